"""The local devnet: a real Anvil with a USDC on it, the agent funded, and the x402 paywall.

``up`` starts (or finds) it and records its facts in ``NIB_HOME/devnet.json``; Anvil's
own ``--state`` file, written every second, keeps the chain across restarts so the spend
ledger stays true to it (a killed Anvil loses at most the blocks of its last second). The
token is TestUSDC, Circle's FiatTokenV2_2 (``--token circle``) or one already deployed
(``NIB_USDC_ADDRESS``, checked); ``twin`` stands the chain in for a public testnet (its
chain id, Circle's token at that network's USDC address). ``down`` stops the processes by
PID: SIGINT, then terminate, then kill.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from chain.devkeys import DEVNET_CHAIN_ID
from chain.errors import AnvilMissing, ChainError, DevnetError
from chain.home import nib_home

# What loads web3 and eth-account (chain.client, chain.devtoken, the dev keys; ~1 s of
# CPU) is imported by the functions that talk to the node: reading the devnet's facts and
# pid_alive (`nib runs`, the run store) need none of it. chain.networks loads x402 on
# import; the devnet needs it only for a twin.
if TYPE_CHECKING:
    from chain.devtoken import TokenKind
    from chain.networks import Network

ANVIL_VERSION = "1.7.1"
REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = REPO_ROOT / "tools"
INSTALL_HINT = (
    f"run `make setup` (or `npm install --prefix tools @foundry-rs/anvil@{ANVIL_VERSION}`), "
    "or set NIB_ANVIL to the path of an anvil binary"
)
FUND_USDC = 100_000_000  # 100 test USDC, atomic units
#: Networks the devnet can stand in for (``up(twin=...)``): their chain id, and Circle's
#: token at their USDC address under their pinned EIP-712 domain (``chain.networks``).
TWINS = ("base-sepolia",)
#: Seconds between Anvil's state dumps: what a killed Anvil can lose.
STATE_INTERVAL_S = 1
#: How long a devnet process (Anvil, the paywall, the market's sellers) may take to answer.
#: A bound on failure, not a wait: readiness is polled. A seller imports FastAPI and the
#: x402 package before it binds, which takes over 20 s on a two-core machine under load.
READY_TIMEOUT_S = 60.0


def find_anvil() -> str:
    """Locate Anvil: ``NIB_ANVIL``, then the project's tools folder, then ``PATH``."""
    env = os.environ.get("NIB_ANVIL")
    if env:
        if Path(env).is_file() and os.access(env, os.X_OK):
            return env
        raise AnvilMissing(f"NIB_ANVIL={env} is not an executable file; expected the anvil binary. Fix: {INSTALL_HINT}.")
    for candidate in sorted((TOOLS_DIR / "node_modules" / "@foundry-rs").glob("anvil-*/bin/anvil")):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("anvil")
    if found:
        return found
    raise AnvilMissing(f"Anvil was not found in NIB_ANVIL, {TOOLS_DIR}, or PATH. Fix: {INSTALL_HINT}.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); treat it as dead.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def stop_pid(pid: int, *, grace_s: float = 5.0) -> None:
    """Stop a process: SIGINT (lets Anvil dump its state), then SIGTERM, then SIGKILL."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        if not pid_alive(pid):
            break
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and pid_alive(pid):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.05)


def stop_pids(pids: list[int]) -> None:
    """Stop several processes at once: SIGINT to all first, so their shutdowns overlap."""
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
    for pid in pids:
        stop_pid(pid)


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class AnvilProcess:
    """One Anvil process on a loopback port."""

    def __init__(
        self,
        *,
        port: int = 0,
        state: Path | None = None,
        log: Path | None = None,
        detach: bool = False,
        chain_id: int = DEVNET_CHAIN_ID,
    ) -> None:
        self.binary = find_anvil()
        if port and port_in_use(port):
            raise DevnetError(
                f"port {port} on 127.0.0.1 is already in use; expected a free port for Anvil. "
                "Fix: choose another port (or 0 for any free one), or stop the process using it."
            )
        self.port = port or free_port()
        self.rpc_url = f"http://127.0.0.1:{self.port}"
        self.chain_id = chain_id
        self.log_path = log or Path(os.devnull)
        # --quiet: Anvil's banner prints its dev accounts' private keys, and no key may
        # reach a log; errors are still printed.
        cmd = [self.binary, "--host", "127.0.0.1", "--port", str(self.port),
               "--chain-id", str(chain_id), "--quiet"]
        if state is not None:
            cmd += ["--state", str(state), "--state-interval", str(STATE_INTERVAL_S)]
        logf = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=detach, env=child_env(),
        )
        logf.close()
        self.pid = self.proc.pid
        try:
            self.wait_ready()
        except DevnetError:
            self.stop()
            raise

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        from chain.client import ChainClient

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DevnetError(
                    f"Anvil exited with code {self.proc.returncode} before answering on {self.rpc_url}; "
                    f"expected it to serve JSON-RPC. Log tail:\n{_log_tail(self.log_path)}"
                )
            try:
                ChainClient(self.rpc_url, timeout_s=1.0).chain_id()
                return
            except ChainError:
                time.sleep(0.05)
        raise DevnetError(
            f"Anvil did not answer on {self.rpc_url} within {timeout_s:.0f} s. "
            f"Log tail:\n{_log_tail(self.log_path)}"
        )

    def stop(self) -> None:
        stop_pid(self.pid)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=1)


@dataclass
class DevnetInfo:
    """The facts of a running (or last-run) devnet, as ``nib devnet up --json`` prints them.

    ``facilitator_url`` serves the x402 facilitator and discovery APIs; ``market`` lists the
    market's sellers (``{name, url, pid}``, with ``mcp`` the paid MCP server's base URL: streamable
    HTTP at ``/mcp``).
    """

    rpc_url: str
    chain_id: int
    usdc: str
    wallet: str
    seller: str
    paywall_url: str | None
    pid: int | None
    paywall_pid: int | None
    running: bool = False
    facilitator_url: str | None = None
    facilitator_pid: int | None = None
    market: list[dict[str, object]] = field(default_factory=list)
    #: Which USDC (chain.devtoken.TokenKind) and, for a twin, which network it stands in for.
    token: str = "test"
    twin: str | None = None

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    def service_pids(self) -> list[int]:
        """PIDs of every process beside Anvil (paywall, facilitator, market)."""
        pids = [self.paywall_pid, self.facilitator_pid]
        pids += [s.get("pid") for s in self.market]  # type: ignore[misc]
        return [int(p) for p in pids if isinstance(p, int) and p]


def _paths(home: Path) -> dict[str, Path]:
    d = home / "devnet"
    return {"dir": d, "facts": d / "devnet.json", "state": d / "anvil-state.json",
            "anvil_log": d / "anvil.log"}


def _read_facts(home: Path) -> DevnetInfo | None:
    path = _paths(home)["facts"]
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        known = {k: data[k] for k in DevnetInfo.__dataclass_fields__ if k in data}
        return DevnetInfo(**known)
    except (ValueError, TypeError) as exc:
        broken = path.with_suffix(".json.broken")
        path.replace(broken)
        raise DevnetError(
            f"devnet facts file {path} is unreadable ({exc}); expected JSON written by `nib devnet up`. "
            f"It was moved to {broken}. Fix: run `nib devnet up` again."
        ) from exc


def _write_facts(home: Path, info: DevnetInfo) -> None:
    p = _paths(home)
    p["dir"].mkdir(parents=True, exist_ok=True)
    tmp = p["facts"].with_suffix(".tmp")
    tmp.write_text(json.dumps(info.to_json(), indent=2) + "\n")
    tmp.replace(p["facts"])


def _answers(info: DevnetInfo) -> bool:
    from chain.client import ChainClient

    try:
        return ChainClient(info.rpc_url, timeout_s=1.0).chain_id() == info.chain_id
    except ChainError:
        return False


def status(home: Path | None = None) -> DevnetInfo | None:
    """The recorded devnet, with ``running`` true only if its Anvil answers."""
    home = home or nib_home()
    info = _read_facts(home)
    if info is None:
        return None
    info.running = pid_alive(info.pid) and _answers(info)
    if info.paywall_pid and not pid_alive(info.paywall_pid):
        info.paywall_pid = None
    if info.facilitator_pid and not pid_alive(info.facilitator_pid):
        info.facilitator_pid = None
    info.market = [s for s in info.market if pid_alive(s.get("pid"))]  # type: ignore[arg-type]
    return info


def _has_code(rpc_url: str, address: str) -> bool:
    from chain.client import ChainClient

    client = ChainClient(rpc_url)
    return len(client.call("eth_getCode", lambda: client.w3.eth.get_code(address))) > 0  # type: ignore[arg-type]


#: The only variables a child process (Anvil, the paywall) inherits: what finding
#: programs, libraries and temporary files needs. Secrets (the wallet passphrase, the
#: judge's token and passphrase, API keys) stay in the process that owns them.
CHILD_ENV_KEYS = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ",
                  "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT")


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A minimal environment for a child process: ``CHILD_ENV_KEYS`` plus ``extra``."""
    env = {k: os.environ[k] for k in CHILD_ENV_KEYS if k in os.environ}
    env.update(extra or {})
    return env


