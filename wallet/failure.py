"""Whether a signed spend failed is the wallet's finding, never the caller's word.

The agent holds what the wallet signed (an EIP-3009 authorization is a bearer note; a
signed transaction can be broadcast by anyone). A caller's "it failed" that freed the
row's cap share would let the agent mark a payment failed and then move the money
itself. So the row is failed only when the chain proves the payload can never move
money; a payload the chain shows used is settled; anything else stays counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from web3.exceptions import TransactionNotFound

from wallet.errors import FailureUnproven
from wallet.ledger import SpendRow
from wallet.reconcile import authorization_expired, authorization_used_in
from wallet.signed import SignedTx, SignedTypedData

if TYPE_CHECKING:
    from chain.client import ChainClient
    from wallet.meter import SpendMeter


def fail_if_proven(
    signed: SignedTypedData | SignedTx,
    note: str,
    *,
    meter: SpendMeter,
    chain: ChainClient,
    usdc: str,
    payer: str,
    clock: Callable[[], float],
    settle: Callable[[SpendRow, str], None],
    emit: Callable[[str, dict[str, object]], None],
) -> None:
    """Fail ``signed``'s row when the chain proves it can never move money; settle it (by
    ``settle``) when the chain shows it used; else keep it counted (the note kept) and
    raise FailureUnproven."""
    row = meter.ledger.get(signed.reservation.id)
    if row.status in ("failed", "released", "cancelled"):
        return
    if isinstance(signed, SignedTypedData):
        chain_time = chain.block_timestamp("latest")  # read first: unused at a later block
        used_in = authorization_used_in(chain, usdc, payer, signed.auth_nonce)
        if used_in is not None:
            settle(meter.ledger.get(row.id), used_in)
        proven = _authorization_alive(signed, used_in, chain_time, clock())
    else:
        proven = _transaction_alive(chain, payer, signed)
    if proven is None:
        meter.fail(signed.reservation, note)
        emit("wallet.failed", {"run_id": row.run_id, "spend_id": row.id,
                               "verdict_id": row.verdict_id, "note": note})
        return
    meter.keep_signed(signed.reservation, f"reported failed ({note[:200]}); {proven}")
    raise FailureUnproven(
        f"found a report that spend {row.id} failed ({note[:200]}), but {proven}; expected "
        "the chain to prove it can never move money (an authorization unused past its "
        "validBefore, a transaction whose nonce another mined transaction took). The row "
        "stays counted against the run's cap. Fix: nothing to do; the wallet releases it "
        "itself once the chain proves it dead (`nib audit reconcile`)."
    )


def _authorization_alive(
    signed: SignedTypedData, used_in: str | None, chain_time: int, wall_time: float
) -> str | None:
    """None when the authorization can never land; else why it still can (or did)."""
    if used_in is not None:
        return f"the chain shows authorization {signed.auth_nonce} used in {used_in} (settled)"
    if authorization_expired(signed.valid_before, chain_time=chain_time, wall_time=wall_time):
        return None
    return (f"authorization {signed.auth_nonce} is unused and valid until "
            f"{signed.valid_before} (chain time {chain_time}): anyone holding it can still use it")


def _transaction_alive(chain: ChainClient, payer: str, signed: SignedTx) -> str | None:
    """None when another mined transaction took the nonce; else why it may still land."""
    w3 = chain.w3
    mined = int(w3.eth.get_transaction_count(payer, "latest"))  # type: ignore[arg-type]
    try:
        receipt = w3.eth.get_transaction_receipt(signed.tx_hash)  # type: ignore[arg-type]
    except TransactionNotFound:
        receipt = None
    if receipt is not None:
        return f"transaction {signed.tx_hash} was mined in block {receipt['blockNumber']}"
    if mined > signed.nonce:
        return None
    return (f"transaction {signed.tx_hash} (nonce {signed.nonce}) is signed and unmined, and "
            f"nonce {signed.nonce} is still free (mined count {mined}): it can still be broadcast")
