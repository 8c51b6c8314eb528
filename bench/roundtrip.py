"""x402 round trip: nib in-process and nib with services, each against the x402 package's
own client, all three interleaved in one run.

The three buyers pay the same local paywall (on a private Anvil) from the same agent
account for the same resource; every request the order of the three rotates, so drift in
the chain or the machine hits all of them. Repeated rounds give the spread.

- **peer**: ``x402HttpxClient`` with an eth-account signer (402 -> sign -> paid GET).
- **in-process**: as ``nib run`` builds it without services (``build_local_judge``): the
  JEV judge with its calibration store and its durable record of verdicts issued and
  consumed, the verdict-gated wallet re-checking with it, one SQLite file (synchronous=FULL,
  a sync per commit).
- **services**: as ``nib run`` builds it by default (``nib services up``): the judge
  service (loopback HTTP, the task registered with its token, the payload re-checked, the
  balance read by the judge, records on) and the wallet service (0600 Unix socket,
  re-checking with the judge) as two processes; the bench holds only their clients.

Goals (issue 27): in-process <= 1.2x the peer (median and p95), services <= 1.35x.

``python -m bench.roundtrip [--quick]``
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from bench._util import (
    BENCH_PATH,
    BenchEnv,
    CpuMeter,
    Decides,
    Figure,
    LoadWindow,
    Spread,
    bench_main,
    fmt_ms,
    fmt_ratio,
    median,
    on_fresh_chain,
    ratio,
    report_rows,
    run_async,
    with_details,
)

if TYPE_CHECKING:
    from x402 import x402Client
    from x402.http.clients import x402HttpxClient

    from judge.jev import Judge
    from judge.service import JudgeClient
    from wallet.signer import Wallet

__all__ = ["Services", "in_process", "main", "peer_client", "peer_x402", "register", "run"]

SERVICES_TOKEN = "bench-services-token"  # the wallet's re-check only
ADMIN = "bench-admin-token"
TASK_CAP = 10**9
#: The sides of one request, in turn (the order rotates every request).
SIDES = ("peer", "local", "services")
GOALS = {"local": 1.2, "services": 1.35}
LABELS = {"local": "in-process (records on)", "services": "services (nib run's default)"}


def peer_client(env: BenchEnv, price: int) -> x402HttpxClient:
    """The x402 package's own buyer: x402HttpxClient, eth-account signer, TestUSDC opted in."""
    from x402.http.clients import x402HttpxClient

    return x402HttpxClient(peer_x402(env, price), timeout=30)


def peer_x402(env: BenchEnv, price: int) -> x402Client:
    """The x402 package's payment client (eth-account signer, TestUSDC opted in)."""
    from x402 import x402Client
    from x402.mechanisms.evm.exact import register_exact_evm_client
    from x402.mechanisms.evm.signers import EthAccountSigner

    from chain.devkeys import AGENT, dev_account

    network = env.network.caip2
    client = register_exact_evm_client(
        x402Client(), EthAccountSigner(dev_account(AGENT)), networks=network
    )
    # x402 refuses tokens outside its default list; TestUSDC must be opted in, with a cap.
    client.set_spend_controls(
        {
            "allowed_assets": [
                {"network": network, "asset": env.usdc, "max_amount_per_payment": str(price)}
            ]
        }
    )
    return client


def _judge_child(config: dict[str, str]) -> None:
    """The judge service's process, until stdin closes: the judge `nib judge serve` builds
    (``build_local_judge(service=True)``: calibration store, records, task registry, the
    balance read from the chain for the home's wallet, and whatever else it is given)."""
    import os

    from agent.cli.runtime import build_local_judge
    from agent.config import load_settings
    from chain.networks import get_network
    from judge.service import JudgeServer, refuse_inspection
    from wallet.keystore import DEVNET_PASSPHRASE, ensure_devnet_wallet

    refuse_inspection()
    home = Path(config["home"])
    ensure_devnet_wallet(home, DEVNET_PASSPHRASE)  # the agent's key: whose balance it reads
    os.environ["NIB_JUDGE_ADMIN_TOKEN"] = ADMIN  # rule only on registered tasks
    settings = load_settings(home=home)
    network = get_network("anvil", rpc_url=config["rpc_url"], usdc=config["usdc"])
    judge = build_local_judge(settings, network, service=True, database=home / "services.db")
    with JudgeServer(judge, token=SERVICES_TOKEN, admin_token=ADMIN) as judge_server:
        print(json.dumps({"judge_url": judge_server.url}), flush=True)
        sys.stdin.readline()


