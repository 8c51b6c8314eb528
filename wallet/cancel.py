"""Ending an abandoned x402 authorization: settled, expired, or cancelled on chain.

A signed EIP-3009 authorization is a bearer instrument until ``validBefore``: a seller
that took it and did not deliver can keep it and settle whenever it likes. When a
purchase is abandoned (an error after payment, no answer, the run stopped), the wallet
alone decides what became of it, from the chain: used (the seller took the money: the
row is settled, paid for nothing), expired unused (failed), or still open, in which case
it signs an EIP-3009 ``CancelAuthorization`` and submits ``cancelAuthorization`` itself,
so the token refuses the authorization for good (the row is ``cancelled`` with the
cancel's transaction, its gas metered to the row's run). If the seller's settlement wins
the race, the cancel reverts and the row is settled.

Written against the EIP-3009 interface (the token's own ``name()``/``version()`` domain,
``authorizationState``, ``AuthorizationUsed``/``AuthorizationCanceled``), which Circle's
FiatTokenV2 and the devnet's TestUSDC share.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol

from eth_account.messages import encode_typed_data
from eth_utils import keccak
from web3.exceptions import Web3RPCError

from chain.money import ATOMIC_PER_USDC, WEI_PER_ETH, gas_to_usdc
from chain.usdc import cancel_authorization_calldata, cancel_authorization_typed_data, token_domain
from judge.storage import MutexTimeout, cell_int
from wallet._tables import CAPS, SPENDS
from wallet.errors import CancelOverCap, LedgerError, SendFailed
from wallet.ledger import SpendRow, hold_gas_in
from wallet.nonces import wait_for_lower_nonces
from wallet.reconcile import authorization_ended_in, authorization_expired
from wallet.reserving import run_committed

if TYPE_CHECKING:
    from chain.client import ChainClient
    from wallet.keystore import KeyHandle
    from wallet.meter import SpendMeter
    from wallet.nonces import NonceManager

__all__ = ["CANCEL_GAS_HEADROOM", "PAID_FOR_NOTHING", "abandon_authorization"]

log = logging.getLogger(__name__)

#: The cancel's gas limit over the node's estimate (the estimate is exact on a quiet chain).
CANCEL_GAS_HEADROOM = Decimal("1.2")
#: How long a second abandon of the same row waits for the first to finish.
_TURN_S = 60.0
#: The words a settled row's note carries when the seller took the money for nothing.
PAID_FOR_NOTHING = "paid for nothing"


class Wallet(Protocol):
    """What ending an authorization uses of the wallet (``wallet.signer.Wallet``)."""

    @property
    def usdc(self) -> str: ...
    @property
    def chain(self) -> ChainClient: ...
    @property
    def meter(self) -> SpendMeter: ...
    @property
    def nonces(self) -> NonceManager: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def receipt_timeout_s(self) -> float: ...
    @property
    def address(self) -> str: ...

    def settle(self, signed: SpendRow, tx_hash: str) -> None: ...

    def _emit(self, name: str, data: dict[str, object]) -> None: ...


@dataclass(frozen=True)
class _Cancel:
    """A mined cancel: its transaction, whether it succeeded, and the gas it cost."""

    tx_hash: str
    ok: bool
    gas_wei: int


def abandon_authorization(wallet: Wallet, key: KeyHandle, spend_id: str, why: str) -> SpendRow:
    """SPENDS GAS, MOVES NO USDC: end the x402 authorization of ledger row ``spend_id``,
    whose purchase was abandoned for ``why``. Returns the row as it ends:

    - ``settled`` (note: paid for nothing): the chain shows the authorization used;
    - ``failed``: it expired unused on the chain's and the wall clock;
    - ``cancelled``: ``cancelAuthorization`` mined (row's ``tx_hash``; gas metered);
    - ``signed`` (annotated): the cancel could not be sent or mined; reconcile decides.

    A row that is no longer ``signed`` is returned as it is. The cancel's gas limit x max
    fee fits in what is left of the run's cap (its fee is lowered to fit, and it is not
    sent, CancelOverCap in the row's note, when even the base fee would not fit), and is
    held against the cap (the row's gas hold) from that check on, in the same write as the
    check: whatever the run signs while the cancel waits for its nonce's turn sees that
    room taken, so a cancel never takes a task past its cap. The hold is given back when
    nothing was broadcast, and ends when the row does (its gas then metered as paid).
    """
    row = wallet.meter.ledger.get(spend_id)
    if row.kind != "x402" or not row.auth_nonce:
        raise LedgerError(
            f"Ledger row {spend_id} is a {row.kind!r} spend without an authorization nonce; "
            "expected an x402 row. Fix: abandon only an x402 purchase's row."
        )
    try:
        with wallet.meter.store.db.mutex(f"wallet-cancel:{spend_id}", timeout_s=_TURN_S):
            return _abandon(wallet, key, wallet.meter.ledger.get(spend_id), why)
    except MutexTimeout:
        return wallet.meter.ledger.get(spend_id)


def _abandon(wallet: Wallet, key: KeyHandle, row: SpendRow, why: str) -> SpendRow:
    if row.status != "signed":
        return row
    ended = _ended(wallet, row, why)
    if ended is not None:
        return ended
    try:
        with wallet.meter.store.db.mutex(f"wallet-cancel-run:{row.run_id}", timeout_s=_TURN_S):
            return _cancel(wallet, key, row, why)
    except MutexTimeout:
        return wallet.meter.ledger.get(row.id)


def _cancel(wallet: Wallet, key: KeyHandle, row: SpendRow, why: str) -> SpendRow:
    """Send the cancel and record what became of it (the run's cancel turn held)."""
    try:
        cancel = _send_cancel(wallet, key, row)
    except Exception as exc:  # used meanwhile (the estimate reverts), no ETH, RPC down, a gap
        if not isinstance(exc, _MaybeSent):
            _hold(wallet, row.id, 0)  # nothing was broadcast: the room is the run's again
        ended = _ended(wallet, row, why)
        if ended is not None:
            return ended
        note = f"abandoned ({why}); cancel not sent ({type(exc).__name__}: {str(exc)[:160]})"
        wallet.meter.keep_signed(row.id, note)
        log.warning("cancel of ledger row %s not sent: %s", row.id, exc)
        return wallet.meter.ledger.get(row.id)
    if cancel.ok:
        note = f"abandoned ({why}); authorization cancelled on chain in {cancel.tx_hash}"
        done = wallet.meter.cancel(row.id, cancel.tx_hash, cancel.gas_wei, note)
        wallet._emit("wallet.cancelled", {**_event(row), "tx_hash": cancel.tx_hash,
                                          "gas_wei": cancel.gas_wei, "why": why})
        return done
    # Reverted: someone used (or cancelled) the nonce first. Its gas is spent all the same.
    wallet.meter.record_gas(row.run_id, cancel.gas_wei, spend_id=row.id, tx_hash=cancel.tx_hash)
    _hold(wallet, row.id, 0)  # the gas is metered as paid now
    return _ended(wallet, row, why) or wallet.meter.ledger.get(row.id)


def _ended(wallet: Wallet, row: SpendRow, why: str) -> SpendRow | None:
    """The row closed from what the chain already shows (used, cancelled, expired), or
    None while the authorization is open. The chain's time is read first: unused at a
    block already past validBefore means unused for good."""
    chain_time = wallet.chain.block_timestamp("latest")
    nonce = str(row.auth_nonce)
    ended = authorization_ended_in(wallet.chain, wallet.usdc, wallet.address, nonce)
    if ended is not None and ended[0] == "used":
        wallet.settle(row, ended[1])
        note = (
            f"abandoned ({why}), but the authorization was used on chain in {ended[1]}: the "
            f"seller took the money without delivering ({PAID_FOR_NOTHING})"
        )
        wallet.meter.ledger.transition(row.id, "settled", note=note)
        return wallet.meter.ledger.get(row.id)
    if ended is not None:
        note = f"abandoned ({why}); authorization found cancelled on chain in {ended[1]}"
        return wallet.meter.ledger.transition(row.id, "cancelled", tx_hash=ended[1], note=note)
    if row.valid_before is not None and authorization_expired(
        row.valid_before, chain_time=chain_time, wall_time=wallet.clock()
    ):
        note = f"abandoned ({why}); authorization expired unused at {row.valid_before}"
        failed = wallet.meter.fail(row.id, note)
        wallet._emit("wallet.failed", {**_event(row), "note": note})
        return failed
    return None


def _send_cancel(wallet: Wallet, key: KeyHandle, row: SpendRow) -> _Cancel:
    """Sign ``CancelAuthorization(wallet, nonce)`` and submit ``cancelAuthorization`` from
    the wallet's own address; wait for the receipt. Raises when nothing was mined."""
    w3, usdc, sender = wallet.chain.w3, wallet.usdc, wallet.address
    name, version = token_domain(w3, usdc)
    nonce = bytes.fromhex(str(row.auth_nonce).removeprefix("0x"))
    typed = cancel_authorization_typed_data(
        name=name, version=version, chain_id=wallet.chain.chain_id(),
        verifying_contract=usdc, authorizer=sender, nonce=nonce,
    )
    signable = encode_typed_data(full_message=typed)
    digest = keccak(b"\x19" + signable.version + signable.header + signable.body)
    sig = key._unsafe_sign_digest(digest)
    data = cancel_authorization_calldata(sender, nonce, sig.v, sig.r, sig.s)
    # A nonce already used or cancelled makes the estimate revert: nothing is sent.
    estimate = int(w3.eth.estimate_gas({"from": sender, "to": usdc, "data": data}))  # type: ignore[typeddict-item]
    priority = int(w3.eth.max_priority_fee)
    base = int(w3.eth.get_block("latest").get("baseFeePerGas", 0))
    gas = int((Decimal(estimate) * CANCEL_GAS_HEADROOM).to_integral_value("ROUND_CEILING"))
    chain_id = wallet.chain.chain_id()
    key.check_chain(chain_id)
    max_fee = _hold_within_cap(wallet, row, gas, base + priority, 2 * base + priority)
    n = wallet.nonces.allocate()
    try:
        tx: dict[str, object] = {
            "type": 2, "chainId": chain_id, "to": usdc,
            "value": 0, "data": data, "nonce": n,
            "gas": gas, "maxFeePerGas": max_fee, "maxPriorityFeePerGas": priority,
        }
        signed = key._unsafe_sign_transaction(tx)
        gap, waiting = wait_for_lower_nonces(wallet.nonces, n)
        if gap or waiting:
            raise SendFailed(
                f"the cancel's nonce {n} sits above numbers not yet sent ({gap or waiting}); "
                "expected none. Nothing was broadcast. Fix: `nib audit reconcile` later."
            )
        tx_hash = "0x" + bytes(w3.eth.send_raw_transaction(signed.raw_transaction)).hex()
    except Web3RPCError as exc:
        wallet.nonces.release(n)
        raise SendFailed(f"the node refused the cancel: {str(exc)[:200]}") from exc
    except BaseException:
        wallet.nonces.release(n)
        raise
    wallet.nonces.confirm(n, tx_hash)
    try:
        receipt = w3.eth.wait_for_transaction_receipt(
            tx_hash, timeout=wallet.receipt_timeout_s, poll_latency=0.05  # type: ignore[arg-type]
        )
    except Exception as exc:  # it may still be mined: its gas stays held
        raise _MaybeSent(f"no receipt for the cancel {tx_hash}: {str(exc)[:160]}") from exc
    gas_wei = int(receipt["gasUsed"]) * int(receipt.get("effectiveGasPrice", 0))
    return _Cancel(tx_hash, int(receipt["status"]) == 1, gas_wei)


class _MaybeSent(SendFailed):
    """The cancel was broadcast and no receipt came: it may still be mined."""


def _hold(wallet: Wallet, spend_id: str, usdc: int) -> None:
    """Row ``spend_id``'s gas hold set to ``usdc`` (0: given back)."""
    with wallet.meter.store.transaction() as conn:
        hold_gas_in(conn, spend_id, usdc, now=wallet.clock())


def _hold_within_cap(wallet: Wallet, row: SpendRow, gas: int, least: int, wanted: int) -> int:
    """The cancel's max fee per gas: ``wanted``, lowered so ``gas`` x fee (as USDC at the
    meter's price) fits in what is left of the run's cap; CancelOverCap when even
    ``least`` (base fee + tip) does not. ``gas`` x fee is held on the row (its gas hold)
    in the same write section as the check, so nothing signed meanwhile counts the same
    room. A run with no cap on record (rows older than the record) is not bounded."""
    price = wallet.meter.eth_price_usdc
    with wallet.meter.store.transaction() as conn:
        found = conn.one(f"SELECT cap FROM {CAPS} WHERE run_id = ?", (row.run_id,))
        if found is None:
            hold_gas_in(conn, row.id, gas_to_usdc(gas * wanted, price), now=wallet.clock())
            return wanted
        cap = cell_int(found[0])
        own = cell_int(conn.scalar(f"SELECT gas_hold FROM {SPENDS} WHERE id = ?", (row.id,)) or 0)
        committed = run_committed(conn, row.run_id) - own
        room = max(cap - committed, 0)
        fits = room * WEI_PER_ETH // max(price * ATOMIC_PER_USDC * gas, 1)
        if fits < least:
            worst = gas_to_usdc(gas * least, price)
            raise CancelOverCap(
                f"found that cancelling ledger row {row.id}'s authorization would cost up to "
                f"{worst} atomic USDC of gas ({gas} gas at {least} wei) with {room} left of "
                f"run {row.run_id}'s cap {cap} ({committed} committed); expected a cancel "
                "within the cap. Not sent: the authorization stays counted until it settles "
                "or expires (`nib audit reconcile`). Fix: give the task a cap with room for "
                "a cancel's gas."
            )
        fee = min(wanted, fits)
        hold_gas_in(conn, row.id, gas_to_usdc(gas * fee, price), now=wallet.clock())
    return fee


def _event(row: SpendRow) -> dict[str, object]:
    return {"run_id": row.run_id, "spend_id": row.id, "verdict_id": row.verdict_id,
            "kind": row.kind, "amount": row.amount, "recipient": row.recipient}

