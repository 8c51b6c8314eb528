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
from wallet._tables import GAS, SPENDS
from wallet.errors import LedgerError
from wallet.journal import append, journal_spend
from wallet.ledger import OUTSTANDING, Ledger, SpendKind, SpendRow, transition_in
from wallet.reserving import Reservation, ReservationLimits, gas_held, run_total, write_reservation

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
        treasury_cap_atomic: int | None = None,
    ) -> None:
        _require_int("eth_price_usdc", eth_price_usdc, minimum=0)
        if treasury_cap_atomic is not None:
            _require_int("treasury_cap_atomic", treasury_cap_atomic, minimum=0)
        #: One cap over every run this wallet pays for (all workers), atomic USDC; None: none.
        self.treasury_cap_atomic = treasury_cap_atomic
        self.store = as_store(db_path)
        self.ledger = Ledger(self.store, clock=clock)
        self.chain = chain
        #: Whole USDC per ETH when gas counts against a cap: the one price the wallet's
        #: reservations and the loop's cap projection both use.
        self.eth_price_usdc = eth_price_usdc
        self.clock = clock

    # ------------------------------------------------------------------ reserve

    def reserve(
        self,
        run_id: str,
        verdict: VerdictLike,
        amount: int,
        spend_cap_atomic: int,
        balance: int,
        *,
        kind: SpendKind = "x402",
        note: str = "",
        gas_hold: int = 0,
        resource: str | None = None,
        authorization: tuple[str, int] | None = None,
    ) -> Reservation:
        """Consume ``verdict`` and hold ``amount`` of ``run_id``'s ``spend_cap_atomic``, atomically: in
        one write section, every refusal of ``wallet.reserving.write_reservation`` (its
        docstring is the contract), then the ledger row. A refusal rolls everything back,
        the verdict included.

        ``authorization`` (an EIP-3009 ``(auth_nonce, valid_before)`` about to be signed)
        inserts the row as ``signed`` with them, in the same commit. ``gas_hold`` (atomic
        USDC) is the most the transaction's gas can cost, held against the cap while the
        spend is pending. ``resource`` admits one live authorization at a time.

        Warning: ``balance`` must be the live chain balance read just before the call; a
        stale, higher balance lets reservations exceed what the wallet holds.
        """
        _require_int("amount", amount, minimum=1)
        _require_int("spend_cap_atomic", spend_cap_atomic, minimum=0)
        _require_int("balance", balance, minimum=0)
        _require_int("gas_hold", gas_hold, minimum=0)
        res = Reservation(
            id=uuid.uuid4().hex,
            run_id=run_id,
            verdict_id=verdict.id,
            kind=kind,
            asset=verdict.asset.lower(),
            amount=amount,
            recipient=verdict.recipient.lower(),
            chain_id=int(verdict.chain_id),
            created_at=self.clock(),
        )
        limits = ReservationLimits(spend_cap_atomic, balance, self.treasury_cap_atomic)
        fingerprint = (verdict.payload_fingerprint or "").lower() or None
        with self.store.transaction() as conn:
            write_reservation(
                conn, res, fingerprint, limits,
                note=note, gas_hold=gas_hold, resource=resource, authorization=authorization,
            )
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
            settled = run_total(conn, run_id, ("settled",))
            reserved = run_total(conn, run_id, OUTSTANDING)
            gas_wei, gas_usdc = conn.one(
                f"SELECT COALESCE(SUM(wei), 0), COALESCE(SUM(usdc), 0) FROM {GAS} WHERE run_id = ?",
                (run_id,),
            ) or (0, 0)
            held = gas_held(conn, run_id)
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


def _require_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LedgerError(
            f"{name} must be an int >= {minimum} in atomic units; got {value!r}. "
            "Fix: convert amounts to atomic units (USDC has 6 decimals; gas is in wei)."
        )
