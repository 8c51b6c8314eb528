"""Non-deliveries held until their payment settles: the judge's table of them.

A paid call whose seller did not deliver while the wallet could not end the authorization
(no cancel sent, nothing used or expired when the run ended) may still be settled by the
seller later. Its task holds the ``paid-not-delivered`` outcome here, for its own verdict,
checked as an outcome is; nothing counts until the payment is found settled on chain
(judge.outcomes), and each is released once counted or once its payment can never move.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from judge._store import Store
from judge.errors import OutcomeRefused
from judge.records import OUTCOMES_TAKEN, VerdictRecord, VerdictRecords, issued_in, outcome_problem
from judge.request import MAX_NAME_CHARS
from judge.storage import Migration, cell_float

__all__ = ["HELD_OUTCOMES", "HeldOutcome", "HeldOutcomes", "check_hold"]

HELD_OUTCOMES = "judge_held_outcomes"
#: Whether a verdict's outcome for a fact kind was taken (by its key).
_TAKEN = f"SELECT 1 AS taken FROM {OUTCOMES_TAKEN} WHERE verdict_id = ? AND fact_kind = ?"

MIGRATIONS: list[Migration] = [
    Migration(
        1,
        "non-deliveries whose payment was undecided when the run ended, held until it settles",
        (
            f"""CREATE TABLE IF NOT EXISTS {HELD_OUTCOMES} (
                verdict_id TEXT NOT NULL,
                fact_kind TEXT NOT NULL,
                spend_id TEXT NOT NULL,
                held_at {{real}} NOT NULL,
                PRIMARY KEY (verdict_id, fact_kind)
            )""",
        ),
    ),
]


#: A verdict's id (judge.verdict: 32 hex digits; at most 64 id characters in any record).
_VERDICT_ID = re.compile(r"^[0-9A-Za-z_-]{1,64}\Z")
#: A ledger row's id (wallet.meter: uuid4 hex).
_SPEND_ID = re.compile(r"^[0-9a-f]{32}\Z")


def check_hold(verdict_id: object, fact_kind: object, spend_id: object) -> None:
    """Refuse (OutcomeRefused) a hold whose fields no record could hold, before any record
    is read: a field that is not text, an id no record has, a NUL PostgreSQL cannot store,
    a row id or fact kind of any length (they are stored until the payment is decided)."""
    problem = None
    if not isinstance(verdict_id, str) or not _VERDICT_ID.match(verdict_id):
        problem = f"the verdict id {str(verdict_id)[:80]!r}"
    elif not isinstance(spend_id, str) or not _SPEND_ID.match(spend_id):
        problem = f"the ledger row id {str(spend_id)[:80]!r}"
    elif not isinstance(fact_kind, str) or not fact_kind.isprintable() \
            or not 0 < len(fact_kind) <= MAX_NAME_CHARS:
        problem = f"the fact kind {str(fact_kind)[:80]!r}"
    if problem is not None:
        raise OutcomeRefused(
            f"found a non-delivery held with {problem}; expected a verdict id and a ledger row "
            "id as nib writes them and a fact kind of the verdict; fix: hold the outcome the "
            "run's own purchase left undecided."
        )


@dataclass(frozen=True)
class HeldOutcome:
    """A ``paid-not-delivered`` outcome a task reported for its own verdict while the
    payment was still undecided: counted once the payment settles, never before.

    ``spend_id`` is the ledger row the task said paid it: only where to look, since the
    row must name ``verdict_id`` itself (wallet.held_outcomes)."""

    verdict_id: str
    fact_kind: str
    spend_id: str
    held_at: float


class HeldOutcomes:
    """The held non-deliveries, kept in the same database as the judge's ``records``."""

    def __init__(
        self, records: VerdictRecords, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = Store(records.db, component="judge.held", migrations=MIGRATIONS)
        self._clock = clock

    def hold(self, verdict_id: str, fact_kind: str, spend_id: str) -> VerdictRecord:
        """Hold a ``paid-not-delivered`` outcome of ``verdict_id`` for ``fact_kind`` until
        its payment (the ledger row ``spend_id``) settles, or raise OutcomeRefused: only for
        a consumed approval, a fact kind the call could cover, and an outcome not taken
        already. Holding it again is a no-op. Nothing is counted here. The fields' shape is
        checked by the caller, before the fact kind is spelled (judge.outcomes, check_hold)."""
        with self._store.transaction() as conn:
            rec = issued_in(conn, verdict_id)
            problem = outcome_problem(rec, fact_kind)
            if problem is None and conn.rows(
                _TAKEN,
                (verdict_id, fact_kind),
            ):
                problem = f"its outcome for {fact_kind!r} was already recorded"
            if problem is not None or rec is None:
                raise OutcomeRefused(
                    f"found a non-delivery held for verdict {verdict_id}, but {problem}; "
                    "expected one per fact kind of an approved call a wallet paid. Fix: hold "
                    "outcomes only for calls this judge approved whose payment is undecided."
                )
            conn.execute(
                f"INSERT INTO {HELD_OUTCOMES} (verdict_id, fact_kind, spend_id, held_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (verdict_id, fact_kind) DO NOTHING",
                (verdict_id, fact_kind, spend_id, self._clock()),
            )
        return rec

    def all(self) -> list[HeldOutcome]:
        """Every outcome held now, oldest first: only non-deliveries whose payment is still
        undecided (each is released once counted or once its payment can never move)."""
        return [
            HeldOutcome(str(r["verdict_id"]), str(r["fact_kind"]), str(r["spend_id"]),
                        cell_float(r["held_at"]))
            for r in self._store.query(
                f"SELECT * FROM {HELD_OUTCOMES} ORDER BY held_at, verdict_id, fact_kind")
        ]

    def taken(self, held: HeldOutcome) -> bool:
        """Whether an outcome of ``held``'s verdict and fact kind was taken (read by key)."""
        return bool(self._store.query(
            _TAKEN,
            (held.verdict_id, held.fact_kind)))

    def release(self, held: HeldOutcome) -> None:
        """Stop holding ``held`` (counted, or its payment can never move)."""
        self._store.execute(
            f"DELETE FROM {HELD_OUTCOMES} WHERE verdict_id = ? AND fact_kind = ?",
            (held.verdict_id, held.fact_kind),
        )
