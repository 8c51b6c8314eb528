"""The buyer's side of x402, as pure functions: no wallet, no network, no clock.

``pay_http`` uses them in order: parse the 402, choose the requirement we can pay, build the
exact EIP-3009 authorization (our nonce, our validity window, from the chain's time), and,
once the wallet has signed it under a verdict, encode the payment header and read the
seller's settlement receipt. Wire types and encoders are the official ``x402`` package's.
"""

from __future__ import annotations

import binascii
import copy
import functools
import json
import os
from collections.abc import Mapping
from typing import Literal, TypedDict

import httpx
from eth_utils import is_address
from pydantic import ValidationError
from x402.extensions.payment_identifier import (
    PAYMENT_IDENTIFIER,
    append_payment_identifier_to_extensions,
)
from x402.http import (
    PAYMENT_REQUIRED_HEADER,
    PAYMENT_RESPONSE_HEADER,
    PAYMENT_SIGNATURE_HEADER,
    X_PAYMENT_HEADER,
    X_PAYMENT_RESPONSE_HEADER,
    decode_payment_response_header,
    encode_payment_signature_header,
    safe_base64_decode,
)
from x402.mechanisms.evm.types import ExactEIP3009Authorization, ExactEIP3009Payload
from x402.mechanisms.evm.v1.constants import V1_NETWORK_CHAIN_IDS
from x402.schemas import (
    PaymentPayload,
    PaymentPayloadV1,
    PaymentRequired,
    PaymentRequiredV1,
    PaymentRequirements,
    PaymentRequirementsV1,
)
from x402.schemas import parse_payment_required as _x402_parse_payment_required

from agent.errors import PermanentToolError, ToolError
from chain.client import checksum_address
from chain.usdc import AuthorizationTypedData, eip3009_typed_data

__all__ = [
    "EXPIRY_MARGIN_S",
    "MAX_VALIDITY_S",
    "VALID_AFTER_SLACK_S",
    "AnyPaymentRequired",
    "AnyRequirement",
    "RefusalCode",
    "RequirementRefused",
    "SettlementReceipt",
    "UnpayableTerms",
    "X402Error",
    "X402ProtocolError",
    "build_authorization",
    "choose_requirement",
    "encode_payment_header",
    "parse_payment_required",
    "parse_payment_response",
    "payment_id_for",
    "payment_payload",
    "requirement_amount",
    "requirement_chain_id",
    "requirement_network",
]

AnyPaymentRequired = PaymentRequired | PaymentRequiredV1
AnyRequirement = PaymentRequirements | PaymentRequirementsV1
RefusalCode = Literal["no-matching-requirement", "price-above-limit"]

#: Upper bound on how long a signed authorization stays usable, whatever the seller allows.
MAX_VALIDITY_S = 300
#: validAfter is set this far before the chain's time, so clock skew cannot void it.
VALID_AFTER_SLACK_S = 600
#: Seconds a signed authorization must still be valid for its seller to settle it: x402
#: facilitators refuse one valid for less than 6 s more (their wall clock), and the paid
#: request and a block come on top. A requirement whose maxTimeoutSeconds is no longer
#: can never be paid, so it is refused before anything is signed.
EXPIRY_MARGIN_S = 15

_SCHEME = "exact"


class SettlementReceipt(TypedDict):
    """The seller's settlement receipt as the buyer keeps it (``transaction`` is the tx hash)."""

    success: bool
    transaction: str
    network: str
    payer: str | None
    amount: str | None
    error_reason: str | None


class X402Error(ToolError):
    """Root of the x402 client errors (shown to the model as a failed tool call).

    X402Error
    ├── X402ProtocolError   the seller's 402 or settlement receipt is malformed (retryable:
    │   │                   a garbled answer may read on a later try)
    │   └── UnpayableTerms  a requirement no buyer can pay as stated (never retried)
    └── RequirementRefused  nothing offered that we may pay: network, asset, price (never
                            retried)

    The last two are also :class:`~agent.errors.PermanentToolError`: the seller's terms
    are the same on every try, so the loop does not run the same call again.
    """


class X402ProtocolError(X402Error):
    """The seller spoke x402 wrongly: the message names exactly which part was malformed."""


