"""Reserving a spend: the one write section every payment passes before it is signed.

In that section, holding the wallet lock, in this order: the verdict is marked used
(VerdictReplayed if it was), one live authorization per resource (AuthorizationOutstanding),
the run's cap (CapExceeded), the treasury cap over every run when one is set
(CapExceeded), the live balance less every other outstanding reservation in the same
asset (InsufficientBalance), then the ledger row. The caller's transaction rolls all of
it back on a refusal, the verdict included.
"""

from __future__ import annotations

from dataclasses import dataclass

import wallet.totals as totals
from judge.storage import Tx, cell_int
from wallet._tables import CAPS, GAS, SPENDS, USED_VERDICTS
from wallet.errors import (
    AuthorizationOutstanding,
    CapExceeded,
    InsufficientBalance,
    VerdictReplayed,
)
from wallet.journal import append, journal_spend
from wallet.ledger import COMMITTED, LIVE, OUTSTANDING, live_scope

__all__ = ["Reservation", "ReservationLimits", "gas_held", "run_committed", "run_total", "write_reservation"]


@dataclass(frozen=True)
class Reservation:
    """A held slice of a run's cap; ``id`` is also the ledger row id."""

    id: str
    run_id: str
    verdict_id: str
    kind: str
    asset: str
    amount: int
    recipient: str
    chain_id: int
    created_at: float


@dataclass(frozen=True)
class ReservationLimits:
    """What one reservation is held against, atomic units: the run's spend cap, the live
    ``balance`` read just before, and the treasury cap over every run (None: none)."""

    spend_cap_atomic: int
    balance: int
    treasury_cap_atomic: int | None


def write_reservation(
    conn: Tx,
    res: Reservation,
    payload_fingerprint: str | None,
    limits: ReservationLimits,
    *,
    note: str,
    gas_hold: int,
    resource: str | None,
    authorization: tuple[str, int] | None,
) -> None:
    """Consume ``res``'s verdict and insert its ledger row inside ``conn``, or refuse.

    The refusals, in order: VerdictReplayed when the verdict was used; when ``resource``
    (an x402 purchase's ``origin + path``) is given, AuthorizationOutstanding while a
    reserved or signed row holds it (in the same transaction, so parallel runs cannot both
    sign one); CapExceeded when the run's committed spend plus ``res.amount`` and
    ``gas_hold`` passes ``limits.spend_cap_atomic``, or every run's committed spend plus them passes the
    treasury cap; InsufficientBalance when ``res.amount`` passes ``limits.balance`` minus
    every other outstanding reservation in the same asset.

    ``authorization`` (an EIP-3009 ``(auth_nonce, valid_before)`` about to be signed)
    inserts the row as ``signed`` with them, in the same commit: one durable write before
    the signature can leave the process instead of two. A row marked so whose signature
    is never made is conservative (held until reconciliation finds the authorization
    unused and expired). ``gas_hold`` (atomic USDC) is the most the transaction's gas can
    cost (gas limit x max fee, converted); it counts against the cap while the spend is
    pending and is replaced by the gas actually paid once the receipt is in.
    """
    now, run_id, verdict_id = res.created_at, res.run_id, res.verdict_id
    _consume_verdict(conn, verdict_id, run_id, now)
    if resource is not None:
        _refuse_second_authorization(conn, resource, res)
    _check_run_cap(conn, run_id, limits.spend_cap_atomic, res.amount, gas_hold, verdict_id)
    conn.execute(
        f"INSERT INTO {CAPS} (run_id, cap) VALUES (?, ?) "
        "ON CONFLICT (run_id) DO UPDATE SET cap = excluded.cap",
        (run_id, limits.spend_cap_atomic),
    )
    if limits.treasury_cap_atomic is not None:
        _check_treasury(conn, limits.treasury_cap_atomic, res.amount + gas_hold, verdict_id)
    _check_balance(conn, res.asset, limits.balance, res.amount, verdict_id)
    _insert_spend(conn, res, payload_fingerprint, note, gas_hold, resource, authorization)
    append(conn, "verdict", {"verdict_id": verdict_id, "used_at": now, "run_id": run_id})
    journal_spend(conn, res.id, "spend")


def _insert_spend(
    conn: Tx,
    res: Reservation,
    payload_fingerprint: str | None,
    note: str,
    gas_hold: int,
    resource: str | None,
    authorization: tuple[str, int] | None,
) -> None:
    """The ledger row of ``res``: ``reserved``, or ``signed`` with the authorization's
    nonce and validBefore when one is about to be signed."""
    status, auth_nonce, valid_before = "reserved", None, None
    if authorization is not None:
        status, (auth_nonce, valid_before) = "signed", authorization
        auth_nonce = auth_nonce.lower()
    conn.execute(
        f"""INSERT INTO {SPENDS} (id, run_id, verdict_id, payload_fingerprint, kind,
            asset, amount, recipient, chain_id, status, tx_hash, auth_nonce,
            valid_before, created_at, updated_at, note, gas_hold, resource)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)""",
        (
            res.id,
            res.run_id,
            res.verdict_id,
            payload_fingerprint,
            res.kind,
            res.asset,
            res.amount,
            res.recipient,
            res.chain_id,
            status,
            auth_nonce,
            valid_before,
            res.created_at,
            res.created_at,
            note,
            gas_hold,
            resource,
        ),
    )
    totals.spend_moved(conn, totals.SpendShape(res.asset, res.amount, gas_hold), None, status)


