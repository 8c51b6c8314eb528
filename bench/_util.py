"""Shared benchmark helpers: timing, percentiles, ratios, the machine, and a devnet to pay.

:class:`BenchEnv` is one private Anvil with TestUSDC, the agent funded, the local x402
paywall (its own process) and an in-process JEV judge; benchmarks that move money share it, so every
figure and its peer are measured on the same chain in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    import httpx

    from agent.seams import AgentWallet
    from agent.tools.base import Observation, Tool, ToolContext
    from chain.client import ChainClient
    from chain.devnet import AnvilProcess
    from chain.networks import Network
    from judge.jev import Judge, PaidCallRequest
    from judge.verdict import Verdict
    from wallet.signer import Wallet

_T = TypeVar("_T")


class Decides(Protocol):
    """A judge to ask: the in-process Judge or a judge service's client."""

    def decide(self, request: PaidCallRequest) -> Verdict: ...

__all__ = [
    "BENCH_PATH",
    "RAW_SENDERS",
    "BenchEnv",
    "CpuMeter",
    "Decides",
    "Figure",
    "LoadWindow",
    "Spread",
    "fmt_ms",
    "fmt_ratio",
    "machine",
    "median",
    "on_fresh_chain",
    "percentile",
    "ratio",
    "report_rows",
    "run_async",
    "with_details",
]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks."""
    if not values:
        raise ValueError("percentile of no values; expected at least one measurement.")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q={q}; expected 0 <= q <= 100.")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def ratio(ours: float, peer: float) -> float:
    """``ours / peer``; NaN when the peer measured zero (a broken peer, reported as such)."""
    return ours / peer if peer else math.nan


@dataclass(frozen=True)
class Figure:
    """One row of bench/RESULTS.md: our figure, the peer's, and ours / peer."""

    benchmark: str
    ours: str
    peer: str
    ratio: float
    notes: str
    details: tuple[str, ...] = ()
    raw: dict[str, object] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "benchmark": self.benchmark,
            "ours": self.ours,
            "peer": self.peer,
            "ratio": self.ratio,
            "notes": self.notes,
            "details": list(self.details),
            **self.raw,
        }


# ---------------------------------------------------------------------------- load

