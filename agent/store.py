"""The run store: runs, their audit events, episodic lessons and paused state, in SQLite.

Lives in the shared SQLite file (WAL). The agent owns four tables: ``agent_runs``,
``agent_events`` (run_id, seq, type, data JSON, ts), ``agent_lessons`` and
``agent_paused`` (a paused run's whole state as JSON, so another process resumes it).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import sqlite_utils

__all__ = ["EVENT_TYPES", "RunStore", "connect", "ensure_tables"]

#: Event types the loop writes (``data`` is JSON; never key material). Tools and packages
#: add their own namespaced types through ``ToolContext.emit`` (``tool.transfer``, ...).
EVENT_TYPES: dict[str, str] = {
    "run.start": "a run began: task, profile, limits",
    "run.resume": "a paused run was picked up again (decision, process)",
    "selfmodel": "the fresh self-model of a turn",
    "checklist": "the checklist extracted for the run",
    "model.call": "one model request: purpose, tokens in/out, estimated",
    "proposal": "a parsed proposal (action, calls, fingerprints)",
    "proposal.invalid": "a malformed reply (and whether it was the retry)",
    "gate.skip": "a proposal not executed: why (unknown tool, invalid args, duplicate, policy)",
    "nudge": "feedback naming the earlier step of an executed duplicate",
    "quote": "a paid tool's quote: amount, recipient, payload fingerprint",
    "verdict": "the judge's decision on a paid call or a free-policy row",
    "approval": "a human approved or denied a paused paid call",
    "tool.call": "one executed tool call: ok, cost, gas, summary, fingerprint",
    "spend": "money moved: atomic USDC and gas wei, running totals",
    "coverage": "checklist items covered by an observation",
    "replan": "the model's re-plan from the trajectory",
    "pause": "the run paused awaiting approval; state saved",
    "lesson": "a lesson distilled from a failed run, or lessons shown to this run",
    "lesson.error": "reading or writing lessons failed (advisory; the run goes on)",
    "synthesis.skipped": "no model synthesis (budget or outage): the evidence backstop answers",
    "judge.outcome.error": "recording a paid call's outcome for calibration failed (advisory)",
    "stop": "the run stopped: reason, finished, steps, spend, tokens",
}


def connect(path: str | Path) -> sqlite_utils.Database:
    """Open the shared SQLite file the way every package does (WAL, autocommit)."""
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    # WAL + NORMAL survives process crashes (not power loss) and keeps audit writes cheap.
    conn.execute("PRAGMA synchronous=NORMAL")
    return sqlite_utils.Database(conn)


def ensure_tables(db: sqlite_utils.Database) -> None:
    """Create the agent's tables and indexes if missing (idempotent)."""
    db.table("agent_runs").create(
        {
            "run_id": str,
            "task": str,
            "status": str,
            "profile": str,
            "stop_reason": str,
            "finished": int,
            "started_at": float,
            "ended_at": float,
            "result": str,
        },
        pk="run_id",
        if_not_exists=True,
    )
    db.table("agent_events").create(
        {"run_id": str, "seq": int, "type": str, "data": str, "ts": float},
        pk=("run_id", "seq"),
        if_not_exists=True,
    )
    db.table("agent_lessons").create(
        {
            "id": int,
            "run_id": str,
            "task": str,
            "stop_reason": str,
            "lesson": str,
            "created_at": float,
        },
        pk="id",
        if_not_exists=True,
    )
    db.table("agent_paused").create(
        {"run_id": str, "state": str, "paused_at": float}, pk="run_id", if_not_exists=True
    )
    db.table("agent_events").create_index(["type"], if_not_exists=True)


