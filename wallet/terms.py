"""The wallet's view of payload terms: the judge's parser, refusals as PayloadMismatch.

The terms themselves have one home, :mod:`judge.terms` (the judge reads the same terms
from the payload it rules on); this module adds what only the signer needs: a private
copy of the payload and the EIP-3009 nonce spelling.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

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
    "private_copy",
    "transfer_terms",
    "typed_data_terms",
]


def typed_data_terms(payload: dict[str, Any]) -> Terms:
    try:
        return _terms.typed_data_terms(payload)
    except PayloadTermsInvalid as exc:
        raise PayloadMismatch(str(exc)) from None


def transfer_terms(tx: dict[str, Any]) -> Terms:
    try:
        return _terms.transfer_terms(tx)
    except PayloadTermsInvalid as exc:
        raise PayloadMismatch(str(exc)) from None


def private_copy(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy, so nobody can change the payload between the checks and the signature."""
    if not isinstance(payload, Mapping):
        raise PayloadMismatch(f"Expected the payload as a dict; got {type(payload).__name__}.")
    return copy.deepcopy(dict(payload))


def hex32(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    return "0x" + str(value).lower().removeprefix("0x")
