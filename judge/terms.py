"""The money-relevant terms of a payment payload: chain, asset, recipient, amount, sender.

Only two shapes pay: an EIP-3009 ``TransferWithAuthorization`` and a USDC
``transfer(to, amount)`` transaction with nonce, gas and fees pinned. The judge reads
them from the payload it rules on, the wallet from the payload it signs; anything else
raises :class:`~judge.errors.PayloadTermsInvalid`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from judge.errors import PayloadTermsInvalid

__all__ = [
    "EIP3009_PRIMARY",
    "PINNED_TX_FIELDS",
    "TRANSFER_SELECTOR",
    "Terms",
    "as_int",
    "hex_body",
    "payload_terms",
    "transfer_terms",
    "typed_data_terms",
]

TRANSFER_SELECTOR = "a9059cbb"  # transfer(address,uint256)
#: Transaction fields a payload must fix before the judge rules on it (item 4 of issue 12:
#: a wallet that filled them after the checks could sign two transactions under one verdict).
PINNED_TX_FIELDS = ("nonce", "gas", "maxFeePerGas", "maxPriorityFeePerGas")
EIP3009_PRIMARY = "TransferWithAuthorization"


@dataclass(frozen=True)
class Terms:
    """The money-relevant terms read from a payload."""

    chain_id: int
    asset: str
    recipient: str
    amount: int
    sender: str | None


def typed_data_terms(payload: Mapping[str, object]) -> Terms:
    if payload.get("primaryType") != EIP3009_PRIMARY:
        raise PayloadTermsInvalid(
            f"The payload's primaryType is {payload.get('primaryType')!r}, expected "
            f"{EIP3009_PRIMARY!r}; the wallet signs no other typed data. Fix: pay with an "
            "EIP-3009 authorization."
        )
    domain, message = payload.get("domain"), payload.get("message")
    if not isinstance(domain, Mapping) or not isinstance(message, Mapping):
        raise PayloadTermsInvalid("The payload lacks a domain or message mapping.")
    try:
        return Terms(
            chain_id=as_int(domain["chainId"]),
            asset=str(domain["verifyingContract"]),
            recipient=str(message["to"]),
            amount=as_int(message["value"]),
            sender=str(message["from"]),
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise PayloadTermsInvalid(
            f"The authorization lacks a readable field ({type(exc).__name__}: {exc}); "
            "expected domain.chainId, domain.verifyingContract, message.from/to/value."
        ) from None


def transfer_terms(tx: Mapping[str, object]) -> Terms:
    unpinned = [name for name in PINNED_TX_FIELDS if tx.get(name) is None]
    if unpinned or tx.get("gasPrice") is not None:
        found = f"leaves {', '.join(unpinned)} unpinned" if unpinned else "sets gasPrice"
        raise PayloadTermsInvalid(
            f"The transaction {found}; expected {', '.join(PINNED_TX_FIELDS)} fixed before "
            "the verdict (EIP-1559, no gasPrice), so the approved fingerprint names exactly "
            "one signable transaction. Fix: quote the transfer with its nonce, gas and fees."
        )
    data = tx.get("data", tx.get("input"))
    raw = hex_body(data)
    if raw[:8] != TRANSFER_SELECTOR or len(raw) != 8 + 128:
        raise PayloadTermsInvalid(
            f"The transaction's calldata starts {('0x' + raw[:8])!r} with {len(raw) // 2} "
            "bytes; expected transfer(address,uint256) (0xa9059cbb, 68 bytes). Fix: the "
            "wallet signs only USDC transfers."
        )
    value = as_int(tx.get("value", 0) or 0)
    if value != 0:
        raise PayloadTermsInvalid(
            f"The transaction sends {value} wei of ETH; expected 0. Fix: remove the value."
        )
    if tx.get("chainId") is None or tx.get("to") is None:
        raise PayloadTermsInvalid("The transaction lacks chainId or to; expected both.")
    recipient = "0x" + raw[8 + 24 : 8 + 64]
    return Terms(
        chain_id=as_int(tx["chainId"]),
        asset=str(tx["to"]),
        recipient=recipient,
        amount=int(raw[8 + 64 :], 16),
        sender=str(tx["from"]) if tx.get("from") is not None else None,
    )


def as_int(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError("a bool is not an amount")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    raise ValueError(f"not an integer: {type(value).__name__}")


def hex_body(data: object) -> str:
    if isinstance(data, bytes | bytearray):
        return bytes(data).hex()
    if isinstance(data, str):
        return data.lower().removeprefix("0x")
    return ""


def payload_terms(payload: Mapping[str, object]) -> Terms:
    """The terms of either shape: typed data when it names a ``primaryType``, else a tx."""
    if not isinstance(payload, Mapping):
        raise PayloadTermsInvalid(
            f"Expected the payload as a mapping; got {type(payload).__name__}."
        )
    if "primaryType" in payload:
        return typed_data_terms(dict(payload))
    return transfer_terms(dict(payload))
