"""Canonical JSON (RFC 8785, JCS) and keccak-256 fingerprints of calls and payloads.

A fingerprint names the *meaning* of a value: values with several spellings are
normalised first, so the same call or payload always has the same fingerprint and
any change of meaning changes it. The judge puts fingerprints in verdicts; the
wallet recomputes them from the exact bytes it is about to sign.

Normalisation (applied recursively, to mapping keys as well as values):

- ``int`` (not ``bool``) -> its decimal string (``5`` and ``"5"`` are one value);
- ``str`` of the form ``0x`` + hex digits (addresses, hashes, calldata) -> lower case
  with a lower-case ``0x`` prefix, so checksum and lower-case addresses agree;
- ``bytes`` / ``bytearray`` / ``memoryview`` -> ``0x`` + lower-case hex;
- ``Decimal`` -> its canonical plain string (``Decimal("1.50")`` -> ``"1.5"``);
- ``tuple`` -> list; ``None``, ``bool``, finite ``float`` stay JSON literals/numbers.

Anything else (sets, NaN, objects, non-string keys other than ints) raises
:class:`~judge.errors.FingerprintError` naming the path: fail closed, never guess.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import TypeAlias, cast

import rfc8785
from eth_utils import is_address, to_checksum_address
from sha3 import keccak_256

from judge.errors import FingerprintError

_HEX = re.compile(r"^0[xX][0-9a-fA-F]*\Z")
JSON: TypeAlias = "str | bool | float | None | list[JSON] | dict[str, JSON]"
"""A normalised JSON value: what :func:`normalize` returns and RFC 8785 encodes."""

_FINGERPRINT = re.compile(r"^0x[0-9a-f]{64}\Z")

#: Fields of an EIP-712 payload; all four are covered by its fingerprint.
TYPED_DATA_KEYS = frozenset({"domain", "types", "primaryType", "message"})

# The EIP712Domain struct is derived from the domain's keys in this fixed order
# (EIP-712 "domainSeparator"); a payload that spells it differently is refused.
_DOMAIN_FIELDS = (
    ("name", "string"),
    ("version", "string"),
    ("chainId", "uint256"),
    ("verifyingContract", "address"),
    ("salt", "bytes32"),
)

#: The EIP-712 domain fields a USDC token (TestUSDC, Circle's FiatToken) signs under, and
#: no others: a domain with a ``salt`` or without a field is another domain's signature.
TOKEN_DOMAIN_FIELDS = frozenset({"name", "version", "chainId", "verifyingContract"})

#: EIP-3009 ``TransferWithAuthorization``, the only typed data nib signs (as chain.usdc
#: builds it; tests pin that the two agree).
TRANSFER_WITH_AUTHORIZATION = (
    ("from", "address"),
    ("to", "address"),
    ("value", "uint256"),
    ("validAfter", "uint256"),
    ("validBefore", "uint256"),
    ("nonce", "bytes32"),
)

# Transaction fields that are quantities: "0x2" and 2 mean the same thing there.
_TX_QUANTITIES = frozenset(
    {
        "chainId",
        "nonce",
        "gas",
        "value",
        "gasPrice",
        "maxFeePerGas",
        "maxPriorityFeePerGas",
        "maxFeePerBlobGas",
        "type",
    }
)


def decimal_str(value: Decimal) -> str:
    """Canonical plain string of a finite Decimal: no exponent, no trailing zeros, no -0."""
    if not value.is_finite():
        raise FingerprintError(
            f"found the non-finite Decimal {value}; expected a finite number; "
            "fix: replace NaN/Infinity before fingerprinting."
        )
    if value == 0:
        return "0"
    text = format(value.normalize(), "f")
    return text


def _norm_str(value: str) -> str:
    plain = str.__str__(value)  # strips str subclasses (enums) to their value
    if _HEX.match(plain):
        return "0x" + plain[2:].lower()
    return plain


def _norm_key(key: object, path: str | None) -> str:
    if isinstance(key, str):
        return _norm_str(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return str(int(key))
    raise FingerprintError(
        f"found a mapping key of type {type(key).__name__} ({key!r}) at {path}; "
        "expected str or int keys; fix: convert keys to strings first."
    )


def normalize(obj: object, path: str = "$") -> JSON:
    """Return the normalised, JSON-ready form of ``obj`` (see the module docstring)."""
    return _normalized(obj, path)[0]


def _normalized(obj: object, path: str) -> tuple[JSON, bool]:
    """The normalised form, and whether it holds a float or a key beyond U+FFFF (the
    two things the fast canonical encoder cannot spell as RFC 8785 does)."""
    odd: list[str] = []
    try:
        return _normalize(obj, None, odd), bool(odd)
    except FingerprintError:
        # Walk again naming every path, so the error says where (paths cost time to
        # build and only an error reads them).
        return _normalize(obj, path, odd), bool(odd)


def _normalize(obj: object, path: str | None, odd: list[str]) -> JSON:
    if type(obj) is str:  # the common kinds first, by exact type (isinstance on ABCs is slow)
        return "0x" + obj[2:].lower() if obj[:1] == "0" and _HEX.match(obj) else obj
    if obj is None or type(obj) is bool:
        return obj  # type: ignore[return-value]  # None or a bool, both JSON
    if type(obj) is int:
        return str(obj)
    if type(obj) is dict or isinstance(obj, Mapping):
        out: dict[str, JSON] = {}
        for key, value in obj.items():
            if type(key) is str:
                nkey = "0x" + key[2:].lower() if key[:1] == "0" and _HEX.match(key) else key
            else:
                nkey = _norm_key(key, path)
            if nkey in out:
                raise FingerprintError(
                    f"found two keys that normalise to {nkey!r} at {path}; expected "
                    "distinct keys; fix: remove the duplicate spelling (case of hex keys)."
                )
            if not nkey.isascii() and max(nkey) > "\uffff":
                odd.append("key beyond U+FFFF")
            # Flat leaves inline (most values are): a call per leaf is most of the cost.
            kind = type(value)
            if kind is str and value[:1] != "0":
                out[nkey] = value
            elif kind is int:
                out[nkey] = str(value)
            elif value is None or kind is bool:
                out[nkey] = value
            else:
                out[nkey] = _normalize(value, None if path is None else f"{path}.{nkey}", odd)
        return out
    if isinstance(obj, int):
        return str(int(obj))
    if isinstance(obj, str):
        return _norm_str(obj)
    if isinstance(obj, Decimal):
        return decimal_str(obj)
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise FingerprintError(
                f"found the float {obj} at {path}; expected a finite number; "
                "fix: money is an int in atomic units, never NaN/Infinity."
            )
        odd.append("float")
        return obj
    if isinstance(obj, bytes | bytearray | memoryview):
        return "0x" + bytes(obj).hex()
    if isinstance(obj, list | tuple):
        return [
            _normalize(item, None if path is None else f"{path}[{i}]", odd)
            for i, item in enumerate(obj)
        ]
    raise FingerprintError(
        f"found a value of type {type(obj).__name__} at {path}; expected JSON-like data "
        "(dict, list, tuple, str, int, bool, None, Decimal, bytes, finite float); "
        "fix: convert it first (e.g. model.model_dump(mode='json'); sets to sorted lists)."
    )


#: The C JSON encoder writes exactly RFC 8785's bytes for normalised data without
#: floats (RFC 8785 spells numbers the ES6 way) and without keys outside the Basic
#: Multilingual Plane (RFC 8785 sorts keys by UTF-16 code units, Python by code point):
#: the same escapes (backslash b f n r t, other controls as lower-case backslash u00xx),
#: raw UTF-8 otherwise, no whitespace. Anything else goes through ``rfc8785`` itself.
_ENCODE = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
).encode


def canonical_json(obj: object) -> bytes:
    """RFC 8785 canonical JSON (UTF-8 bytes) of ``obj`` after normalisation."""
    norm, odd = _normalized(obj, "$")
    if not odd:
        try:
            return _ENCODE(norm).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: refused below, as rfc8785 refuses it
    try:
        return rfc8785.dumps(norm)
    except (rfc8785.CanonicalizationError, UnicodeEncodeError) as exc:
        raise FingerprintError(
            f"found a value RFC 8785 cannot encode ({exc}); expected JSON-like data in "
            "valid Unicode; fix: normalise it and drop lone surrogates before fingerprinting."
        ) from exc


def keccak(data: bytes) -> bytes:
    """Keccak-256 (Ethereum's hash, not NIST SHA3-256) of ``data``."""
    return bytes(keccak_256(data).digest())


def fingerprint(obj: object) -> str:
    """``"0x"`` + keccak-256 hex of :func:`canonical_json` of ``obj``."""
    return "0x" + keccak_256(canonical_json(obj)).hexdigest()


def is_fingerprint(value: object) -> bool:
    """True when ``value`` is a well-formed fingerprint (``0x`` + 64 lower-case hex)."""
    return isinstance(value, str) and bool(_FINGERPRINT.match(value))


def call_fingerprint(tool: str, args: Mapping[str, object]) -> str:
    """Fingerprint of a tool call, over ``{"tool": tool, "args": args}``."""
    if not isinstance(tool, str) or not tool:
        raise FingerprintError(
            f"found tool name {tool!r}; expected a non-empty string; fix: pass the tool's name."
        )
    if not isinstance(args, Mapping):
        raise FingerprintError(
            f"found args of type {type(args).__name__}; expected a mapping of argument "
            "names to values; fix: pass the validated arguments as a dict."
        )
    return fingerprint({"tool": tool, "args": args})


def _domain_type(domain: Mapping[str, object]) -> list[dict[str, str]]:
    unknown = sorted(set(domain) - {name for name, _ in _DOMAIN_FIELDS})
    if unknown:
        raise FingerprintError(
            f"found EIP-712 domain fields {unknown}; expected only "
            f"{[name for name, _ in _DOMAIN_FIELDS]}; fix: remove the extra domain fields."
        )
    return [{"name": n, "type": t} for n, t in _DOMAIN_FIELDS if n in domain]


def typed_data_fingerprint(td: Mapping[str, object]) -> str:
    """The EIP-712 digest of a ``TransferWithAuthorization`` payload, as ``0x`` hex.

    The fingerprint is the very hash the wallet signs (``keccak(0x19 0x01 ‖
    domainSeparator ‖ hashStruct(message))``, encoded by eth-account as signing does), so
    two payloads share it only when their signatures would be interchangeable: a domain
    ``version`` of ``2`` and ``"2"`` differ, a checksum and a lower-case address agree.
    The types must be exactly the canonical EIP-3009 struct; ``types["EIP712Domain"]``
    may be present or absent, and when present must match the domain's fields in
    EIP-712 order.

    Warning: this is what the wallet compares before signing. Any top-level key other
    than the four is refused rather than dropped, so nothing signed escapes the hash.
    """
    full = _canonical_typed_data(td)
    _check_authorization(full["message"])
    digest = _token_domain_digest(full)
    if digest is not None:
        return "0x" + digest.hex()
    # eth-account (~0.5 s to import) loads here and below, where something is encoded
    # with it: reading verdicts and their records (`nib audit verify`, the judge's client)
    # loads none of it.
    from eth_account.messages import encode_typed_data

    try:
        signable = encode_typed_data(full_message=full)
    except Exception as exc:  # fail closed: what cannot be encoded cannot be approved
        raise FingerprintError(
            f"found typed data EIP-712 cannot encode ({type(exc).__name__}: {str(exc)[:200]}); "
            "expected values of the declared types; fix: build it with eip3009_typed_data."
        ) from exc
    return "0x" + keccak(b"\x19" + signable.version + signable.header + signable.body).hex()


def _check_authorization(message: object) -> None:
    """Refuse an authorization whose nonce or parties are not spelled as the token and the
    ledger read them: the nonce exactly 32 bytes (``0x`` + 64 hex), each party ``0x`` + 40
    hex. eth-account would encode an integer or a short nonce (padding it on the right)
    while the wallet's record and the chain's ``authorizationState`` read it as written,
    so the payment would move money its ledger row could never be matched with."""
    if not isinstance(message, Mapping):
        return  # _canonical_typed_data has refused it already
    nonce = message.get("nonce")
    if not _spelled(nonce, _BYTES32_HEX, 32):
        raise FingerprintError(
            f"found the authorization nonce {_shown(nonce)!r}; expected exactly 32 bytes "
            "(0x and 64 hex digits); fix: build it with eip3009_typed_data."
        )
    for party in ("from", "to"):
        value = message.get(party)
        if not _spelled(value, _ANY_CASE_ADDRESS, 20):
            raise FingerprintError(
                f"found the authorization's {party!r} {_shown(value)!r}; expected an address "
                "(0x and 40 hex digits); fix: build it with eip3009_typed_data."
            )


def _spelled(value: object, text: re.Pattern[str], size: int) -> bool:
    """``value`` as hex text matching ``text``, or raw bytes of exactly ``size``."""
    if isinstance(value, bytes | bytearray | memoryview):
        return len(bytes(value)) == size
    return isinstance(value, str) and bool(text.match(value))


def _shown(value: object) -> str:
    """``value`` as the refusal names it: raw bytes in hex, anything at most 80 characters."""
    if isinstance(value, bytes | bytearray | memoryview):
        return ("0x" + bytes(value).hex())[:80]
    return str(value)[:80]


def _struct_type(name: str, fields: tuple[tuple[str, str], ...]) -> bytes:
    return keccak_256(f"{name}({','.join(f'{t} {n}' for n, t in fields)})".encode()).digest()


_TOKEN_DOMAIN_TYPEHASH = _struct_type("EIP712Domain", _DOMAIN_FIELDS[:4])
_TRANSFER_TYPEHASH = _struct_type("TransferWithAuthorization", TRANSFER_WITH_AUTHORIZATION)
_LOWER_OR_UPPER_ADDRESS = re.compile(r"^0x(?:[0-9a-f]{40}|[0-9A-F]{40})\Z")
_ANY_CASE_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}\Z")
_BYTES32_HEX = re.compile(r"^0x[0-9a-fA-F]{64}\Z")
_HEX_DIGITS = re.compile(r"^[0-9a-fA-F]{40}\Z")


