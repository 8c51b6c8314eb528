"""The judge and the wallet as their own processes: ``nib services up/status/down``,
``nib wallet serve``, and how ``nib run`` uses them.

Who holds what: the wallet service is the only process that unlocks the keystore; the
judge service is the only holder of its key, of each task's registered limits and of
the record of verdicts issued and consumed. The agent process gets the judge's URL and
agent token and the wallet's socket path, never a passphrase or the judge's admin token
(``nib run`` reads that from its 0600 file only to register the task, before the model
runs). ``services.json`` in NIB_HOME (0600) says where they are.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import typer

from agent.config import NibSettings, load_settings
from agent.errors import AgentConfigError
from chain import devnet as _devnet

SERVICES_FILE = "services.json"
ADMIN_TOKEN_FILE = "judge-admin.token"
READY_TIMEOUT_S = 60.0
#: NIB_* settings a service needs to find the network, its database (the workers' own:
#: NIB_DATABASE_URL may carry a password; it goes into the child's environment, never a
#: file or a log) and the wallet's treasury cap and gas price.
_SETTINGS_ENV = ("NIB_HOME", "NIB_NETWORK", "NIB_RPC_URL", "NIB_USDC_ADDRESS", "NIB_DB_PATH",
                 "NIB_DATABASE_URL", "NIB_TREASURY_CAP_USDC", "NIB_ETH_PRICE_USDC")

services_app = typer.Typer(
    no_args_is_help=True, help="The judge and the wallet as their own processes."
)


@dataclass
class ServicesInfo:
    """Where the services run (``services.json``)."""

    judge_url: str
    judge_address: str
    judge_pid: int
    wallet_socket: str
    wallet_pid: int
    agent_token: str
    network: str

    @property
    def running(self) -> bool:
        return _devnet.pid_alive(self.judge_pid) and _devnet.pid_alive(self.wallet_pid)

    def public(self) -> dict[str, Any]:
        """Everything but the agent token (for printing)."""
        data: dict[str, Any] = {k: v for k, v in asdict(self).items() if k != "agent_token"}
        data["running"] = self.running
        return data

    def describe(self) -> str:
        return (
            f"judge service {self.judge_url} (pid {self.judge_pid}) · wallet service "
            f"{self.wallet_socket} (pid {self.wallet_pid})"
        )


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
    info = status(home)
    if info is not None and not info.running:
        raise AgentConfigError(
            f"the judge and wallet services recorded in {home} are not both running "
            f"({info.describe()}); expected both. Fix: `nib services up` to restart them, or "
            "`nib services down` to use the in-process composition on the devnet."
        )
    return info


def _service_env(settings: NibSettings, **extra: str) -> dict[str, str]:
    env = _devnet.child_env({k: os.environ[k] for k in _SETTINGS_ENV if k in os.environ})
    env["NIB_HOME"] = str(settings.home)
    env["NIB_NETWORK"] = settings.network
    env.update(extra)
    return env


def _spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    logf = open(log, "ab")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "agent.cli", *args], env=env, stdout=logf,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            cwd=str(_devnet.REPO_ROOT),
        )
    finally:
        logf.close()


def _wait(ready: Any, proc: subprocess.Popen[bytes], name: str, log: Path) -> None:
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
    from wallet.service import SOCKET_NAME

    home = settings.home
    existing = status(home)
    if existing is not None and existing.running:
        return existing
    down(home)
    agent_token = secrets.token_hex(32)
    admin_token = secrets.token_hex(32)
    _write_private(home / ADMIN_TOKEN_FILE, admin_token)
    port = _devnet.free_port()
    judge_url = f"http://127.0.0.1:{port}"
    judge_env = _service_env(
        settings, NIB_JUDGE_TOKEN=agent_token, NIB_JUDGE_ADMIN_TOKEN=admin_token,
        **({"NIB_JUDGE_PASSWORD": os.environ["NIB_JUDGE_PASSWORD"]}
           if "NIB_JUDGE_PASSWORD" in os.environ else {}),
    )
    judge_log = home / "judge.log"
    judge = _spawn(["judge", "serve", "--port", str(port)], judge_env, judge_log)

    def judge_ready() -> bool:
        try:
            return httpx.get(judge_url + "/v1/health", timeout=1, trust_env=False).is_success
        except httpx.HTTPError:
            return False

    _wait(judge_ready, judge, "judge", judge_log)
    address = str(httpx.get(judge_url + "/v1/health", timeout=2, trust_env=False).json()["judge"])
    if _network_is_devnet(settings) and address != dev_account(JUDGE).address:
        _devnet.stop_pid(judge.pid)
        raise AgentConfigError(f"the devnet judge answered as {address}; expected the judge dev key.")
    wallet_env = _service_env(
        settings, NIB_JUDGE_URL=judge_url, NIB_JUDGE_TOKEN=agent_token,
        NIB_JUDGE_ADDRESS=address,
        **({"NIB_WALLET_PASSWORD": os.environ["NIB_WALLET_PASSWORD"]}
           if "NIB_WALLET_PASSWORD" in os.environ else {}),
    )
    socket = home / SOCKET_NAME
    socket.unlink(missing_ok=True)
    wallet_log = home / "wallet.log"
    wallet = _spawn(["wallet", "serve"], wallet_env, wallet_log)
    _wait(lambda: socket.exists() and (socket.stat().st_mode & 0o777) == 0o600, wallet,
          "wallet", wallet_log)
    info = ServicesInfo(judge_url, address, judge.pid, str(socket), wallet.pid, agent_token,
                        settings.network)
    _write_private(home / SERVICES_FILE, json.dumps(asdict(info)))
    return info


def down(home: Path) -> ServicesInfo | None:
    """Stop the recorded services (wallet first: nothing signs without its judge)."""
    info = status(home)
    if info is not None:
        _devnet.stop_pids([info.wallet_pid, info.judge_pid])
    for name in (SERVICES_FILE, ADMIN_TOKEN_FILE):
        (home / name).unlink(missing_ok=True)
    return info


def _network_is_devnet(settings: NibSettings) -> bool:
    return settings.network == "anvil"


def _admin_client(settings: NibSettings, info: ServicesInfo) -> Any:
    """A judge client holding the user's admin token (read from its 0600 file)."""
    from judge.service import JudgeClient

    path = settings.home / ADMIN_TOKEN_FILE
    if not path.exists():
        raise AgentConfigError(
            f"no judge admin token at {path}; expected the one `nib services up` wrote. "
            "Fix: `nib services down` then `nib services up`."
        )
    return JudgeClient(info.judge_url, token=path.read_text().strip(), timeout_s=10)


