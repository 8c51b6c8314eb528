"""The run store: runs, their audit events, episodic lessons and paused state.

Lives in nib's database (the shared SQLite file, or PostgreSQL when ``NIB_DATABASE_URL``
is set). The agent owns ``agent_runs``, ``agent_events`` (run_id, seq, type, data JSON,
ts), ``agent_lessons`` and ``agent_paused`` (a paused run's whole state as JSON, so
another process resumes it) and ``agent_queue`` (tasks for workers, see agent.queue);
versioned by the ``agent`` migrations below.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal

from agent.loop.result import PROCESS_DIED, SpendSummary
from chain.devnet import pid_alive
from judge.events import EVENT_TYPES as JUDGE_EVENTS
from judge.storage import (
    Database,
    IntegrityError,
    Location,
    Migration,
    add_missing_columns,
    cell_float,
    cell_int,
    migrate,
    open_database,
    process_identity,
)
from wallet.events import EVENT_TYPES as WALLET_EVENTS
from wallet.meter import SpendMeter

if TYPE_CHECKING:
    from agent.seams import SpendView
    from judge.storage.db import PgConnection

__all__ = [
    "EVENT_TYPES",
    "HEARTBEAT_S",
    "MIGRATIONS",
    "QUEUE",
    "STALE_AFTER_S",
    "RunStatus",
    "RunStore",
    "ensure_tables",
    "owner_gone",
    "run_status",
    "spend_reader",
]

RunStatus = Literal["queued", "running", "paused", "finished", "stopped", "died"]
"""Where a run stands, in the words ``nib runs``, ``nib show``, the report and their JSON
all use. ``queued``: submitted, not started. ``running``: its process drives it now.
``paused``: stopped ``awaiting-approval`` (``nib approve``/``nib deny``). ``finished``: a
finish stop (exit 0; docs/runs.md). ``stopped``: any other stop (exit 1). ``died``:
``process-died``, its process gone before it could stop."""


def run_status(row: Mapping[str, object] | None, queued: str | None = None) -> RunStatus:
    """The status of a run row (``agent_runs``), or of a queue row's status ``queued`` for
    a task whose run has not started."""
    if row is None:
        return "running" if queued in ("running", "recovering") else (
            "stopped" if queued in ("stopped", "closed") else
            "finished" if queued == "finished" else "queued")
    status = str(row.get("status") or "")
    if status in ("running", "paused", "died"):
        return status  # type: ignore[return-value]
    return "finished" if row.get("finished") else "stopped"


#: How often a process beats for each run it drives (``agent_runs.beat_at``).
HEARTBEAT_S = 10.0
#: A running run whose process has not beaten for this long is dead (on any host; on the
#: run's own host a vanished pid says so at once). Six missed beats: a loaded machine
#: delays a beat by seconds, never by a minute.
STALE_AFTER_S = 60.0

#: How often an event insert re-reads the run's last sequence number after a collision
#: with another writer before giving up (each retry reads the table, so one is enough in
#: practice: the others cover writers racing again on PostgreSQL).
_SEQ_ATTEMPTS = 5

#: The work queue's table (agent.queue reads and writes it).
QUEUE = "agent_queue"

#: Every event type a run's trail may hold (``data`` is JSON; never key material): the
#: loop's, the tools' (namespaced ``tool.``), and the wallet's and the judge's, which those
#: packages declare. tests/agent/test_event_types.py fails on an emitted type not here.
EVENT_TYPES: dict[str, str] = {
    "run.start": "a run began: task, profile, limits",
    "run.resume": "a paused run was picked up again (decision, process)",
    "selfmodel": "the fresh self-model of a turn",
    "checklist": "the checklist extracted for the run (fallback=task when extraction failed)",
    "checklist.head": "the chain head read once when the checklist names a block: relative "
    "block references (the previous block, N blocks ago) resolve against it",
    "checklist.orders": "payments the task orders that the model's checklist left out, added "
    "as items so each is made or named as not made (added: their texts)",
    "wallet.nonce_filled": "a nonce number below this task's transfer that was given back, or "
    "that another confined task held, filled with a plain 0-ETH transfer to the wallet itself; "
    "its gas charged to the other task that held or gave it back, else to this one (run_id; "
    "for_run: the task whose transfer needed it; nonce, tx_hash, gas_wei, taken_from)",
    "checklist.offers": "a seller's offers read once from its /catalog when a request to buy "
    "names that seller but no subject (url, kind, price each; or why they could not be read): "
    "the request's pick resolves against them",
    "checklist.invalid": "a checklist reply that did not validate (and whether it was the retry)",
    "checklist.drift": "the checklist, asked again at a re-plan, asked for other facts (added, "
    "dropped, drifts so far): counted toward the churn stop",
    "model.call": "one model request: purpose, tokens in/out, estimated, provider stop reason",
    "model.protocol": "how tools travel to the model: native tool calling or the JSON fallback",
    "model.count.error": "exact pre-send token counting failed; the estimate was used",
    "proposal": "a parsed proposal (action, calls, fingerprints)",
    "proposal.invalid": "a malformed reply (and whether it was the retry)",
    "gate.skip": "a proposal not executed: why (unknown tool, invalid args, duplicate, policy)",
    "nudge": "feedback naming the earlier step of an executed duplicate",
    "quote": "a paid tool's quote: amount, recipient, payload fingerprint",
    "verdict": "the judge's decision on a paid call or a free-policy row",
    "approval": "a human approved or denied a paused paid call",
    "approval.deferred": "an approval hit a dependency outage before anything ran; still paused",
    "tool.call": "one executed tool call: ok, cost, gas, summary, fingerprint",
    "spend": "money moved: atomic USDC and gas wei, running totals",
    "seller.not_delivered": "a seller handed a payment did not deliver (why, ledger row, "
    "whether the money moved): it is paid nothing more in the run",
    "coverage": "checklist items covered by an observation",
    "replan": "the model's re-plan from the trajectory",
    "pause": "the run paused awaiting approval; state saved",
    "lesson": "a lesson distilled from a failed run, or lessons shown to this run",
    "lesson.error": "reading or writing lessons failed (advisory; the run goes on)",
    "synthesis.skipped": "no model synthesis (budget or outage): the evidence backstop answers",
    "judge.outcome.error": "recording a paid call's outcome for calibration failed (advisory)",
    "stop": "the run stopped: reason, finished, steps, spend, tokens",
    "worker.recovered": "the run's worker died; its money state was recovered (by whom, what)",
    "run.died": "a reader found the run's process gone; the row is closed (owner, last beat, why)",
    "offer.unquoted": "an alternative offer could not be quoted; it is no alternative (why)",
    "tool.abandon.error": "giving back what a quote reserved failed (advisory; audited only)",
    "tool.transfer": "a USDC transfer was mined: tx hash, amount, recipient",
    "tool.transfer.abandoned": "a quoted transfer was not made; its nonce was given back",
    "tool.transfer.refused": "a transfer to a recipient the task does not name was refused",
    "tool.x402.paying": "an x402 payment is being sent to a seller: url, amount, ledger row",
    "tool.x402.resent": "a live payment was re-sent to the same seller (url, ledger row, status)",
    **WALLET_EVENTS,
    **JUDGE_EVENTS,
}


#: The agent's schema versions (version 1 is what sqlite-utils created before versioning).
MIGRATIONS: list[Migration] = [
    Migration(
        1,
        "runs, events, lessons, paused state",
        (
            """CREATE TABLE IF NOT EXISTS agent_runs (
                run_id TEXT PRIMARY KEY, task TEXT, status TEXT, profile TEXT,
                stop_reason TEXT, finished {int}, started_at {real}, ended_at {real},
                result TEXT)""",
            """CREATE TABLE IF NOT EXISTS agent_events (
                run_id TEXT, seq {int}, type TEXT, data TEXT, ts {real},
                PRIMARY KEY (run_id, seq))""",
            """CREATE TABLE IF NOT EXISTS agent_lessons (
                id {id}, run_id TEXT, task TEXT, stop_reason TEXT, lesson TEXT,
                created_at {real})""",
            """CREATE TABLE IF NOT EXISTS agent_paused (
                run_id TEXT PRIMARY KEY, state TEXT, paused_at {real})""",
            "CREATE INDEX IF NOT EXISTS idx_agent_events_type ON agent_events (type)",
        ),
    ),
    Migration(
        2,
        "runs indexed by start time (nib runs and nib report read the newest page)",
        ("CREATE INDEX IF NOT EXISTS idx_agent_runs_started ON agent_runs (started_at)",),
    ),
    Migration(
        3,
        "the work queue (nib submit / nib worker)",
        (
            f"""CREATE TABLE IF NOT EXISTS {QUEUE} (
                id TEXT PRIMARY KEY, task TEXT NOT NULL, max_spend {{int}}, status TEXT NOT NULL,
                worker TEXT, attempts {{int}} NOT NULL DEFAULT 0, lease_until {{real}},
                created_at {{real}} NOT NULL, started_at {{real}}, ended_at {{real}},
                stop_reason TEXT, note TEXT NOT NULL DEFAULT '')""",
            f"CREATE INDEX IF NOT EXISTS idx_{QUEUE}_status ON {QUEUE} (status, created_at)",
        ),
    ),
    Migration(
        4,
        "who drives a running run (host:pid) and its last heartbeat: a dead process shows",
        (add_missing_columns("agent_runs", [("owner", "TEXT"), ("beat_at", "{real}")]),),
    ),
]


def owner_gone(owner: str | None, beat_at: float | None, now: float) -> str | None:
    """Why the process ``owner`` (``host:pid``) driving a run is gone, or None while it
    may still be alive: its pid vanished from this host, or it stopped beating."""
    if not owner:
        return None  # a row written before owners were recorded: nothing to go on
    host, _, pid = owner.rpartition(":")
    if host == socket.gethostname() and pid.isdigit() and not pid_alive(int(pid)):
        return f"process {pid} on {host} no longer exists"
    if beat_at is not None and now - float(beat_at) > STALE_AFTER_S:
        return f"no heartbeat from {owner} for {now - float(beat_at):.0f} s (limit {STALE_AFTER_S:.0f} s)"
    return None


def ensure_tables(db: Database) -> None:
    """Bring the agent's tables to the newest schema version (idempotent)."""
    migrate(db, "agent", MIGRATIONS)