def _address_word(value: object) -> bytes | None:
    """The 32-byte ABI word of an address eth-account would accept as it stands (all one
    case, or mixed case with a valid EIP-55 checksum), else None."""
    if not isinstance(value, str) or len(value) != 42:
        return None
    if not _LOWER_OR_UPPER_ADDRESS.match(value) and not _eip55(value):
        return None
    return bytes(12) + bytes.fromhex(value[2:])


@functools.lru_cache(maxsize=4096)
def _eip55(value: str) -> bool:
    """Whether ``value`` (``0x`` and 40 characters) is hex spelled with its EIP-55 checksum."""
    digits = value[2:]
    if value[:2] != "0x" or not _HEX_DIGITS.match(digits):
        return False
    hashed = keccak_256(digits.lower().encode()).hexdigest()[:40]
    return all(
        c == (c.upper() if int(h, 16) >= 8 else c.lower()) for c, h in zip(digits, hashed, strict=True)
    )


def _uint_word(value: object) -> bytes | None:
    if type(value) is not int or not 0 <= value < 1 << 256:
        return None
    return value.to_bytes(32, "big")


def _token_domain_digest(full: Mapping[str, object]) -> bytes | None:
    """The EIP-712 digest of a canonical payload (the four token-domain fields, every
    value as chain.usdc.eip3009_typed_data writes it) encoded directly: the same bytes
    eth-account hashes, without its generic encoder (a sixth of a millisecond, paid by the
    tool, the judge twice and the wallet on every purchase). None for any other shape,
    which eth-account then encodes (or refuses) itself; tests compare the two."""
    domain, message = full["domain"], full["message"]
    if not isinstance(domain, Mapping) or not isinstance(message, Mapping):
        return None
    if set(domain) != TOKEN_DOMAIN_FIELDS or set(message) != {n for n, _ in TRANSFER_WITH_AUTHORIZATION}:
        return None
    name, version, nonce = domain["name"], domain["version"], message["nonce"]
    if not isinstance(name, str) or not isinstance(version, str):
        return None
    if not isinstance(nonce, str) or not _BYTES32_HEX.match(nonce):
        return None
    words = (
        _uint_word(domain["chainId"]), _address_word(domain["verifyingContract"]),
        _address_word(message["from"]), _address_word(message["to"]), _uint_word(message["value"]),
        _uint_word(message["validAfter"]), _uint_word(message["validBefore"]),
    )
    if any(word is None for word in words):
        return None
    chain_id, contract, sender, recipient, value, after, before = cast("tuple[bytes, ...]", words)
    separator = keccak_256(
        _TOKEN_DOMAIN_TYPEHASH + keccak_256(name.encode()).digest()
        + keccak_256(version.encode()).digest() + chain_id + contract
    ).digest()
    struct = keccak_256(
        _TRANSFER_TYPEHASH + sender + recipient + value + after + before + bytes.fromhex(nonce[2:])
    ).digest()
    return keccak_256(b"\x19\x01" + separator + struct).digest()


