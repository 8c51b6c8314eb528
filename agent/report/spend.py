"""A run's reported spend, read from the record of money: the wallet's ledger.

``nib runs``, ``nib show`` and ``nib report`` print what the ledger holds for a run (the
services' records, or the agent's database for a run whose wallet ran in-process), not the
figure the run process kept when it ended: a run whose wallet service was killed mid-payment
ended with only what it had seen settle, and ``nib audit reconcile`` may settle or release
its rows later. The ledger is read on every report, so the figure follows reconcile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from agent.config import NibSettings

__all__ = [
    "LEDGER",
    "RUN",
    "LedgerSpend",
    "LedgerState",
    "SpendOf",
    "ledger_spend",
    "reported_spend",
]

#: Where a reported spend was read from: the ledger, or (the ledger unreadable) the
#: figure the run process stored when it ended.
LEDGER, RUN = "ledger", "run"

LedgerState = Literal["held", "unsigned", "unreadable"]
"""What the ledger says of one run. ``held``: it holds the run's rows (payments, gas), and
the spend is theirs. ``unsigned``: it was read and holds no row of the run: the run signed
nothing, so it spent nothing. ``unreadable``: it could not be read (missing, or its
database refused); the spend falls back to the figure the run stored."""


@dataclass(frozen=True)
class LedgerSpend:
    """One run's spend as the ledger shows it.

    ``spend``: SpendSummary fields with ``source`` (zeros when ``unsigned``; None when
    ``unreadable``). ``problem``: when ``unreadable``, what was found and the fix."""

    state: LedgerState
    spend: dict[str, object] | None = None
    problem: str = ""


#: ``run_id -> what the ledger says of that run``.
SpendOf = Callable[[str], LedgerSpend]


def ledger_spend(settings: NibSettings) -> SpendOf:
    """A reader of each run's spend in this home's ledger. A ledger that cannot be opened
    (its file gone, a database that is down) answers ``unreadable`` for every run, naming
    what was found and the fix; a readable ledger with no row of a run, ``unsigned``."""
    # Deferred: these cost ~900 ms to import after this module (min of 3 runs, 2 busy
    # cores); only reading a ledger needs them.
    from agent.cli.services import records_database
    from agent.loop.result import SpendSummary
    from wallet.meter import SpendMeter

    where = records_database(settings)
    if isinstance(where, Path) and not where.exists():
        missing = LedgerSpend(
            "unreadable",
            problem=f"no ledger at {where}, where this home's records are kept; expected "
            "the wallet's database there. Fix: restore that file, or run nib with the "
            "NIB_HOME the run ran in",
        )
        return lambda run_id: missing
    try:
        meter = SpendMeter(where)
    except Exception as exc:  # the stored figure stands in, marked as the run's
        closed = LedgerSpend("unreadable", problem=_unread(where, "opened", exc))
        return lambda run_id: closed

    def spend(run_id: str) -> LedgerSpend:
        try:
            usage = meter.usage(run_id)
            held = usage.gas_wei or next(meter.ledger.iter_rows(run_id, page=1), None)
        except Exception as exc:  # as above
            return LedgerSpend("unreadable", problem=_unread(where, "read", exc))
        summary = {**SpendSummary.from_meter(usage).model_dump(), "source": LEDGER}
        return LedgerSpend("held" if held else "unsigned", summary)

    return spend


def _unread(where: str | Path, how: str, exc: Exception) -> str:
    from judge.storage import describe  # a URL's password masked

    return (
        f"the ledger at {describe(where)} could not be {how} ({type(exc).__name__}: "
        f"{str(exc)[:200]}); expected the wallet's database. Fix: check that it is up and "
        "readable by you (NIB_DATABASE_URL, or the file's permissions), then `nib audit "
        "verify`"
    )


def reported_spend(stored: Mapping[str, object], reading: LedgerSpend) -> dict[str, object]:
    """The spend to report for a run: the ledger's (``ledger`` says what it held), else the
    figure the run stored (``source`` ``run``), with ``ledger_problem`` saying why.

    ``stored`` is the spend in the run's own result. A ledger that holds no row of a run
    whose own figure shows money moved has not seen its wallet (another home's ledger):
    the run's figure is reported, not a spend of nothing."""
    moved = any(stored.get(k) for k in ("usdc_atomic", "gas_wei", "outstanding_atomic"))
    if reading.state == "held" or (reading.state == "unsigned" and not moved):
        return {**(reading.spend or {}), "ledger": reading.state}
    problem = reading.problem or (
        "the ledger holds no row of this run, whose own result records money moved; its "
        "wallet kept another ledger. Fix: `nib audit --run RUN` with the NIB_HOME it ran in"
    )
    return {**stored, "source": RUN, "ledger": reading.state, "ledger_problem": problem}
