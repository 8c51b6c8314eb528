"""The suites' two compositions: the judge and the wallet in the test process, or each as
its own process (``tests/service_child.py``, the service code ``nib services up`` runs).

A test that takes the ``composition`` fixture runs once per composition. With services,
the harness holds only clients (the judge's URL with the registered task's token, the
wallet's socket), the wallet service's events come back into the run's trace, and every run's
task is registered with the judge first (admin token), as ``nib run`` does; the judge
then rules only on registered tasks, from their registered limits.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.cli.services import registered_limits
from agent.loop.limits import Limits
from agent.loop.result import AgentResult
from agent.loop.run import Deps, run_task
from chain import devnet
from chain.devkeys import JUDGE, SELLER, dev_account
from judge.service import JudgeClient
from judge.storage.db import open_database
from judge.tasks import TaskLimits
from wallet.service import WalletClient

HERE = Path(__file__).resolve().parent
READY_S = 90.0


@dataclass
class Services:
    """Clients of one judge service and one wallet service, each its own process."""

    judge: JudgeClient
    admin: JudgeClient
    wallet: WalletClient
    pids: tuple[int, int]
    #: The agent's token for the judge: the task token of the task registered last (what
    #: an agent process of the test holds; ``judge`` sends it), "" before any.
    agent_token: str = ""

    def register(self, run_id: str, task: str, deps: Deps, *, queued: bool = False) -> str:
        """Register ``task`` for ``run_id`` as the user does before ``nib run``'s loop;
        from then on the agent's judge client acts with the task token the judge issued
        for it (as ``nib run`` gets it from its registration child), which it returns."""
        return self.register_limits(task_registration(run_id, task, deps), queued=queued)

    def register_by_limits(self, run_id: str, task: str, deps: Deps) -> str:
        """Register ``task``'s limits without its text, as an embedder registers one: its
        direct transfers are judged on expected value, not held to what the text orders
        (judge/ruling.py). For tests of how the wallet handles a transfer, not of orders."""
        return self.register_limits(replace(task_registration(run_id, task, deps), text_digest=""))

    def register_limits(self, limits: TaskLimits, *, queued: bool = False) -> str:
        """Register ``limits`` as the user does; the agent's judge client acts with the
        task token the judge issued for it from then on (returned)."""
        token = self.admin.register_task_for_token(limits, queued=queued)
        self.agent_token = token
        self.judge.use_token(token)
        return token

    def judge_for(self, token: str) -> JudgeClient:
        """A judge client of its own acting for one task: runs that go at once each hold
        theirs (one shared client would send whichever task token was registered last)."""
        return JudgeClient(self.judge.url, self.judge.timeout_s,
                           trusted_judge=self.judge.trusted_judge, token=token)


def task_registration(run_id: str, task: str, deps: Deps) -> TaskLimits:
    """What ``nib run`` registers for ``task`` with these deps (see agent.cli.services)."""
    paywall = deps.extras.get("paywall_url")
    allow = [*deps.allowlist, *([str(paywall)] if paywall else [])]
    limits: TaskLimits = registered_limits(
        run_id, task, deps.limits or Limits(), allowlist=allow,
        recipients=(dev_account(SELLER).address,),  # the devnet sellers' payTo
    )
    return limits


def records_beside(db: Path | str) -> Path | str:
    """Where the services keep their records for an agent whose database is ``db``, as
    `nib services up` lays them out: a SQLite file of their own (beside the agent's
    here), or the agent's PostgreSQL database (shared, the default there)."""
    from judge.storage import is_url

    return str(db) if is_url(db) else Path(db).with_name("services.db")


#: Times the services are started on a new port when another process took the judge's.
PORT_ATTEMPTS = 3


