"""A run's reported spend, read from the record of money: the wallet's ledger.

``nib runs``, ``nib show`` and ``nib report`` print what the ledger holds for a run (the
services' records, or the agent's database for a run whose wallet ran in-process), not the
figure the run process kept when it ended: a run whose wallet service was killed mid-payment
ended with only what it had seen settle, and ``nib audit reconcile`` may settle or release
its rows later. The ledger is read on every report, so the figure follows reconcile.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.config import NibSettings

__all__ = ["LEDGER", "RUN", "SpendOf", "ledger_spend"]

#: Where a reported spend was read from: the ledger, or (the ledger unreadable) the
#: figure the run process stored when it ended.
LEDGER, RUN = "ledger", "run"

#: ``run_id -> spend`` (a SpendSummary as a dict, with ``source``); None: no ledger to read,
#: or it holds no row of the run (a run of another home's wallet, or one that signed nothing).
SpendOf = Callable[[str], "dict[str, object] | None"]


def ledger_spend(settings: NibSettings) -> SpendOf:
    """A reader of each run's spend in this home's ledger; it answers None for every run
    when the ledger cannot be opened (no records yet, a database that is down)."""
    # Deferred: these cost ~900 ms to import after this module (min of 3 runs, 2 busy
    # cores); only reading a ledger needs them.
    from agent.cli.services import records_database
    from agent.loop.result import SpendSummary
    from wallet.meter import SpendMeter

    where = records_database(settings)
    if isinstance(where, Path) and not where.exists():
        return lambda run_id: None
    try:
        meter = SpendMeter(where)
    except Exception:  # an unreadable ledger leaves the stored figure, marked as the run's
        return lambda run_id: None

    def spend(run_id: str) -> dict[str, object] | None:
        try:
            usage = meter.usage(run_id)
            if not usage.gas_wei and next(meter.ledger.iter_rows(run_id, page=1), None) is None:
                return None  # the ledger never held this run: it signed nothing here
        except Exception:  # as above
            return None
        return {**SpendSummary.from_meter(usage).model_dump(), "source": LEDGER}

    return spend
