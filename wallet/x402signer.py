"""The x402 client's signer shape, bound to one judge verdict.

x402's EVM client asks a signer for ``sign_typed_data(domain, types, primary_type,
message)``. This one rebuilds the full EIP-712 payload and routes it through the
verdict-gated ``Wallet``, so an x402 payment can only be signed for the payload the
judge approved, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from judge.verdict import Verdict
from wallet.signed import SignedTypedData

if TYPE_CHECKING:
    from wallet.signer import Wallet

__all__ = ["DOMAIN_ORDER", "VerdictBoundSigner", "typed_data_from_parts"]

DOMAIN_ORDER = (
    ("name", "string"),
    ("version", "string"),
    ("chainId", "uint256"),
    ("verifyingContract", "address"),
    ("salt", "bytes32"),
)


class VerdictBoundSigner:
    """The x402 ``ClientEvmSigner`` shape, bound to one verdict.

    x402's client calls ``sign_typed_data(domain, types, primary_type, message)``; this
    rebuilds the full EIP-712 dict and routes it through ``Wallet.sign_typed_data``, so
    only the payload the judge saw can be signed, and only once. ``signed`` holds the
    result (reservation and ledger ids) after a successful call.
    """

    def __init__(self, wallet: Wallet, verdict: Verdict | None, *, run_id: str, cap: int):
        self._wallet = wallet
        self._verdict = verdict
        self._run_id = run_id
        self._cap = cap
        self.signed: SignedTypedData | None = None

    @property
    def address(self) -> str:
        return self._wallet.address

    def __repr__(self) -> str:
        vid = self._verdict.id if self._verdict is not None else None
        return f"VerdictBoundSigner(address={self.address!r}, verdict={vid!r})"

    def sign_typed_data(
        self, domain: Any, types: Mapping[str, Any], primary_type: str, message: Mapping[str, Any]
    ) -> bytes:
        """MOVES MONEY: sign if and only if this is the approved payload."""
        payload = typed_data_from_parts(domain, types, primary_type, message)
        signed = self._wallet.sign_typed_data(
            payload, self._verdict, run_id=self._run_id, cap=self._cap
        )
        self.signed = signed
        return signed.signature_bytes()


def typed_data_from_parts(
    domain: Any, types: Mapping[str, Any], primary_type: str, message: Mapping[str, Any]
) -> dict[str, Any]:
    """The full EIP-712 dict from x402's parts (TypedDataDomain/TypedDataField or dicts)."""
    if isinstance(domain, Mapping):
        dom = dict(domain)
    else:
        dom = {
            "name": domain.name,
            "version": domain.version,
            "chainId": domain.chain_id,
            "verifyingContract": domain.verifying_contract,
        }
    full_types: dict[str, list[dict[str, str]]] = {}
    for name, fields in types.items():
        full_types[name] = [
            dict(f) if isinstance(f, Mapping) else {"name": f.name, "type": f.type} for f in fields
        ]
    if "EIP712Domain" not in full_types:
        full_types["EIP712Domain"] = [{"name": n, "type": t} for n, t in DOMAIN_ORDER if n in dom]
    return {
        "types": full_types,
        "primaryType": primary_type,
        "domain": dom,
        "message": dict(message),
    }
