"""The work queue: research tasks waiting for a worker, on the same engine as everything else.

``nib submit`` inserts a ``queued`` row; a worker claims the oldest queued row, marks it
``running`` under its name with a lease it renews while the task runs, and closes it
``finished`` or ``stopped`` (the run's stop reason). A row whose lease ran out belongs to
a worker that died: a recoverer takes it (``recovering``) and either queues it again or
closes it ``closed`` with a named reason (see ``agent.worker``).

Claiming uses ``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL (each worker locks the
row it takes and skips rows others are taking, so N workers never queue behind one
another or take the same row) and ``BEGIN IMMEDIATE`` on SQLite (one writer per file;
claims are one short statement pair, so workers on one host barely wait). Chosen over a
queue library (procrastinate, pgqueuer): those bring their own schema, worker process
and job model, and PostgreSQL only; nib needs the queue on SQLite too, sharing the run
ids and transactions of the run store, and the whole queue is a few statements.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from agent.loop.result import StopReason
from agent.store import QUEUE, ensure_tables
from judge.storage import Database, Location, cell_float, cell_int, open_database

__all__ = [
    "QUEUE",
    "QUEUE_STATUSES",
    "QueuedTask",
    "TaskQueue",
]

_T = TypeVar("_T")

#: queued: waiting; running: a worker holds it (lease); recovering: its worker's lease ran
#: out and a recoverer is settling its money state; finished / stopped: the run ended
#: (stopped: without finishing, reason in stop_reason); closed: not run to an end, with a
#: named reason (a worker died after money moved, or too many attempts).
QUEUE_STATUSES = ("queued", "running", "recovering", "finished", "stopped", "closed")

@dataclass(frozen=True)
class QueuedTask:
    """One queue row. ``id`` is also the run id of the run that executes it."""

    id: str
    task: str
    max_spend: int | None
    status: str
    worker: str | None
    attempts: int
    lease_until: float | None
    created_at: float
    started_at: float | None
    ended_at: float | None
    stop_reason: str | None
    note: str

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> QueuedTask:
        """The task a queue row (``SELECT *``) holds; other columns are ignored."""
        return cls(
            id=str(row["id"]),
            task=str(row["task"]),
            max_spend=_or_none(cell_int, row["max_spend"]),
            status=str(row["status"]),
            worker=_or_none(str, row["worker"]),
            attempts=cell_int(row["attempts"]),
            lease_until=_or_none(cell_float, row["lease_until"]),
            created_at=cell_float(row["created_at"]),
            started_at=_or_none(cell_float, row["started_at"]),
            ended_at=_or_none(cell_float, row["ended_at"]),
            stop_reason=_or_none(str, row["stop_reason"]),
            note=str(row["note"]),
        )


def _or_none(read: Callable[[object], _T], cell: object) -> _T | None:
    """A nullable cell: None stays None, anything else is read by ``read``."""
    return None if cell is None else read(cell)


class TaskQueue:
    """Submit, claim, renew and close queued tasks (safe across processes and machines)."""

    def __init__(
        self,
        location: Location | Database,
        *,
        lease_s: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = open_database(location)
        ensure_tables(self.db)
        self.lease_s = lease_s
        self.clock = clock

    # ------------------------------------------------------------------ producers

    def submit(self, task: str, *, max_spend: int | None = None) -> str:
        """Queue ``task`` (``max_spend``: its spend cap, atomic USDC); returns its id."""
        task_id = uuid.uuid4().hex[:12]
        self.db.execute(
            f"INSERT INTO {QUEUE} (id, task, max_spend, status, created_at) "
            "VALUES (?, ?, ?, 'queued', ?)",
            (task_id, task, max_spend, self.clock()),
        )
        return task_id

    # ------------------------------------------------------------------ workers

    def claim(self, worker: str) -> QueuedTask | None:
        """Take the oldest queued task for ``worker`` (lease starts now); None when empty."""
        now = self.clock()
        with self.db.transaction(lock=None) as tx:
            row = tx.one(
                f"SELECT id FROM {QUEUE} WHERE status = 'queued' ORDER BY created_at, id "
                f"LIMIT 1{tx.skip_locked()}"
            )
            if row is None:
                return None
            tx.execute(
                f"UPDATE {QUEUE} SET status = 'running', worker = ?, lease_until = ?, "
                "started_at = ?, attempts = attempts + 1 WHERE id = ?",
                (worker, now + self.lease_s, now, row[0]),
            )
        return self.get(str(row[0]))

    def renew(self, task_ids: list[str], worker: str) -> list[str]:
        """Extend ``worker``'s leases; returns the ids it no longer holds (taken from it)."""
        lost = []
        until = self.clock() + self.lease_s
        for task_id in task_ids:
            changed = self.db.execute(
                f"UPDATE {QUEUE} SET lease_until = ? WHERE id = ? AND worker = ? "
                "AND status = 'running'",
                (until, task_id, worker),
            )
            if changed != 1:
                lost.append(task_id)
        return lost

    def finish(
        self, task_id: str, worker: str, *, finished: bool, stop_reason: StopReason, note: str = ""
    ) -> bool:
        """Close ``worker``'s task with the run's outcome (``note``: what else to keep, such
        as the error a run raised); False if it no longer held it."""
        changed = self.db.execute(
            f"UPDATE {QUEUE} SET status = ?, stop_reason = ?, ended_at = ?, lease_until = NULL, "
            "note = CASE WHEN ? = '' THEN note WHEN note = '' THEN ? ELSE note || '; ' || ? END "
            "WHERE id = ? AND worker = ? AND status = 'running'",
            ("finished" if finished else "stopped", stop_reason, self.clock(), note, note, note,
             task_id, worker),
        )
        return changed == 1

    # ------------------------------------------------------------------ recovery

    def take_abandoned(self, recoverer: str) -> list[QueuedTask]:
        """Running (or recovering) tasks whose lease ran out, now ``recovering`` for
        ``recoverer``; each is handed to exactly one recoverer."""
        now = self.clock()
        with self.db.transaction(lock=None) as tx:
            found = tx.rows(
                f"SELECT id FROM {QUEUE} WHERE status IN ('running', 'recovering') "
                f"AND lease_until < ? ORDER BY created_at{tx.skip_locked()}",
                (now,),
            )
            for row in found:
                tx.execute(
                    f"UPDATE {QUEUE} SET status = 'recovering', lease_until = ?, "
                    "note = CASE WHEN note = '' THEN ? ELSE note || '; ' || ? END WHERE id = ?",
                    (now + self.lease_s, f"recovered by {recoverer}",
                     f"recovered by {recoverer}", row["id"]),
                )
        return [self.get(str(r["id"])) for r in found]

    def requeue(self, task_id: str, note: str) -> None:
        """Put a recovered task back in line (nothing of it paid or in flight)."""
        self._after_recovery(task_id, "queued", None, note)

    def close(self, task_id: str, reason: StopReason, note: str) -> None:
        """End a recovered task without running it again, for the named ``reason``."""
        self._after_recovery(task_id, "closed", reason, note)

    def _after_recovery(
        self, task_id: str, status: str, reason: StopReason | None, note: str
    ) -> None:
        self.db.execute(
            f"UPDATE {QUEUE} SET status = ?, stop_reason = ?, lease_until = NULL, "
            "ended_at = CASE WHEN ? = 'closed' THEN ? ELSE NULL END, "
            "note = CASE WHEN note = '' THEN ? ELSE note || '; ' || ? END "
            "WHERE id = ? AND status = 'recovering'",
            (status, reason, status, self.clock(), note, note, task_id),
        )

    # ------------------------------------------------------------------ reading

    def get(self, task_id: str) -> QueuedTask:
        rows = self.db.query(f"SELECT * FROM {QUEUE} WHERE id = ?", (task_id,))
        if not rows:
            raise KeyError(
                f"no queued task {task_id!r}; expected an id `nib submit` printed. "
                "Fix: list tasks with `nib runs`."
            )
        return QueuedTask.from_row(rows[0])

    def tasks(self, limit: int = 50) -> list[QueuedTask]:
        """Newest first."""
        rows = self.db.query(
            f"SELECT * FROM {QUEUE} ORDER BY created_at DESC, id LIMIT ?", (int(limit),)
        )
        return [QueuedTask.from_row(r) for r in rows]

    def counts(self) -> dict[str, int]:
        rows = self.db.query(f"SELECT status, COUNT(*) AS n FROM {QUEUE} GROUP BY status")
        return {str(r["status"]): cell_int(r["n"]) for r in rows}

    def open_work(self) -> int:
        """Tasks queued, running or being recovered (a draining worker waits for none)."""
        return sum(n for s, n in self.counts().items() if s in ("queued", "running", "recovering"))

    def close_db(self) -> None:
        self.db.close()

