"""Per-task spend meter: atomic reservations against a cap and the live balance.

A reservation consumes the verdict and holds part of the run's cap in one database
transaction, so parallel calls (threads, tasks, processes) can never overspend. Gas
paid in wei is converted to atomic USDC at a configured rate and counts against the
same cap. Settled spend can be measured from the chain's Transfer logs.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import wallet.totals as totals
from chain.money import DEFAULT_ETH_PRICE_USDC, gas_to_usdc
from judge.storage import Database, Tx, cell_int
from wallet._store import Store, as_store
from wallet._tables import CAPS, GAS, SPENDS, USED_VERDICTS
from wallet.errors import (
    AuthorizationOutstanding,
    CapExceeded,
    InsufficientBalance,
    LedgerError,
    VerdictReplayed,
)
from wallet.journal import append, journal_spend
from wallet.ledger import COMMITTED, LIVE, OUTSTANDING, Ledger, SpendKind, SpendRow, transition_in

if TYPE_CHECKING:
    from chain.client import ChainClient



class VerdictLike(Protocol):
    """What the meter reads from a verdict (judge.verdict.Verdict satisfies it)."""

    @property
    def id(self) -> str: ...
    @property
    def payload_fingerprint(self) -> str | None: ...
    @property
    def asset(self) -> str: ...
    @property
    def recipient(self) -> str: ...
    @property
    def chain_id(self) -> int: ...


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
class RunSpend:
    """A run's money, atomic units: settled USDC, held USDC, and gas (wei and USDC)."""

    run_id: str
    settled: int
    reserved: int
    gas_wei: int
    gas_usdc: int
    #: The most pending transactions' gas can still cost (atomic USDC), held against the cap.
    gas_held: int = 0

    @property
    def spent(self) -> int:
        """Settled USDC plus gas converted to USDC."""
        return self.settled + self.gas_usdc

    @property
    def committed(self) -> int:
        """What counts against the cap: spent plus still-held reservations and gas holds."""
        return self.spent + self.reserved + self.gas_held


@dataclass(frozen=True)
class MeasuredSpend:
    """A run's settled spend per the ledger vs. per the chain's Transfer logs."""

    run_id: str
    ledger: int
    onchain: int
    missing_tx: tuple[str, ...]

    @property
    def agrees(self) -> bool:
        return self.ledger == self.onchain and not self.missing_tx