class UnpayableTerms(X402ProtocolError, PermanentToolError):
    """The seller's requirement reads, but no buyer can pay it as stated: its window is too
    short to settle, its EIP-712 domain is not the token's, or a field EIP-3009 needs (the
    price, an address, the token's name and version, an EVM chain) is not one. Refused
    before anything is signed; the same call would be refused the same way."""


class RequirementRefused(X402Error, PermanentToolError):
    """No offered requirement fits our network, asset or price limit: refused before quoting.

    ``code`` says which; ``offered`` lists the requirements as one-line descriptions. The
    same call (its price limit included) is refused the same way on every try.
    """

    def __init__(self, code: RefusalCode, message: str, offered: list[str]) -> None:
        super().__init__(message)
        self.code: RefusalCode = code
        self.offered = offered


# ------------------------------------------------------------------------------ parse


def parse_payment_required(response: httpx.Response) -> AnyPaymentRequired:
    """Decode a 402: the v2 ``PAYMENT-REQUIRED`` header, else a v1 JSON body.

    Raises :class:`X402ProtocolError` naming what is malformed (status, base64, JSON,
    version, schema field, empty ``accepts``).
    """
    if response.status_code != 402:
        raise X402ProtocolError(
            f"expected HTTP 402 Payment Required from {_url(response)}, got "
            f"{response.status_code}; only a 402 carries payment requirements."
        )
    source, data = _payment_required_json(response)
    if not isinstance(data, dict):
        raise X402ProtocolError(
            f"{source} is a JSON {type(data).__name__}; expected a PaymentRequired object."
        )
    version = data.get("x402Version")
    if version is None:
        raise X402ProtocolError(
            f"{source} lacks x402Version; expected 1 or 2. The seller may not speak x402."
        )
    if isinstance(version, bool) or version not in (1, 2):
        raise X402ProtocolError(f"{source} has x402Version {version!r}; expected 1 or 2.")
    try:
        parsed = _x402_parse_payment_required(data)
    except ValidationError as exc:
        raise X402ProtocolError(
            f"{source} does not match the x402 v{version} PaymentRequired schema: "
            f"{_validation_summary(exc)}."
        ) from exc
    if not parsed.accepts:
        raise X402ProtocolError(
            f"{source} offers no payment requirements (accepts is empty); expected at least one."
        )
    return parsed


def _payment_required_json(response: httpx.Response) -> tuple[str, object]:
    """(where it was read, the decoded JSON) of a 402: the v2 header, else the v1 body."""
    where = f"402 from {_url(response)}"
    header = response.headers.get(PAYMENT_REQUIRED_HEADER)
    if header is not None:
        source = f"{PAYMENT_REQUIRED_HEADER} header of the {where}"
        try:
            text = safe_base64_decode(header.strip())
        except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
            raise X402ProtocolError(
                f"{source} is not base64-encoded UTF-8 ({exc}); expected base64 of the "
                "x402 PaymentRequired JSON. The seller is misconfigured."
            ) from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise X402ProtocolError(
                f"{source} decodes to text that is not JSON ({exc.msg} at char {exc.pos}); "
                "expected the x402 PaymentRequired JSON object."
            ) from exc
    else:
        source = f"JSON body of the {where}"
        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise X402ProtocolError(
                f"the {where} has no {PAYMENT_REQUIRED_HEADER} header and its body is not "
                f"JSON; expected an x402 v2 {PAYMENT_REQUIRED_HEADER} header or a v1 JSON body "
                "with x402Version 1. The seller may not speak x402."
            ) from exc
    return source, data


def parse_payment_response(response: httpx.Response) -> SettlementReceipt:
    """The seller's settlement receipt from ``PAYMENT-RESPONSE`` (v1: ``X-PAYMENT-RESPONSE``).

    Returns ``{success, transaction, network, payer, amount, error_reason}``; ``transaction``
    is the settlement tx hash. Raises :class:`X402ProtocolError` when the header is missing
    or malformed.
    """
    name = PAYMENT_RESPONSE_HEADER
    header = response.headers.get(name)
    if header is None:
        name = X_PAYMENT_RESPONSE_HEADER
        header = response.headers.get(name)
    if header is None:
        raise X402ProtocolError(
            f"HTTP {response.status_code} from {_url(response)} carries no "
            f"{PAYMENT_RESPONSE_HEADER} (or {X_PAYMENT_RESPONSE_HEADER}) header; expected the "
            "seller's settlement receipt after a payment."
        )
    try:
        settled = decode_payment_response_header(header.strip())
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        detail = _validation_summary(exc) if isinstance(exc, ValidationError) else str(exc)
        raise X402ProtocolError(
            f"{name} header from {_url(response)} is not a base64 x402 SettleResponse ({detail})."
        ) from exc
    return {
        "success": settled.success,
        "transaction": settled.transaction,
        "network": settled.network,
        "payer": settled.payer,
        "amount": settled.amount,
        "error_reason": settled.error_reason,
    }


