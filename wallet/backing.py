"""Whether the judge's record backs each settled spend: a settled or signed ledger row
whose verdict was not issued there, was issued for another payload or another task's run,
or was never consumed by a wallet's re-check is unbacked. ``reconcile`` lists them all;
``nib audit verify`` lists those booked under another task's run, reading no chain (this
module loads no web3, so that command does not either)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from wallet._store import Store
from wallet.ledger import Ledger, SpendRow

__all__ = ["Unbacked", "VerdictStanding", "booked_elsewhere", "unbacked_among", "unbacked_rows"]


@dataclass(frozen=True)
class Unbacked:
    """A settled spend whose verdict the judge's record does not back: it was not issued
    there, was issued for another payload, or was never consumed by a wallet's re-check."""

    ledger_id: str
    run_id: str
    verdict_id: str | None
    standing: str


#: The judge's answer on one verdict id, payload fingerprint and the run a spend is booked
#: under (``Judge.verdict_standing``): ``other-task`` when the verdict was issued to another.
VerdictStanding = Callable[[str, str | None, str | None], str]


def booked_elsewhere(location: str | Path, standing: VerdictStanding) -> tuple[str, ...]:
    """Each ledger row booked under a run that is not its verdict's task, as a problem
    (``nib audit verify``): a payment approved for one task and counted against another."""
    store = Store(location)
    try:
        return tuple(
            f"ledger row {u.ledger_id} is booked under run {u.run_id!r}, but the judge issued "
            f"its verdict {u.verdict_id} to another task"
            for u in unbacked_rows(Ledger(store), standing) if u.standing == "other-task"
        )
    finally:
        store.close()


def unbacked_rows(ledger: Ledger, standing: VerdictStanding) -> tuple[Unbacked, ...]:
    """Settled and signed rows whose verdict the judge's record does not call consumed for
    that payload and the run the row is booked under."""
    return unbacked_among(ledger.by_status("settled", "signed"), standing)


def unbacked_among(rows: Iterable[SpendRow], standing: VerdictStanding) -> tuple[Unbacked, ...]:
    """:func:`unbacked_rows` over ``rows`` (a pass from a checkpoint: the rows it read)."""
    found = []
    for row in rows:
        if row.status not in ("settled", "signed"):
            continue
        said = ("not-issued" if not row.verdict_id
                else standing(row.verdict_id, row.payload_fingerprint, row.run_id))
        if said != "consumed":
            found.append(Unbacked(row.id, row.run_id, row.verdict_id, said))
    return tuple(found)