class RunStore:
    """Reads and writes the agent's tables. Safe to share between runs in one process."""

    def __init__(self, path: str | Path | sqlite_utils.Database) -> None:
        self.db = path if isinstance(path, sqlite_utils.Database) else connect(path)
        self.path = str(path) if not isinstance(path, sqlite_utils.Database) else ""
        ensure_tables(self.db)
        self._lock = threading.Lock()
        self._seq: dict[str, int] = {}

    @property
    def conn(self) -> sqlite3.Connection:
        return self.db.conn

    # ------------------------------------------------------------------ runs
    # Every write on the shared connection holds ``_lock``. Wallet events arrive from
    # worker threads: without the lock, a thread binding parameters (GIL held) waits on
    # the connection mutex while another thread's write busy-waits on the SQLite lock;
    # the whole process stalls until busy_timeout ("database is locked").
    def start_run(self, run_id: str, task: str, profile: str) -> None:
        with self._lock:
            self.db.table("agent_runs").upsert(
                {
                    "run_id": run_id,
                    "task": task,
                    "status": "running",
                    "profile": profile,
                    "started_at": time.time(),
                },
                pk="run_id",
            )

    def set_status(self, run_id: str, status: str) -> None:
        with self._lock:
            self.conn.execute("UPDATE agent_runs SET status=? WHERE run_id=?", (status, run_id))

    def finish_run(self, run_id: str, result: dict[str, Any]) -> None:
        with self._lock:
            self.conn.execute(
                "UPDATE agent_runs SET status='stopped', stop_reason=?, finished=?, ended_at=?, "
                "result=? WHERE run_id=?",
                (
                    result["stop_reason"],
                    int(bool(result["finished"])),
                    time.time(),
                    json.dumps(result),
                    run_id,
                ),
            )

    def run(self, run_id: str) -> dict[str, Any] | None:
        rows = list(self.db.table("agent_runs").rows_where("run_id = ?", [run_id]))
        return rows[0] if rows else None

    def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        return list(self.db.table("agent_runs").rows_where(order_by="started_at desc", limit=limit))

    # ---------------------------------------------------------------- events
    def _next_seq(self, run_id: str) -> int:
        if run_id not in self._seq:
            row = self.conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM agent_events WHERE run_id=?", (run_id,)
            ).fetchone()
            self._seq[run_id] = int(row[0])
        self._seq[run_id] += 1
        return self._seq[run_id]

    def event(self, run_id: str, type_: str, data: dict[str, Any]) -> int:
        """Append one audit event; returns its sequence number within the run."""
        payload = json.dumps(data, default=str, separators=(",", ":"))
        with self._lock:
            seq = self._next_seq(run_id)
            self.conn.execute(
                "INSERT INTO agent_events (run_id, seq, type, data, ts) VALUES (?,?,?,?,?)",
                (run_id, seq, type_, payload, time.time()),
            )
        return seq

    def events(self, run_id: str, type_: str | None = None) -> list[dict[str, Any]]:
        where, params = "run_id = ?", [run_id]
        if type_:
            where, params = where + " AND type = ?", [run_id, type_]
        rows = self.db.table("agent_events").rows_where(where, params, order_by="seq")
        return [{**r, "data": json.loads(r["data"])} for r in rows]

    # ---------------------------------------------------------------- paused
    def save_paused(self, run_id: str, state_json: str) -> None:
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.execute(
                    "INSERT OR REPLACE INTO agent_paused (run_id, state, paused_at) VALUES (?,?,?)",
                    (run_id, state_json, time.time()),
                )
                self.conn.execute("UPDATE agent_runs SET status='paused' WHERE run_id=?", (run_id,))
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

    def take_paused(self, run_id: str) -> str | None:
        """Remove and return a paused run's state (atomically: one resumer wins)."""
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                row = self.conn.execute(
                    "SELECT state FROM agent_paused WHERE run_id=?", (run_id,)
                ).fetchone()
                if row is not None:
                    self.conn.execute("DELETE FROM agent_paused WHERE run_id=?", (run_id,))
                    self.conn.execute(
                        "UPDATE agent_runs SET status='running' WHERE run_id=?", (run_id,)
                    )
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
        return None if row is None else str(row[0])

    def restore_paused(self, run_id: str, state_json: str) -> None:
        """Put a taken state back (resume failed before doing anything)."""
        self.save_paused(run_id, state_json)

    def paused(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT run_id FROM agent_paused")]

    # --------------------------------------------------------------- lessons
    def add_lesson(self, run_id: str, task: str, stop_reason: str, lesson: str) -> None:
        with self._lock:
            self.db.table("agent_lessons").insert(
                {
                    "run_id": run_id,
                    "task": task,
                    "stop_reason": stop_reason,
                    "lesson": lesson,
                    "created_at": time.time(),
                }
            )

    def lessons(self, limit: int = 200) -> list[dict[str, Any]]:
        return list(self.db.table("agent_lessons").rows_where(order_by="id desc", limit=limit))

    def close(self) -> None:
        self.conn.close()