def _wallet_child(config: dict[str, str]) -> None:
    """The wallet service's process, until stdin closes, as `nib wallet serve` builds it:
    the agent's key, the meter with the home's treasury cap and gas price, the ledger in
    the services' database, the judge's re-check over loopback HTTP."""
    from agent.config import load_settings
    from chain.client import ChainClient
    from chain.devkeys import AGENT, JUDGE, dev_account
    from judge.service import JudgeClient, refuse_inspection
    from wallet.keystore import KeyHandle
    from wallet.meter import SpendMeter
    from wallet.service import WalletServer
    from wallet.signer import Wallet

    refuse_inspection()
    home = Path(config["home"])
    settings = load_settings(home=home)
    judge_address = dev_account(JUDGE).address
    recheck = JudgeClient(config["judge_url"], trusted_judge=judge_address, token=SERVICES_TOKEN,
                          timeout_s=10).recheck
    chain = ChainClient(config["rpc_url"], 31337)
    db = home / "services.db"
    meter = SpendMeter(db, chain, treasury_cap_atomic=settings.treasury_cap_atomic,
                       eth_price_usdc=settings.eth_price_usdc)
    wallet = Wallet(KeyHandle(dev_account(AGENT)), db_path=db, chain=chain, meter=meter,
                    usdc=config["usdc"], trusted_judge=judge_address, recheck=recheck)
    with WalletServer(wallet, home) as wallet_server:
        print(json.dumps({"socket": str(wallet_server.socket_path)}), flush=True)
        sys.stdin.readline()