@dataclass
class _Starting:
    """A service process started by ``up``, until its URL file shows it is serving."""

    name: str
    proc: subprocess.Popen[bytes]
    url_file: Path
    log: Path
    health: str = "/health"


def _spawn(
    home: Path, name: str, module: str, *args: str, health: str = "/health", port: int = 0
) -> _Starting:
    """Start ``python -m module args`` detached, logging to ``devnet/<name>.log``."""
    d = _paths(home)["dir"]
    url_file, log = d / f"{name}.url", d / f"{name}.log"
    url_file.unlink(missing_ok=True)
    logf = open(log, "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args, "--port", str(port), "--url-file", str(url_file)],
        stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, cwd=str(REPO_ROOT), env=child_env(),
    )
    logf.close()
    return _Starting(name, proc, url_file, log, health)


def _await_ready(starting: list[_Starting]) -> dict[str, tuple[int, str]]:
    """Wait (concurrently) until every process writes its URL and answers its health path;
    ``{name: (pid, url)}``. On failure every one of them is stopped and DevnetError names
    the one that failed, with its log tail."""
    ready: dict[str, tuple[int, str]] = {}
    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        while len(ready) < len(starting):
            for s in starting:
                if s.name in ready:
                    continue
                if s.proc.poll() is not None:
                    raise DevnetError(
                        f"the devnet's {s.name} exited with code {s.proc.returncode} before it "
                        f"was ready. Log tail:\n{_log_tail(s.log)}"
                    )
                url = s.url_file.read_text().strip() if s.url_file.exists() else ""
                if url and (not s.health or _health(url, s.health)):
                    ready[s.name] = (s.proc.pid, url)
            if len(ready) < len(starting):
                if time.monotonic() > deadline:
                    late = [s for s in starting if s.name not in ready][0]
                    raise DevnetError(
                        f"the devnet's {late.name} did not become ready in "
                        f"{READY_TIMEOUT_S:.0f} s. Log tail:\n{_log_tail(late.log)}\nFix: read the "
                        f"log above; on a loaded machine run `nib devnet up` again."
                    )
                time.sleep(0.05)
    except BaseException:
        stop_pids([s.proc.pid for s in starting])
        raise
    return ready


