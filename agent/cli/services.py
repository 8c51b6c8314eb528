"""The judge and the wallet as their own processes: ``nib services up/status/down``,
``nib wallet serve``, and how ``nib run`` uses them.

Who holds what: the wallet service is the only process that unlocks the keystore; the
judge service is the only holder of its key, of each task's registered limits and of
the record of verdicts issued and consumed. The agent process gets the judge's URL, the
wallet's socket path and the token of its own task, never a passphrase, the judge's
admin token or the services' own token (the wallet's re-check): a short-lived child of
the user's command reads the admin token to register the task (see :func:`register_task`)
and hands back the task's token, which the judge honours for that task only, before the
agent process confines itself (agent.confine).

The services keep their own state in ``NIB_HOME/services`` (0700): their database (task
registrations, verdicts, grants, calibration, the wallet's ledger and nonces), the admin
token and their logs; the agent process cannot open it once confined. The agent's own
database (runs, events, queue) stays where it was. ``services.json`` in NIB_HOME (0600)
says where the services are.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from agent.config import NibSettings
from agent.errors import AgentConfigError
from chain import devnet as _devnet

if TYPE_CHECKING:
    from agent.loop.limits import Limits
    from agent.store import RunStore
    from chain.networks import Network
    from judge.client import JudgeClient
    from judge.records import Grant
    from judge.tasks import TaskLimits

SERVICES_FILE = "services.json"
#: The services' own directory in NIB_HOME (0700), and what it holds.
SERVICES_DIR = "services"
ADMIN_TOKEN_FILE = "judge-admin.token"
SERVICES_DB_FILE = "nib.db"
#: Where the services keep their records (a path or a URL, 0600): written by `nib
#: services up`, read by the user's commands that read those records (audit, approve).
RECORDS_FILE = "database"
READY_TIMEOUT_S = 60.0
#: NIB_* settings a service needs to find the network and the wallet's treasury cap and
#: gas price. Its database is the services' own (see services_database), set apart.
_SETTINGS_ENV = ("NIB_HOME", "NIB_NETWORK", "NIB_RPC_URL", "NIB_USDC_ADDRESS",
                 "NIB_TREASURY_CAP_ATOMIC", "NIB_TREASURY_CAP_USDC",  # the old name still reads
                 "NIB_ETH_PRICE_USDC", "NIB_NONCE_LEASE_S")

T = TypeVar("T")

@dataclass
class ServicesInfo:
    """Where the services run (``services.json``)."""

    judge_url: str
    judge_address: str
    judge_pid: int
    wallet_socket: str
    wallet_pid: int
    network: str
    #: Where the services keep their records (password masked), and whether that is the
    #: agent's own database (PostgreSQL without NIB_SERVICES_DATABASE_URL).
    database: str = ""
    shared_database: bool = False
    #: The chain the services were started against (they read it once, at start).
    rpc_url: str = ""

    @property
    def running(self) -> bool:
        return _devnet.pid_alive(self.judge_pid) and _devnet.pid_alive(self.wallet_pid)

    def public(self) -> dict[str, object]:
        """What to print."""
        data: dict[str, object] = dict(asdict(self))
        data["running"] = self.running
        return data

    def describe(self) -> str:
        records = (
            f"records in the agent's own database {self.database} (SHARED: set "
            "NIB_SERVICES_DATABASE_URL to a database of their own)"
            if self.shared_database else f"records in {self.database}"
        )
        return (
            f"judge service {self.judge_url} (pid {self.judge_pid}) · wallet service "
            f"{self.wallet_socket} (pid {self.wallet_pid}) · {records}"
        )


def services_home(home: Path) -> Path:
    """The services' own directory (0700): their database, admin token and logs."""
    return home / SERVICES_DIR


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.chmod(0o700)
    return path


def services_database(settings: NibSettings) -> tuple[str | Path, bool]:
    """Where `nib services up` puts the services' records, and whether that is the agent's
    own database: NIB_SERVICES_DATABASE_URL; else, with the agent on PostgreSQL
    (NIB_DATABASE_URL), the agent's database (shared: said in every first line); else the
    SQLite file in the services' own directory."""
    if settings.services_database_url:
        return settings.services_database_url, False
    if settings.database_url:
        return settings.database_url, True
    return services_home(settings.home) / SERVICES_DB_FILE, False


