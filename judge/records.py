"""The judge's record of every verdict it issued, its single consumption and its outcomes.

Single use is enforced where the verdict was issued: the wallet's pre-signing re-check
consumes the verdict here (one ``UPDATE ... WHERE consumed_at IS NULL``), so a second
wallet with its own database cannot present the same verdict again. Reconcile asks
:meth:`VerdictRecords.standing` whether a settled spend's verdict was issued here,
consumed, and approved the payload the spend names. Outcomes (calibration data) are
taken only for consumed approvals, once per (verdict, fact kind) the call could cover; a
non-delivery whose payment was still undecided when its run ended is held beside them until
the payment settles (judge.held).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from judge._store import Store
from judge.errors import (
    GrantRefused,
    OutcomeRefused,
    VerdictConsumed,
    VerdictRevoked,
    VerdictUnknown,
)
from judge.storage import Database, Location, Migration, Tx, cell_float, cell_int

if TYPE_CHECKING:  # judge.verdict: reading the record (`nib audit verify`) loads no eth-account
    from judge.verdict import Verdict

VERDICTS = "judge_verdicts"
OUTCOMES_TAKEN = "judge_verdict_outcomes"
GRANTS = "judge_grants"
OUTCOME_KEYS = "judge_outcome_keys"

Standing = Literal[
    "consumed", "unconsumed", "revoked", "not-issued", "fingerprint-mismatch", "other-task"
]
"""What the judge's record says about a verdict id and a payload fingerprint.