def _start_services(home: Path, info: DevnetInfo, *, paywall: bool, market: bool) -> None:
    """Start whatever of the paywall and the market is not running, all at once: the
    facilitator service gets its port up front, and the market's sellers and paid MCP
    server wait for it to answer before they read its /supported."""
    from chain.paywall.sellers import MARKET

    chain_args = ("--rpc-url", info.rpc_url)
    starting = []
    if paywall and not info.paywall_pid:
        starting.append(_spawn(home, "paywall", "chain.paywall", *chain_args, "--usdc", info.usdc))
    want_market = market and not info.market
    if want_market:
        if not (info.facilitator_pid and info.facilitator_url):
            port = free_port()
            info.facilitator_url = f"http://127.0.0.1:{port}"
            starting.append(
                _spawn(home, "facilitator", "chain.paywall.facilitator_service", *chain_args, port=port)
            )
        common = ("--facilitator-url", info.facilitator_url, "--usdc", info.usdc, *chain_args)
        starting += [
            _spawn(home, s.name, "chain.paywall.market", "--seller", s.name, *common) for s in MARKET
        ]
        # The MCP server's readiness is its URL file (written once it serves and is listed).
        starting.append(_spawn(home, "mcp", "chain.paywall.mcp_seller", *common, health=""))
    ready = _await_ready(starting)
    if "paywall" in ready:
        info.paywall_pid, info.paywall_url = ready.pop("paywall")
    if "facilitator" in ready:
        info.facilitator_pid, info.facilitator_url = ready.pop("facilitator")
    if want_market:
        info.market = [{"name": n, "url": url, "pid": pid} for n, (pid, url) in ready.items()]


