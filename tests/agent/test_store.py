"""The agent's tables in the shared SQLite file."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

import agent.store
from agent.store import STALE_AFTER_S, RunStore


def test_tables_idempotent_and_wal(tmp_path: Path) -> None:
    a = RunStore(tmp_path / "nib.db")
    RunStore(tmp_path / "nib.db")
    names = {r["name"] for r in a.db.query("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"agent_runs", "agent_events", "agent_lessons", "agent_paused"} <= names
    assert a.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_event_seq_continues_across_store_instances(tmp_path: Path) -> None:
    a = RunStore(tmp_path / "nib.db")
    a.start_run("r1", "task", "cost-optimized")
    assert [a.event("r1", "x", {"i": i}) for i in range(3)] == [1, 2, 3]
    b = RunStore(tmp_path / "nib.db")  # another process resuming the run
    assert b.event("r1", "y", {}) == 4
    assert [e["type"] for e in b.events("r1")] == ["x", "x", "x", "y"]
    assert b.events("r1", "x")[2]["data"] == {"i": 2}


def test_two_processes_writing_one_runs_events_never_collide(store_location: str | Path) -> None:
    # A worker settling another run's authorization writes into that run's events from its
    # own process; the run's own process, whose next number was cached, must not collide
    # (it did: the wallet's "signed" event raised, and the signed transfer was dropped).
    own, other = RunStore(store_location), RunStore(store_location)
    own.start_run("r1", "task", "p")
    assert own.event("r1", "x", {}) == 1
    assert other.event("r1", "wallet.settled", {}) == 2
    assert own.event("r1", "wallet.signed", {}) == 3
    assert other.event("r1", "y", {}) == 4
    assert [e["type"] for e in own.events("r1")] == ["x", "wallet.settled", "wallet.signed", "y"]


def test_paused_state_is_taken_once(tmp_path: Path) -> None:
    a = RunStore(tmp_path / "nib.db")
    a.start_run("r1", "task", "cost-optimized")
    a.save_paused("r1", '{"k": 1}')
    assert a.run("r1")["status"] == "paused" and a.paused() == ["r1"]  # type: ignore[index]
    b = RunStore(tmp_path / "nib.db")
    assert b.take_paused("r1") == '{"k": 1}'
    assert a.take_paused("r1") is None and a.run("r1")["status"] == "running"  # type: ignore[index]


def test_finish_and_lessons(tmp_path: Path) -> None:
    s = RunStore(tmp_path / "nib.db")
    s.start_run("r1", "task", "p")
    s.finish_run("r1", {"stop_reason": "max-steps", "finished": False})
    row = s.run("r1")
    assert row and row["status"] == "stopped" and row["stop_reason"] == "max-steps"
    s.add_lesson("r1", "task", "max-steps", "finish sooner")
    assert s.lessons()[0]["lesson"] == "finish sooner" and s.runs()[0]["run_id"] == "r1"


def test_a_running_row_whose_process_is_gone_reads_as_died(tmp_path: Path) -> None:
    import subprocess
    import sys

    s = RunStore(tmp_path / "nib.db")
    s.start_run("mine", "task", "p")  # this process: alive
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    s.start_run("gone", "task", "p")
    s.db.execute("UPDATE agent_runs SET owner = ? WHERE run_id = 'gone'", (f"{socket.gethostname()}:{gone.pid}",))
    rows = {r["run_id"]: r for r in RunStore(tmp_path / "nib.db").runs()}
    assert rows["mine"]["status"] == "running" and rows["mine"]["stop_reason"] is None
    died = rows["gone"]
    assert (died["status"], died["stop_reason"], died["finished"]) == ("died", "process-died", 0)
    assert f"process {gone.pid} on {socket.gethostname()} no longer exists" in json.loads(died["result"])["message"]
    events = s.events("gone", "run.died")
    assert len(events) == 1 and events[0]["data"]["owner"].endswith(f":{gone.pid}")
    s.run("gone")  # a second reader closes nothing twice
    assert len(s.events("gone", "run.died")) == 1
    s.finish_run("mine", {"stop_reason": "max-steps", "finished": False})


def test_a_run_on_another_host_dies_when_its_heartbeat_goes_stale(tmp_path: Path) -> None:
    s = RunStore(tmp_path / "nib.db")
    for run_id, age in (("fresh", 5.0), ("stale", STALE_AFTER_S + 5)):
        s.start_run(run_id, "task", "p")
        s.finish_run(run_id, {"stop_reason": "max-steps", "finished": False})  # stop beating
        s.db.execute(
            "UPDATE agent_runs SET status = 'running', owner = 'elsewhere:4242', beat_at = ?, "
            "stop_reason = NULL, result = NULL WHERE run_id = ?",
            (time.time() - age, run_id),
        )
    assert s.run("fresh")["status"] == "running"  # type: ignore[index]
    s.start_run("late", "task", "p")  # driven here, its beat late (a lock held long)
    s.db.execute("UPDATE agent_runs SET beat_at = ? WHERE run_id = 'late'", (time.time() - 2 * STALE_AFTER_S,))
    assert s.run("late")["status"] == "running"  # type: ignore[index]
    s.finish_run("late", {"stop_reason": "max-steps", "finished": False})
    row = s.run("stale")
    assert row is not None and (row["status"], row["stop_reason"]) == ("died", "process-died")
    assert "no heartbeat from elsewhere:4242" in json.loads(row["result"])["message"]


def test_the_driving_process_beats_until_the_run_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent.store, "HEARTBEAT_S", 0.05)
    s = RunStore(tmp_path / "nib.db")
    s.start_run("r1", "task", "p")
    first = s.run("r1")["beat_at"]  # type: ignore[index]
    deadline = time.monotonic() + 10
    while s.run("r1")["beat_at"] == first:  # type: ignore[index]
        assert time.monotonic() < deadline, "no heartbeat in 10 s"
        time.sleep(0.02)
    s.save_paused("r1", "{}")  # a paused run has no process: nothing beats for it
    assert s.run("r1")["status"] == "paused"  # type: ignore[index]
    deadline = time.monotonic() + 10
    while s._beater is not None and s._beater.is_alive():
        assert time.monotonic() < deadline, "the beat thread outlived its runs"
        time.sleep(0.02)
    assert s.take_paused("r1") == "{}"
    row = s.run("r1")
    assert row is not None and row["status"] == "running" and row["owner"] == s.owner
    s.close()