class SpendMeter:
    """Caps, reservations and settlement for spends, backed by the wallet's tables."""

    def __init__(
        self,
        db_path: str | Path | Store | Database,
        chain: ChainClient | None = None,
        *,
        eth_price_usdc: int = DEFAULT_ETH_PRICE_USDC,
        clock: Callable[[], float] = time.time,
        treasury_cap: int | None = None,
    ) -> None:
        _require_int("eth_price_usdc", eth_price_usdc, minimum=0)
        if treasury_cap is not None:
            _require_int("treasury_cap", treasury_cap, minimum=0)
        #: One cap over every run this wallet pays for (all workers), atomic USDC; None: none.
        self.treasury_cap = treasury_cap
        self.store = as_store(db_path)
        self.ledger = Ledger(self.store, clock=clock)
        self.chain = chain
        #: Whole USDC per ETH when gas counts against a cap: the one price the wallet's
        #: reservations and the loop's cap projection both use.
        self.eth_price_usdc = eth_price_usdc
        self.clock = clock

    # ------------------------------------------------------------------ reserve

    # Over 60 lines only by its docstring, the contract: every refusal, in the order the
    # one write section makes them; the body is those checks in that order (helpers below).
    def reserve(
        self,
        run_id: str,
        verdict: VerdictLike,
        amount: int,
        cap: int,
        balance: int,
        *,
        kind: SpendKind = "x402",
        note: str = "",
        gas_hold: int = 0,
        resource: str | None = None,
        authorization: tuple[str, int] | None = None,
    ) -> Reservation:
        """Consume ``verdict`` and hold ``amount`` of ``run_id``'s ``cap``, atomically.

        ``authorization`` (an EIP-3009 ``(auth_nonce, valid_before)`` about to be signed)
        inserts the row as ``signed`` with them, in the same commit: one durable write
        before the signature can leave the process instead of two. A row marked so whose
        signature is never made is conservative (held until reconciliation finds the
        authorization unused and expired).

        ``gas_hold`` (atomic USDC) is the most the transaction's gas can cost (gas limit x
        max fee, converted); it counts against the cap while the spend is pending and is
        replaced by the gas actually paid once the receipt is in.

        In one write section holding the wallet lock: mark the verdict used (VerdictReplayed if it
        was), refuse if the run's committed spend plus ``amount`` exceeds ``cap``
        (CapExceeded), refuse if every run's committed spend plus ``amount`` exceeds the
        treasury cap when one is set (CapExceeded), refuse if ``amount`` exceeds ``balance`` minus every other
        outstanding reservation in the same asset (InsufficientBalance), then insert the
        ledger row as ``reserved``. A refusal rolls everything back, the verdict included.

        ``resource`` (an x402 purchase's ``origin + path``) admits one live authorization at
        a time: while a reserved or signed row holds it, AuthorizationOutstanding is raised
        (in the same transaction, so parallel runs cannot both sign one).

        Warning: ``balance`` must be the live chain balance read just before the call; a
        stale, higher balance lets reservations exceed what the wallet holds.
        """
        _require_int("amount", amount, minimum=1)
        _require_int("cap", cap, minimum=0)
        _require_int("balance", balance, minimum=0)
        _require_int("gas_hold", gas_hold, minimum=0)
        now = self.clock()
        res = Reservation(
            id=uuid.uuid4().hex,
            run_id=run_id,
            verdict_id=verdict.id,
            kind=kind,
            asset=verdict.asset.lower(),
            amount=amount,
            recipient=verdict.recipient.lower(),
            chain_id=int(verdict.chain_id),
            created_at=now,
        )
        with self.store.transaction() as conn:
            _consume_verdict(conn, verdict.id, run_id, now)
            if resource is not None:
                _refuse_second_authorization(conn, resource, verdict.id)
            _check_run_cap(conn, run_id, cap, amount, gas_hold, verdict.id)
            conn.execute(
                f"INSERT INTO {CAPS} (run_id, cap) VALUES (?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET cap = excluded.cap",
                (run_id, cap),
            )
            if self.treasury_cap is not None:
                _check_treasury(conn, self.treasury_cap, amount + gas_hold, verdict.id)
            _check_balance(conn, res.asset, balance, amount, verdict.id)
            fingerprint = (verdict.payload_fingerprint or "").lower() or None
            _insert_spend(conn, res, fingerprint, note, gas_hold, resource, authorization)
            append(conn, "verdict", {"verdict_id": verdict.id, "used_at": now, "run_id": run_id})
            journal_spend(conn, res.id, "spend")
        return res

    # ------------------------------------------------------------------ transitions

    def mark_signed(
        self,
        res: Reservation | str,
        *,
        tx_hash: str | None = None,
        auth_nonce: str | None = None,
        valid_before: int | None = None,
        tx_nonce: int | None = None,
    ) -> SpendRow:
        """Record that a signature exists for ``res``: from now on money can move.

        For an EIP-3009 authorization pass its ``auth_nonce`` and ``valid_before``, for a
        transaction its ``tx_hash`` and ``tx_nonce``: they let reconciliation find it on
        chain, or fail it once it can no longer land.
        """
        return self.ledger.transition(
            _rid(res),
            "signed",
            tx_hash=tx_hash,
            auth_nonce=auth_nonce,
            valid_before=valid_before,
            tx_nonce=tx_nonce,
        )

    def keep_signed(self, res: Reservation | str, note: str) -> SpendRow:
        """Annotate a signed spend that stays pending because its money may still move.

        The row keeps holding its share of the cap and the balance until reconciliation
        settles it (the money moved) or fails it (the authorization expired unused). A
        row already settled or failed meanwhile is returned unchanged (that is the newer
        truth); one that was never signed raises LedgerError.
        """
        spend_id = _rid(res)
        with self.store.transaction() as conn:
            found = conn.execute(
                f"SELECT status FROM {SPENDS} WHERE id = ?", (spend_id,)
            ).fetchone()
            if found is not None and found[0] in ("reserved", "released"):
                raise LedgerError(
                    f"Ledger row {spend_id} is {found[0]!r}; keep_signed expects 'signed'. "
                    "Fix: annotate only a spend whose signature exists."
                )
            if found is None or found[0] == "signed":
                transition_in(conn, spend_id, "signed", now=self.clock(), note=note)
        return self.ledger.get(spend_id)

    def keep_payment(self, res: Reservation | str, header: tuple[str, str]) -> SpendRow:
        """Store the signed x402 payment header of ``res`` so a retry re-sends it.

        Warning: the header carries a bearer authorization; it is stored only so the same
        one (never a second) can be handed to the same seller again.

        Committed without waiting for the disk: lost in an OS crash, the row stays signed
        with no header to re-send, so no second authorization is signed for the resource
        until reconciliation settles or fails the first (fails closed).
        """
        spend_id = _rid(res)
        with self.store.transaction(durable=False) as conn:
            conn.execute(
                f"UPDATE {SPENDS} SET x402_payment = ? WHERE id = ? AND status = 'signed'",
                (json.dumps(list(header)), spend_id),
            )
            journal_spend(conn, spend_id, "payment")
        return self.ledger.get(spend_id)

    def settle(self, res: Reservation | str, tx_hash: str) -> SpendRow:
        """Record that ``res``'s money moved on chain in ``tx_hash`` (final).

        Committed without waiting for the disk: lost in an OS crash, the row stays signed,
        holding its share of the cap and the balance, until reconciliation finds the
        transfer on chain and settles it again (fails closed).
        """
        if not isinstance(tx_hash, str) or not tx_hash.startswith("0x"):
            raise LedgerError(
                f"settle needs a 0x-prefixed transaction hash; got {tx_hash!r}. Fix: pass "
                "the hash from the receipt or the seller's PAYMENT-RESPONSE."
            )
        return self.ledger.transition(_rid(res), "settled", tx_hash=tx_hash, durable=False)

    def fail(self, res: Reservation | str, note: str = "") -> SpendRow:
        """Record that ``res`` did not move money (frees its share of the cap).

        Warning: call it only when the money provably cannot move any more (the tx
        reverted or was never broadcast, the authorization expired or was cancelled);
        a signed EIP-3009 authorization can be submitted by anyone until validBefore.
        """
        return self.ledger.transition(_rid(res), "failed", note=note or None)

    def cancel(self, res: Reservation | str, tx_hash: str, gas_wei: int, note: str) -> SpendRow:
        """Record that ``res``'s x402 authorization was cancelled on chain in ``tx_hash``
        (``cancelAuthorization`` mined): the row is closed with nothing moved, and the
        cancel's gas is metered to the row's run in the same transaction.

        Warning: call it only with the receipt of a successful cancel in hand.
        """
        _require_int("gas_wei", gas_wei, minimum=0)
        spend_id = _rid(res)
        with self.store.transaction() as conn:
            found = conn.one(f"SELECT run_id FROM {SPENDS} WHERE id = ?", (spend_id,))
            if found is None:
                raise LedgerError(f"No ledger row with id {spend_id!r}; expected an x402 row.")
            self._insert_gas(conn, str(found[0]), gas_wei, spend_id, tx_hash)
            transition_in(conn, spend_id, "cancelled", now=self.clock(), tx_hash=tx_hash, note=note)
        return self.ledger.get(spend_id)

    def release(self, res: Reservation | str, note: str = "") -> SpendRow:
        """Give back an unsigned reservation's share of the cap; the verdict stays used."""
        return self.ledger.transition(_rid(res), "released", note=note or None)

    def record_gas(
        self,
        run_id: str,
        wei: int,
        *,
        spend_id: str | None = None,
        tx_hash: str | None = None,
    ) -> int:
        """Meter ``wei`` of gas for ``run_id``; returns the atomic USDC it counts as."""
        _require_int("wei", wei, minimum=0)
        with self.store.transaction() as conn:
            return self._insert_gas(conn, run_id, wei, spend_id, tx_hash)

    def _insert_gas(
        self, conn: Tx, run_id: str, wei: int, spend_id: str | None, tx_hash: str | None
    ) -> int:
        """One ``wallet_gas`` row (journaled) inside the caller's transaction; its USDC."""
        usdc = gas_to_usdc(wei, self.eth_price_usdc)
        row = {
            "id": uuid.uuid4().hex,
            "run_id": run_id,
            "spend_id": spend_id,
            "tx_hash": tx_hash.lower() if tx_hash else None,
            "wei": wei,
            "usdc": usdc,
            "created_at": self.clock(),
        }
        conn.execute(
            f"""INSERT INTO {GAS} (id, run_id, spend_id, tx_hash, wei, usdc, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)""",
            tuple(row.values()),
        )
        totals.gas_added(conn, usdc)
        append(conn, "gas", {"row": row})
        return usdc

    # ------------------------------------------------------------------ reading

    def usage(self, run_id: str) -> RunSpend:
        """The run's settled, reserved and gas totals, read in one consistent snapshot."""
        with self.store.transaction() as conn:
            settled = _sum(conn, run_id, ("settled",))
            reserved = _sum(conn, run_id, OUTSTANDING)
            gas_wei, gas_usdc = conn.one(
                f"SELECT COALESCE(SUM(wei), 0), COALESCE(SUM(usdc), 0) FROM {GAS} WHERE run_id = ?",
                (run_id,),
            ) or (0, 0)
            held = _gas_held(conn, run_id)
        return RunSpend(run_id, settled, reserved, cell_int(gas_wei), cell_int(gas_usdc), held)

    def spent(self, run_id: str) -> int:
        """Settled USDC plus metered gas (in atomic USDC) for ``run_id``."""
        return self.usage(run_id).spent

    def reserved(self, run_id: str) -> int:
        """USDC held by reserved or signed (not yet settled) spends of ``run_id``."""
        return self.usage(run_id).reserved

    def measured_spend(
        self,
        run_id: str,
        chain: ChainClient | None,
        usdc: str,
        wallet: str,
        from_block: int = 0,
        to_block: int | str = "latest",
    ) -> MeasuredSpend:
        """Compare the run's settled ledger total with the Transfer logs of its tx hashes."""
        client = chain or self.chain
        if client is None:
            raise LedgerError(
                "measured_spend needs a chain client; got none. Fix: pass chain= here or "
                "to SpendMeter(...)."
            )
        settled = [r for r in self.ledger.rows(run_id) if r.status == "settled"]
        ledger_total = sum(r.amount for r in settled)
        logs = client.transfer_logs(usdc, from_block, to_block, address=wallet)
        by_tx: dict[str, int] = {}
        for log in logs:
            if log.sender.lower() == wallet.lower():
                key = log.tx_hash.lower()
                by_tx[key] = by_tx.get(key, 0) + int(log.value)
        hashes = sorted({(r.tx_hash or "").lower() for r in settled})
        missing = tuple(h or "(no tx hash)" for h in hashes if h not in by_tx)
        onchain = sum(by_tx[h] for h in hashes if h in by_tx)
        return MeasuredSpend(run_id, ledger_total, onchain, missing)