def register_task(settings: NibSettings, info: ServicesInfo, limits: Any) -> None:
    """Register a task's limits with the judge service, as the user (admin token)."""
    with _admin_client(settings, info) as admin:
        admin.register_task(limits)


def grant_escalation(
    settings: NibSettings, info: ServicesInfo, verdict_id: str, *, task_id: str | None = None
) -> Any:
    """A human grants the escalated payment ``verdict_id`` at the judge service (admin
    token); returns the judge's :class:`~judge.records.Grant` (what it now covers).

    With ``task_id``, a verdict of another task is refused before anything is granted.
    """
    with _admin_client(settings, info) as admin:
        return admin.grant(verdict_id, task_id=task_id, by=f"uid {os.getuid()}")


def held_verdict(store: Any, run_id: str) -> str:
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


def task_limits(rt: Any, run_id: str, task: str, limits: Any) -> Any:
    """The limits ``nib run`` registers for one task, from the user's configuration and
    the task text: its caps and threshold, the addresses it may pay (named in the task,
    allowlisted, and the devnet sellers' payTo) and the seller origins it may buy from."""
    from chain.devkeys import SELLER, dev_account

    allow = [e.strip() for e in rt.settings.seller_allowlist.split(",") if e.strip()]
    if rt.paywall_url:
        allow.append(rt.paywall_url)
    recipients: list[str] = []
    if rt.network.is_devnet:
        from chain.paywall.market import MARKET

        recipients += [dev_account(SELLER).address, *(s.pay_to for s in MARKET)]
        if rt.devnet is not None:
            allow += [str(s["url"]) for s in rt.devnet.market if s.get("url")]
    return registered_limits(run_id, task, limits, allowlist=allow, recipients=recipients)


def registered_limits(
    run_id: str, task: str, limits: Any, *, allowlist: Sequence[str], recipients: Sequence[str] = ()
) -> Any:
    """A task's :class:`~judge.tasks.TaskLimits`: the run's caps and threshold; it may pay
    the addresses the task names, the allowlist's 0x entries and ``recipients``, and buy
    from the allowlist's URL entries (seller origins)."""
    from agent.tools.base import addresses_named_in
    from judge.tasks import TaskLimits

    return TaskLimits(
        task_id=run_id,
        spend_cap=limits.spend_cap_usdc,
        per_call_cap=limits.per_call_cap_usdc,
        approval_threshold=limits.approval_threshold_usdc,
        recipients=(
            *addresses_named_in(task),
            *(a for a in allowlist if a.startswith("0x")),
            *recipients,
        ),
        sellers=tuple(u for u in allowlist if "://" in u),
    )


# ------------------------------------------------------------------ commands


def _settings() -> NibSettings:
    return load_settings()


@services_app.command("up")
def services_up(as_json: bool = typer.Option(False, "--json")) -> None:
    """Start the judge and the wallet as their own processes."""
    info = up(_settings())
    _show(info, as_json)


@services_app.command("status")
def services_status(as_json: bool = typer.Option(False, "--json")) -> None:
    """Where the services run, and whether they do."""
    info = status(_settings().home)
    if info is None:
        typer.echo("no services started; fix: `nib services up`", err=True)
        raise typer.Exit(1)
    _show(info, as_json)
    if not info.running:
        raise typer.Exit(1)


@services_app.command("down")
def services_down() -> None:
    """Stop the judge and the wallet services."""
    info = down(_settings().home)
    typer.echo("stopped" if info is not None else "no services were recorded", err=True)


def _show(info: ServicesInfo, as_json: bool) -> None:
    data = info.public()
    if as_json:
        typer.echo(json.dumps(data))
    else:
        for k, v in data.items():
            typer.echo(f"{k:14} {v}")
