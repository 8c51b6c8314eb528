"""Confinement of the agent process (agent.confine): the rules it builds, the refusal off
the devnet where the kernel cannot confine, and a real confined process (this kernel has
Landlock) that keeps its own database and temp files and loses the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agent import confine as confine_mod
from agent.cli import runtime as runtime_mod
from agent.cli.runtime import Runtime
from agent.cli.services import SERVICE_SECRETS
from agent.confine import READ, Confinement, Policy, handled_rights, rules
from agent.errors import AgentConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_rules_split_around_what_is_denied_and_never_grant_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "services").mkdir(parents=True)
    (home / "services" / "nib.db").write_text("records")
    (home / "wallet.json").write_text("{}")
    (home / "nib.db").write_text("runs")
    (home / "devnet").mkdir()
    (home / "link").symlink_to(home / "services")  # a way round by name: not granted
    work = tmp_path / "work"
    code = work / "code"  # read-only code inside a writable directory
    (code / "pkg").mkdir(parents=True)
    (work / "scratch").mkdir()
    handled = handled_rights(7)
    policy = Policy(deny=(home / "services", home / "wallet.json"), read_only=(code,),
                    writable=(home / "nib.db", work, code))
    found: dict[Path, int] = {}
    for path, rights in rules(policy, handled):
        found[path] = found.get(path, 0) | rights  # rules add up
    # Nothing at or beneath a denied path, and no directory holding one, is granted.
    assert not any(p in (Path("/"), tmp_path, home) or home / "services" in (p, *p.parents)
                   or p == home / "wallet.json" for p in found)
    assert home / "link" not in found
    # Its siblings are: read-only, except what is writable.
    assert found[home / "devnet"] == READ & handled
    assert found[home / "nib.db"] & (1 << 1)  # WRITE_FILE
    assert found[work / "scratch"] == handled
    # Code stays read-only (read through its directory) even when a writable root holds
    # it, or names it: nothing writable is granted at, above or beneath it.
    assert found[work] == READ & handled
    assert not [p for p, r in found.items()
                if r & (1 << 1) and (code in (p, *p.parents) or p in code.parents)]


def _runtime(network: str, services: object | None) -> Runtime:
    rt = Runtime.__new__(Runtime)
    rt.settings = SimpleNamespace(home=Path("/nonexistent"))  # type: ignore[assignment]
    rt.network = SimpleNamespace(is_devnet=network == "anvil", name=network)  # type: ignore[assignment]
    rt.services = services  # type: ignore[assignment]
    rt.extras = {}
    # The wallet client: confinement closes its connections opened before (Runtime.confine).
    rt.wallet = SimpleNamespace(close=lambda: None)  # type: ignore[assignment]
    return rt


def test_without_landlock_off_the_devnet_the_run_is_refused_unless_the_user_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(confine_mod, "landlock_abi", lambda: (0, "this kernel has no Landlock"))
    for name in SERVICE_SECRETS:
        monkeypatch.delenv(name, raising=False)
    services = object()
    with pytest.raises(AgentConfigError) as refused:
        _runtime("base-sepolia", services).confine()
    message = str(refused.value)
    assert "this kernel has no Landlock" in message and "--unconfined" in message
    assert "expected Landlock ABI 6 or newer off the devnet" in message
    rt = _runtime("base-sepolia", services)
    assert rt.confine(unconfined=True).line() == "agent process NOT confined: --unconfined was given"
    devnet = _runtime("anvil", services)
    assert devnet.confine().line() == "agent process NOT confined: this kernel has no Landlock"
    assert "NOT confined" in devnet.first_line()
    in_process = _runtime("anvil", None)
    assert in_process.confine().line().startswith("agent process NOT confined: the judge and the")


def test_a_kernel_that_confines_files_but_not_signals_is_named_and_refused_off_the_devnet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Below ABI 6 the agent could stop the judge service and answer the wallet's
    re-checks on the judge's port itself (the red team paid past a cap that way):
    a partial confinement is said in the first line, and refused off the devnet."""
    for name in SERVICE_SECRETS:
        monkeypatch.delenv(name, raising=False)
    for abi, left in ((5, "signal the judge and the wallet services"),
                      (3, "services and listen on a TCP port")):
        monkeypatch.setattr(confine_mod, "landlock_abi", lambda abi=abi: (abi, ""))
        monkeypatch.setattr(confine_mod, "confine", lambda policy, abi=abi: Confinement(abi, "", 9))
        monkeypatch.setattr(runtime_mod, "agent_policy", lambda settings: None)
        with pytest.raises(AgentConfigError) as refused:
            _runtime("base-sepolia", object()).confine()
        assert f"Landlock ABI {abi} confines files only" in str(refused.value)
        assert left in str(refused.value) and "--unconfined" in str(refused.value)
        devnet = _runtime("anvil", object())
        assert devnet.confine().line().startswith("agent process PARTLY confined: Landlock ABI")
    assert Confinement(6, "", 9).line() == "agent process confined (Landlock ABI 6)"
    assert Confinement(7, "", 9).gap == ""