def records_database(settings: NibSettings) -> str | Path:
    """Where this home's money records are (ledger, verdicts, task registrations): where
    the services were last started to keep them, else the agent's database (a home whose
    judge and wallet always ran in-process). Read by the user's commands, never by an
    agent process under services (it cannot open them)."""
    path = services_home(settings.home) / RECORDS_FILE
    if not path.exists():
        return settings.database
    text = path.read_text().strip()
    return text if "://" in text else Path(text)


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def status(home: Path) -> ServicesInfo | None:
    """The recorded services (running or not), or None when none were started."""
    path = home / SERVICES_FILE
    if not path.exists():
        return None
    try:
        return ServicesInfo(**json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:
        raise AgentConfigError(
            f"{path} is unreadable ({exc}); expected what `nib services up` wrote. Fix: "
            "`nib services down` then `nib services up`."
        ) from exc


def running(home: Path) -> ServicesInfo | None:
    """The recorded services, or None when none were started.

    Raises when they were started and one of them is gone: a run must not quietly
    fall back to holding the key itself.
    """
    from agent.errors import DependencyDown

    info = status(home)
    if info is not None and not info.running:
        raise DependencyDown(
            f"the judge and wallet services recorded in {home} are not both running "
            f"({info.describe()}); expected both. Fix: `nib devnet up` restarts them on the "
            "devnet, `nib services up` on any other network."
        )
    return info


#: The services' secrets: `nib services up` needs them, an agent process must not hold them.
SERVICE_SECRETS = ("NIB_WALLET_PASSWORD", "NIB_JUDGE_PASSWORD", "NIB_JUDGE_ADMIN_TOKEN",
                   "NIB_SERVICES_DATABASE_URL")
#: Set in a service's environment when its secrets come on its stdin (see take_secrets).
SECRETS_ON_STDIN = "NIB_SECRETS_ON_STDIN"


def _service_env(settings: NibSettings) -> dict[str, str]:
    """A service's environment: the network settings only. Its secrets (tokens,
    passphrases, a database URL that may carry a password) go on its stdin, because a
    process's initial environment stays readable in /proc/PID/environ to whoever may
    inspect it (root, even under Landlock)."""
    env = _devnet.child_env({k: os.environ[k] for k in _SETTINGS_ENV if k in os.environ})
    env["NIB_HOME"] = str(settings.home)
    env["NIB_NETWORK"] = settings.network
    env[SECRETS_ON_STDIN] = "1"
    return env


def _database_env(database: str | Path) -> dict[str, str]:
    return {"NIB_DATABASE_URL" if isinstance(database, str) else "NIB_DB_PATH": str(database)}


def _passed_on(*names: str) -> dict[str, str]:
    """The user's own settings ``names`` (passphrases) a service needs, when set."""
    return {k: os.environ[k] for k in names if k in os.environ}


def _spawn(
    args: list[str], env: dict[str, str], log: Path, secrets: dict[str, str]
) -> subprocess.Popen[bytes]:
    """Start ``nib ARGS`` as a service: ``env`` in its environment, ``secrets`` on its
    stdin (one JSON line, read by take_secrets before anything else)."""
    logf = open(log, "ab")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent.cli", *args], env=env, stdout=logf,
            stderr=subprocess.STDOUT, stdin=subprocess.PIPE, start_new_session=True,
            cwd=str(_devnet.REPO_ROOT),
        )
    finally:
        logf.close()
    assert proc.stdin is not None
    with proc.stdin:
        proc.stdin.write(json.dumps(secrets).encode() + b"\n")
    return proc


def take_secrets() -> None:
    """In a service started by `nib services up`: its secrets from stdin into this
    process's settings (os.environ), never into its initial environment block."""
    if os.environ.get(SECRETS_ON_STDIN) != "1":
        return
    line = sys.stdin.readline()
    try:
        secrets = json.loads(line)
    except ValueError as exc:
        raise AgentConfigError(
            f"{SECRETS_ON_STDIN} is set but stdin held no JSON line of secrets ({exc}); "
            "expected the line `nib services up` writes. Fix: start the services with "
            "`nib services up`, or unset it."
        ) from exc
    os.environ.update({str(k): str(v) for k, v in dict(secrets).items()})


