"""The agent's tables in the shared SQLite file."""

from __future__ import annotations

from pathlib import Path

from agent.store import RunStore


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