def _health(url: str, path: str = "/health") -> bool:
    import httpx

    from chain.http_proxy import proxy_for
    from chain.tls import tls_context

    try:
        return httpx.get(url.rstrip("/") + path, timeout=1.0, trust_env=False, proxy=proxy_for(url),
                         verify=tls_context()).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass(frozen=True)
class TokenChoice:
    """The chain and token ``up`` is asked for: ``kind`` None keeps whatever the recorded
    devnet has (TestUSDC on a fresh one); ``usdc`` is an outside token (NIB_USDC_ADDRESS)."""

    kind: TokenKind | None = None
    twin: str | None = None
    usdc: str | None = None

    @property
    def chain_id(self) -> int:
        return _twin_network(self.twin).chain_id if self.twin else DEVNET_CHAIN_ID

    def conflict(self, info: DevnetInfo) -> str | None:
        """Why the recorded devnet ``info`` is not the one asked for (None: it is)."""
        if info.chain_id != self.chain_id or info.twin != self.twin:
            return f"chain {info.chain_id} (twin of {info.twin or 'nothing'}), asked for chain " \
                   f"{self.chain_id} (twin of {self.twin or 'nothing'})"
        if self.kind is not None and self.kind != info.token:
            return f"token {info.token}, asked for {self.kind}"
        return None


def _twin_network(name: str) -> Network:
    from chain.networks import NETWORKS

    net = NETWORKS.get(name)
    if name not in TWINS or net is None or not net.usdc or net.domain is None:
        raise DevnetError(
            f"the devnet can stand in for {', '.join(TWINS)}; got twin {name!r}. "
            f"Fix: pass --twin {TWINS[0]} (or no --twin for the plain devnet)."
        )
    return net


def up(
    home: Path | None = None, *, port: int = 0, paywall: bool = True, market: bool | None = None,
    choice: TokenChoice | None = None, wallet: str | None = None,
) -> DevnetInfo:
    """Start the devnet (Anvil, its USDC, the paywall, and the x402 market: facilitator
    service, sellers, paid MCP server), or report the one already running under ``home``
    after starting whatever of it is missing. ``market`` defaults to ``paywall``.
    ``choice`` names the chain and token (default: the recorded devnet's, else TestUSDC);
    a recorded devnet of another chain or token is refused with the fix. A fresh devnet
    funds ``wallet`` (default: the agent's dev account) with 100 USDC."""
    from chain.devkeys import AGENT, SELLER, dev_account

    home = home or nib_home()
    choice = choice or TokenChoice()
    market = paywall if market is None else market
    p = _paths(home)
    p["dir"].mkdir(parents=True, exist_ok=True)
    existing = status(home)
    conflict = choice.conflict(existing) if existing and existing.usdc else None
    if conflict:
        raise DevnetError(
            f"the devnet recorded under {home} runs {conflict}; its chain state and the spend "
            "ledger belong together, so it is not replaced. Fix: `nib devnet down`, then use "
            "another NIB_HOME for the other chain (or move its devnet/ folder aside)."
        )
    if existing and existing.running:
        _adopt_outside_token(home, existing, choice.usdc)
        _start_services(home, existing, paywall=paywall, market=market)
        _write_facts(home, existing)
        return existing
    if existing and existing.pid and pid_alive(existing.pid):
        stop_pid(existing.pid)  # alive but not answering: a wedged node
    stop_pids(existing.service_pids() if existing else [])

    # The same port as before when it is free: whatever still points at the old RPC URL
    # (the paywall, the judge and wallet services) keeps working on the restarted chain.
    port = port or _previous_port(existing)
    anvil = _start_with_state(p["state"], p["anvil_log"], port, choice.chain_id)
    try:
        info = DevnetInfo(
            rpc_url=anvil.rpc_url, chain_id=choice.chain_id, usdc="", wallet=wallet or dev_account(AGENT).address,
            seller=dev_account(SELLER).address, paywall_url=None, pid=anvil.pid,
            paywall_pid=None, running=True, token=existing.token if existing else "test", twin=choice.twin,
        )
        if existing and existing.usdc and _has_code(anvil.rpc_url, existing.usdc):
            info.usdc = existing.usdc
        _adopt_outside_token(home, info, choice.usdc)
        if not info.usdc:
            _provision(info, choice)
        _write_facts(home, info)
        _start_services(home, info, paywall=paywall, market=market)
        _write_facts(home, info)
    except Exception:
        anvil.stop()
        raise
    return info


