"""The spend ledger: one row per audited spend, from reservation to settlement.

Tables (owned by the wallet, created idempotently):

``wallet_spends``: id, run_id, verdict_id, payload_fingerprint, kind, asset, amount
(atomic units), recipient, chain_id, status, tx_hash, auth_nonce, created_at,
updated_at (unix seconds), note, valid_before (an x402 authorization's validBefore, unix
seconds; NULL for other kinds and for rows written before the column existed), gas_hold,
resource (an x402 purchase's ``origin + path``: at most one live authorization each) and
x402_payment (the signed payment header, so a retry re-sends it instead of signing anew)
and tx_nonce (a signed transfer's transaction nonce; NULL for x402 and older rows).
``wallet_used_verdicts``: verdict_id (primary key), used_at, run_id.
``wallet_gas``: id, run_id, spend_id, tx_hash, wei, usdc (atomic, rounded up), created_at.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from judge.storage import Database, Tx, cell_int
from wallet._store import Store, as_store
from wallet._tables import GAS, SPENDS, USED_VERDICTS
from wallet.errors import LedgerError
from wallet.journal import journal_spend
from wallet.totals import SpendShape, hold_moved, spend_moved

SpendKind = Literal["x402", "transfer", "contract"]
"""x402: an EIP-3009 authorization paid to a seller; transfer: a USDC transfer tx;
contract: any other contract call."""

SpendStatus = Literal["reserved", "signed", "settled", "failed", "released", "cancelled"]
"""reserved: cap and balance held, nothing signed yet.
signed: a signature exists; money can move (holds the cap until settled or failed).
settled: the money moved on chain (tx hash known).
failed: signed or sent but provably did not move money, and never will (reverted, never
broadcast, authorization expired unused).
released: reserved and never signed; frees the cap, the verdict stays used.
cancelled: an x402 authorization the wallet cancelled on chain (``cancelAuthorization``
mined in ``tx_hash``) before anyone used it: it moved no money and never can."""

SPEND_STATUSES: tuple[str, ...] = get_args(SpendStatus)
#: Statuses that count against a run's cap.
COMMITTED: tuple[str, ...] = ("reserved", "signed", "settled")
#: Statuses whose money may still leave the wallet (they hold balance).
OUTSTANDING: tuple[str, ...] = ("reserved", "signed")
#: Statuses of a live authorization: another one for the same resource is never signed.
LIVE: tuple[str, ...] = OUTSTANDING

_TRANSITIONS: dict[str, frozenset[str]] = {
    "reserved": frozenset({"signed", "released", "failed"}),
    "signed": frozenset({"settled", "failed", "cancelled"}),
    # A row marked failed (or cancelled) whose money turns up on chain is corrected by
    # reconciliation.
    "failed": frozenset({"settled"}),
    # A settled (or cancelled) row whose transaction the chain no longer has (a devnet
    # restarted from an older state, a reorganisation) is reopened by reconciliation: its
    # signature can move money again until the chain decides (used again, cancelled,
    # expired).
    "cancelled": frozenset({"settled", "signed"}),
    "settled": frozenset({"signed"}),
    "released": frozenset(),
}


@dataclass(frozen=True)
class SpendRow:
    """One ledger row, as stored."""

    id: str
    run_id: str
    verdict_id: str | None
    payload_fingerprint: str | None
    kind: str
    asset: str
    amount: int
    recipient: str
    chain_id: int
    status: str
    tx_hash: str | None
    auth_nonce: str | None
    created_at: float
    updated_at: float
    note: str
    valid_before: int | None = None
    #: Most the transaction's gas can cost (atomic USDC), held against the cap while pending.
    gas_hold: int = 0
    #: What an x402 authorization buys (``origin + path``); one live authorization each.
    resource: str | None = None
    #: The signed payment header (JSON ``[name, value]``): a bearer authorization until
    #: valid_before, so it is never shown (repr, ``to_dict``) and only re-sent to its seller.
    x402_payment: str | None = field(default=None, repr=False)
    #: A signed transfer's transaction nonce: once the chain has used it for another
    #: transaction, this one can never land (reconcile fails the row).
    tx_nonce: int | None = None

    @classmethod
    def from_row(cls, row: dict[str, object]) -> SpendRow:
        # Our own table's columns: the schema types every field.
        return cls(**_known(cls, row))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, object]:
        """A JSON-serialisable dict (for ``nib audit --json`` and events), without the
        signed payment header."""
        out = dict(self.__dict__)
        out.pop("x402_payment", None)
        return out


@dataclass(frozen=True)
class GasRow:
    """Gas paid by the wallet, in wei and converted to atomic USDC (rounded up)."""

    id: str
    run_id: str
    spend_id: str | None
    tx_hash: str | None
    wei: int
    usdc: int
    created_at: float


class Ledger:
    """Read access to the wallet's tables, plus the status transitions the meter makes."""

    def __init__(
        self, db: str | Path | Store | Database, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = as_store(db)
        self.clock = clock

    # ------------------------------------------------------------------ queries

    def rows(self, run_id: str | None = None) -> list[SpendRow]:
        """All spend rows (of one run when ``run_id`` is given), oldest first."""
        return list(self.iter_rows(run_id))

    def iter_rows(self, run_id: str | None = None, *, page: int = 500) -> Iterator[SpendRow]:
        """The rows of :meth:`rows`, read ``page`` at a time (keyset on insertion order), so
        a reader of a large ledger holds one page in memory, never the whole table."""
        after: tuple[object, object] | None = None
        while True:
            where = ["run_id = ?"] if run_id is not None else []
            params: list[object] = [run_id] if run_id is not None else []
            if after is not None:
                where.append("(created_at > ? OR (created_at = ? AND rowid > ?))")
                params.extend([after[0], after[0], after[1]])
            clause = f" WHERE {' AND '.join(where)}" if where else ""
            found = self.store.query(
                f"SELECT *, rowid AS row_position FROM {SPENDS}{clause} "
                f"ORDER BY created_at, rowid LIMIT {int(page)}",
                tuple(params),
            )
            yield from (SpendRow.from_row(r) for r in found)
            if len(found) < page:
                return
            after = (found[-1]["created_at"], found[-1]["row_position"])

    def by_status(self, *statuses: str, run_id: str | None = None) -> list[SpendRow]:
        """Rows whose status is one of ``statuses``."""
        for status in statuses:
            _check_status(status)
        return [r for r in self.rows(run_id) if r.status in statuses]

    def get(self, spend_id: str) -> SpendRow:
        """The row ``spend_id``; raises LedgerError if there is none."""
        found = self.store.query(f"SELECT * FROM {SPENDS} WHERE id = ?", (spend_id,))
        if not found:
            raise LedgerError(
                f"No ledger row with id {spend_id!r}; expected an id returned by "
                "SpendMeter.reserve. Fix: pass the Reservation (or its id) you were given."
            )
        return SpendRow.from_row(found[0])

    def find_tx(self, tx_hash: str) -> list[SpendRow]:
        """Rows recorded with ``tx_hash`` (case-insensitive)."""
        found = self.store.query(
            f"SELECT * FROM {SPENDS} WHERE lower(tx_hash) = ?", (tx_hash.lower(),)
        )
        return [SpendRow.from_row(r) for r in found]

    def live_for(
        self, resource: str, *, runs: Collection[str] | None = None, recipient: str | None = None
    ) -> SpendRow | None:
        """The reserved or signed x402 row for ``resource``, if one is live: of one of
        ``runs`` (tasks) and paying ``recipient`` when given (the one-live rule holds per
        task and payTo: a task's row never holds up another task's purchase)."""
        marks = ", ".join("?" for _ in LIVE)
        where, params = live_scope(runs, recipient)
        found = self.store.query(
            f"SELECT * FROM {SPENDS} WHERE resource = ? AND status IN ({marks}){where} "
            "ORDER BY created_at, rowid LIMIT 1",
            (resource, *LIVE, *params),
        )
        return SpendRow.from_row(found[0]) if found else None

    def used_verdicts(self) -> list[dict[str, object]]:
        """Rows of ``wallet_used_verdicts`` (verdict_id, used_at, run_id)."""
        return self.store.query(f"SELECT * FROM {USED_VERDICTS} ORDER BY used_at")

    def is_used(self, verdict_id: str) -> bool:
        found = self.store.query(
            f"SELECT 1 FROM {USED_VERDICTS} WHERE verdict_id = ?", (verdict_id,)
        )
        return bool(found)

    def gas_rows(self, run_id: str | None = None) -> list[GasRow]:
        if run_id is None:
            found = self.store.query(f"SELECT * FROM {GAS} ORDER BY created_at, rowid")
        else:
            found = self.store.query(
                f"SELECT * FROM {GAS} WHERE run_id = ? ORDER BY created_at, rowid", (run_id,)
            )
        # Our own table's columns: the schema types every field.
        return [GasRow(**_known(GasRow, r)) for r in found]  # type: ignore[arg-type]

    # ------------------------------------------------------------------ transitions

    def transition(
        self,
        spend_id: str,
        to: SpendStatus,
        *,
        tx_hash: str | None = None,
        auth_nonce: str | None = None,
        valid_before: int | None = None,
        note: str | None = None,
        tx_nonce: int | None = None,
        durable: bool = True,
    ) -> SpendRow:
        """Move row ``spend_id`` to status ``to`` atomically; refuse illegal transitions.

        ``to`` equal to the current status is allowed: it only records the other fields
        (a note on a row that stays pending, for instance). ``durable=False``: see
        ``Store.transaction`` (only for a transition whose loss leaves the row holding).
        """
        with self.store.transaction(durable=durable) as conn:
            transition_in(
                conn,
                spend_id,
                to,
                now=self.clock(),
                tx_hash=tx_hash,
                auth_nonce=auth_nonce,
                valid_before=valid_before,
                note=note,
                tx_nonce=tx_nonce,
            )
        return self.get(spend_id)


def transition_in(
    conn: Tx,
    spend_id: str,
    to: str,
    *,
    now: float,
    tx_hash: str | None = None,
    auth_nonce: str | None = None,
    valid_before: int | None = None,
    note: str | None = None,
    tx_nonce: int | None = None,
) -> None:
    """Apply one status transition inside the caller's open transaction."""
    _check_status(to)
    cur = conn.execute(
        f"SELECT status, asset, amount, gas_hold FROM {SPENDS} WHERE id = ?", (spend_id,)
    )
    found = cur.fetchone()
    if found is None:
        raise LedgerError(
            f"No ledger row with id {spend_id!r}; expected an id returned by "
            "SpendMeter.reserve. Fix: pass the Reservation (or its id) you were given."
        )
    current = str(found[0])
    if to != current and to not in _TRANSITIONS[current]:
        allowed = ", ".join(sorted(_TRANSITIONS[current])) or "none (final)"
        raise LedgerError(
            f"Ledger row {spend_id} is {current!r}; cannot move it to {to!r}. "
            f"Allowed from {current!r}: {allowed}. Fix: check the spend's state before "
            "settling, failing or releasing it."
        )
    sets = ["status = ?", "updated_at = ?"]
    params: list[object] = [to, now]
    if tx_hash is not None:
        sets.append("tx_hash = ?")
        params.append(tx_hash.lower())
    if auth_nonce is not None:
        sets.append("auth_nonce = ?")
        params.append(auth_nonce.lower())
    if valid_before is not None:
        sets.append("valid_before = ?")
        params.append(int(valid_before))
    if tx_nonce is not None:
        sets.append("tx_nonce = ?")
        params.append(int(tx_nonce))
    if note is not None:
        sets.append("note = CASE WHEN note = '' THEN ? ELSE note || '; ' || ? END")
        params.extend([note, note])
    params.append(spend_id)
    conn.execute(f"UPDATE {SPENDS} SET {', '.join(sets)} WHERE id = ?", params)
    shape = SpendShape(str(found[1]), cell_int(found[2]), cell_int(found[3] or 0))
    spend_moved(conn, shape, current, to)
    journal_spend(conn, spend_id)


def live_scope(runs: Collection[str] | None, recipient: str | None) -> tuple[str, tuple[str, ...]]:
    """The SQL (`` AND ...``) and parameters that narrow live rows to ``runs`` and
    ``recipient`` (either None: not narrowed by it; no runs at all: no row)."""
    where = ""
    params: tuple[str, ...] = ()
    if runs is not None:
        names = tuple(sorted(runs)) or ("",)
        where += f" AND run_id IN ({', '.join('?' for _ in names)})"
        params += names
    if recipient is not None:
        where += " AND recipient = ?"
        params += (recipient.lower(),)
    return where, params


def hold_gas_in(conn: Tx, spend_id: str, gas_hold: int, *, now: float) -> None:
    """Set row ``spend_id``'s gas hold (atomic USDC held against its run's cap while it is
    outstanding) inside the caller's open transaction, moving the totals and journaling it."""
    found = conn.one(f"SELECT status, gas_hold FROM {SPENDS} WHERE id = ?", (spend_id,))
    if found is None:
        raise LedgerError(f"No ledger row with id {spend_id!r}; expected a row to hold gas for.")
    if cell_int(found[1] or 0) == gas_hold:
        return
    conn.execute(f"UPDATE {SPENDS} SET gas_hold = ?, updated_at = ? WHERE id = ?",
                 (gas_hold, now, spend_id))
    hold_moved(conn, str(found[0]), gas_hold - cell_int(found[1] or 0))
    journal_spend(conn, spend_id)


def _known(cls: type, row: dict[str, object]) -> dict[str, object]:
    """``row`` without columns ``cls`` does not declare (PostgreSQL's explicit rowid)."""
    names = cls.__dataclass_fields__  # type: ignore[attr-defined]
    return {k: v for k, v in row.items() if k in names}


def _check_status(status: str) -> None:
    if status not in SPEND_STATUSES:
        raise LedgerError(
            f"Unknown spend status {status!r}; expected one of {', '.join(SPEND_STATUSES)}."
        )