- ``consumed``: issued here as an approval of exactly that payload, and consumed once.
- ``unconsumed``: issued here for that payload, never consumed (no wallet signed under it).
- ``revoked``: issued here, revoked before any wallet consumed it.
- ``not-issued``: this judge never issued a verdict with that id.
- ``fingerprint-mismatch``: issued here, but for a different payload.
- ``other-task``: issued here, but to another task than the one the spend is booked under.
"""


@dataclass(frozen=True)
class VerdictRecord:
    """One issued verdict as the judge recorded it (amounts in atomic units)."""

    id: str
    decision: str
    subject: str
    task_id: str
    payload_fingerprint: str | None
    amount: int
    asset: str
    recipient: str
    chain_id: int
    p: str
    facts: tuple[str, ...]
    issued_at: int
    expires_at: int
    consumed_at: float | None
    revoked_at: float | None
    grant_id: str | None = None
    #: ``payer:nonce`` of the EIP-3009 authorization an approval pays with (None: a
    #: transaction, or a verdict issued before this was recorded).
    authorization: str | None = None


@dataclass(frozen=True)
class Grant:
    """A human's approval of one escalated payment (atomic units; addresses lower-cased).

    Given through the judge's admin path for an escalate verdict this judge issued for a
    registered task; it lifts the approval threshold for one approve verdict on exactly
    that payload (``used_by``), never for another payload or a second time.
    """

    id: str
    verdict_id: str
    task_id: str
    payload_fingerprint: str
    amount: int
    recipient: str
    granted_by: str
    granted_at: float
    used_by: str | None = None

    def to_wire(self) -> dict[str, object]:
        return dict(self.__dict__)


MIGRATIONS: list[Migration] = [
    Migration(
        1,
        "verdicts issued and their consumption; outcomes taken per (verdict, fact kind)",
        (
            f"""CREATE TABLE IF NOT EXISTS {VERDICTS} (
                id TEXT PRIMARY KEY,
                decision TEXT NOT NULL,
                subject TEXT NOT NULL,
                task_id TEXT NOT NULL DEFAULT '',
                payload_fingerprint TEXT,
                amount {{int}} NOT NULL,
                asset TEXT NOT NULL,
                recipient TEXT NOT NULL,
                chain_id {{int}} NOT NULL,
                p TEXT NOT NULL,
                facts TEXT NOT NULL DEFAULT '',
                issued_at {{int}} NOT NULL,
                expires_at {{int}} NOT NULL,
                consumed_at {{real}},
                revoked_at {{real}}
            )""",
            # committed() sums a task's approvals on every decision for that task: by
            # index, not by a scan of every verdict ever issued.
            f"CREATE INDEX IF NOT EXISTS idx_{VERDICTS}_task ON {VERDICTS}(task_id)",
            f"""CREATE TABLE IF NOT EXISTS {OUTCOMES_TAKEN} (
                verdict_id TEXT NOT NULL,
                fact_kind TEXT NOT NULL,
                taken_at {{real}} NOT NULL,
                PRIMARY KEY (verdict_id, fact_kind)
            )""",
        ),
    ),
    Migration(
        2,
        "human grants of escalated payments; the grant an approve verdict was issued under",
        (
            f"ALTER TABLE {VERDICTS} ADD COLUMN grant_id TEXT",
            f"""CREATE TABLE IF NOT EXISTS {GRANTS} (
                id TEXT PRIMARY KEY,
                verdict_id TEXT NOT NULL UNIQUE,
                task_id TEXT NOT NULL,
                payload_fingerprint TEXT NOT NULL,
                amount {{int}} NOT NULL,
                recipient TEXT NOT NULL,
                granted_by TEXT NOT NULL,
                granted_at {{real}} NOT NULL,
                used_by TEXT,
                used_at {{real}}
            )""",
            f"CREATE INDEX IF NOT EXISTS idx_{GRANTS}_payload ON {GRANTS}(task_id, payload_fingerprint)",
        ),
    ),
    Migration(
        3,
        "the EIP-3009 authorization an approval pays with; outcomes once per (task, subject, fact)",
        (
            f"ALTER TABLE {VERDICTS} ADD COLUMN paid_with TEXT",
            f"""CREATE TABLE IF NOT EXISTS {OUTCOME_KEYS} (
                task_id TEXT NOT NULL,
                subject TEXT NOT NULL,
                fact_kind TEXT NOT NULL,
                verdict_id TEXT NOT NULL,
                PRIMARY KEY (task_id, subject, fact_kind)
            )""",
        ),
    ),
    Migration(
        4,
        "whether an outcome reported its seller paid and not delivering (the reporting task "
        "does not pay that seller again)",
        (f"ALTER TABLE {OUTCOMES_TAKEN} ADD COLUMN lost {{int}} NOT NULL DEFAULT 0",),
    ),
]


def issued_in(conn: Tx, verdict_id: str) -> VerdictRecord | None:
    """The record of ``verdict_id`` read inside the caller's write section, or None."""
    found = conn.rows(f"SELECT * FROM {VERDICTS} WHERE id = ?", (verdict_id,))
    return _record(found[0]) if found else None


def outcome_problem(rec: VerdictRecord | None, fact_kind: str) -> str | None:
    """Why ``rec`` carries no outcome for ``fact_kind`` (not issued here, not a consumed
    approval, a fact kind the call could not cover), else None."""
    if rec is None:
        return "this judge never issued it"
    if rec.decision != "approve" or rec.consumed_at is None:
        return f"it is a {rec.decision} verdict no wallet consumed (no call was made)"
    if fact_kind not in rec.facts:
        return (f"the fact kind {fact_kind!r} is not one the call could cover "
                f"({', '.join(rec.facts) or 'none'})")
    return None


def _take_outcome(
    conn: Tx, rec: VerdictRecord, fact_kind: str, now: float, *, once_per_task: bool,
    lost: bool = False,
) -> str | None:
    """Mark the outcome taken (once per verdict and fact kind; with ``once_per_task``
    once per task, subject and fact kind too; ``lost``: paid and not delivered); why
    not, else None."""
    taken = conn.execute(
        f"INSERT INTO {OUTCOMES_TAKEN} (verdict_id, fact_kind, taken_at, lost) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (verdict_id, fact_kind) DO NOTHING",
        (rec.id, fact_kind, now, int(lost)),
    ).rowcount
    if taken != 1:
        return f"its outcome for {fact_kind!r} was already recorded"
    if once_per_task and conn.execute(
        f"INSERT INTO {OUTCOME_KEYS} (task_id, subject, fact_kind, verdict_id) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (task_id, subject, fact_kind) DO NOTHING",
        (rec.task_id, rec.subject, fact_kind, rec.id),
    ).rowcount != 1:
        return (f"task {rec.task_id!r} already reported an outcome for {rec.subject} and "
                f"{fact_kind!r} (one per task, seller and fact kind)")
    return None