class RunStore:
    """Reads and writes the agent's tables. Safe to share between runs in one process.

    One connection shared by threads under the Database's lock: wallet events arrive
    from worker threads, and on SQLite a thread binding parameters while another's write
    busy-waits on the file lock would stall the whole process ("database is locked").
    """

    def __init__(self, path: Location | Database) -> None:
        # Audit writes skip SQLite's per-commit fsync (survives process crashes).
        self.db = open_database(path, durable=False)
        self.path = "" if isinstance(path, Database) else str(path)
        ensure_tables(self.db)
        self._lock = threading.Lock()
        self._seq: dict[str, int] = {}
        self.owner = process_identity()
        self._driving: set[str] = set()  # runs this process drives (it beats for them)
        self._beat_lock = threading.Lock()
        self._beater: threading.Thread | None = None
        self._closed = threading.Event()
        #: The ledger's spend of a run (``SpendSummary`` fields), for the result of a run
        #: whose process died: by default the wallet's ledger in this same database; the
        #: runtime and the CLI point it at the wallet service when one holds the ledger.
        self.spend_of: Callable[[str], dict[str, object]] = self._ledger_spend

    @property
    def conn(self) -> sqlite3.Connection | PgConnection:
        return self.db.conn

    # ------------------------------------------------------------------ runs
    def start_run(self, run_id: str, task: str, profile: str) -> None:
        now = time.time()
        self.db.execute(
            "INSERT INTO agent_runs (run_id, task, status, profile, started_at, owner, beat_at) "
            "VALUES (?, ?, 'running', ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
            "task = excluded.task, status = excluded.status, profile = excluded.profile, "
            "started_at = excluded.started_at, owner = excluded.owner, beat_at = excluded.beat_at, "
            "stop_reason = NULL, finished = NULL, ended_at = NULL, result = NULL",
            (run_id, task, profile, now, self.owner, now),
        )
        self._drive(run_id)

    def finish_run(self, run_id: str, result: Mapping[str, object]) -> None:
        self.db.execute(
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
        self._release(run_id)

    def run(self, run_id: str) -> dict[str, object] | None:
        rows = self.db.query("SELECT * FROM agent_runs WHERE run_id = ?", (run_id,))
        return self._close_dead(rows)[0] if rows else None

    def runs(self, limit: int = 50) -> list[dict[str, object]]:
        return self._close_dead(
            self.db.query("SELECT * FROM agent_runs ORDER BY started_at DESC LIMIT ?", (int(limit),))
        )

    # ------------------------------------------------------------- liveness
    def _drive(self, run_id: str) -> None:
        """This process now drives ``run_id``: beat for it until it stops or pauses."""
        with self._beat_lock:
            self._driving.add(run_id)
            if self._beater is None or not self._beater.is_alive():
                self._beater = threading.Thread(target=self._beat, name="nib-run-beat", daemon=True)
                self._beater.start()

    def _release(self, run_id: str) -> None:
        with self._beat_lock:
            self._driving.discard(run_id)

    def _beat(self) -> None:
        """Stamp ``beat_at`` on every run this process drives; the thread ends with them.
        A thread, not a task: a busy event loop must not look like a dead process."""
        while not self._closed.wait(HEARTBEAT_S):
            with self._beat_lock:
                ids = sorted(self._driving)
                if not ids:
                    self._beater = None
                    return
            marks = ",".join("?" * len(ids))
            try:
                self.db.execute(
                    f"UPDATE agent_runs SET beat_at = ? WHERE owner = ? AND status = 'running' "
                    f"AND run_id IN ({marks})",
                    (time.time(), self.owner, *ids),
                )
            except Exception:  # a blip (or the store closed): the next beat retries
                continue

    def _close_dead(self, rows: list[dict[str, object]]) -> list[dict[str, object]]:
        """Rows as read, with each ``running`` row whose process is gone closed as
        ``died`` / ``process-died`` (once, by whichever reader sees it first)."""
        now = time.time()
        for row in rows:
            if row.get("status") != "running":
                continue
            if row.get("owner") == self.owner and row["run_id"] in self._driving:
                continue  # this very process drives it (a late beat is not a death)
            run_id, owner, beat = str(row["run_id"]), row.get("owner"), row.get("beat_at")
            owner = owner if isinstance(owner, str) else None
            beat_at = None if beat is None else cell_float(beat)
            why = owner_gone(owner, beat_at, now)
            if why is None:
                continue
            self.close_died(run_id, why, owner=owner, beat_at=beat_at)
            # Closed here, or meanwhile by its process or another reader: read what stands.
            row.update(self.db.query("SELECT * FROM agent_runs WHERE run_id = ?", (run_id,))[0])
        return rows

    def _ledger_spend(self, run_id: str) -> dict[str, object]:
        return spend_reader(SpendMeter(self.db))(run_id)

    def close_died(
        self, run_id: str, why: str, *, owner: str | None = None, beat_at: float | None = None
    ) -> bool:
        """Close a run whose process died: status ``died``, stop ``process-died``, a result
        naming why, and a ``run.died`` event. Only a row still ``running`` (under ``owner``
        when given) is closed; returns whether this call closed it."""
        message = (
            f"the run's process died before it could return a result ({why}); its last event "
            "is the last thing it did. An authorization it signed stays pending in the "
            "ledger. Fix: `nib audit reconcile`, then run the task again."
        )
        result: dict[str, object] = {"run_id": run_id, "stop_reason": PROCESS_DIED,
                                     "finished": False, "partial": True, "message": message}
        try:
            result["spend"] = self.spend_of(run_id)
        except Exception as exc:  # the wallet is away: `nib audit` reads it later
            result["message"] = f"{message} (spend unread: {type(exc).__name__}: {exc})"
        whose = "" if owner is None else " AND owner = ?"
        closed = self.db.execute(
            "UPDATE agent_runs SET status = 'died', stop_reason = ?, finished = 0, ended_at = ?, "
            f"result = ? WHERE run_id = ? AND status = 'running'{whose}",
            (PROCESS_DIED, time.time(), json.dumps(result), run_id,
             *(() if owner is None else (owner,))),
        )
        if closed:
            self.event(run_id, "run.died", {"owner": owner, "beat_at": beat_at, "why": why})
        return bool(closed)

    # ---------------------------------------------------------------- events
    def _last_seq(self, run_id: str) -> int:
        found = self.db.scalar(
            "SELECT COALESCE(MAX(seq), 0) FROM agent_events WHERE run_id=?", (run_id,)
        )
        return cell_int(found)

    def event(self, run_id: str, type_: str, data: Mapping[str, object]) -> int:
        """Append one audit event; returns its sequence number within the run.

        Other processes write to the same run too (a worker settling another run's
        authorization it found used on chain, a recoverer), so the cached number is only a
        first guess: a taken number is re-read from the table and the next one tried.
        """
        payload = json.dumps(data, default=str, separators=(",", ":"))
        with self._lock:
            if run_id not in self._seq:
                self._seq[run_id] = self._last_seq(run_id)
            for attempt in range(_SEQ_ATTEMPTS):
                seq = self._seq[run_id] + 1
                try:
                    self.db.execute(
                        "INSERT INTO agent_events (run_id, seq, type, data, ts) "
                        "VALUES (?,?,?,?,?)",
                        (run_id, seq, type_, payload, time.time()),
                    )
                except IntegrityError:
                    if attempt == _SEQ_ATTEMPTS - 1:
                        raise
                    self._seq[run_id] = max(seq, self._last_seq(run_id))
                    continue
                self._seq[run_id] = seq
                return seq
        raise AssertionError("unreachable")

    def events(self, run_id: str, type_: str | None = None) -> list[dict[str, object]]:
        where, params = "run_id = ?", [run_id]
        if type_:
            where, params = where + " AND type = ?", [run_id, type_]
        rows = self.db.query(f"SELECT * FROM agent_events WHERE {where} ORDER BY seq", params)
        return [{**r, "data": json.loads(str(r["data"]))} for r in rows]

    # ---------------------------------------------------------------- paused
    def save_paused(self, run_id: str, state_json: str) -> None:
        with self.db.transaction(lock="agent") as tx:
            tx.execute(
                "INSERT INTO agent_paused (run_id, state, paused_at) VALUES (?,?,?) "
                "ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, "
                "paused_at = excluded.paused_at",
                (run_id, state_json, time.time()),
            )
            tx.execute("UPDATE agent_runs SET status='paused' WHERE run_id=?", (run_id,))
        self._release(run_id)

    def take_paused(self, run_id: str) -> str | None:
        """Remove and return a paused run's state (atomically: one resumer wins)."""
        with self.db.transaction(lock="agent") as tx:
            row = tx.one("SELECT state FROM agent_paused WHERE run_id=?", (run_id,))
            if row is not None:
                tx.execute("DELETE FROM agent_paused WHERE run_id=?", (run_id,))
                tx.execute(
                    "UPDATE agent_runs SET status='running', owner=?, beat_at=? WHERE run_id=?",
                    (self.owner, time.time(), run_id),
                )
        if row is None:
            return None
        self._drive(run_id)
        return str(row[0])

    def paused_state(self, run_id: str) -> str | None:
        """A paused run's saved state, left in place (what a human is asked to approve)."""
        rows = self.db.query("SELECT state FROM agent_paused WHERE run_id=?", (run_id,))
        return str(rows[0]["state"]) if rows else None

    def paused(self) -> list[str]:
        return [str(r["run_id"]) for r in self.db.query("SELECT run_id FROM agent_paused")]

    # --------------------------------------------------------------- lessons
    def add_lesson(self, run_id: str, task: str, stop_reason: str, lesson: str) -> None:
        self.db.execute(
            "INSERT INTO agent_lessons (run_id, task, stop_reason, lesson, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (run_id, task, stop_reason, lesson, time.time()),
        )

    def lessons(self, limit: int = 200) -> list[dict[str, object]]:
        return self.db.query("SELECT * FROM agent_lessons ORDER BY id DESC LIMIT ?", (int(limit),))

    def close(self) -> None:
        self._closed.set()
        self.db.close()


def spend_reader(meter: SpendView) -> Callable[[str], dict[str, object]]:
    """A run's spend as a wallet's meter (``meter``) has it (what a run whose process died is
    reported with, as a live run reports its own): a ``RunStore.spend_of``."""

    def spend(run_id: str) -> dict[str, object]:
        return SpendSummary.from_meter(meter.usage(run_id)).model_dump()

    return spend
