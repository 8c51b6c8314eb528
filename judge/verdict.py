"""Verdicts: the judge's signed decision about one money-moving call.

Signing scheme (``nib-verdict-v1``): the body is every field except ``signature``;
its fingerprint (keccak-256 of RFC 8785 canonical JSON, see :mod:`judge.fingerprint`)
is embedded in the text ``"nib verdict v1\\n0x<64 hex>"``, which the judge's own key
signs as an EIP-191 personal message (version ``0x45``). Anyone can verify a verdict
with the judge's address alone (:func:`verify_verdict`); the text prefix keeps the
judge key's signatures from being replayed as anything other than a verdict.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Literal, NoReturn, Protocol

import coincurve
from eth_utils import to_checksum_address
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from judge.errors import (
    JudgeConfigError,
    VerdictExpired,
    VerdictMalformed,
    VerdictSignatureInvalid,
    VerdictWrongSigner,
)
from judge.fingerprint import decimal_str, fingerprint, keccak

if TYPE_CHECKING:
    # eth-account loads in _message_for, where a message is encoded for it: reading and
    # checking a verdict (coincurve, keccak) needs none (the judge's client, its records).
    from eth_account.datastructures import SignedMessage
    from eth_account.messages import SignableMessage

#: Default verdict lifetime: long enough to sign and send, short enough to be useless later.
DEFAULT_TTL_S = 120
SCHEME = "nib-verdict-v1"
_MESSAGE_PREFIX = "nib verdict v1\n"
#: EIP-191 version 0x45 ("personal message") header, followed by the text's length.
_EIP191_HEADER = b"\x19Ethereum Signed Message:\n"

_ADDRESS = r"^0x[0-9a-fA-F]{40}$"
_FP = r"^0x[0-9a-f]{64}$"
_ADDRESS_RE = re.compile(_ADDRESS)

Decision = Literal["approve", "refuse", "escalate", "answer"]
"""What the judge ruled.

