"""Verdicts: signing, verification, tamper resistance, key hygiene."""

from __future__ import annotations

import copy
import pickle
from decimal import Decimal
from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount
from hypothesis import given, settings
from hypothesis import strategies as st

from judge.errors import (
    JudgeConfigError,
    VerdictExpired,
    VerdictMalformed,
    VerdictSignatureInvalid,
    VerdictWrongSigner,
)
from judge.fingerprint import call_fingerprint, fingerprint
from judge.verdict import (
    DEFAULT_TTL_S,
    Verdict,
    VerdictSigner,
    parse_verdict,
    recover_signer,
    verify_verdict,
)

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
SELLER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
NOW = 1_800_000_000


def _issue(signer: VerdictSigner, **over: Any) -> Verdict:
    fields: dict[str, Any] = {
        "decision": "approve",
        "call_fingerprint": call_fingerprint("paid_quote", {"q": "eth"}),
        "payload_fingerprint": fingerprint({"payload": 1}),
        "amount": 250_000,
        "asset": USDC,
        "recipient": SELLER,
        "chain_id": 31337,
        "p": Decimal("0.7"),
        "ev": Decimal("100000.0"),
        "reason": "EV 0.10 USDC > 0",
        "now": NOW,
    }
    fields.update(over)
    return signer.issue(**fields)


def test_issue_fills_identity_expiry_and_signs(signer: VerdictSigner) -> None:
    v = _issue(signer)
    assert len(v.id) == 32 and v.judge == signer.address
    assert (v.issued_at, v.expires_at) == (NOW, NOW + DEFAULT_TTL_S)
    assert (v.p, v.ev) == ("0.7", "100000")  # canonical decimal strings
    verify_verdict(v, signer.address)
    verify_verdict(v, signer.address.lower())
    assert recover_signer(v) == signer.address
    assert _issue(signer).id != v.id


def test_signature_is_eip191_over_the_body_fingerprint(signer: VerdictSigner) -> None:
    v = _issue(signer)
    text = "nib verdict v1\n" + fingerprint(v.body())
    assert "signature" not in v.body()
    recovered = Account.recover_message(
        encode_defunct(text=text), signature=bytes.fromhex(v.signature[2:])
    )
    assert recovered == signer.address
    assert v.signing_digest().startswith("0x") and len(v.signing_digest()) == 66


def test_json_round_trip_keeps_the_signature_valid(signer: VerdictSigner) -> None:
    v = _issue(signer)
    again = parse_verdict(v.model_dump_json())
    assert again == v
    verify_verdict(again, signer.address)


TAMPER = {
    "decision": "escalate",
    "call_fingerprint": "0x" + "11" * 32,
    "payload_fingerprint": "0x" + "22" * 32,
    "amount": 250_001,
    "asset": SELLER,
    "recipient": USDC,
    "chain_id": 84532,
    "issued_at": NOW - 1,
    "expires_at": NOW + 10_000,
    "p": "0.9",
    "ev": "1",
    "reason": "tampered",
    "id": "f" * 32,
}


@pytest.mark.parametrize(("field", "value"), sorted(TAMPER.items()))
def test_any_tampered_field_breaks_the_signature(
    signer: VerdictSigner, field: str, value: Any
) -> None:
    tampered = parse_verdict({**_issue(signer).model_dump(), field: value})
    with pytest.raises(VerdictSignatureInvalid, match=r"altered after signing"):
        verify_verdict(tampered, signer.address)


@settings(max_examples=50, deadline=None)
@given(amount=st.integers(min_value=0, max_value=2**64))
def test_amount_tamper_property(signer: VerdictSigner, amount: int) -> None:
    v = _issue(signer, amount=250_000)
    if amount == v.amount:
        return
    with pytest.raises(VerdictSignatureInvalid):
        verify_verdict(v.model_copy(update={"amount": amount}), signer.address)


def test_verdict_signed_by_another_key_is_refused(
    signer: VerdictSigner, outsider_account: LocalAccount
) -> None:
    forged = _issue(VerdictSigner(outsider_account))
    with pytest.raises(VerdictWrongSigner) as err:
        verify_verdict(forged, signer.address)
    assert str(err.value).startswith(f"verdict {forged.id}: signed by {outsider_account.address}")
    assert f"expected the trusted judge {signer.address}" in str(err.value)