def _record(row: dict[str, object]) -> VerdictRecord:
    facts = str(row["facts"] or "")
    return VerdictRecord(
        id=str(row["id"]),
        decision=str(row["decision"]),
        subject=str(row["subject"]),
        task_id=str(row["task_id"]),
        payload_fingerprint=None if row["payload_fingerprint"] is None else str(row["payload_fingerprint"]),
        amount=cell_int(row["amount"]),
        asset=str(row["asset"]),
        recipient=str(row["recipient"]),
        chain_id=cell_int(row["chain_id"]),
        p=str(row["p"]),
        facts=tuple(f for f in facts.split(",") if f),
        issued_at=cell_int(row["issued_at"]),
        expires_at=cell_int(row["expires_at"]),
        consumed_at=None if row["consumed_at"] is None else cell_float(row["consumed_at"]),
        revoked_at=None if row["revoked_at"] is None else cell_float(row["revoked_at"]),
        grant_id=None if row.get("grant_id") is None else str(row["grant_id"]),
        authorization=None if row.get("paid_with") is None else str(row["paid_with"]),
    )


def _grant(row: dict[str, object]) -> Grant:
    return Grant(
        id=str(row["id"]),
        verdict_id=str(row["verdict_id"]),
        task_id=str(row["task_id"]),
        payload_fingerprint=str(row["payload_fingerprint"]),
        amount=cell_int(row["amount"]),
        recipient=str(row["recipient"]),
        granted_by=str(row["granted_by"]),
        granted_at=cell_float(row["granted_at"]),
        used_by=None if row["used_by"] is None else str(row["used_by"]),
    )


def _insert_issued(
    verdict: Verdict, subject: str, facts: tuple[str, ...], task_id: str,
    grant_id: str | None, authorization: str | None,
) -> tuple[str, tuple[object, ...]]:
    """The statement (and its parameters) that records ``verdict`` as issued."""
    return (
        f"INSERT INTO {VERDICTS} (id, decision, subject, task_id, payload_fingerprint, "
        "amount, asset, recipient, chain_id, p, facts, issued_at, expires_at, grant_id, "
        "paid_with) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            verdict.id,
            verdict.decision,
            subject,
            task_id,
            verdict.payload_fingerprint,
            verdict.amount,
            verdict.asset.lower(),
            verdict.recipient.lower(),
            verdict.chain_id,
            verdict.p,
            ",".join(facts),
            verdict.issued_at,
            verdict.expires_at,
            grant_id,
            authorization,
        ),
    )