class Forks:
    """One process that imported the service code once and forks each service from it
    (``tests/service_child.py``): a service process starts in well under a second."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None

    def fork(self, cfg: dict[str, Any], ready_file: Path) -> int:
        """Fork one service; its pid (``pid_ready`` waits until it serves)."""
        if self._proc is None:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
            self._proc = subprocess.Popen(
                [sys.executable, str(HERE / "service_child.py")], env=env, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            _line(self._proc)
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps({**cfg, "ready_file": str(ready_file)}) + "\n")
        self._proc.stdin.flush()
        return int(_line(self._proc)["pid"])

    def start(self, cfg: dict[str, Any], ready_file: Path) -> tuple[int, dict[str, Any]]:
        """Fork one service; its pid and what it wrote to ``ready_file`` once serving."""
        pid = self.fork(cfg, ready_file)
        return pid, pid_ready(pid, ready_file)

    def close(self) -> None:
        if self._proc is not None:
            _stop(self._proc)
            self._proc = None


@dataclass
class Composition:
    """Which composition a test runs in; starts the services for it when asked."""

    name: str
    chain: Any
    forks: Forks = field(default_factory=Forks)
    stack: ExitStack = field(default_factory=ExitStack)
    _running: Services | None = None
    _wallet_cfg: dict[str, Any] = field(default_factory=dict)
    _live: set[int] = field(default_factory=set)

    @property
    def services(self) -> bool:
        return self.name == "services"

    def start(
        self,
        db: Path | str,
        emit: Callable[[str, dict[str, object]], None] | None = None,
        **wallet: Any,
    ) -> Services:
        """The judge and the wallet services on ``db`` (stopped when the test ends); the
        wallet service's events of each call go to ``emit`` (the run's trace). ``wallet``
        adds to the wallet service's config (``treasury_cap``; ``hang_on``: see
        tests/service_child.py)."""
        # The wallet's socket lives in a short private directory (a socket path is
        # limited to 107 bytes; pytest's tmp_path can be longer).
        home = Path(tempfile.mkdtemp(prefix="nib-svc-"))
        self.stack.callback(shutil.rmtree, home, True)
        self.stack.callback(self._kill_all)
        # The services' own token (the wallet's re-check) never reaches the agent: its
        # judge client acts with each registered task's token (Services.register).
        services_token, admin_token = secrets.token_hex(16), secrets.token_hex(16)
        base = {"db": str(db), "rpc_url": self.chain.rpc_url, "chain_id": self.chain.chain_id,
                "usdc": self.chain.usdc, "token": services_token}
        # Open the records once first, so the two do not race to make a fresh SQLite file
        # WAL and to create its bookkeeping tables (a judge once failed to start: "database
        # is locked").
        first = open_database(db)
        first.bootstrap()
        first.close()
        for attempt in range(1, PORT_ATTEMPTS + 1):
            # The judge's port is picked here, for the wallet's config: another test's
            # process may take it before the judge binds it; then both start again.
            url = f"http://127.0.0.1:{devnet.free_port()}"
            self._wallet_cfg = {**base, "role": "wallet", "home": str(home), "judge_url": url}
            # Both forked before either is awaited: they start side by side.
            for ready in home.glob("*.ready*"):
                ready.unlink()
            judge_pid = self._fork({**base, "role": "judge", "port": int(url.rsplit(":", 1)[1]),
                                    "admin_token": admin_token}, home / "judge.ready")
            wallet_pid = self._fork({**self._wallet_cfg, **wallet}, home / "wallet.ready")
            try:
                assert pid_ready(judge_pid, home / "judge.ready")["url"] == url
            except RuntimeError as exc:
                kill(wallet_pid)
                if "Address already in use" not in str(exc) or attempt == PORT_ATTEMPTS:
                    raise
                continue
            break
        socket = pid_ready(wallet_pid, home / "wallet.ready")["socket"]
        trusted = dev_account(JUDGE).address
        services = Services(
            JudgeClient(url, trusted_judge=trusted, timeout_s=10),
            JudgeClient(url, trusted_judge=trusted, token=admin_token, timeout_s=10),
            WalletClient(socket, timeout_s=75),
            (judge_pid, wallet_pid),
        )
        services.wallet.emit = emit
        for client in (services.judge, services.admin, services.wallet):
            self.stack.callback(client.close)
        self._running = services
        return services

    def hung(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """Wait until the wallet service stops at its ``hang_on`` point; the event's data."""
        marker = Path(self._wallet_cfg["home"]) / "wallet.ready.hung"
        deadline = time.monotonic() + timeout_s
        while not marker.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the wallet service did not reach its hang point in {timeout_s:g} s")
            time.sleep(0.02)
        return dict(json.loads(marker.read_text()))

    def kill_wallet(self) -> None:
        """SIGKILL the wallet service (a crash: nothing it was doing is finished)."""
        assert self._running is not None
        self._kill(self._running.pids[1])

    def kill_judge(self) -> None:
        """SIGKILL the judge service."""
        assert self._running is not None
        self._kill(self._running.pids[0])

    def restart_wallet(self, **wallet: Any) -> int:
        """A new wallet service on the same database and socket path (the old one
        killed first if it still runs), as `nib services up` after a crash; its pid."""
        assert self._running is not None
        self.kill_wallet()
        home = Path(self._wallet_cfg["home"])
        ready = home / f"wallet-{len(self._live)}-{time.monotonic_ns()}.ready"
        pid = self._fork({**self._wallet_cfg, **wallet}, ready)
        pid_ready(pid, ready)
        self._running.pids = (self._running.pids[0], pid)
        return pid

    def _fork(self, cfg: dict[str, Any], ready: Path) -> int:
        pid = self.forks.fork(cfg, ready)
        self._live.add(pid)
        return pid

    def _kill(self, pid: int) -> None:
        # Only a pid this composition forked and has not killed yet: a reaped pid may
        # belong to another process by now.
        if pid in self._live:
            self._live.discard(pid)
            kill(pid)

    def _kill_all(self) -> None:
        for pid in list(self._live):
            self._kill(pid)

    def close(self) -> None:
        self.stack.close()