#: Above this 1-minute load per core a row is marked loaded and not compared with its goal:
#: the machine was queueing work, and queueing waits dilute any ratio toward 1.
MAX_LOAD_PER_CORE = 1.0


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def loadavg() -> float:
    """The 1-minute load average (NaN where /proc is not there)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return math.nan


class LoadWindow:
    """The 1-minute load average sampled over a measurement (call :meth:`sample` at each
    round's start and once at the end): a row reports the highest sample, per core."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    def sample(self) -> None:
        self.samples.append(loadavg())

    def summary(self) -> dict[str, object]:
        if not self.samples:
            self.sample()
        high = max(self.samples)
        per_core = high / cores()
        return {
            "low": min(self.samples),
            "high": high,
            "per_core": per_core,
            "loaded": per_core > MAX_LOAD_PER_CORE,
            "text": f"{min(self.samples):.2f}-{high:.2f} ({per_core:.2f} per core)",
        }

    def __str__(self) -> str:
        return str(self.summary()["text"])


class CpuMeter:
    """CPU time the machine spends, by role, between two :meth:`read` calls: the sum over
    every thread of each role's processes of the kernel's scheduler clock
    (``/proc/PID/task/*/schedstat``, nanoseconds on the CPU, user and system alike). On a
    machine of few cores the processes on a purchase's path (buyer, seller, chain) share
    them, so the wall time of a round trip is bounded by the CPU its parts spend in turn;
    this says how much each part spent."""

    def __init__(self, roles: dict[str, Sequence[int]]) -> None:
        self.roles = {role: tuple(pids) for role, pids in roles.items()}

    def read(self) -> dict[str, int]:
        """Nanoseconds on the CPU so far, by role (a process gone counts 0)."""
        return {role: sum(_cpu_ns(pid) for pid in pids) for role, pids in self.roles.items()}


def _cpu_ns(pid: int) -> int:
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
    return total


# ---------------------------------------------------------------------------- machine


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else platform.processor() or "unknown"


def _ram_gib() -> str:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return "unknown"
    match = re.search(r"^MemTotal:\s*(\d+)\s*kB", text, re.MULTILINE)
    return f"{int(match.group(1)) / 1024 / 1024:.1f} GiB" if match else "unknown"


def _anvil_version() -> str:
    from chain.devnet import find_anvil

    try:
        out = subprocess.run(
            [find_anvil(), "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except Exception as exc:  # noqa: BLE001 - the machine note must not fail the run
        return f"unknown ({type(exc).__name__})"
    first = out.strip().splitlines()[0] if out.strip() else "unknown"
    return first.replace("anvil Version:", "").strip()


def machine() -> dict[str, str]:
    """CPU model, cores, RAM, OS, Python and Anvil versions of this machine."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu": _cpu_model(),
        "cores": f"{os.cpu_count()} logical ({affinity} usable)",
        "ram": _ram_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "anvil": _anvil_version(),
        "libraries": _versions("x402", "web3", "eth-account", "eth-keys", "pydantic-ai-slim"),
        "secp256k1 backend": _ecc_backend(),
    }


def _versions(*names: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in names:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def _ecc_backend() -> str:
    """eth-keys' signing backend: coincurve (libsecp256k1) or the much slower pure Python."""
    try:
        from eth_keys.backends import get_backend

        return type(get_backend()).__name__
    except Exception as exc:  # noqa: BLE001 - the machine note must not fail the run
        return f"unknown ({type(exc).__name__})"


# ---------------------------------------------------------------------------- devnet

#: What the payment benchmarks buy (0.02 USDC): a static dataset, so the seller's own
#: work is tiny and the round trip is the payment path itself.
BENCH_PATH = "/datasets/token/USDC"
#: Dev accounts that send raw USDC transfers in the throughput peer (not agent/seller/judge).
RAW_SENDERS = (5, 6, 7, 8)
_RAW_FUND = 1_000_000_000  # 1000 test USDC each, atomic units


class _SellerProcess:
    """The paywall (the x402 seller and its facilitator) as its own process, as a seller
    runs: buyers measured here never share an interpreter or its GIL with the seller they
    pay (`python -m chain.paywall.app`, what `nib devnet up` starts). Its output goes to a
    log file, never to a pipe nobody reads (a full pipe would stall the seller)."""

    def __init__(self, rpc_url: str, usdc: str, tmp: Path, timeout_s: float = 60.0) -> None:
        url_file, log = tmp / "paywall.url", tmp / "paywall.log"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "chain.paywall.app", "--rpc-url", rpc_url,
                 "--usdc", usdc, "--url-file", str(url_file)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout_s
        while not url_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"benchmark: the paywall process did not start within {timeout_s:g} s "
                    f"(exit {self.proc.returncode}); its log: {log.read_text()[-800:]!r}")
            time.sleep(0.05)
        self.url = url_file.read_text().strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class BenchEnv:
    """A private devnet for the benchmarks: Anvil, TestUSDC, the paywall, judge and wallet.

    Use as a context manager. ``wallet()`` builds the real verdict-gated wallet of the
    agent (dev account AGENT) on a SQLite file in a temporary folder; ``judge`` is the
    real in-process JEV judge with the devnet judge key; ``paid_call`` runs our whole
    paid path once (quote, verdict, sign, pay, settle).
    """

    def __init__(self) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._anvil: AnvilProcess | None = None
        self._paywall: _SellerProcess | None = None
        self.rpc_url = ""
        self.usdc = ""
        self.paywall_url = ""
        #: The processes a purchase's counterparts run in (for CpuMeter).
        self.seller_pids: tuple[int, ...] = ()
        self.chain_pids: tuple[int, ...] = ()
        # Set by __enter__ (used only inside the with-block).
        self.judge: Judge
        self.network: Network
        self.chain: ChainClient
        self._snapshot: str | None = None

    def __enter__(self) -> BenchEnv:
        from chain.client import ChainClient
        from chain.devkeys import AGENT, DEPLOYER, JUDGE, dev_account
        from chain.devnet import FUND_USDC, AnvilProcess
        from chain.networks import get_network
        from chain.usdc import deploy_test_usdc, mint
        from judge.jev import Judge
        from judge.verdict import VerdictSigner

        self._tmp = tempfile.TemporaryDirectory(prefix="nib-bench-")
        tmp = Path(self._tmp.name)
        try:
            self._anvil = AnvilProcess(port=0, log=tmp / "anvil.log")
            self.rpc_url = self._anvil.rpc_url
            self.chain = ChainClient(self.rpc_url, self._anvil.chain_id)
            deployer = dev_account(DEPLOYER)
            self.usdc = deploy_test_usdc(self.chain.w3, deployer)
            mint(self.chain.w3, self.usdc, deployer, dev_account(AGENT).address, FUND_USDC)
            for i in RAW_SENDERS:
                mint(self.chain.w3, self.usdc, deployer, dev_account(i).address, _RAW_FUND)
            self._paywall = _SellerProcess(self.rpc_url, self.usdc, tmp)
            self.paywall_url = self._paywall.url
            self.seller_pids, self.chain_pids = (self._paywall.proc.pid,), (self._anvil.pid,)
            self.network = get_network("anvil", rpc_url=self.rpc_url, usdc=self.usdc)
            self.judge = Judge(
                VerdictSigner(dev_account(JUDGE)),
                allowed_assets={self.network.chain_id: {self.usdc}},
            )
            self._snapshot = str(self._rpc("evm_snapshot"))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._paywall is not None:
            self._paywall.stop()
            self._paywall = None
        if self._anvil is not None:
            self._anvil.stop()
            self._anvil = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _rpc(self, method: str, params: list[object] | None = None) -> object:
        resp = self.chain.w3.provider.make_request(method, params or [])  # type: ignore[arg-type]
        if "error" in resp:
            raise RuntimeError(f"benchmark: {method} failed on {self.rpc_url}: {resp['error']}")
        return resp["result"]

    def reset_chain(self) -> None:
        """Revert Anvil to the state right after set-up (funded, paywall up, few blocks).

        Anvil's automine slows down as the chain grows (a few thousand one-transaction
        blocks halve its transfer rate here), so every measured side starts from the same
        chain length. Spend-meter rows of reverted payments stay in the bench's own DBs.
        """
        if self._snapshot is None or not self._rpc("evm_revert", [self._snapshot]):
            raise RuntimeError(f"benchmark: could not revert {self.rpc_url} to the baseline")
        self._snapshot = str(self._rpc("evm_snapshot"))

    @property
    def tmp(self) -> Path:
        assert self._tmp is not None, "BenchEnv used outside its with-block"
        return Path(self._tmp.name)

    def wallet(self, name: str = "bench") -> Wallet:
        """The agent's real wallet (verdict-gated signer, spend meter, ledger) on a fresh DB."""
        from chain.client import ChainClient
        from chain.devkeys import AGENT, dev_account
        from wallet.keystore import KeyHandle
        from wallet.signer import Wallet

        return Wallet(
            KeyHandle(dev_account(AGENT)),
            db_path=self.tmp / f"{name}.db",
            chain=ChainClient(self.rpc_url, self.network.chain_id),
            usdc=self.usdc,
            trusted_judge=self.judge.address,
            recheck=self.judge.recheck,
        )

    def context(
        self, wallet: AgentWallet | None, http: httpx.AsyncClient | None, run_id: str,
        cap: int = 1_000_000, *, judge: Decides | None = None,
    ) -> ToolContext:
        """A tool context for one run paying from ``wallet`` with a spend cap of ``cap``,
        its verdicts from ``judge`` (default: the bench's in-process judge): built at the
        run's start, as the loop builds it (agent.loop.context.RunContext)."""
        from agent.tools.base import ToolContext, judge_reads_terms, terms_ahead_of

        return ToolContext(
            run_id=run_id,
            chain=self.chain,
            network=self.network,
            wallet=wallet,
            allowlist=(self.paywall_url,),
            http=http,
            spend_cap_atomic=cap,
            judge_reads_terms=judge_reads_terms(judge or self.judge),
            read_terms_ahead=terms_ahead_of(judge or self.judge, run_id),
        )

    async def paid_call(
        self,
        tool: Tool,
        ctx: ToolContext,
        url: str,
        phases: dict[str, list[float]] | None = None,
        *,
        judge: Decides | None = None,
    ) -> Observation:
        """Our paid path, once: quote (402) -> JEV verdict -> wallet signs -> pay -> settle.

        The judge is asked the way the loop asks it (one missing checklist item the
        endpoint sells); anything but an approval is a broken benchmark, raised.
        ``phases`` (optional) collects seconds spent in quote, judge and execute;
        ``judge`` (optional) replaces the in-process judge (a judge service's client).
        """
        from agent.loop.selfmodel import read_balance
        from judge.fingerprint import call_fingerprint
        from judge.jev import PaidCallRequest

        if ctx.wallet is None:
            raise RuntimeError("benchmark: paid_call needs a context with a wallet")
        payer = ctx.wallet.address
        t0 = time.perf_counter()
        args = tool.parse_args({"url": url})
        # The loop's judge request carries the balance its self-model read at the turn's
        # start, not one read after the quote: read it beside the quote (its work counted,
        # not added in series).
        balance = asyncio.ensure_future(read_balance(self.chain, self.usdc, payer))
        try:
            quote = await tool.quote(args, ctx)
        finally:
            paid_balance = await balance
        t1 = time.perf_counter()
        if paid_balance is None:
            raise RuntimeError("benchmark: the wallet's balance was not read (no USDC or wallet)")
        cap = ctx.spend_cap_atomic
        facts = tuple(tool.facts_for(args))
        request = PaidCallRequest(
            tool=tool.name,
            args=quote.args,
            call_fingerprint=call_fingerprint(tool.name, quote.args),
            payload_fingerprint=quote.payload_fingerprint,
            price=quote.amount,
            asset=quote.asset,
            recipient=quote.recipient,
            chain_id=quote.chain_id,
            remaining_budget=cap,
            balance=paid_balance,
            per_call_cap_atomic=cap,
            spend_cap_atomic=cap,
            missing=facts,
            tool_facts=facts,
            task_id=ctx.run_id,
            payload=quote.payload,
        )
        verdict = await asyncio.to_thread((judge or self.judge).decide, request)
        t2 = time.perf_counter()
        if verdict.decision != "approve":
            raise RuntimeError(
                f"benchmark: the judge ruled {verdict.decision!r} on {url} ({verdict.reason}); "
                "expected approve. Fix: lower the endpoint price or raise the bench cap."
            )
        obs = await tool.execute(quote, verdict, ctx)
        if phases is not None:
            for name, took in (
                ("quote", t1 - t0),
                ("judge", t2 - t1),
                ("execute", time.perf_counter() - t2),
            ):
                phases.setdefault(name, []).append(took)
        if not obs.ok or not obs.cost_usdc:
            raise RuntimeError(f"benchmark: paid call to {url} did not settle: {obs.summary}")
        return obs


def run_async(fn: Callable[[], Coroutine[object, object, _T]]) -> _T:
    """Run a coroutine function on a fresh event loop."""
    return asyncio.run(fn())


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


@dataclass(frozen=True)
class Spread:
    """The median and p95 of one side's latency samples (seconds); prints both in ms."""

    median: float
    p95: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        return cls(median(samples), percentile(samples, 95))

    def __str__(self) -> str:
        return f"{fmt_ms(self.median)} (p95 {fmt_ms(self.p95)})"


def on_fresh_chain(env: BenchEnv | None, measure: Callable[[BenchEnv], _T]) -> _T:
    """``measure(env)`` from a reset chain; without ``env``, on a BenchEnv of its own."""
    if env is None:
        with BenchEnv() as own:
            return on_fresh_chain(own, measure)
    env.reset_chain()
    return measure(env)


def with_details(rows: list[dict[str, object]], details: Sequence[str]) -> list[dict[str, object]]:
    """``rows`` of one module, each carrying the module's whole details (printed once)."""
    for row in rows:
        row["details"] = list(details)
    return rows


def report_rows(rows: Sequence[dict[str, object]]) -> str:
    """The details a module's rows share, as its command line prints them."""
    details = rows[0]["details"]
    return "\n".join(str(d) for d in details) if isinstance(details, list) else str(details)


def fmt_ratio(value: float) -> str:
    """Two decimals, or three significant digits below 0.1 so a small share stays readable."""
    if math.isnan(value):
        return "n/a"
    return f"{value:.2f}x" if abs(value) >= 0.095 else f"{value:.3g}x"


def bench_main(
    prog: str,
    doc: str | None,
    run: Callable[[bool], _T],
    report: Callable[[_T], str],
    argv: list[str] | None = None,
) -> int:
    """The command line every benchmark module shares: ``--quick``, run, print the report."""
    parser = argparse.ArgumentParser(prog=prog, description=doc)
    parser.add_argument("--quick", action="store_true", help="tiny iteration counts")
    args = parser.parse_args(argv)
    print(report(run(args.quick)))
    return 0