def _wait(ready: Callable[[], bool], proc: subprocess.Popen[bytes], name: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            _devnet.stop_pid(proc.pid)
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise AgentConfigError(
                f"the {name} service did not start (exit {proc.returncode}); expected it to "
                f"answer within {READY_TIMEOUT_S:.0f} s. Log tail:\n{tail}\nFix: read "
                f"{log} and `nib services up` again."
            )
        time.sleep(0.1)


def up(settings: NibSettings) -> ServicesInfo:
    """Start the judge, then the wallet, each as its own process (idempotent)."""
    import httpx

    from chain.devkeys import JUDGE, dev_account
    from judge.storage import describe
    from judge.tls import tls_context
    from wallet.service import SOCKET_NAME

    home = settings.home
    existing = status(home)
    if existing is not None and not health(existing, settings):
        return existing
    down(home)
    own = _private_dir(services_home(home))
    database, shared = services_database(settings)
    _write_private(own / RECORDS_FILE, str(database))
    # The services' own token (the wallet's re-check): never in services.json, which an
    # agent process reads; agents get a token for their own task only (register_task).
    service_token = secrets.token_hex(32)
    admin_token = secrets.token_hex(32)
    _write_private(own / ADMIN_TOKEN_FILE, admin_token)
    port = _devnet.free_port()
    judge_url = f"http://127.0.0.1:{port}"
    judge_secrets = {"NIB_JUDGE_TOKEN": service_token, "NIB_JUDGE_ADMIN_TOKEN": admin_token,
                     **_database_env(database), **_passed_on("NIB_JUDGE_PASSWORD")}
    judge_log = own / "judge.log"
    judge = _spawn(["judge", "serve", "--port", str(port)], _service_env(settings), judge_log,
                   judge_secrets)

    def judge_ready() -> bool:
        try:
            return httpx.get(judge_url + "/v1/health", timeout=1, trust_env=False,
                             verify=tls_context()).is_success
        except httpx.HTTPError:
            return False

    _wait(judge_ready, judge, "judge", judge_log)
    address = str(httpx.get(judge_url + "/v1/health", timeout=2, trust_env=False,
                          verify=tls_context()).json()["judge"])
    if _network_is_devnet(settings) and address != dev_account(JUDGE).address:
        _devnet.stop_pid(judge.pid)
        raise AgentConfigError(f"the devnet judge answered as {address}; expected the judge dev key.")
    wallet_env = {**_service_env(settings), "NIB_JUDGE_URL": judge_url,
                  "NIB_JUDGE_ADDRESS": address}
    wallet_secrets = {"NIB_JUDGE_TOKEN": service_token, **_database_env(database),
                      **_passed_on("NIB_WALLET_PASSWORD")}
    socket = home / SOCKET_NAME
    socket.unlink(missing_ok=True)
    wallet_log = own / "wallet.log"
    wallet = _spawn(["wallet", "serve"], wallet_env, wallet_log, wallet_secrets)
    try:
        _wait(lambda: socket.exists() and (socket.stat().st_mode & 0o777) == 0o600, wallet,
              "wallet", wallet_log)
    except BaseException:
        _devnet.stop_pid(judge.pid)  # no judge left running, unrecorded, for a wallet that failed
        raise
    info = ServicesInfo(judge_url, address, judge.pid, str(socket), wallet.pid,
                        settings.network, describe(database), shared, current_rpc(settings) or "")
    _write_private(home / SERVICES_FILE, json.dumps(asdict(info)))
    return info


def current_rpc(settings: NibSettings) -> str | None:
    """The RPC URL of the chain this home uses now: the running devnet's (None when it is
    down), else NIB_RPC_URL or the network's own."""
    if _network_is_devnet(settings):
        info = _devnet.status(settings.home)
        return info.rpc_url if info is not None and info.running else None
    from chain.networks import get_network

    try:
        return settings.rpc_url or get_network(settings.network).rpc_url
    except Exception:  # a custom network without an RPC URL: nothing to compare
        return settings.rpc_url


def health(info: ServicesInfo, settings: NibSettings) -> list[str]:
    """What is wrong with the recorded services (empty: healthy): a process gone, a judge
    that does not answer, or a chain other than the one this home uses now (a devnet
    restarted on a new port leaves services on the dead one until they are restarted)."""
    import httpx

    from judge.tls import tls_context

    problems = [f"the {name} service (pid {pid}) is not running"
                for name, pid in (("judge", info.judge_pid), ("wallet", info.wallet_pid))
                if not _devnet.pid_alive(pid)]
    if not problems:
        try:
            httpx.get(info.judge_url + "/v1/health", timeout=2, trust_env=False,
                      verify=tls_context()).raise_for_status()
        except httpx.HTTPError as exc:
            problems.append(f"the judge service at {info.judge_url} does not answer ({exc})")
    rpc = current_rpc(settings)
    if rpc is None and _network_is_devnet(settings):
        problems.append("the devnet is down")
    elif info.rpc_url and rpc != info.rpc_url:
        problems.append(f"the services were started against the chain at {info.rpc_url}, "
                        f"but this home's chain is now at {rpc}")
    return problems


def down(home: Path) -> ServicesInfo | None:
    """Stop the recorded services (wallet first: nothing signs without its judge)."""
    info = status(home)
    if info is not None:
        _devnet.stop_pids([info.wallet_pid, info.judge_pid])
    # The admin token goes with the services (and from where older versions kept it).
    for path in (home / SERVICES_FILE, services_home(home) / ADMIN_TOKEN_FILE,
                 home / ADMIN_TOKEN_FILE):
        path.unlink(missing_ok=True)
    return info


def _network_is_devnet(settings: NibSettings) -> bool:
    return settings.network == "anvil"


def _admin_client(settings: NibSettings, info: ServicesInfo) -> JudgeClient:
    """A judge client holding the user's admin token (read from its 0600 file). Only ever
    called in :func:`as_user`'s child: the token never enters an agent process."""
    from judge.client import JudgeClient

    path = services_home(settings.home) / ADMIN_TOKEN_FILE
    if not path.exists():
        raise AgentConfigError(
            f"no judge admin token at {path}; expected the one `nib services up` wrote. "
            "Fix: `nib services down` then `nib services up`."
        )
    return JudgeClient(info.judge_url, token=path.read_text().strip(), timeout_s=10)


def as_user(fn: Callable[[], T]) -> T:
    """``fn()`` run in a short-lived forked child of this process: its answer, or the error
    it raised, raised here. What the child reads (the judge's admin token) dies with it,
    so the process that goes on to run the model and parse tool results never holds it.
    The child is this process's own code, forked before any untrusted data was read."""
    import pickle

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: do it, send the outcome, leave without running any cleanup
        os.close(read_end)
        code = 0
        try:
            try:
                outcome: tuple[bool, object] = (True, fn())
            except BaseException as exc:  # sent to the parent, which raises it
                outcome, code = (False, exc), 1
            try:
                data = pickle.dumps(outcome)
            except Exception as exc:  # an unpicklable error: its text
                data, code = pickle.dumps((False, AgentConfigError(f"{type(exc).__name__}: {exc}"))), 1
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(data)
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        raise AgentConfigError(
            f"the child that acts as the user (pid {pid}) died (wait status {status}) before "
            "answering; expected it to register the task or grant at the judge. Fix: run "
            "the command again; `nib services status` shows whether the judge runs."
        )
    ok, value = pickle.loads(data)  # noqa: S301 - our own fork's answer, not outside data
    if not ok:
        raise value  # type: ignore[misc]
    return value  # type: ignore[no-any-return]


def register_task(settings: NibSettings, info: ServicesInfo, limits: TaskLimits, *,
                  queued: bool = False) -> str:
    """Register a task's limits with the judge service, as the user (admin token, read in
    a child: see :func:`as_user`); ``queued``: for a worker to claim (``nib submit``).
    Returns the task's token: the judge honours it for that task and its verdicts only."""

    def register() -> str:
        with _admin_client(settings, info) as admin:
            return str(admin.register_task_for_token(limits, queued=queued))

    return as_user(register)


def task_token(settings: NibSettings, info: ServicesInfo, task_id: str) -> str:
    """A new token for the registered task ``task_id`` (admin token, in a child): what a
    resumed run (``nib approve/deny``) acts with."""

    def issue() -> str:
        with _admin_client(settings, info) as admin:
            return str(admin.task_token(task_id))

    return as_user(issue)


def worker_token(settings: NibSettings, info: ServicesInfo) -> str:
    """A worker token (admin token, in a child): it may only claim the tokens of tasks
    ``nib submit`` registered as queued, so a compromised worker's scope is that queue."""

    def issue() -> str:
        with _admin_client(settings, info) as admin:
            return str(admin.worker_token())

    return as_user(issue)


def grant_escalation(
    settings: NibSettings, info: ServicesInfo, verdict_id: str, *, task_id: str | None = None
) -> Grant:
    """A human grants the escalated payment ``verdict_id`` at the judge service (admin
    token, read in a child: see :func:`as_user`); returns the judge's
    :class:`~judge.records.Grant` (what it now covers).

    With ``task_id``, a verdict of another task is refused before anything is granted.
    """

    def grant() -> Grant:
        with _admin_client(settings, info) as admin:
            return admin.grant(verdict_id, task_id=task_id, by=f"uid {os.getuid()}")

    return as_user(grant)


def held_verdict(store: RunStore, run_id: str) -> str:
    """The escalate verdict a paused run is waiting on, from its saved state."""
    import json as _json

    raw = store.paused_state(run_id)
    pending = _json.loads(raw).get("pending") if raw else None
    if not pending:
        raise AgentConfigError(
            f"run {run_id} is not paused awaiting approval; expected a paused run. Fix: list "
            "paused runs with `nib runs`."
        )
    return str(pending["verdict"]["id"])


class RunPlace(Protocol):
    """Where a run happens, as :func:`task_limits` reads it (``agent.cli.runtime.Runtime``)."""

    @property
    def settings(self) -> NibSettings: ...
    @property
    def paywall_url(self) -> str | None: ...
    @property
    def network(self) -> Network: ...
    @property
    def devnet(self) -> _devnet.DevnetInfo | None: ...


def task_limits(rt: RunPlace, run_id: str, task: str, limits: Limits) -> TaskLimits:
    """The limits ``nib run`` registers for one task, from the user's configuration and
    the task text: its caps and threshold, the addresses it may pay (named in the task,
    allowlisted, and the devnet sellers' payTo) and the seller origins it may buy from."""
    from chain.devkeys import SELLER, dev_account

    allow = list(rt.settings.allowlist.entries)
    if rt.paywall_url:
        allow.append(rt.paywall_url)
    recipients: list[str] = []
    if rt.network.is_devnet:
        from chain.paywall.sellers import MARKET

        recipients += [dev_account(SELLER).address, *(s.pay_to for s in MARKET)]
        if rt.devnet is not None:
            allow += [str(s["url"]) for s in rt.devnet.market if s.get("url")]
    return registered_limits(run_id, task, limits, allowlist=allow, recipients=recipients)


def registered_limits(
    run_id: str, task: str, limits: Limits, *, allowlist: Sequence[str], recipients: Sequence[str] = ()
) -> TaskLimits:
    """A task's :class:`~judge.tasks.TaskLimits`: the run's caps and threshold; it may pay
    the addresses the task names, the allowlist's 0x entries and ``recipients``, buy
    from the allowlist's URL entries (seller origins), and make the payments the task's
    text orders (mandates). A spend bound in the task's words lowers the caps (never raises
    them); the text's digest keeps the cap the task was submitted with."""
    from agent.loop.limits import within_task_bound
    from agent.tools.allowlist import parse_allowlist
    from agent.tools.base import addresses_named_in
    from judge.mandates import mandates_in
    from judge.tasks import TaskLimits, text_digest

    allowed = parse_allowlist(allowlist)
    # A bound the task's own words set on its spending ("don't spend more than 0.20 USDC")
    # is the judge's to hold too, not the agent's alone; never raised.
    cap = within_task_bound(limits, task).spend_cap_atomic
    # The payments the task's own text orders, read here, before any model or tool output
    # exists: nothing else can create or widen one (judge/mandates.py).
    return TaskLimits(
        task_id=run_id,
        spend_cap_atomic=cap,
        per_call_cap_atomic=min(limits.per_call_cap_atomic, cap),
        approval_threshold_atomic=limits.approval_threshold_atomic,
        recipients=(
            *addresses_named_in(task),
            *allowed.addresses,
            *recipients,
        ),
        sellers=allowed.sellers,
        mandates=mandates_in(task),
        text_digest=text_digest(task, limits.spend_cap_atomic),
    )