# ----------------------------------------------------------------------------- choose


def requirement_network(requirement: AnyRequirement) -> str:
    """The requirement's network as CAIP-2 (v1 legacy names such as ``base-sepolia`` mapped)."""
    network = str(requirement.network)
    if isinstance(requirement, PaymentRequirementsV1) and network in V1_NETWORK_CHAIN_IDS:
        return f"eip155:{V1_NETWORK_CHAIN_IDS[network]}"
    return network


def requirement_chain_id(requirement: AnyRequirement) -> int:
    """The EVM chain id the requirement pays on; UnpayableTerms when it is not EVM."""
    network = requirement_network(requirement)
    prefix, _, reference = network.partition(":")
    if prefix != "eip155" or not reference.isdigit():
        raise UnpayableTerms(
            f"requirement network {requirement.network!r} is not an EVM chain; expected "
            "CAIP-2 'eip155:<chain id>' (or a known v1 EVM network name)."
        )
    return int(reference)


def requirement_amount(requirement: AnyRequirement) -> int:
    """The exact price in atomic units (v2 ``amount``, v1 ``maxAmountRequired``)."""
    raw = requirement.get_amount()
    field = "amount" if isinstance(requirement, PaymentRequirements) else "maxAmountRequired"
    if not isinstance(raw, str) or not raw.isdigit() or int(raw) <= 0:
        raise UnpayableTerms(
            f"requirement {field} {raw!r} is not a positive integer string of atomic units; "
            "expected e.g. '50000' for 0.05 USDC."
        )
    return int(raw)


def choose_requirement(
    pr: AnyPaymentRequired,
    *,
    network_caip2: str,
    asset: str,
    max_amount: int | None = None,
) -> AnyRequirement:
    """The cheapest offered ``exact`` EIP-3009 requirement on our network, in our asset.

    Refuses with :class:`RequirementRefused` (``no-matching-requirement``) when nothing
    offered is on ``network_caip2`` in ``asset``, and (``price-above-limit``) when every match
    costs more than ``max_amount``. Both messages list what was offered.
    """
    offered = [_describe(req) for req in pr.accepts]
    matches = [
        req
        for req in pr.accepts
        if req.scheme == _SCHEME
        and requirement_network(req) == network_caip2
        and str(req.asset).lower() == asset.lower()
        and (req.extra or {}).get("assetTransferMethod", "eip3009") == "eip3009"
    ]
    if not matches:
        raise RequirementRefused(
            "no-matching-requirement",
            f"the seller offers nothing we can pay: we pay scheme '{_SCHEME}' (EIP-3009) on "
            f"{network_caip2} in {asset}; offered: {'; '.join(offered)}. Fix: use a seller that "
            "accepts this network and asset, or configure the network the seller accepts.",
            offered,
        )
    priced = sorted(matches, key=requirement_amount)
    if max_amount is not None and requirement_amount(priced[0]) > max_amount:
        raise RequirementRefused(
            "price-above-limit",
            f"the cheapest matching requirement costs {requirement_amount(priced[0])} atomic "
            f"units, above the limit of {max_amount}; offered: {'; '.join(offered)}.",
            offered,
        )
    return priced[0]


# ------------------------------------------------------------------------------ build


