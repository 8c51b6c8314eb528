"""The wallet's view of payload terms: the judge's parser, refusals as PayloadMismatch.

The terms themselves have one home, :mod:`judge.terms` (the judge reads the same terms
from the payload it rules on); this module adds what only the signer needs: a private
copy of the payload and the EIP-3009 nonce spelling.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from judge import terms as _terms
from judge.errors import PayloadTermsInvalid
from judge.terms import (
    EIP3009_PRIMARY,
    PINNED_TX_FIELDS,
    TRANSFER_SELECTOR,
    Terms,
    as_int,
    hex_body,
)
from wallet.errors import PayloadMismatch

__all__ = [
    "EIP3009_PRIMARY",
    "PINNED_TX_FIELDS",
    "TRANSFER_SELECTOR",
    "Terms",
    "as_int",
    "hex32",
    "hex_body",
    "payload_part",
    "private_copy",
    "transfer_terms",
    "typed_data_terms",
]


def typed_data_terms(payload: Mapping[str, object]) -> Terms:
    try:
        return _terms.typed_data_terms(payload)
    except PayloadTermsInvalid as exc:
        raise PayloadMismatch(str(exc)) from None


def transfer_terms(tx: Mapping[str, object]) -> Terms:
    try:
        return _terms.transfer_terms(tx)
    except PayloadTermsInvalid as exc:
        raise PayloadMismatch(str(exc)) from None


def private_copy(payload: Mapping[str, object]) -> dict[str, object]:
    """A deep copy, so nobody can change the payload between the checks and the signature."""
    if not isinstance(payload, Mapping):
        raise PayloadMismatch(f"Expected the payload as a dict; got {type(payload).__name__}.")
    return copy.deepcopy(dict(payload))


def payload_part(payload: Mapping[str, object], key: str) -> Mapping[str, object]:
    """``payload[key]`` as a mapping (an EIP-712 ``domain`` or ``message``), else refused."""
    part = payload.get(key)
    if not isinstance(part, Mapping):
        raise PayloadMismatch(
            f"The payload's {key} is {type(part).__name__}; expected a mapping. Fix: build "
            "the payload with chain.usdc.eip3009_typed_data."
        )
    return part


def hex32(value: object) -> str:
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    return "0x" + str(value).lower().removeprefix("0x")
