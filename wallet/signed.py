"""What the wallet hands back after signing: immutable records carrying the signature,
the spend reservation and the ledger row, never the key."""

from __future__ import annotations

from dataclasses import dataclass, field

from eth_utils import to_checksum_address

from wallet.meter import Reservation

__all__ = ["SentTx", "SignedTx", "SignedTypedData"]


class _Reserved:
    """A signed record's reservation, which is also its ledger row."""

    reservation: Reservation

    @property
    def reservation_id(self) -> str:
        return self.reservation.id

    @property
    def ledger_id(self) -> str:
        """The ``wallet_spends`` row id (the reservation's id)."""
        return self.reservation.id


@dataclass(frozen=True)
class SignedTypedData(_Reserved):
    """An EIP-3009 authorization the wallet signed (immutable).

    Warning: whoever holds ``signature`` can move ``value`` to ``recipient`` once,
    until ``valid_before``. Hand it only to the seller the judge approved.
    """

    signature: str = field(repr=False)  # a bearer authorization until validBefore
    signer: str
    payload_fingerprint: str
    verdict_id: str
    run_id: str
    reservation: Reservation
    recipient: str
    value: int
    valid_after: int
    valid_before: int
    auth_nonce: str


    def signature_bytes(self) -> bytes:
        return bytes.fromhex(self.signature[2:])

    def to_x402_payload(self) -> dict[str, object]:
        """The x402 "exact" EVM inner payload: ``{authorization: {...}, signature}``."""
        return {
            "authorization": {
                "from": self.signer,
                "to": to_checksum_address(self.recipient),
                "value": str(self.value),
                "validAfter": str(self.valid_after),
                "validBefore": str(self.valid_before),
                "nonce": self.auth_nonce,
            },
            "signature": self.signature,
        }


@dataclass(frozen=True)
class SignedTx(_Reserved):
    """A signed transaction, not yet broadcast (immutable). Send it with ``send_transaction``."""

    raw_transaction: str = field(repr=False)
    tx_hash: str
    nonce: int
    signer: str
    payload_fingerprint: str
    verdict_id: str
    run_id: str
    reservation: Reservation
    recipient: str
    amount: int



@dataclass(frozen=True)
class SentTx:
    """A mined transaction the wallet sent, with the gas it paid."""

    tx_hash: str
    block_number: int
    status: int
    gas_used: int
    gas_wei: int
    gas_usdc: int
    ledger_id: str