def build_authorization(
    requirement: AnyRequirement,
    *,
    payer: str,
    chain_time: int,
    wall_time: int | None = None,
    nonce: bytes | None = None,
    validity_s: int | None = None,
) -> tuple[AuthorizationTypedData, dict[str, str]]:
    """The EIP-3009 ``TransferWithAuthorization`` for ``requirement``, unsigned.

    Returns ``(typed_data, authorization)``: the full EIP-712 dict the wallet signs, and the
    same authorization in x402 wire form (decimal strings). The nonce is ours (32 random
    bytes unless given); validAfter = chain_time - 600 (floored at 0) and validBefore =
    chain_time + min(maxTimeoutSeconds, validity_s or 300), both from the CHAIN's block time,
    which may differ from the wall clock on a devnet. With ``wall_time`` given the window
    covers both clocks (after = the earlier minus 600 s, before = the later plus the
    validity): the token checks the next block's time, while x402 facilitators check their
    own wall clock, and an idle chain's latest block can lag the wall clock by minutes.

    Warning: once signed, anyone holding the signature can move ``amount`` from ``payer`` to
    the seller until validBefore, once. Build it only for the requirement the judge prices.
    """
    chain_id = requirement_chain_id(requirement)
    amount = requirement_amount(requirement)
    name, version = _token_domain(requirement)
    asset = _address("asset", requirement.asset)
    pay_to = _address("payTo", requirement.pay_to)
    sender = _address("payer", payer)
    valid_after, valid_before = _validity_window(requirement, chain_time, wall_time, validity_s)
    nonce = os.urandom(32) if nonce is None else nonce
    if not isinstance(nonce, bytes | bytearray) or len(nonce) != 32:
        raise ValueError("nonce must be exactly 32 bytes (default: os.urandom(32)).")
    typed_data = eip3009_typed_data(
        name=name,
        version=version,
        chain_id=chain_id,
        verifying_contract=asset,
        sender=sender,
        recipient=pay_to,
        value=amount,
        valid_after=valid_after,
        valid_before=valid_before,
        nonce=bytes(nonce),
    )
    wire = ExactEIP3009Payload(authorization=_wire_authorization(typed_data["message"]))
    return typed_data, wire.to_dict()["authorization"]


def _wire_authorization(fields: Mapping[str, object]) -> ExactEIP3009Authorization:
    """x402's wire form (decimal strings) of an EIP-3009 authorization's fields: the
    typed data's message, or the authorization as :func:`build_authorization` returned it."""
    return ExactEIP3009Authorization(
        from_address=str(fields["from"]),
        to=str(fields["to"]),
        value=str(fields["value"]),
        valid_after=str(fields["validAfter"]),
        valid_before=str(fields["validBefore"]),
        nonce=str(fields["nonce"]),
    )


def _token_domain(requirement: AnyRequirement) -> tuple[str, str]:
    """The token's EIP-712 (name, version) the seller declares in ``extra``."""
    extra = requirement.extra or {}
    name, version = extra.get("name"), extra.get("version")
    if not isinstance(name, str) or not name or not isinstance(version, str) or not version:
        raise UnpayableTerms(
            f"requirement extra lacks the token's EIP-712 domain (name={name!r}, "
            f"version={version!r}); expected extra.name and extra.version, e.g. 'USDC' and '2'."
        )
    return name, version


def _validity_window(
    requirement: AnyRequirement, chain_time: int, wall_time: int | None, validity_s: int | None
) -> tuple[int, int]:
    """(validAfter, validBefore) covering the chain's clock and, when given, the wall
    clock, as :func:`build_authorization` describes."""
    if requirement.max_timeout_seconds <= EXPIRY_MARGIN_S:
        raise UnpayableTerms(
            f"requirement maxTimeoutSeconds is {requirement.max_timeout_seconds}; expected more "
            f"than {EXPIRY_MARGIN_S} s: an authorization valid for no longer expires before "
            "the seller can settle it (x402 facilitators refuse one valid for less than 6 s "
            "more), so nothing was signed. Fix: the seller must allow a longer "
            "maxTimeoutSeconds; buy the data elsewhere."
        )
    if validity_s is not None and validity_s <= 0:
        raise ValueError(f"validity_s must be a positive number of seconds; got {validity_s}.")
    if isinstance(chain_time, bool) or not isinstance(chain_time, int) or chain_time <= 0:
        raise ValueError(
            f"chain_time must be the chain's block timestamp (int); got {chain_time!r}."
        )
    early = chain_time if wall_time is None else min(chain_time, wall_time)
    late = chain_time if wall_time is None else max(chain_time, wall_time)
    cap = MAX_VALIDITY_S if validity_s is None else validity_s
    return max(0, early - VALID_AFTER_SLACK_S), late + min(requirement.max_timeout_seconds, cap)


# ----------------------------------------------------------------------------- encode