def _rid(res: Reservation | str) -> str:
    return res if isinstance(res, str) else res.id


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


def _refuse_second_authorization(conn: Tx, resource: str, verdict_id: str) -> None:
    marks = ", ".join("?" for _ in LIVE)
    live = conn.one(
        f"SELECT id, status, valid_before, amount FROM {SPENDS} "
        f"WHERE resource = ? AND status IN ({marks}) LIMIT 1",
        (resource, *LIVE),
    )
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


def _committed(conn: Tx, run_id: str) -> int:
    """``run_id``'s spends reserved, signed or settled, gas paid, and gas still held by its
    pending spends (read through the run's indexes: a run's own rows, never the ledger's)."""
    gas = conn.scalar(f"SELECT COALESCE(SUM(usdc), 0) FROM {GAS} WHERE run_id = ?", (run_id,))
    return _sum(conn, run_id, COMMITTED) + cell_int(gas) + _gas_held(conn, run_id)


def _gas_held(conn: Tx, run_id: str) -> int:
    """The gas still held by ``run_id``'s pending spends."""
    return _sum(conn, run_id, OUTSTANDING, column="gas_hold")


def _sum(conn: Tx, run_id: str, statuses: tuple[str, ...], *, column: str = "amount") -> int:
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
            "treasury cap (NIB_TREASURY_CAP_USDC) or wait for queued work to finish.",
            limit=cap,
            observed=total + this_call,
            verdict_id=verdict_id,
        )


def _require_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LedgerError(
            f"{name} must be an int >= {minimum} in atomic units; got {value!r}. "
            "Fix: convert amounts to atomic units (USDC has 6 decimals; gas is in wei)."
        )