def test_the_services_secrets_in_an_agent_processs_environment_are_refused_off_the_devnet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NIB_WALLET_PASSWORD", "only-for-nib-services-up")
    with pytest.raises(AgentConfigError) as refused:
        _runtime("base-sepolia", object()).confine(unconfined=True)
    assert "found NIB_WALLET_PASSWORD in the agent process's environment" in str(refused.value)
    assert "env -u NIB_WALLET_PASSWORD" in str(refused.value)
    devnet = _runtime("anvil", object())
    devnet.confine(unconfined=True)
    assert "(warning: NIB_WALLET_PASSWORD in its environment" in devnet.first_line()


CHILD = r"""
import json, os, sys, threading
from pathlib import Path
from agent.cli.runtime import agent_policy
from agent.config import load_settings
from agent.confine import confine
from agent.store import RunStore

settings = load_settings()
store = RunStore(settings.database)
done = confine(agent_policy(settings))
home = settings.home

def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return type(exc).__name__

def other_thread():  # a thread started after confinement writes the database too
    out["thread_write"] = attempt(lambda: RunStore(settings.database).event("r", "x", {}))

out = {"line": done.line(), "store": attempt(lambda: store.event("r", "x", {"a": 1}))}
t = threading.Thread(target=other_thread); t.start(); t.join()
import tempfile
out["temp"] = attempt(lambda: tempfile.NamedTemporaryFile().write(b"x"))
out["token"] = attempt(lambda: (home / "services" / "judge-admin.token").read_text())
out["config_write"] = attempt(lambda: (home / "config.toml").open("a"))
out["services_json"] = attempt(lambda: (home / "services.json").read_text())
print(json.dumps(out))
"""


def test_a_confined_process_keeps_its_database_and_loses_the_services_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "services").mkdir(parents=True, mode=0o700)
    (home / "services" / "judge-admin.token").write_text("admin")
    (home / "services.json").write_text("{}")
    (home / "config.toml").write_text("")
    env: dict[str, Any] = {**os.environ, "NIB_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("NIB_DB_PATH", None)
    env.pop("NIB_DATABASE_URL", None)
    env.pop("NIB_CONFIG", None)
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                       timeout=120, cwd=str(ROOT))
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out == {"line": out["line"], "store": "ok", "thread_write": "ok", "temp": "ok",
                   "token": "PermissionError", "config_write": "PermissionError",
                   "services_json": "ok"}, out
    assert out["line"].startswith("agent process confined (Landlock ABI ")


def test_what_acts_as_the_user_runs_in_a_child_and_its_errors_come_back() -> None:
    """The admin token is read only in as_user's forked child (registration, grants): it
    runs in another process, its answer and its error (same type) come back."""
    from agent.cli.services import as_user
    from judge.errors import TaskRegistrationConflict

    assert as_user(os.getpid) != os.getpid()
    assert as_user(lambda: {"held": 1}) == {"held": 1}

    def conflict() -> None:
        raise TaskRegistrationConflict("task t is already registered with other limits")

    with pytest.raises(TaskRegistrationConflict, match="already registered"):
        as_user(conflict)
