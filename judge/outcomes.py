"""Outcomes of paid calls taken into calibration: the ones a task reports for its own
verdicts, and the non-deliveries held until their payment settles.

An outcome counts only for a consumed approval this judge issued, once per fact kind, and
(with a chain reader) only once its authorization settled on chain at the approved price.
A seller that did not deliver while the wallet could not end the authorization (neither
used, cancelled nor expired when the run ended) may still settle it later; its outcome is
held (:meth:`Outcomes.hold`), and whoever later finds the payment settled files it
(:meth:`Outcomes.file_held`, which reads the chain itself): counted then, exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from typing import Literal

from judge.calibration import Calibrator, Delivery, check_outcome, fact_key
from judge.errors import JudgeConfigError, OutcomeRefused
from judge.held import HeldOutcome, HeldOutcomes, check_hold
from judge.records import VerdictRecord, VerdictRecords

__all__ = ["OUTCOME_FULL_WEIGHT_PAID", "HeldFiling", "Outcomes", "outcome_weight"]

Emit = Callable[[str, dict[str, object]], None]

#: An outcome of a purchase that paid at least this (atomic units; 0.01 USDC, what the
#: market's sellers ask) counts one outcome toward p, one that paid less that share of
#: one (at least a thousandth), never more: what moves a shared p is paid for, and with
#: one outcome per task, seller and fact kind under the services, one task moves a
#: seller's p by at most one outcome against a prior worth DEFAULT_PRIOR_STRENGTH.
OUTCOME_FULL_WEIGHT_PAID = 10_000

HeldFiling = Literal["filed", "refused", "not-settled"]
"""What became of a held non-delivery when it was filed.

- ``filed``: its payment settled on chain: counted now, as any settled non-delivery.
- ``refused``: the judge takes no outcome for it (one was taken already, or the task
  reported one for that seller and fact kind); no longer held.
- ``not-settled``: the chain does not show its payment settled at the approved price;
  still held.
"""


def outcome_weight(paid: int) -> Decimal:
    """The pseudo-outcomes an outcome of a payment of ``paid`` atomic units counts for."""
    return min(Decimal(1), Decimal(max(paid, 0)) / OUTCOME_FULL_WEIGHT_PAID)


class Outcomes:
    """Takes outcomes into ``calibrator`` under the judge's record ``records``.

    ``paid`` is the judge's own read of the chain (``payer:nonce`` settled at the approved
    amount and recipient); without it, outcomes are taken on the record alone (the
    in-process judge trusts its run) and held ones are never filed."""

    def __init__(
        self,
        records: VerdictRecords,
        calibrator: Calibrator,
        *,
        paid: Callable[[VerdictRecord], bool] | None = None,
        emit: Emit | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.records = records
        self.calibrator = calibrator
        self._held = HeldOutcomes(records, clock=clock)
        self._paid = paid
        self._emit = emit

    def record(
        self, verdict_id: str, fact_kind: str, covered: bool, delivery: Delivery = "delivered"
    ) -> None:
        """Record whether an executed approved call covered a missing item (see
        ``Judge.record_outcome``); OutcomeRefused for any outcome the record does not back."""
        check_outcome(covered, delivery)
        rec = self.records.take_outcome(verdict_id, fact_key(fact_kind), paid=self._paid,
                                        lost=delivery == "paid-not-delivered")
        self._count(rec, fact_key(fact_kind), covered, delivery)

    def hold(self, verdict_id: str, fact_kind: str, spend_id: str) -> None:
        """Hold a ``paid-not-delivered`` outcome of ``verdict_id`` whose payment (ledger row
        ``spend_id``) is undecided: nothing counts until :meth:`file_held` finds it settled."""
        check_hold(verdict_id, fact_kind, spend_id)  # as sent, before it is read or spelled
        kind = fact_key(fact_kind)
        self._held.hold(verdict_id, kind, spend_id)
        if self._emit is not None:
            self._emit("judge.outcome.held", {"verdict_id": verdict_id, "fact_kind": kind,
                                              "spend_id": spend_id})

    def held(self) -> list[HeldOutcome]:
        """The non-deliveries held now (their payment undecided when last looked at)."""
        return self._held.all()

    def file_held(self, held: HeldOutcome) -> HeldFiling:
        """Count ``held`` as a ``paid-not-delivered`` outcome when the chain shows its
        payment settled at the approved price (read here, never taken from the caller),
        once: a second filing, or one the judge refuses, counts nothing. Only the
        ``not-settled`` one stays held."""
        if self._paid is None:
            raise JudgeConfigError(
                f"found held outcome of verdict {held.verdict_id} filed without a read of the "
                "chain; expected Outcomes built with paid= (the judge's settlement check). "
                "Fix: pass paid=agent.cli.runtime.settled_on(chain)."
            )
        if self._held.taken(held):
            self._held.release(held)
            return "refused"
        rec = self.records.get(held.verdict_id)
        if rec is None or not rec.authorization or not self._paid(rec):
            return "not-settled"
        try:
            rec = self.records.take_outcome(held.verdict_id, held.fact_kind, paid=self._paid,
                                            lost=True)
        except OutcomeRefused:
            self._held.release(held)
            return "refused"
        self._count(rec, held.fact_kind, False, "paid-not-delivered", held=True)
        self._held.release(held)
        return "filed"

    def drop_held(self, held: HeldOutcome) -> None:
        """Stop holding ``held``: its payment can no longer move (cancelled, expired
        unused), so there is no paid outcome to count."""
        self._held.release(held)

    def _count(self, rec: VerdictRecord, kind: str, covered: bool, delivery: Delivery,
               *, held: bool = False) -> None:
        self.calibrator.record(rec.subject, kind, rec.p, covered,
                               weight=outcome_weight(rec.amount), delivery=delivery)
        if self._emit is not None:
            self._emit("judge.outcome", {
                "verdict_id": rec.id, "subject": rec.subject, "fact_kind": kind,
                "p_used": rec.p, "covered": covered, "delivery": delivery,
                **({"held": True} if held else {}),
            })