def test_relabelled_judge_field_is_refused(
    signer: VerdictSigner, outsider_account: LocalAccount
) -> None:
    forged = _issue(VerdictSigner(outsider_account))
    relabelled = forged.model_copy(update={"judge": signer.address})
    with pytest.raises(
        VerdictSignatureInvalid, match=f"expected the verdict's judge {signer.address}"
    ):
        verify_verdict(relabelled, signer.address)


def test_junk_signature_is_refused(signer: VerdictSigner) -> None:
    junk = _issue(signer).model_copy(update={"signature": "0x" + "00" * 65})
    with pytest.raises(VerdictSignatureInvalid, match="does not recover to any key"):
        verify_verdict(junk, signer.address)


def test_expiry(signer: VerdictSigner) -> None:
    v = _issue(signer, ttl_s=30)
    assert not v.is_expired(NOW + 29) and v.is_expired(NOW + 30)
    verify_verdict(v, signer.address, now=NOW + 29)
    with pytest.raises(VerdictExpired, match=r"expired at 1800000030, now 1800000031 \(1 s late\)"):
        verify_verdict(v, signer.address, now=NOW + 31)


def test_verdicts_are_frozen_and_strict(signer: VerdictSigner) -> None:
    v = _issue(signer)
    with pytest.raises(Exception, match="frozen"):
        v.amount = 1  # type: ignore[misc]
    with pytest.raises(VerdictMalformed, match="amount"):
        parse_verdict({**v.model_dump(), "amount": "250000"})
    with pytest.raises(VerdictMalformed, match="p must be within"):
        parse_verdict({**v.model_dump(), "p": "1.5"})
    with pytest.raises(VerdictMalformed, match="needs a payload_fingerprint"):
        parse_verdict({**v.model_dump(), "payload_fingerprint": None})
    with pytest.raises(VerdictMalformed, match="bonus: Extra inputs"):
        parse_verdict({**v.model_dump(), "bonus": 1})
    answer = _issue(signer, decision="answer", payload_fingerprint=None)
    verify_verdict(answer, signer.address)


def test_issue_refuses_floats_and_bad_ttl(signer: VerdictSigner) -> None:
    with pytest.raises(JudgeConfigError, match="never float"):
        _issue(signer, p=0.5)
    with pytest.raises(JudgeConfigError, match="expected a positive int"):
        _issue(signer, ttl_s=0)


def test_bad_trusted_judge_is_a_config_error(signer: VerdictSigner) -> None:
    with pytest.raises(JudgeConfigError, match="expected a 0x address"):
        verify_verdict(_issue(signer), "judge")


def test_signer_never_exposes_its_key(signer: VerdictSigner, judge_account: LocalAccount) -> None:
    key_hex = judge_account.key.hex()
    assert repr(signer) == f"VerdictSigner(address={judge_account.address})"
    assert key_hex.removeprefix("0x") not in repr(signer) + str(signer)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(signer)
    with pytest.raises(TypeError, match="cannot be pickled"):
        copy.copy(signer)
    v = _issue(signer)
    assert key_hex.removeprefix("0x") not in v.model_dump_json()


def test_signer_refuses_non_accounts() -> None:
    with pytest.raises(JudgeConfigError, match="expected an eth-account LocalAccount"):
        VerdictSigner(object())  # type: ignore[arg-type]


def test_fast_path_signature_equals_eth_account(
    signer: VerdictSigner, judge_account: LocalAccount
) -> None:
    v = _issue(signer)
    expected = judge_account.sign_message(v.signing_message()).signature
    assert v.signature == "0x" + bytes(expected).hex()


class _ExternalSigner:
    """An account without a raw key (think hardware or KMS): only address + sign_message."""

    def __init__(self, account: LocalAccount) -> None:
        self._account = account
        self.address = account.address

    def sign_message(self, signable_message: Any) -> Any:
        return self._account.sign_message(signable_message)


def test_signers_without_a_raw_key_work(judge_account: LocalAccount) -> None:
    external = VerdictSigner(_ExternalSigner(judge_account))
    v = _issue(external)
    verify_verdict(v, judge_account.address)
    assert v.signature == _issue(VerdictSigner(judge_account), verdict_id=v.id).signature