def _consume_verdict(conn: Tx, verdict_id: str, run_id: str, now: float) -> None:
    """Mark the verdict used, once (VerdictReplayed when it already was)."""
    fresh = conn.execute(
        f"INSERT INTO {USED_VERDICTS} (verdict_id, used_at, run_id) VALUES (?, ?, ?) "
        "ON CONFLICT (verdict_id) DO NOTHING",
        (verdict_id, now, run_id),
    ).rowcount
    if fresh != 1:
        raise VerdictReplayed(
            f"Verdict {verdict_id} was already used; a verdict authorises one "
            "signature only. Fix: ask the judge for a new verdict.",
            verdict_id=verdict_id,
        )


def _check_run_cap(
    conn: Tx, run_id: str, cap: int, amount: int, gas_hold: int, verdict_id: str
) -> None:
    """CapExceeded when the run's committed spend plus this call (and its gas) passes ``cap``."""
    committed = _committed(conn, run_id)
    if committed + amount + gas_hold > cap:
        gas_part = f" plus up to {gas_hold} for gas" if gas_hold else ""
        raise CapExceeded(
            f"Spend cap exceeded for run {run_id}: cap {cap} atomic USDC, already "
            f"committed {committed}, this call {amount}{gas_part} would make "
            f"{committed + amount + gas_hold}. Fix: raise the task's spend cap or "
            "choose a cheaper call.",
            limit=cap,
            observed=committed + amount + gas_hold,
            verdict_id=verdict_id,
        )


def _check_balance(conn: Tx, asset: str, balance: int, amount: int, verdict_id: str) -> None:
    """InsufficientBalance when ``amount`` passes ``balance`` less every outstanding
    reservation in ``asset``."""
    held = totals.outstanding(conn, asset)
    available = balance - held
    if amount > available:
        raise InsufficientBalance(
            f"Insufficient balance for {amount} atomic units of {asset}: the wallet "
            f"holds {balance} and {held} is held by outstanding reservations, leaving "
            f"{max(available, 0)}. Fix: fund the wallet or wait for pending spends "
            "to settle.",
            limit=max(available, 0),
            observed=amount,
            verdict_id=verdict_id,
        )


def _refuse_second_authorization(conn: Tx, resource: str, res: Reservation) -> None:
    """AuthorizationOutstanding when ``res``'s task has a live authorization for
    ``resource`` paying the same address (per task and payTo: never another task's)."""
    marks = ", ".join("?" for _ in LIVE)
    where, params = live_scope((res.run_id,), res.recipient)
    live = conn.one(
        f"SELECT id, status, valid_before, amount FROM {SPENDS} "
        f"WHERE resource = ? AND status IN ({marks}){where} LIMIT 1",
        (resource, *LIVE, *params),
    )
    verdict_id = res.verdict_id
    if live is None:
        return
    spend_id, status, valid_before, amount = live
    until = f"until {valid_before}" if valid_before is not None else "until it is signed or released"
    valid_before = None if valid_before is None else cell_int(valid_before)
    raise AuthorizationOutstanding(
        f"An authorization for {resource} is still live (ledger row {spend_id}, {status}, "
        f"{amount} atomic units, valid {until}); expected none, since a second one could "
        "let the seller settle both. Nothing was signed. Fix: wait until it settles or "
        "expires (`nib audit reconcile`); a retry re-sends the same authorization.",
        ledger_id=str(spend_id),
        valid_before=valid_before,
        verdict_id=verdict_id,
    )


def run_committed(conn: Tx, run_id: str) -> int:
    """``run_id``'s committed spend (see RunSpend.committed), inside the caller's section."""
    return _committed(conn, run_id)


def _committed(conn: Tx, run_id: str) -> int:
    """``run_id``'s spends reserved, signed or settled, gas paid, and gas still held by its
    pending spends (read through the run's indexes: a run's own rows, never the ledger's)."""
    gas = conn.scalar(f"SELECT COALESCE(SUM(usdc), 0) FROM {GAS} WHERE run_id = ?", (run_id,))
    return run_total(conn, run_id, COMMITTED) + cell_int(gas) + gas_held(conn, run_id)


def gas_held(conn: Tx, run_id: str) -> int:
    """The gas still held by ``run_id``'s pending spends."""
    return run_total(conn, run_id, OUTSTANDING, column="gas_hold")


def run_total(conn: Tx, run_id: str, statuses: tuple[str, ...], *, column: str = "amount") -> int:
    """The sum of ``column`` over ``run_id``'s spends in ``statuses``."""
    marks = ", ".join("?" for _ in statuses)
    total = conn.scalar(
        f"SELECT COALESCE(SUM({column}), 0) FROM {SPENDS} WHERE run_id = ? AND status IN ({marks})",
        (run_id, *statuses),
    )
    return cell_int(total)


def _check_treasury(conn: Tx, cap: int, this_call: int, verdict_id: str) -> None:
    total = totals.committed(conn)
    if total + this_call > cap:
        raise CapExceeded(
            f"Treasury cap exceeded: cap {cap} atomic USDC over every run, already committed "
            f"{total}, this call {this_call} would make {total + this_call}. Fix: raise the "
            "treasury cap (NIB_TREASURY_CAP_ATOMIC) or wait for queued work to finish.",
            limit=cap,
            observed=total + this_call,
            verdict_id=verdict_id,
        )