- ``approve``: the wallet may sign exactly this payload, once, before expiry.
- ``refuse``: do not make the call; the reason says why.
- ``escalate``: a human must approve (price at or above the approval threshold).
- ``answer``: nothing on the checklist is missing; the history suffices to answer.
"""


def _parse_decimal(name: str, value: str) -> Decimal:
    try:
        number = Decimal(value)
    except InvalidOperation as exc:
        raise ValueError(f"{name} must be a decimal string, found {value!r}") from exc
    if not number.is_finite():
        raise ValueError(f"{name} must be finite, found {value!r}")
    return number


class Verdict(BaseModel):
    """A signed, immutable decision. Verify with :func:`verify_verdict` before acting.

    Warning: an unverified verdict is attacker-controlled data. Anyone can build one
    with ``decision="approve"``; only the signature binds it to the judge.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    id: str = Field(pattern=r"^[0-9a-f]{32}$")
    decision: Decision
    call_fingerprint: str = Field(pattern=_FP)
    payload_fingerprint: str | None = Field(default=None, pattern=_FP)
    amount: int = Field(ge=0)
    asset: str = Field(pattern=_ADDRESS)
    recipient: str = Field(pattern=_ADDRESS)
    chain_id: int = Field(gt=0)
    issued_at: int = Field(ge=0)
    expires_at: int = Field(ge=0)
    p: str
    ev: str
    reason: str
    judge: str = Field(pattern=_ADDRESS)
    #: The task the verdict was issued to and the spend cap it registered (atomic units):
    #: the wallet books the payment under this task and holds it to this cap, whatever
    #: its caller names (None: a judge that rules on unregistered requests, in-process).
    task_id: str | None = Field(default=None, max_length=200)
    task_cap: int | None = Field(default=None, ge=0)
    signature: str = Field(pattern=r"^0x[0-9a-fA-F]{130}$")

    @field_validator("p")
    @classmethod
    def _p_is_probability(cls, value: str) -> str:
        number = _parse_decimal("p", value)
        if not Decimal(0) <= number <= Decimal(1):
            raise ValueError(f"p must be within [0, 1], found {value}")
        return value

    @field_validator("ev")
    @classmethod
    def _ev_is_decimal(cls, value: str) -> str:
        _parse_decimal("ev", value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Verdict:
        if self.expires_at <= self.issued_at:
            raise ValueError(
                f"expires_at {self.expires_at} must be after issued_at {self.issued_at}"
            )
        if self.decision in ("approve", "escalate") and self.payload_fingerprint is None:
            raise ValueError(f"a {self.decision} verdict needs a payload_fingerprint")
        return self

    # -- signing helpers -------------------------------------------------------------

    def body(self) -> dict[str, object]:
        """Every field except the signature: what the judge signs."""
        return self.model_dump(exclude={"signature"})

    def body_fingerprint(self) -> str:
        """Fingerprint of :meth:`body` (canonical JSON, keccak-256)."""
        return fingerprint(self.body())

    def signing_message(self) -> SignableMessage:
        """The EIP-191 personal message the judge signs."""
        return _message_for(self.body())

    def signing_digest(self) -> str:
        """``0x`` hex of the 32-byte EIP-191 hash the judge's ECDSA signature covers."""
        return "0x" + _digest_for(self.body()).hex()

    def is_expired(self, now: float) -> bool:
        """True at and after ``expires_at`` (unix seconds)."""
        return now >= self.expires_at

    def amount_decimal(self, decimals: int = 6) -> Decimal:
        """The amount in whole tokens (display only; money stays in ``amount``)."""
        return Decimal(self.amount).scaleb(-decimals)

    def p_decimal(self) -> Decimal:
        return Decimal(self.p)

    def ev_decimal(self) -> Decimal:
        return Decimal(self.ev)


def _text_for(body: dict[str, object]) -> str:
    return _MESSAGE_PREFIX + fingerprint(body)


def _message_for(body: dict[str, object]) -> SignableMessage:
    from eth_account.messages import encode_defunct

    return encode_defunct(text=_text_for(body))


def _digest_for(body: dict[str, object]) -> bytes:
    """The EIP-191 personal-message hash of the verdict text (what eth-account signs)."""
    text = _text_for(body).encode("utf-8")
    return keccak(_EIP191_HEADER + str(len(text)).encode("ascii") + text)


def _address_of(public: coincurve.PublicKey) -> bytes:
    """The 20-byte Ethereum address of a secp256k1 public key."""
    return keccak(public.format(compressed=False)[1:])[-20:]


class _MessageSigner(Protocol):
    """The slice of eth-account's LocalAccount the judge uses."""

    @property
    def address(self) -> str: ...

    def sign_message(self, signable_message: SignableMessage) -> SignedMessage: ...


def _as_decimal_str(name: str, value: Decimal | str | int) -> str:
    if isinstance(value, bool) or isinstance(value, float):
        raise JudgeConfigError(
            f"found {name}={value!r} ({type(value).__name__}); expected a Decimal or "
            f"decimal string; fix: compute {name} with Decimal, never float."
        )
    try:
        return decimal_str(Decimal(value))
    except InvalidOperation as exc:
        raise JudgeConfigError(
            f"found {name}={value!r}; expected a decimal number; fix: pass a Decimal."
        ) from exc


class VerdictSigner:
    """Issues verdicts signed with the judge's own key.

    The key stays inside: the repr shows only the address, and the signer refuses to
    be pickled or copied (a pickled LocalAccount carries its private key).
    """

    __slots__ = ("_account", "_private")

    def __init__(self, account: _MessageSigner) -> None:
        if not callable(getattr(account, "sign_message", None)) or not _ADDRESS_RE.match(
            str(getattr(account, "address", ""))
        ):
            raise JudgeConfigError(
                f"found a judge account of type {type(account).__name__}; expected an "
                "eth-account LocalAccount (address + sign_message); fix: pass "
                "Account.from_key(...) or a keystore-decrypted account."
            )
        self._account = account
        # eth-account re-derives the key objects on every sign_message (more than half
        # the cost of a signature); build libsecp256k1's key once and sign digests with it.
        raw = getattr(account, "key", None)
        self._private = coincurve.PrivateKey(bytes(raw)) if raw is not None else None
        if self._private is not None and (
            to_checksum_address(_address_of(self._private.public_key)) != account.address
        ):
            raise JudgeConfigError(
                f"found an account whose key does not match its address {account.address}; "
                "expected a consistent LocalAccount; fix: load the judge key again."
            )

    @property
    def address(self) -> str:
        """The judge's address (checksum), the only thing verifiers need."""
        return str(self._account.address)

    def __repr__(self) -> str:
        return f"VerdictSigner(address={self.address})"

    def __reduce__(self) -> NoReturn:
        raise TypeError("VerdictSigner holds a private key; it cannot be pickled or copied.")

    def issue(
        self,
        *,
        decision: Decision,
        call_fingerprint: str,
        payload_fingerprint: str | None,
        amount: int,
        asset: str,
        recipient: str,
        chain_id: int,
        p: Decimal | str | int,
        ev: Decimal | str | int,
        reason: str,
        ttl_s: int = DEFAULT_TTL_S,
        now: float | None = None,
        verdict_id: str | None = None,
        task_id: str | None = None,
        task_cap: int | None = None,
    ) -> Verdict:
        """Build, validate and sign a verdict that expires ``ttl_s`` seconds from ``now``;
        ``task_id``/``task_cap``: the task it is issued to and that task's spend cap."""
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, int) or ttl_s <= 0:
            raise JudgeConfigError(
                f"found ttl_s={ttl_s!r}; expected a positive int (seconds); "
                f"fix: use the default {DEFAULT_TTL_S}."
            )
        issued_at = int(time.time() if now is None else now)
        body: dict[str, object] = {
            "id": verdict_id or secrets.token_hex(16),
            "decision": decision,
            "call_fingerprint": call_fingerprint,
            "payload_fingerprint": payload_fingerprint,
            "amount": amount,
            "asset": asset,
            "recipient": recipient,
            "chain_id": chain_id,
            "issued_at": issued_at,
            "expires_at": issued_at + ttl_s,
            "p": _as_decimal_str("p", p),
            "ev": _as_decimal_str("ev", ev),
            "task_id": task_id,
            "task_cap": task_cap,
            "reason": reason,
            "judge": self.address,
        }
        # The model is strict (nothing is coerced): the validated verdict's body() is
        # ``body`` itself, so it is signed as built and validated once, signature and all.
        # A body that fails validation is refused here and its signature never leaves.
        return Verdict.model_validate({**body, "signature": self._sign(body)})

    def _sign(self, body: dict[str, object]) -> str:
        if self._private is None:
            signed = self._account.sign_message(_message_for(body))
            return "0x" + bytes(signed.signature).hex()
        # RFC 6979 deterministic and low-s, as eth-keys' coincurve backend signs.
        sig = self._private.sign_recoverable(_digest_for(body), hasher=None)
        return "0x" + (sig[:64] + bytes([sig[64] + 27])).hex()


