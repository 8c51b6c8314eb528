"""Who starts the devnet, through the real `nib` console script: only `nib devnet up`.
Every other command that needs it and finds it down stops with exit 1 and the fix, and
starts nothing (counted); a devnet brought up again re-points the services at its chain."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chain import devnet

NIB = Path(sys.executable).parent / "nib"


def nib(home: Path, *args: str, timeout: float = 180, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NIB_HOME": str(home), "NIB_WALLET_PASSWORD": "nib-devnet", **extra}
    env.pop("NIB_CONFIG", None)
    return subprocess.run([str(NIB), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def processes_of(home: Path) -> list[int]:
    """Every live process started for ``home``: its NIB_HOME in the environment, or the
    home in its command line (Anvil's state file)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if str(home).encode() in cmdline or f"NIB_HOME={home}".encode() in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory):
    h = tmp_path_factory.mktemp("devnet-home")
    yield h
    nib(h, "devnet", "down")


COMMANDS_THAT_NEED_THE_DEVNET = [
    ("wallet", "balance"),
    ("audit", "reconcile"),
    ("run", "What is the base fee?"),
    ("run", "--demo"),
]


def test_after_devnet_down_no_command_starts_anything(home):
    up = nib(home, "devnet", "up", "--json")
    assert up.returncode == 0, up.stderr
    assert processes_of(home), "devnet up started nothing the count can see"
    assert nib(home, "devnet", "down").returncode == 0
    assert processes_of(home) == []
    for args in COMMANDS_THAT_NEED_THE_DEVNET:
        r = nib(home, *args)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "`nib devnet up`" in lines[0] and "Traceback" not in r.stderr, (
            args, r.stderr)
        assert processes_of(home) == [], f"`nib {' '.join(args)}` started processes"
    for args in [("runs",), ("audit",), ("devnet", "status")]:  # reads that need no chain
        r = nib(home, *args)
        assert r.returncode == 0, (args, r.stderr)
        assert processes_of(home) == [], f"`nib {' '.join(args)}` started processes"
    status = nib(home, "services", "status")
    assert status.returncode == 1 and "nib devnet up" in status.stderr
    assert processes_of(home) == []


def test_without_services_a_run_is_refused_unless_in_process_is_asked_for(home):
    assert nib(home, "devnet", "up", "--no-services").returncode == 0
    assert nib(home, "services", "down").returncode == 0
    refused = nib(home, "run", "What is the base fee?")
    assert refused.returncode == 1
    assert "no judge and wallet services are running" in refused.stderr
    assert "`nib devnet up`" in refused.stderr and "--in-process" in refused.stderr
    asked = nib(home, "run", "What is the base fee?", "--in-process")
    assert asked.returncode == 0, asked.stderr
    assert "in-process judge and wallet (--in-process" in asked.stderr


def test_devnet_up_again_re_points_the_services_at_the_chain_it_brings_up(home):
    first = json.loads(nib(home, "devnet", "up", "--json").stdout)
    services = first["services"]
    assert services["rpc_url"] == first["rpc_url"]
    assert nib(home, "services", "status").returncode == 0
    os.kill(first["pid"], signal.SIGKILL)  # Anvil dies; the services stay on its address
    deadline = time.monotonic() + 30
    while devnet.pid_alive(first["pid"]):
        assert time.monotonic() < deadline, "Anvil did not die"
        time.sleep(0.05)
    stale = nib(home, "services", "status", "--json")
    assert stale.returncode == 1
    assert json.loads(stale.stdout)["healthy"] is False and "devnet up" in stale.stderr
    second = json.loads(nib(home, "devnet", "up", "--json").stdout)
    assert second["services"]["rpc_url"] == second["rpc_url"]
    if second["rpc_url"] != first["rpc_url"]:
        assert second["services"]["judge_pid"] != services["judge_pid"]
    healthy = nib(home, "services", "status", "--json")
    assert healthy.returncode == 0 and json.loads(healthy.stdout)["healthy"] is True
    paid = nib(home, "run", "--demo", "--json")
    assert paid.returncode == 0, paid.stderr[-2000:]
    result = json.loads(paid.stdout)
    assert result["stop_reason"] != "judge-unreachable" and result["spend"]["usdc_atomic"] > 0


def _held_env(home: Path, model_url: str) -> dict[str, str]:
    env = {**os.environ, "NIB_HOME": str(home), "NIB_WALLET_PASSWORD": "nib-devnet",
           "NIB_MODEL_PROVIDER": "openai", "NIB_MODEL": "silent", "NIB_MODEL_BASE_URL": model_url,
           "NIB_MODEL_TIMEOUT": "600"}
    env.pop("NIB_CONFIG", None)
    return env


def _wait_or_dump(child: subprocess.Popen, timeout: float) -> None:
    """Wait for ``child`` to exit; if it does not, fail with its threads' stacks."""
    import shutil
    try:
        child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        spy = shutil.which("py-spy")  # optional: `pip install py-spy` shows where it waits
        dump = subprocess.run([spy, "dump", "--pid", str(child.pid)], capture_output=True,
                              text=True, timeout=60) if spy else None
        stacks = f"{dump.stdout}{dump.stderr}" if dump else "(install py-spy for its stacks)"
        raise AssertionError(f"pid {child.pid} still running {timeout} s after SIGINT:\n"
                             f"{stacks}") from None


def _read_until(fd: int, needle: bytes, seen: bytearray, timeout: float = 120) -> None:
    import select

    deadline = time.monotonic() + timeout
    while needle not in seen:
        assert time.monotonic() < deadline, f"never saw {needle!r} in {bytes(seen)[-2000:]!r}"
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                return


def _as_on_a_terminal() -> None:
    """Give the child the SIGINT a foreground command gets. A job a non-interactive shell
    starts in the background (``make test > log &``) inherits SIGINT *ignored* (POSIX), and
    Python then installs no KeyboardInterrupt handler, so the Ctrl-C these tests send was
    ignored and the child ran on: the hang two fresh-clone runs showed."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

def test_a_slow_step_shows_a_spinner_on_a_terminal_and_ctrl_c_exits_130(home):
    """`nib run` on a terminal (a pty) whose model never answers: after a second a spinner
    with the step, what it waits on and the elapsed time; `nib runs` and `nib show` show the
    running run's step and time; Ctrl-C ends it with exit 130 and says nothing was signed."""
    import pty

    from tests.agent.test_cli import SilentModelServer

    assert nib(home, "devnet", "up").returncode == 0
    silent = SilentModelServer()
    master, slave = pty.openpty()
    child = subprocess.Popen([str(NIB), "run", "What is the gas price?"],
                             env=_held_env(home, silent.url), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=slave, text=True,
                             preexec_fn=_as_on_a_terminal)
    os.close(slave)
    seen = bytearray()
    try:
        _read_until(master, b"step 1 \xc2\xb7 asking the model \xc2\xb7 2 s", seen)
        assert b"\r\x1b[2K" in seen  # redrawn in place
        rows = json.loads(nib(home, "runs", "--json").stdout)
        row = next(r for r in rows if r["status"] == "running")
        assert row["elapsed_s"] > 0 and row["current"] == "run.start", row
        shown = nib(home, "show", row["run_id"][:6])
        assert shown.returncode == 0 and "running: step" in shown.stdout, shown.stdout
        child.send_signal(signal.SIGINT)
        _wait_or_dump(child, 180)  # 60 s was exceeded once on a loaded 2-core CI run
        _read_until(master, b"cannot be resumed", seen, timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
        os.close(master)
        silent.close()
    assert child.returncode == 130
    text = seen.decode(errors="replace")
    assert "interrupted at step" in text and "nothing was signed and nothing was spent" in text
    assert "stays pending" not in text  # the old warning, shown even when nothing was signed
    after = {r["run_id"]: r for r in json.loads(nib(home, "runs", "--json").stdout)}[row["run_id"]]
    assert (after["status"], after["stop_reason"]) == ("stopped", "interrupted")


def test_the_worker_prints_one_line_per_task_and_ctrl_c_exits_130(home):
    from tests.agent.test_cli import SilentModelServer

    assert nib(home, "devnet", "up").returncode == 0
    ids = [nib(home, "submit", "What is the base fee?").stdout.strip() for _ in range(2)]
    drained = nib(home, "worker", "--drain")
    assert drained.returncode == 0, drained.stderr[-2000:]
    lines = [line for line in drained.stdout.splitlines() if line.split(" ")[0] in ids]
    assert len(lines) == 2 and all(" finished " in line and "step" in line for line in lines), (
        drained.stdout)
    silent = SilentModelServer()
    held = nib(home, "submit", "What is the gas price?").stdout.strip()
    worker = subprocess.Popen([str(NIB), "worker"], env=_held_env(home, silent.url),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, preexec_fn=_as_on_a_terminal)
    try:
        deadline = time.monotonic() + 120
        while not silent.held:
            assert worker.poll() is None and time.monotonic() < deadline, "never ran the task"
            time.sleep(0.1)
        worker.send_signal(signal.SIGINT)
        _wait_or_dump(worker, 180)
        _, stderr = worker.communicate(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
        silent.close()
    assert worker.returncode == 130, stderr[-2000:]
    assert "interrupted (Ctrl-C)" in stderr and "Traceback" not in stderr
    row = {r["run_id"]: r for r in json.loads(nib(home, "runs", "--json").stdout)}[held]
    assert row["stop_reason"] == "interrupted", row


def test_the_per_call_cap_and_approval_threshold_follow_max_spend_and_refusals_name_the_flag(home):
    """`--max-spend 5` registers a 1.25 USDC per-call cap and a 2.50 USDC approval
    threshold at the judge (a quarter and a half); `--per-call-cap` sets it, and a purchase
    over it is refused naming the limit and the flag."""
    import sqlite3

    assert nib(home, "devnet", "up").returncode == 0
    five = json.loads(nib(home, "run", "What is the base fee?", "--max-spend", "5", "--json").stdout)
    tight = nib(home, "run", "--demo", "--per-call-cap", "0.01", "--json")
    assert tight.returncode == 1, tight.stderr[-2000:]
    capped = json.loads(tight.stdout)
    with sqlite3.connect(home / "services" / "nib.db") as db:
        limits = dict((row[0], row[1:]) for row in db.execute(
            "SELECT task_id, spend_cap, per_call_cap, approval_threshold FROM judge_tasks"))
    assert limits[five["run_id"]] == (5_000_000, 1_250_000, 2_500_000)
    assert limits[capped["run_id"]] == (1_000_000, 10_000, 500_000)
    shown = json.loads(nib(home, "show", capped["run_id"], "--json").stdout)
    datas = [e["data"] if isinstance(e["data"], dict) else json.loads(e["data"])
             for e in shown["events"] if e["type"] == "verdict"]
    reasons = [str(d.get("reason", "")) for d in datas]
    assert any("exceeds the per-call cap 0.01 USDC (fix: `nib run --per-call-cap`" in r
               for r in reasons), reasons
    assert capped["spend"]["usdc_atomic"] == 0


def test_the_worker_prints_a_line_for_a_task_it_would_not_run(home):
    """A queued row rewritten after `nib submit` (the agents' database, which an agent may
    write) is refused by the worker: one line with the task's id, `not run` and the reason
    naming the fix, not only a count in the totals."""
    import sqlite3

    assert nib(home, "devnet", "up").returncode == 0
    queued = nib(home, "submit", "What is the latest block number?").stdout.strip()
    with sqlite3.connect(home / "nib.db") as db:
        assert db.execute("UPDATE agent_queue SET task = ? WHERE id = ?",
                          ("What is the gas price?", queued)).rowcount == 1
    drained = nib(home, "worker", "--drain")
    assert drained.returncode == 0, drained.stderr[-2000:]
    line = next(line for line in drained.stdout.splitlines() if line.startswith(queued))
    assert " not run worker-error " in line and "`nib submit` the task again" in line, line
    assert "stopped 1" in drained.stdout


def test_an_offline_run_records_the_profile_it_applied(home):
    """No model configured: the offline planner runs on this machine, so a run gets the
    local-guarded profile and `nib runs`, `nib show` and the result name it so (an outside
    tester's `nib run --demo` recorded `custom`); `custom` only when a flag changed one of
    its values. The worker's runs too."""
    assert nib(home, "devnet", "up").returncode == 0

    def recorded(*args: str, **extra: str) -> tuple[str, str]:
        r = nib(home, "run", *(args or ("What is the base fee?",)), "--json", **extra)
        assert r.returncode == 0, r.stderr[-2000:]
        result = json.loads(r.stdout)
        shown = json.loads(nib(home, "show", result["run_id"], "--json").stdout)
        start = next(e for e in shown["events"] if e["type"] == "run.start")["data"]
        assert result["profile"] == shown["run"]["profile"] == start["profile"]
        return str(result["run_id"]), str(result["profile"])

    runs = [
        (recorded("--demo"), "local-guarded"),
        (recorded("What is the base fee?", "--max-steps", "10"), "local-guarded"),  # its own value
        (recorded("What is the base fee?", "--max-steps", "3"), "custom"),
        (recorded("What is the base fee?", "--profile", "quality-first"), "quality-first"),
        (recorded(NIB_PROFILE="cost-optimized"), "cost-optimized"),
    ]
    queued = nib(home, "submit", "What is the gas price?").stdout.strip()
    assert nib(home, "worker", "--drain").returncode == 0
    # `nib runs` names each run's profile too (one listing for all of them).
    rows = {x["run_id"]: x["profile"] for x in json.loads(nib(home, "runs", "--json").stdout)}
    assert [(profile, rows[run_id]) for (run_id, profile), _want in runs] == [
        (want, want) for _got, want in runs]
    assert rows[queued] == "local-guarded"