class _Child:
    """One service as its own process (``python -m bench.roundtrip --child ROLE CONFIG``)."""

    def __init__(self, role: str, config: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.roundtrip", "--child", role, json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            self.proc.kill()
            raise RuntimeError(f"benchmark: the {role} service process did not start")
        self.where: dict[str, str] = json.loads(line)

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
        self.proc.wait(timeout=30)


class Services:
    """The judge service and the wallet service, each its own process as `nib services up`
    starts them (two interpreters, two GILs), on one database."""

    def __init__(self, env: BenchEnv) -> None:
        config = {"home": str(env.tmp / "services"), "rpc_url": env.rpc_url, "usdc": env.usdc}
        Path(config["home"]).mkdir(parents=True, exist_ok=True)
        self._judge = _Child("judge", config)
        try:
            self.judge_url = self._judge.where["judge_url"]
            self._wallet = _Child("wallet", {**config, "judge_url": self.judge_url})
        except BaseException:
            self._judge.stop()
            raise
        self.socket = self._wallet.where["socket"]
        self.pids = (self._judge.proc.pid, self._wallet.proc.pid)

    def stop(self) -> None:
        try:
            self._wallet.stop()
        finally:
            self._judge.stop()

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def in_process(env: BenchEnv, name: str) -> tuple[Judge, Wallet]:
    """The in-process composition as `nib run` builds it without services: the judge
    ``build_local_judge`` makes (calibration store and durable record of verdicts issued
    and consumed, in the run's database) and the verdict-gated wallet re-checking with it
    directly, its meter with the home's treasury cap, on the same file."""
    from agent.cli.runtime import build_local_judge
    from agent.config import load_settings
    from chain.client import ChainClient
    from chain.devkeys import AGENT, dev_account
    from wallet.keystore import KeyHandle
    from wallet.meter import SpendMeter
    from wallet.signer import Wallet

    home = env.tmp / f"home-{name}"
    home.mkdir(parents=True, exist_ok=True)
    settings = load_settings(home=home)
    db = home / "nib.db"
    judge = build_local_judge(settings, env.network, database=db)
    chain = ChainClient(env.rpc_url, env.network.chain_id)
    meter = SpendMeter(db, chain, treasury_cap_atomic=settings.treasury_cap_atomic,
                       eth_price_usdc=settings.eth_price_usdc)
    wallet = Wallet(KeyHandle(dev_account(AGENT)), db_path=db, chain=chain, meter=meter,
                    usdc=env.usdc, trusted_judge=judge.address, recheck=judge.recheck)
    return judge, wallet


def register(env: BenchEnv, services: Services, run_id: str) -> JudgeClient:
    """A judge client holding ``run_id``'s task token, the task registered as `nib run`
    registers it (once per run, before its first payment; not part of a round trip)."""
    from chain.devkeys import SELLER, dev_account
    from judge.service import JudgeClient
    from judge.tasks import TaskLimits

    admin = JudgeClient(services.judge_url, token=ADMIN, timeout_s=10)
    token = admin.register_task_for_token(TaskLimits(
        task_id=run_id, spend_cap_atomic=TASK_CAP, per_call_cap_atomic=TASK_CAP, approval_threshold_atomic=None,
        recipients=(dev_account(SELLER).address,), sellers=(env.paywall_url,)))
    return JudgeClient(services.judge_url, token=token, timeout_s=10)


@dataclass(frozen=True)
class _Measured:
    """Each side's seconds per request, by round; the price paid; the load window; each
    side's CPU per request by role (ms: the buyer's processes, the seller's, the chain's)."""

    samples: dict[str, list[list[float]]]
    price_atomic: int
    load: dict[str, object]
    cpu: dict[str, dict[str, float]]


async def _measure(env: BenchEnv, rounds: int, per_round: int, warmup: int) -> _Measured:
    from agent.tools.x402.pay_http import PayHttpTool
    from chain.paywall.app import DEFAULT_PRICES
    from wallet.service import WalletClient

    price = DEFAULT_PRICES["token"]
    url = env.paywall_url + BENCH_PATH
    tool = PayHttpTool(env.paywall_url)
    local_judge, local_wallet = in_process(env, "roundtrip")
    samples: dict[str, list[list[float]]] = {side: [] for side in SIDES}
    load = LoadWindow()
    cpu_ns = {side: {"buyer": 0, "seller": 0, "chain": 0} for side in SIDES}
    counted = dict.fromkeys(SIDES, 0)
    with Services(env) as services:
        # The buyer's side is this process and the two services (idle but for their side).
        meter = CpuMeter({"buyer": (os.getpid(), *services.pids), "seller": env.seller_pids,
                          "chain": env.chain_pids})
        remote_wallet = WalletClient(services.socket)
        async with httpx.AsyncClient(timeout=30) as http, peer_client(env, price) as x402_http:

            async def one(side: str, run_id: str) -> float:
                if side == "peer":
                    start = time.perf_counter()
                    resp = await x402_http.get(url)
                    took = time.perf_counter() - start
                    if resp.status_code != 200 or "PAYMENT-RESPONSE" not in resp.headers:
                        raise RuntimeError(
                            f"benchmark: the x402 client got {resp.status_code} from {url} "
                            f"({resp.text[:200]!r}); expected a settled 200.")
                    return took
                judge: Decides
                if side == "services":
                    judge = register(env, services, run_id)
                    ctx = env.context(remote_wallet, http, run_id, judge=judge)
                else:
                    judge = local_judge
                    ctx = env.context(local_wallet, http, run_id, judge=judge)
                start = time.perf_counter()
                await env.paid_call(tool, ctx, url, judge=judge)
                return time.perf_counter() - start

            for r in range(rounds):
                load.sample()
                got: dict[str, list[float]] = {side: [] for side in SIDES}
                count = per_round + (warmup if r == 0 else 0)
                for i in range(count):
                    turn = i % len(SIDES)
                    for side in SIDES[turn:] + SIDES[:turn]:
                        before = meter.read()
                        took = await one(side, f"bench-{side}-{r}-{i}")
                        if r > 0 or i >= warmup:
                            got[side].append(took)
                            after = meter.read()
                            counted[side] += 1
                            for role, ns in after.items():
                                cpu_ns[side][role] += ns - before[role]
                for side in SIDES:
                    samples[side].append(got[side])
            load.sample()
    cpu = {side: {role: ns / 1e6 / max(counted[side], 1) for role, ns in roles.items()}
           for side, roles in cpu_ns.items()}
    return _Measured(samples, price, load.summary(), cpu)


def run(quick: bool = False, env: BenchEnv | None = None) -> list[dict[str, object]]:
    """Both of nib's compositions against the peer; one row each."""
    rounds, per_round, warmup = (1, 3, 1) if quick else (5, 10, 3)
    data = on_fresh_chain(
        env, lambda e: run_async(lambda: _measure(e, rounds, per_round, warmup)))
    by_round = data.samples
    pooled = {side: [x for rnd in by_round[side] for x in rnd] for side in SIDES}
    spreads = {side: Spread.of(pooled[side]) for side in SIDES}
    peer = spreads["peer"]
    details = [
        f"x402 paid round trip: {rounds} rounds x {per_round} requests per side, the three "
        f"sides' order rotating every request, {warmup} warm-up dropped; load {data.load['text']}",
        *(f"  {LABELS.get(side, 'peer: x402HttpxClient'):<34} {spreads[side]}  (round medians: "
          + ", ".join(fmt_ms(median(rnd)) for rnd in by_round[side]) + ")" for side in SIDES),
        "  CPU per purchase, every thread of each role's processes (the buyer's: this "
        "process and the two services; the seller's; Anvil's):",
        *(f"  {LABELS.get(side, 'peer: x402HttpxClient'):<34} {_cpu_text(data.cpu[side])}"
          for side in SIDES),
    ]
    rows = []
    for side in ("local", "services"):
        ours = spreads[side]
        med, p95 = ratio(ours.median, peer.median), ratio(ours.p95, peer.p95)
        per_round_ratios = [ratio(median(o), median(p))
                            for o, p in zip(by_round[side], by_round["peer"], strict=True)]
        goal = GOALS[side]
        details.append(
            f"  {side}/peer: median {fmt_ratio(med)}, p95 {fmt_ratio(p95)}, per round "
            + ", ".join(fmt_ratio(x) for x in per_round_ratios))
        rows.append(Figure(
            benchmark=f"x402 round trip, {LABELS[side]} vs the x402 client",
            ours=str(ours),
            peer=f"{peer} (x402HttpxClient)",
            ratio=med,
            notes=(
                f"median {fmt_ratio(med)}, p95 {fmt_ratio(p95)}; round medians' ratios "
                f"{fmt_ratio(min(per_round_ratios))}-{fmt_ratio(max(per_round_ratios))} over "
                f"{rounds} rounds; {len(pooled[side])} paid GETs of {BENCH_PATH} "
                f"({data.price_atomic} atomic USDC) per side, interleaved with the other two "
                "sides in one run. Ours: quote, JEV verdict (recorded), wallet checks and "
                "signature, paid GET, settlement proven on chain, ledger (SQLite, a sync per "
                "commit)" + (" through the judge and wallet services" if side == "services"
                             else "") + "."
            ),
            details=tuple(details),
            raw={"kind": "peer", "goal": f"median and p95 <= {goal}x",
                 "met": med <= goal and p95 <= goal, "load": data.load,
                 "p95_ratio": p95, "round_ratios": per_round_ratios,
                 "cpu_ms": data.cpu[side], "peer_cpu_ms": data.cpu["peer"]},
        ).as_dict())
    return with_details(rows, details)


def _cpu_text(cpu: dict[str, float]) -> str:
    roles = " + ".join(f"{role} {ms:.1f}" for role, ms in cpu.items())
    return f"{sum(cpu.values()):.1f} ms ({roles})"


def report(rows: list[dict[str, object]]) -> str:
    return report_rows(rows)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        child = _judge_child if args[1] == "judge" else _wallet_child
        child(json.loads(args[2]))
        return 0
    return bench_main("python -m bench.roundtrip", __doc__, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