def _recover(verdict: Verdict) -> bytes:
    """The 20-byte address whose key produced ``verdict.signature`` over its body."""
    try:
        raw = bytes.fromhex(verdict.signature[2:])
        v = raw[64] - 27 if raw[64] >= 27 else raw[64]
        if v not in (0, 1):
            raise ValueError(f"recovery id v={raw[64]}, expected 27 or 28 (or 0 or 1)")
        public = coincurve.PublicKey.from_signature_and_message(
            raw[:64] + bytes([v]), _digest_for(verdict.body()), hasher=None
        )
        return _address_of(public)
    except Exception as exc:  # libsecp256k1 refuses junk r, s or v in several ways
        raise VerdictSignatureInvalid(
            f"found a verdict signature that does not recover to any key ({exc}); "
            "expected a 65-byte EIP-191 signature by the judge; fix: request a fresh "
            "verdict from the judge, do not edit verdicts."
        ) from exc


def recover_signer(verdict: Verdict) -> str:
    """The checksum address whose key produced ``verdict.signature``."""
    return to_checksum_address(_recover(verdict))


def verify_verdict(verdict: Verdict, trusted_judge: str, *, now: float | None = None) -> None:
    """Raise unless ``verdict`` was signed, unmodified, by ``trusted_judge``.

    Checks: the signature recovers to the verdict's ``judge`` field (any edited field
    changes the recovered key), and that field is ``trusted_judge``. With ``now``, also
    refuses an expired verdict. Does not check the decision or the payload: callers do.
    """
    if not isinstance(trusted_judge, str) or not _ADDRESS_RE.match(trusted_judge):
        raise JudgeConfigError(
            f"found trusted judge {trusted_judge!r}; expected a 0x address; fix: configure "
            "the judge's address (nib judge serve prints it)."
        )
    raw = "0x" + _recover(verdict).hex()
    if raw != verdict.judge.lower():
        recovered = to_checksum_address(raw)
        raise VerdictSignatureInvalid(
            f"verdict {verdict.id}: signature recovers to {recovered}, expected the "
            f"verdict's judge {verdict.judge}; the verdict was altered after signing. "
            "Fix: request a fresh verdict from the judge."
        )
    if raw != trusted_judge.lower():
        recovered = to_checksum_address(raw)
        raise VerdictWrongSigner(
            f"verdict {verdict.id}: signed by {recovered}, expected the trusted judge "
            f"{trusted_judge}. Fix: get the verdict from the configured judge, or "
            "update the trusted judge address if the key was rotated on purpose."
        )
    if now is not None and verdict.is_expired(now):
        raise VerdictExpired(
            f"verdict {verdict.id}: expired at {verdict.expires_at}, now {int(now)} "
            f"({int(now) - verdict.expires_at} s late); expected now < expires_at. "
            "Fix: request a fresh verdict."
        )


def parse_verdict(data: str | bytes | Mapping[str, object]) -> Verdict:
    """Parse a verdict from JSON text or a dict, raising VerdictMalformed on bad fields."""
    try:
        if isinstance(data, str | bytes):
            return Verdict.model_validate_json(data)
        return Verdict.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'verdict'}: {err['msg']}"
            for err in exc.errors()
        )
        raise VerdictMalformed(
            f"found a malformed verdict ({problems}); expected the fields of "
            "judge.verdict.Verdict; fix: pass the verdict exactly as the judge issued it."
        ) from exc