def _canonical_typed_data(td: Mapping[str, object]) -> dict[str, object]:
    """``td`` as eth-account encodes it (the domain type derived), or FingerprintError when
    it is not exactly an EIP-3009 TransferWithAuthorization payload."""
    if not isinstance(td, Mapping):
        raise FingerprintError(
            f"found typed data of type {type(td).__name__}; expected an EIP-712 dict; "
            "fix: pass {domain, types, primaryType, message}."
        )
    keys = set(td)
    if keys != TYPED_DATA_KEYS:
        missing = sorted(TYPED_DATA_KEYS - keys)
        extra = sorted(keys - TYPED_DATA_KEYS)
        raise FingerprintError(
            f"found typed-data keys {sorted(keys)} (missing {missing}, unexpected {extra}); "
            f"expected exactly {sorted(TYPED_DATA_KEYS)}; fix: pass the full EIP-712 "
            "payload and nothing else."
        )
    domain, types = td["domain"], td["types"]
    if not isinstance(domain, Mapping) or not isinstance(types, Mapping):
        raise FingerprintError(
            "found a typed-data domain or types that is not a mapping; expected dicts; "
            "fix: pass the EIP-712 payload as produced by eip3009_typed_data()."
        )
    derived = _domain_type(domain)
    if "EIP712Domain" in types:
        given = normalize(types["EIP712Domain"])
        if given != normalize(derived):
            raise FingerprintError(
                f"found types.EIP712Domain {given}; expected {derived} (derived from the "
                "domain's fields in EIP-712 order); fix: drop EIP712Domain or make it match."
            )
    others = {k: v for k, v in types.items() if k != "EIP712Domain"}
    canonical = [{"name": n, "type": t} for n, t in TRANSFER_WITH_AUTHORIZATION]
    if td["primaryType"] != "TransferWithAuthorization" or others != {
        "TransferWithAuthorization": canonical
    }:
        raise FingerprintError(
            f"found primaryType {td['primaryType']!r} with types {sorted(others)}; expected "
            f"exactly TransferWithAuthorization {canonical} (EIP-3009), the only typed data "
            "nib signs; fix: build it with chain.usdc.eip3009_typed_data."
        )
    return {
        "types": {"EIP712Domain": derived, **others},
        "domain": dict(domain),
        "primaryType": td["primaryType"],
        "message": dict(td["message"]) if isinstance(td["message"], Mapping) else td["message"],
    }