def _line(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """The next JSON line the forking process prints, within READY_S, or its errors."""
    assert proc.stdout is not None
    deadline = time.monotonic() + READY_S
    poller = select.poll()  # not select(): it cannot take a descriptor above 1023
    poller.register(proc.stdout, select.POLLIN | select.POLLHUP)
    while time.monotonic() < deadline and proc.poll() is None:
        if poller.poll(200):
            line = proc.stdout.readline()
            if line:
                return dict(json.loads(line))
    _stop(proc)
    err = proc.stderr.read() if proc.stderr else ""
    raise RuntimeError(f"the service forker did not answer within {READY_S:g} s: {err[-2000:]}")


def pid_ready(pid: int, ready_file: Path) -> dict[str, Any]:
    """What a forked service wrote once it serves, within READY_S, or why it died."""
    deadline = time.monotonic() + READY_S
    error = Path(str(ready_file) + ".error")
    while time.monotonic() < deadline:
        if ready_file.exists():
            return dict(json.loads(ready_file.read_text()))
        if error.exists() or not devnet.pid_alive(pid):
            break
        time.sleep(0.02)
    kill(pid)
    why = error.read_text() if error.exists() else "no answer"
    raise RuntimeError(f"service process {pid} did not start within {READY_S:g} s: {why}")


def kill(pid: int) -> None:
    """Kill a forked service (the test is over: every call it made has returned and its
    writes are committed); its forker reaps it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while devnet.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)


def _stop(proc: subprocess.Popen[str]) -> None:
    """Kill the service (the test is over: every call it made has returned and its
    writes are committed) and close its pipes."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


async def run_registered(task: str, deps: Deps, services: Services | None) -> AgentResult:
    """``run_task``, with the task registered at the judge service first when there is one."""
    run_id = uuid.uuid4().hex[:12]
    if services is None:
        return await run_task(task, deps, run_id=run_id)
    judge = services.judge_for(services.register(run_id, task, deps))
    try:
        return await run_task(task, replace(deps, judge=judge), run_id=run_id)
    finally:
        judge.close()