def _previous_port(info: DevnetInfo | None) -> int:
    """The recorded Anvil's port when nothing listens on it now, else 0 (any free port)."""
    from urllib.parse import urlparse

    port = urlparse(info.rpc_url).port if info else None
    return port if port and not port_in_use(port) else 0


def _provision(info: DevnetInfo, choice: TokenChoice) -> None:
    """Put the asked-for token on a fresh chain and fund the wallet with it."""
    from chain.devtoken import fund, provision

    if choice.twin:
        net = _twin_network(choice.twin)
        info.token = "circle"
        assert net.domain is not None  # _twin_network refuses a network without one
        info.usdc = provision(info.rpc_url, "circle", at=net.usdc, name=net.domain[0])
    else:
        info.token = choice.kind or "test"
        info.usdc = provision(info.rpc_url, info.token)  # type: ignore[arg-type]
    fund(info.rpc_url, info.usdc, info.token, info.wallet, FUND_USDC)  # type: ignore[arg-type]


def _adopt_outside_token(home: Path, info: DevnetInfo, usdc: str | None) -> None:
    """Point the devnet at an outside token (NIB_USDC_ADDRESS), checked first; its
    running sellers, which take another token, are stopped so they restart on it."""
    from chain.devtoken import check_token

    if not usdc or usdc.lower() == info.usdc.lower():
        return
    facts = check_token(info.rpc_url, usdc)
    stop_pids(info.service_pids())
    info.paywall_pid = info.facilitator_pid = None
    info.paywall_url = info.facilitator_url = None
    info.market = []
    info.usdc, info.token = facts.address, "outside"
    _write_facts(home, info)


def fund_address(address: str, amount: int, home: Path | None = None) -> str:
    """MOVES MONEY (devnet only): mint ``amount`` atomic USDC of the running devnet's token
    to ``address`` (any wallet: a TypeScript or Python buyer), with gas money; the tx hash."""
    from chain.devtoken import fund

    info = status(home or nib_home())
    if info is None or not info.running:
        raise DevnetError("no running devnet under NIB_HOME; expected one. Fix: `nib devnet up`.")
    return fund(info.rpc_url, info.usdc, info.token, address, amount)  # type: ignore[arg-type]


def _start_with_state(state: Path, log: Path, port: int, chain_id: int) -> AnvilProcess:
    """Start Anvil on its saved state; a state file Anvil cannot load is moved aside."""
    try:
        return AnvilProcess(port=port, state=state, log=log, detach=True, chain_id=chain_id)
    except DevnetError:
        if not state.exists():
            raise
        broken = state.with_suffix(f".broken-{int(time.time())}.json")
        state.replace(broken)
        print(f"note: Anvil could not load its saved state; moved it to {broken} and started fresh.",
              file=sys.stderr)
        return AnvilProcess(port=port, state=state, log=log, detach=True, chain_id=chain_id)


def down(home: Path | None = None) -> DevnetInfo | None:
    """Stop the paywall, the market and Anvil (Anvil dumps its state on SIGINT); keep the facts file."""
    home = home or nib_home()
    info = _read_facts(home)
    if info is None:
        return None
    stop_pids(info.service_pids())  # before Anvil: settlements in flight finish first
    if info.pid:
        stop_pid(info.pid)
    info.pid = info.paywall_pid = info.facilitator_pid = None
    info.paywall_url = info.facilitator_url = None
    info.market = []
    info.running = False
    _write_facts(home, info)
    return info


@contextlib.contextmanager
def running(home: Path) -> Iterator[DevnetInfo]:
    """Bring the devnet up for the duration of a block, then down."""
    info = up(home)
    try:
        yield info
    finally:
        down(home)
