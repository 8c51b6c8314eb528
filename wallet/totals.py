"""Running totals over the whole ledger, kept in the same transaction as each write.

The wallet refuses a reservation on two sums over every run: the treasury's committed
spend and the spend still outstanding per asset (held against the live balance). Summing
``wallet_spends`` for them costs one row read per row ever written (232 ms per payment at
a million rows); a counter row per sum, moved by exactly the rows each write changes, costs
one primary-key read at any size. Every write to a spend's status, amount or gas hold goes
through :func:`spend_moved` (``wallet.meter`` inserts, ``wallet.ledger`` transitions) and
every gas row through :func:`gas_added`; ``nib audit verify`` recounts them from the rows
(:func:`recount`) and names a counter that drifted.
"""

from __future__ import annotations

from dataclasses import dataclass

from judge.storage import Tx, cell_int
from wallet._tables import GAS, SPENDS, TOTALS

__all__ = [
    "SpendShape",
    "check",
    "committed",
    "gas_added",
    "hold_moved",
    "outstanding",
    "rebuild",
    "recount",
    "spend_moved",
]

#: Statuses that count against a cap (the ledger's COMMITTED; kept here to avoid a cycle).
_COMMITTED = ("reserved", "signed", "settled")
#: Statuses whose money may still leave the wallet (the ledger's OUTSTANDING).
_OUTSTANDING = ("reserved", "signed")
#: The treasury's counter: every run's committed spend, gas paid and gas still held.
COMMITTED_KEY = "committed"


def _outstanding_key(asset: str) -> str:
    return f"outstanding:{asset.lower()}"


@dataclass(frozen=True)
class SpendShape:
    """What a ledger row contributes to the totals: its asset, amount and gas hold."""

    asset: str
    amount: int
    gas_hold: int


def _contribution(shape: SpendShape, status: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    if status in _COMMITTED:
        out[COMMITTED_KEY] = shape.amount
    if status in _OUTSTANDING:
        out[COMMITTED_KEY] = out.get(COMMITTED_KEY, 0) + shape.gas_hold
        out[_outstanding_key(shape.asset)] = shape.amount
    return out


def spend_moved(tx: Tx, shape: SpendShape, before: str | None, after: str) -> None:
    """Move the totals for one row going from status ``before`` (None: just inserted) to
    ``after``, inside the caller's write section (the same one that writes the row)."""
    old, new = _contribution(shape, before), _contribution(shape, after)
    for key in old.keys() | new.keys():
        delta = new.get(key, 0) - old.get(key, 0)
        if delta:
            _add(tx, key, delta)


def hold_moved(tx: Tx, status: str, delta: int) -> None:
    """Move the treasury's counter for a row in ``status`` whose gas hold changed by
    ``delta`` (a cancel's gas held against its run's cap, or given back)."""
    if delta and status in _OUTSTANDING:
        _add(tx, COMMITTED_KEY, delta)


def gas_added(tx: Tx, usdc: int) -> None:
    """Count ``usdc`` of gas paid against the treasury, inside the gas row's write section."""
    if usdc:
        _add(tx, COMMITTED_KEY, usdc)


def committed(tx: Tx) -> int:
    """Every run's committed spend (spends, gas paid, gas held): one primary-key read."""
    return _read(tx, COMMITTED_KEY)


def outstanding(tx: Tx, asset: str) -> int:
    """What reserved and signed spends in ``asset`` still hold: one primary-key read."""
    return _read(tx, _outstanding_key(asset))


def recount(tx: Tx) -> dict[str, int]:
    """The totals summed from the rows themselves (a full scan: migration and verify only)."""
    out: dict[str, int] = {COMMITTED_KEY: 0}
    committed_marks = ", ".join(f"'{s}'" for s in _COMMITTED)
    outstanding_marks = ", ".join(f"'{s}'" for s in _OUTSTANDING)
    out[COMMITTED_KEY] += cell_int(
        tx.scalar(
            f"SELECT COALESCE(SUM(amount), 0) FROM {SPENDS} WHERE status IN ({committed_marks})"
        )
    )
    for asset, amount, gas_hold in tx.execute(
        f"SELECT asset, COALESCE(SUM(amount), 0), COALESCE(SUM(gas_hold), 0) FROM {SPENDS} "
        f"WHERE status IN ({outstanding_marks}) GROUP BY asset"
    ).fetchall():
        out[_outstanding_key(str(asset))] = cell_int(amount)
        out[COMMITTED_KEY] += cell_int(gas_hold)
    out[COMMITTED_KEY] += cell_int(tx.scalar(f"SELECT COALESCE(SUM(usdc), 0) FROM {GAS}"))
    return out


def rebuild(tx: Tx) -> None:
    """Set every counter to :func:`recount` (the migration that adds them; bulk loads)."""
    tx.execute(f"DELETE FROM {TOTALS}")
    for key, value in recount(tx).items():
        tx.execute(f"INSERT INTO {TOTALS} (name, value) VALUES (?, ?)", (key, value))


def check(tx: Tx) -> list[str]:
    """Each counter that differs from the rows it sums, named with both values."""
    want = recount(tx)
    rows = tx.execute(f"SELECT name, value FROM {TOTALS}").fetchall()
    have = {str(r[0]): cell_int(r[1]) for r in rows}
    problems = []
    for key in sorted(want.keys() | have.keys()):
        if want.get(key, 0) != have.get(key, 0):
            problems.append(
                f"running total {key!r} is {have.get(key, 0)} in {TOTALS}, the rows sum to "
                f"{want.get(key, 0)} (edited outside the wallet; the caps check against it)"
            )
    return problems


def _read(tx: Tx, key: str) -> int:
    found = tx.scalar(f"SELECT value FROM {TOTALS} WHERE name = ?", (key,))
    return 0 if found is None else cell_int(found)


def _add(tx: Tx, key: str, delta: int) -> None:
    tx.execute(
        f"INSERT INTO {TOTALS} (name, value) VALUES (?, ?) "
        f"ON CONFLICT (name) DO UPDATE SET value = {TOTALS}.value + excluded.value",
        (key, delta),
    )
