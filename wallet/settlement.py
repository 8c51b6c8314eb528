"""How a signed spend ends, from what the chain proves: settled (its settlement proven
on chain), failed (proven never to move money), or still live.

A seller's receipt is a claim, not a proof; a caller's "it failed" is a report, not a
finding. One live authorization per resource: ``live_authorization`` asks the chain
before it calls a row live.
"""

from __future__ import annotations

from collections.abc import Collection

from chain.usdc import prove_authorization_settled
from wallet.core import WalletCore, spend_event
from wallet.errors import SettlementUnproven
from wallet.failure import fail_if_proven
from wallet.ledger import LIVE, SpendRow
from wallet.reconcile import authorization_expired, authorization_used_in
from wallet.signed import SignedTx, SignedTypedData
from wallet.terms import as_int

__all__ = ["Settlement"]


class Settlement:
    """Settles, fails or keeps a signed spend by the chain's word."""

    def __init__(self, core: WalletCore) -> None:
        self._core = core

    def settle(self, signed: SignedTypedData | SignedTx | SpendRow, tx_hash: str) -> None:
        """See ``Wallet.settle``."""
        core = self._core
        event = spend_event(signed)
        spend_id = str(event["spend_id"])
        nonce = _authorization_nonce(signed)
        if nonce is not None:
            proof = prove_authorization_settled(
                core.chain.w3,
                tx_hash,
                token=core.usdc,
                authorizer=core.address,
                nonce=nonce,
                recipient=str(event["recipient"]),
                value=as_int(event["amount"]),
            )
            if not proof.proven:
                claimed = str(tx_hash)[:80]
                note = (
                    f"claimed settlement {claimed} unproven ({proof.finding}: "
                    f"{proof.detail}); authorization {nonce} still pending"
                )
                core.meter.keep_signed(spend_id, note)
                core.emit(
                    "wallet.settlement_unproven",
                    {**event, "tx_hash": claimed, "finding": proof.finding},
                )
                raise SettlementUnproven(
                    f"Transaction {claimed} does not settle authorization {nonce} "
                    f"({proof.finding}: {proof.detail}); expected AuthorizationUsed("
                    f"{core.address}, nonce) and Transfer({core.address} -> "
                    f"{event['recipient']}, {event['amount']}) from {core.usdc}. Ledger row "
                    f"{spend_id} stays 'signed'. Fix: run `nib audit reconcile`; it settles "
                    "the row when the authorization is used on chain.",
                    finding=proof.finding,
                    tx_hash=claimed,
                )
        core.meter.settle(spend_id, tx_hash)
        core.emit("wallet.settled", {**event, "tx_hash": tx_hash})

    def live_authorization(
        self, resource: str, runs: Collection[str] | None = None
    ) -> SpendRow | None:
        """See ``Wallet.live_authorization``."""
        core = self._core
        while True:
            row = core.meter.ledger.live_for(resource, runs=runs)
            if row is None or row.status != "signed" or not row.auth_nonce:
                return row
            # The chain's time is read first: unused at a block already past validBefore
            # means unused for good.
            chain_time = core.chain.block_timestamp("latest")
            used_in = authorization_used_in(core.chain, core.usdc, core.address, row.auth_nonce)
            if used_in is not None:
                self.settle(row, used_in)
                return None
            if row.valid_before is not None and authorization_expired(
                row.valid_before, chain_time=chain_time, wall_time=core.clock()
            ):
                note = f"authorization expired unused at {row.valid_before}; released"
                core.meter.fail(row.id, note)
                core.emit("wallet.failed", {**spend_event(row), "note": note})
                return None
            now = core.meter.ledger.get(row.id)
            if now.status in LIVE:
                return now

    def fail(self, signed: SignedTypedData | SignedTx, note: str) -> None:
        """See ``Wallet.fail``."""
        core = self._core
        fail_if_proven(
            signed, note, meter=core.meter, chain=core.chain, usdc=core.usdc,
            payer=core.address, clock=core.clock, settle=self.settle, emit=core.emit,
        )


def _authorization_nonce(spend: SignedTypedData | SignedTx | SpendRow) -> str | None:
    """The EIP-3009 nonce of an x402 spend (its settlement must carry it), else None."""
    if isinstance(spend, SignedTypedData):
        return spend.auth_nonce
    if isinstance(spend, SpendRow) and spend.kind == "x402" and spend.auth_nonce:
        return spend.auth_nonce
    return None