def payment_id_for(authorization: Mapping[str, str]) -> str:
    """The x402 ``payment-identifier`` of one purchase: derived from the authorization's
    nonce, so a re-sent authorization carries the same id and a seller can recognise it."""
    return "pay_" + str(authorization["nonce"]).removeprefix("0x")


def payment_payload(
    requirement: AnyRequirement,
    pr: AnyPaymentRequired,
    authorization: dict[str, str],
    signature: bytes | str,
) -> PaymentPayload | PaymentPayloadV1:
    """The x402 PaymentPayload carrying the signed authorization (HTTP header or MCP
    ``_meta``). v2 echoes ``requirement`` as ``accepted`` and the 402's extensions, with
    our payment id added when the seller declared ``payment-identifier``.

    Raises ValueError when the authorization does not pay exactly ``requirement`` (amount
    and recipient), so a payload changed after approval cannot be sent under it.
    """
    if requirement not in pr.accepts:
        raise ValueError("requirement is not one of this 402's accepts; choose it from pr.")
    if str(authorization.get("value")) != str(requirement_amount(requirement)):
        raise ValueError(
            f"authorization value {authorization.get('value')!r} differs from the requirement's "
            f"price {requirement_amount(requirement)}; rebuild the authorization."
        )
    if str(authorization.get("to", "")).lower() != str(requirement.pay_to).lower():
        raise ValueError(
            f"authorization recipient {authorization.get('to')!r} differs from the requirement's "
            f"payTo {requirement.pay_to!r}; rebuild the authorization."
        )
    inner = ExactEIP3009Payload(
        authorization=_wire_authorization(authorization), signature=_signature_hex(signature)
    ).to_dict()
    if isinstance(pr, PaymentRequired) and isinstance(requirement, PaymentRequirements):
        extensions = copy.deepcopy(pr.extensions) if pr.extensions else None
        if extensions and PAYMENT_IDENTIFIER in extensions:
            append_payment_identifier_to_extensions(extensions, payment_id_for(authorization))
        return PaymentPayload(
            x402_version=2,
            payload=inner,
            accepted=requirement,
            resource=pr.resource,
            extensions=extensions,
        )
    return PaymentPayloadV1(
        x402_version=1, scheme=requirement.scheme, network=requirement.network, payload=inner
    )


def encode_payment_header(
    requirement: AnyRequirement,
    pr: AnyPaymentRequired,
    authorization: dict[str, str],
    signature: bytes | str,
    version: int | None = None,
) -> tuple[str, str]:
    """``(header_name, header_value)`` carrying the signed authorization to the seller.

    v2: ``PAYMENT-SIGNATURE`` with the :func:`payment_payload`; v1: ``X-PAYMENT``.
    ``version`` defaults to the 402's. Raises ValueError as :func:`payment_payload` does.
    """
    version = pr.x402_version if version is None else version
    if version != pr.x402_version:
        raise ValueError(
            f"version {version} does not match the 402's x402Version {pr.x402_version}."
        )
    payload = payment_payload(requirement, pr, authorization, signature)
    name = PAYMENT_SIGNATURE_HEADER if payload.x402_version == 2 else X_PAYMENT_HEADER
    return name, encode_payment_signature_header(payload)


# ---------------------------------------------------------------------------- helpers


def _url(response: httpx.Response) -> str:
    try:
        return str(response.request.url)
    except RuntimeError:  # a Response built without a request
        return "the seller"


def _validation_summary(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _describe(req: AnyRequirement) -> str:
    amount = req.get_amount()
    return f"{req.scheme} on {req.network} in {req.asset} for {amount} to {req.pay_to}"


def _address(field: str, value: object) -> str:
    if not isinstance(value, str) or not _is_address(value):
        raise UnpayableTerms(
            f"{field} {value!r} is not an EVM address; expected 0x followed by 40 hex digits."
        )
    return checksum_address(value)


@functools.lru_cache(maxsize=4096)
def _is_address(value: str) -> bool:
    """eth_utils' ``is_address`` (a keccak for a mixed-case spelling), remembered."""
    return bool(is_address(value))


def _signature_hex(signature: bytes | str) -> str:
    if isinstance(signature, bytes | bytearray):
        return "0x" + bytes(signature).hex()
    if isinstance(signature, str) and signature:
        return signature if signature.startswith("0x") else "0x" + signature
    raise ValueError("signature must be the wallet's signature bytes or 0x-hex string.")