class VerdictRecords:
    """The judge's table of issued verdicts, in nib's database or in memory.

    ``db`` is a SQLite path, a ``postgresql://`` URL, an open ``storage.Database``, or
    ``None`` for memory (tests; single use then holds only within this process).

    ``wallet_syncs_after``: the wallet that re-checks keeps its ledger in this same database
    (one SQLite file, or one PostgreSQL cluster) and commits its reservation durably after
    the re-check and before anything is signed (as ``nib run`` and ``nib services up``
    compose them). Consuming then commits without waiting for the disk: the wallet's
    synced commit flushes the same write-ahead log past it, so a consumption lost in an OS
    crash is one no signature followed. Leave it False for a judge whose wallets keep their
    ledgers elsewhere.
    """

    def __init__(
        self,
        db: Location | Database | None = None,
        *,
        clock: Callable[[], float] = time.time,
        wallet_syncs_after: bool = False,
    ) -> None:
        self._store = Store(db, component="judge.records", migrations=MIGRATIONS)
        self._clock = clock
        self._consume_durable = not wallet_syncs_after

    @property
    def db(self) -> Database:
        """The database the record is kept in (the tables kept beside it: judge.held)."""
        return self._store.db

    def issued(
        self,
        verdict: Verdict,
        *,
        subject: str,
        facts: tuple[str, ...] = (),
        task_id: str = "",
        grant: Grant | None = None,
        authorization: str | None = None,
    ) -> None:
        """Record a verdict the judge just signed (every decision, not only approvals).

        ``subject`` is what its outcomes calibrate (the tool, at its seller when it has
        one); ``facts`` the fact keys the call could cover. ``grant``: the human grant an
        approval above the task's threshold was issued under; it is used up here, in the
        same write section, or the verdict is not recorded (and so never consumed).
        """
        if grant is not None:
            with self._store.transaction() as conn:
                used = conn.execute(
                    f"UPDATE {GRANTS} SET used_by = ?, used_at = ? WHERE id = ? AND used_at IS NULL",
                    (verdict.id, self._clock(), grant.id),
                ).rowcount
                if used != 1:
                    raise GrantRefused(
                        f"grant {grant.id} was already used; expected an unused grant for "
                        f"verdict {verdict.id}. Fix: a human grants each escalated payment once."
                    )
                conn.execute(*_insert_issued(verdict, subject, facts, task_id, grant.id, authorization))
            return
        # One statement on an autocommit connection is its own atomic transaction: no
        # BEGIN / COMMIT round (two more statements on every decision). Not synced to
        # disk before the verdict is handed out: a record lost in an OS crash (a process
        # crash loses nothing) leaves a verdict this judge never issued as far as its
        # record says, which every re-check refuses (VerdictUnknown), so it can move no
        # money. Consuming it is a synced commit, which syncs this row with it.
        self._store.execute(
            *_insert_issued(verdict, subject, facts, task_id, None, authorization), durable=False
        )

    # -- human grants of escalated payments ----------------------------------------

    def grant(self, verdict_id: str, *, by: str) -> Grant:
        """Record a human's approval of the escalated payment ``verdict_id`` names.

        Only an escalate verdict this judge issued for a registered task can be granted;
        granting it again before it is used returns the same grant, after it is used is
        refused. The grant covers exactly its payload (fingerprint, amount, recipient).
        """
        with self._store.transaction() as conn:
            rec = issued_in(conn, verdict_id)
            problem = None
            if rec is None:
                problem = "this judge never issued it"
            elif rec.decision != "escalate":
                problem = f"it is a {rec.decision} verdict, not an escalation"
            elif not rec.task_id or not rec.payload_fingerprint:
                problem = "it names no registered task and payload"
            else:
                given = conn.rows(f"SELECT * FROM {GRANTS} WHERE verdict_id = ?", (verdict_id,))
                if given and given[0]["used_by"] is None:
                    return _grant(given[0])  # granted already, not used yet: the same grant
                if given:
                    problem = f"its grant was already used by verdict {given[0]['used_by']}"
            if problem is not None or rec is None or not rec.payload_fingerprint:
                raise GrantRefused(
                    f"found a grant for verdict {verdict_id}, but {problem}; expected the id "
                    "of an escalate verdict of a registered task, granted once. Fix: grant the "
                    "verdict id `nib run` printed when it paused (or `nib judge approve RUN`)."
                )
            grant = Grant(
                id=f"g-{verdict_id}",
                verdict_id=verdict_id,
                task_id=rec.task_id,
                payload_fingerprint=rec.payload_fingerprint,
                amount=rec.amount,
                recipient=rec.recipient,
                granted_by=by,
                granted_at=self._clock(),
            )
            conn.execute(
                f"INSERT INTO {GRANTS} (id, verdict_id, task_id, payload_fingerprint, amount, "
                "recipient, granted_by, granted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    grant.id,
                    grant.verdict_id,
                    grant.task_id,
                    grant.payload_fingerprint,
                    grant.amount,
                    grant.recipient,
                    grant.granted_by,
                    grant.granted_at,
                ),
            )
        return grant

    def open_grant(self, task_id: str, payload_fingerprint: str) -> Grant | None:
        """The unused grant for exactly this task and payload, if a human gave one."""
        rows = self._store.query(
            f"SELECT * FROM {GRANTS} WHERE task_id = ? AND payload_fingerprint = ? AND "
            "used_at IS NULL",
            (task_id, payload_fingerprint),
        )
        return _grant(rows[0]) if rows else None

    def get(self, verdict_id: str) -> VerdictRecord | None:
        rows = self._store.query(f"SELECT * FROM {VERDICTS} WHERE id = ?", (verdict_id,))
        return _record(rows[0]) if rows else None

    def consume(
        self, verdict: Verdict, *, needs_grant: Callable[[VerdictRecord], bool] | None = None
    ) -> VerdictRecord:
        """MOVES MONEY (gate): mark ``verdict`` used, once, or raise.

        Raises VerdictUnknown (never issued here, issued for other terms, or an approval
        ``needs_grant`` says needed a human's grant and was issued without one),
        VerdictRevoked, or VerdictConsumed (a second use, from any wallet).
        """
        with self._store.transaction(durable=self._consume_durable) as conn:
            rec = issued_in(conn, verdict.id)
            if rec is None:
                raise VerdictUnknown(
                    f"verdict {verdict.id} was never issued by this judge; expected a verdict "
                    "from its record of issued verdicts. Fix: ask this judge for a verdict; "
                    "verdicts are not portable between judges."
                )
            issued_terms = (rec.decision, rec.payload_fingerprint, rec.amount, rec.recipient)
            given_terms = (
                verdict.decision,
                verdict.payload_fingerprint,
                verdict.amount,
                verdict.recipient.lower(),
            )
            if issued_terms != given_terms:
                raise VerdictUnknown(
                    f"verdict {verdict.id} presents {given_terms}, but this judge issued it "
                    f"with {issued_terms}; expected the verdict exactly as issued. Fix: "
                    "request a fresh verdict, do not edit verdicts."
                )
            if needs_grant is not None and rec.grant_id is None and needs_grant(rec):
                raise VerdictUnknown(
                    f"verdict {verdict.id} approves {rec.amount} at or above its task's "
                    "approval threshold, but no human grant was recorded for it; expected a "
                    "grant through the judge's admin path. Fix: `nib approve RUN` (or `nib "
                    "judge approve VERDICT`) as the user."
                )
            if rec.revoked_at is not None:
                raise VerdictRevoked(
                    f"verdict {verdict.id} was revoked by the judge; expected a standing "
                    "verdict. Fix: request a fresh verdict."
                )
            now = self._clock()
            done = conn.execute(
                f"UPDATE {VERDICTS} SET consumed_at = ? WHERE id = ? AND consumed_at IS NULL",
                (now, verdict.id),
            ).rowcount
            if done != 1:
                raise VerdictConsumed(
                    f"verdict {verdict.id} was already used at {rec.consumed_at}; expected an "
                    "unused verdict (each verdict pays once, in any wallet). Fix: request a "
                    "fresh verdict for a new payment."
                )
        return VerdictRecord(**{**rec.__dict__, "consumed_at": now})

    def committed(self, task_id: str, now: float) -> int:
        """What the judge approved for ``task_id`` that may still move money: consumed
        approvals, and live ones (unexpired, unrevoked) a wallet may yet consume."""
        row = self._store.query(
            f"SELECT COALESCE(SUM(amount), 0) AS total FROM {VERDICTS} WHERE task_id = ? AND "
            "decision = 'approve' AND (consumed_at IS NOT NULL OR "
            "(revoked_at IS NULL AND expires_at > ?))",
            (task_id, now),
        )
        return cell_int(row[0]["total"])

    def approved_to(self, task_id: str, recipient: str, amount: int, now: float) -> bool:
        """True when the judge approved a payment of exactly ``amount`` to ``recipient``
        for ``task_id`` that moved or may still move money (an ordered payment is made
        once)."""
        row = self._store.query(
            f"SELECT COUNT(*) AS n FROM {VERDICTS} WHERE task_id = ? AND decision = 'approve' "
            "AND lower(recipient) = ? AND amount = ? AND (consumed_at IS NOT NULL OR "
            "(revoked_at IS NULL AND expires_at > ?))",
            (task_id, recipient.lower(), amount, now),
        )
        return cell_int(row[0]["n"]) > 0

    def revoke(self, verdict_id: str) -> None:
        """Revoke an unconsumed verdict; a consumed one stays consumed (it already paid)."""
        with self._store.transaction() as conn:
            conn.execute(
                f"UPDATE {VERDICTS} SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (self._clock(), verdict_id),
            )

    def standing(
        self, verdict_id: str, payload_fingerprint: str | None, task_id: str | None = None
    ) -> Standing:
        """What the record says about ``verdict_id`` approving ``payload_fingerprint``
        (for ``task_id``: a spend booked under another run than the verdict's task)."""
        rec = self.get(verdict_id)
        if rec is None:
            return "not-issued"
        if (rec.payload_fingerprint or "").lower() != (payload_fingerprint or "").lower():
            return "fingerprint-mismatch"
        if task_id is not None and rec.task_id and rec.task_id != task_id:
            return "other-task"
        if rec.consumed_at is not None:
            return "consumed"
        if rec.revoked_at is not None:
            return "revoked"
        return "unconsumed"

    def lost_to(self, task_id: str, subject: str) -> bool:
        """Whether ``task_id`` reported a settled purchase from ``subject`` (a tool at its
        seller) paid and not delivered."""
        return bool(self._store.query(
            f"SELECT 1 AS lost FROM {OUTCOMES_TAKEN} o JOIN {VERDICTS} v ON v.id = o.verdict_id "
            "WHERE v.task_id = ? AND v.subject = ? AND o.lost = 1 LIMIT 1", (task_id, subject)))

    def take_outcome(
        self, verdict_id: str, fact_kind: str, *, paid: Callable[[VerdictRecord], bool] | None = None,
        lost: bool = False,
    ) -> VerdictRecord:
        """Accept one outcome for (verdict, fact kind), or raise OutcomeRefused.

        Only approvals this judge issued and a wallet consumed (a call that was made)
        carry outcomes, only for a fact kind the call could cover, and only once. With
        ``paid`` (the judge reading the chain), only an approval whose authorization
        ``paid`` proves settled on chain at the approved price, and at most one per
        (task, subject, fact kind): moving a shared p takes real payments to that seller
        from tasks the user registered, not verdicts signed and never submitted.
        """
        unpaid = None
        if paid is not None:
            found = self.get(verdict_id)
            if found is not None and found.decision == "approve" and not (
                found.authorization and paid(found)
            ):
                unpaid = "its payment is not settled on chain at the approved price"
        with self._store.transaction() as conn:
            rec = issued_in(conn, verdict_id)
            problem = outcome_problem(rec, fact_kind) or unpaid
            if problem is None and rec is not None:
                problem = _take_outcome(conn, rec, fact_kind, self._clock(),
                                        once_per_task=paid is not None, lost=lost)
            if problem is not None:
                raise OutcomeRefused(
                    f"found an outcome for verdict {verdict_id}, but {problem}; expected one "
                    "outcome per fact kind of an approved call whose payment settled on chain. "
                    "Fix: report outcomes only for calls this judge approved and that were paid."
                )
        assert rec is not None
        return rec