def transaction_fingerprint(tx: Mapping[str, object]) -> str:
    """The signing hash of a transaction: keccak of its serialized unsigned form, ``0x`` hex.

    Quantities given as ``0x`` hex are read as numbers and ``input`` as ``data`` (JSON-RPC
    and Python spellings agree); ``from`` is not part of what is signed (the wallet checks
    the sender itself). Every field must be pinned (chainId, nonce, gas, fees): a
    transaction that cannot be serialized as it stands is refused, so nothing can be
    filled in after the verdict.
    """
    if not isinstance(tx, Mapping):
        raise FingerprintError(
            f"found a transaction of type {type(tx).__name__}; expected a dict; "
            "fix: pass the EIP-1559 transaction dict."
        )
    if tx.get("chainId") is None:
        raise FingerprintError(
            f"found a transaction without chainId (fields {sorted(tx)}); expected chainId; "
            "fix: set chainId so the transaction cannot be replayed on another chain."
        )
    body: dict[str, object] = {}
    for key, value in tx.items():
        name = "data" if key == "input" else key
        if name in _TX_QUANTITIES and isinstance(value, str) and _HEX.match(value):
            value = int(value, 16) if len(value) > 2 else 0
        if name in body and normalize(body[name]) != normalize(value):
            raise FingerprintError(
                "found both 'input' and 'data' with different values; expected one "
                "calldata field; fix: keep only 'data'."
            )
        body[name] = value
    unsigned = {k: v for k, v in body.items() if k != "from"}
    to = unsigned.get("to")
    if isinstance(to, str) and is_address(to):  # one spelling: the same 20 bytes are signed
        unsigned["to"] = to_checksum_address(to)
    from eth_account._utils.legacy_transactions import (
        serializable_unsigned_transaction_from_dict,
    )

    try:
        digest = bytes(serializable_unsigned_transaction_from_dict(unsigned).hash())  # type: ignore[arg-type]
    except Exception as exc:  # fail closed: an unpinned field would be filled after approval
        raise FingerprintError(
            f"found a transaction that is not a complete unsigned transaction "
            f"({type(exc).__name__}: {str(exc)[:200]}; fields {sorted(unsigned)}); expected "
            "every field pinned before the verdict (chainId, nonce, gas, fees, to, value, "
            "data); fix: quote with all of them filled."
        ) from exc
    return "0x" + digest.hex()
