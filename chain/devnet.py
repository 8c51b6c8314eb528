"""The local devnet: a real Anvil with TestUSDC deployed, the agent funded, and the x402 paywall.

``up`` starts (or finds) it and records its facts in ``NIB_HOME/devnet.json``; Anvil's
own ``--state`` file keeps the chain across restarts so the spend ledger stays true to
it. ``down`` stops both processes by PID: SIGINT, then terminate, then kill.
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
from dataclasses import asdict, dataclass
from pathlib import Path

from chain.client import ChainClient
from chain.devkeys import AGENT, DEPLOYER, DEVNET_CHAIN_ID, SELLER, dev_account
from chain.errors import AnvilMissing, ChainError, DevnetError

ANVIL_VERSION = "1.7.1"
REPO_ROOT = Path(__file__).resolve().parent.parent
TOOLS_DIR = REPO_ROOT / "tools"
INSTALL_HINT = (
    f"run `make setup` (or `npm install --prefix tools @foundry-rs/anvil@{ANVIL_VERSION}`), "
    "or set NIB_ANVIL to the path of an anvil binary"
)
FUND_USDC = 100_000_000  # 100 test USDC, atomic units
READY_TIMEOUT_S = 20.0


def nib_home() -> Path:
    """The state folder: ``NIB_HOME`` or ``~/.nib``."""
    return Path(os.environ.get("NIB_HOME") or Path.home() / ".nib")


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
    ) -> None:
        self.binary = find_anvil()
        if port and port_in_use(port):
            raise DevnetError(
                f"port {port} on 127.0.0.1 is already in use; expected a free port for Anvil. "
                "Fix: choose another port (or 0 for any free one), or stop the process using it."
            )
        self.port = port or free_port()
        self.rpc_url = f"http://127.0.0.1:{self.port}"
        self.chain_id = DEVNET_CHAIN_ID
        self.log_path = log or Path(os.devnull)
        # --quiet: Anvil's banner prints its dev accounts' private keys, and no key may
        # reach a log; errors are still printed.
        cmd = [self.binary, "--host", "127.0.0.1", "--port", str(self.port),
               "--chain-id", str(DEVNET_CHAIN_ID), "--quiet"]
        if state is not None:
            cmd += ["--state", str(state)]
        logf = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=detach,
        )
        logf.close()
        self.pid = self.proc.pid
        try:
            self.wait_ready()
        except DevnetError:
            self.stop()
            raise

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
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
    """The facts of a running (or last-run) devnet, as ``nib devnet up --json`` prints them."""

    rpc_url: str
    chain_id: int
    usdc: str
    wallet: str
    seller: str
    paywall_url: str | None
    pid: int | None
    paywall_pid: int | None
    running: bool = False

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def _paths(home: Path) -> dict[str, Path]:
    d = home / "devnet"
    return {"dir": d, "facts": d / "devnet.json", "state": d / "anvil-state.json",
            "anvil_log": d / "anvil.log", "paywall_log": d / "paywall.log", "paywall_url": d / "paywall.url"}


def _read_facts(home: Path) -> DevnetInfo | None:
    path = _paths(home)["facts"]
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        return DevnetInfo(**{k: data.get(k) for k in DevnetInfo.__dataclass_fields__})
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
    try:
        return ChainClient(info.rpc_url, DEVNET_CHAIN_ID, timeout_s=1.0).chain_id() == DEVNET_CHAIN_ID
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
    return info


def deploy_and_fund(rpc_url: str, wallet: str) -> str:
    """Deploy TestUSDC from the deployer and fund ``wallet`` with 100 test USDC."""
    from chain.usdc import deploy_test_usdc, mint

    client = ChainClient(rpc_url, DEVNET_CHAIN_ID)
    usdc = deploy_test_usdc(client.w3, dev_account(DEPLOYER))
    mint(client.w3, usdc, dev_account(DEPLOYER), wallet, FUND_USDC)
    return usdc


def _has_code(rpc_url: str, address: str) -> bool:
    client = ChainClient(rpc_url, DEVNET_CHAIN_ID)
    return len(client.call("eth_getCode", lambda: client.w3.eth.get_code(address))) > 0  # type: ignore[arg-type]


def _start_paywall(home: Path, rpc_url: str, usdc: str) -> tuple[int, str]:
    p = _paths(home)
    p["paywall_url"].unlink(missing_ok=True)
    logf = open(p["paywall_log"], "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "chain.paywall", "--rpc-url", rpc_url, "--usdc", usdc,
         "--port", "0", "--url-file", str(p["paywall_url"])],
        stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, cwd=str(REPO_ROOT),
    )
    logf.close()
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DevnetError(
                f"the x402 paywall exited with code {proc.returncode} before it was ready. "
                f"Log tail:\n{_log_tail(p['paywall_log'])}"
            )
        if p["paywall_url"].exists() and p["paywall_url"].read_text().strip():
            url = p["paywall_url"].read_text().strip()
            if _health(url):
                return proc.pid, url
        time.sleep(0.1)
    stop_pid(proc.pid)
    raise DevnetError(f"the x402 paywall did not become ready in {READY_TIMEOUT_S:.0f} s. "
                      f"Log tail:\n{_log_tail(p['paywall_log'])}")


def _health(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url.rstrip("/") + "/health", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def up(home: Path | None = None, *, port: int = 0, paywall: bool = True) -> DevnetInfo:
    """Start the devnet, or report the one already running under ``home``."""
    home = home or nib_home()
    p = _paths(home)
    p["dir"].mkdir(parents=True, exist_ok=True)
    existing = status(home)
    if existing and existing.running:
        if paywall and not existing.paywall_pid:
            existing.paywall_pid, existing.paywall_url = _start_paywall(home, existing.rpc_url, existing.usdc)
            _write_facts(home, existing)
        return existing
    if existing and existing.pid and pid_alive(existing.pid):
        stop_pid(existing.pid)  # alive but not answering: a wedged node
    if existing and existing.paywall_pid:
        stop_pid(existing.paywall_pid)

    state = p["state"]
    anvil = _start_with_state(state, p["anvil_log"], port)
    wallet = dev_account(AGENT).address
    try:
        usdc = existing.usdc if existing and existing.usdc and _has_code(anvil.rpc_url, existing.usdc) else None
        if usdc is None:
            usdc = deploy_and_fund(anvil.rpc_url, wallet)
        info = DevnetInfo(
            rpc_url=anvil.rpc_url, chain_id=DEVNET_CHAIN_ID, usdc=usdc, wallet=wallet,
            seller=dev_account(SELLER).address, paywall_url=None, pid=anvil.pid,
            paywall_pid=None, running=True,
        )
        _write_facts(home, info)
        if paywall:
            info.paywall_pid, info.paywall_url = _start_paywall(home, anvil.rpc_url, usdc)
            _write_facts(home, info)
    except Exception:
        anvil.stop()
        raise
    return info


def _start_with_state(state: Path, log: Path, port: int) -> AnvilProcess:
    """Start Anvil on its saved state; a state file Anvil cannot load is moved aside."""
    try:
        return AnvilProcess(port=port, state=state, log=log, detach=True)
    except DevnetError:
        if not state.exists():
            raise
        broken = state.with_suffix(f".broken-{int(time.time())}.json")
        state.replace(broken)
        print(f"note: Anvil could not load its saved state; moved it to {broken} and started fresh.",
              file=sys.stderr)
        return AnvilProcess(port=port, state=state, log=log, detach=True)


def down(home: Path | None = None) -> DevnetInfo | None:
    """Stop the paywall and Anvil (Anvil dumps its state on SIGINT); keep the facts file."""
    home = home or nib_home()
    info = _read_facts(home)
    if info is None:
        return None
    for pid in (info.paywall_pid, info.pid):
        if pid:
            stop_pid(pid)
    info.pid = info.paywall_pid = None
    info.paywall_url = None
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
