"""The judge's held non-deliveries, settled from the ledger as reconcile leaves it.

A paid call whose seller did not deliver, and whose authorization the wallet could not end
before the run did (no cancel sent, nothing used or expired yet), leaves its ledger row
``signed`` and its ``paid-not-delivered`` outcome held by the judge. Once reconcile has
brought the row up to date with the chain, the row says what became of the payment:
settled (the judge files the outcome, reading the chain itself), cancelled or failed (it
can never move: nothing is counted, the outcome is dropped), or still pending (held).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wallet.errors import LedgerError

if TYPE_CHECKING:
    from judge.outcomes import Outcomes
    from wallet.ledger import Ledger

__all__ = ["file_held_outcomes"]

#: Ledger statuses of a payment that never moved money and never can.
_NEVER_PAID = ("failed", "cancelled", "released")


def file_held_outcomes(ledger: Ledger, outcomes: Outcomes) -> tuple[str, ...]:
    """File every held outcome whose ledger row is now settled; drop those whose row can
    never move money, or that name a row not paid under their verdict (the task's word
    is only where to look). Returns ``verdict_id:fact_kind`` of each outcome counted now.

    The held table holds only undecided payments' outcomes (a few), each read by key."""
    filed: list[str] = []
    for held in outcomes.held():
        try:
            row = ledger.get(held.spend_id)
        except LedgerError:
            row = None
        if row is None or row.verdict_id != held.verdict_id or row.status in _NEVER_PAID:
            outcomes.drop_held(held)
        elif row.status == "settled" and outcomes.file_held(held) == "filed":
            filed.append(f"{held.verdict_id}:{held.fact_kind}")
    return tuple(filed)
