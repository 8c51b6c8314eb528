"""The JEV decision: every ruling with its reason text, exact EV, recheck and revocation."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from eth_account.signers.local import LocalAccount

from judge.calibration import BetaCalibrator, FixedCalibrator
from judge.errors import (
    JudgeConfigError,
    JudgeRequestInvalid,
    OutcomeRefused,
    VerdictConsumed,
    VerdictExpired,
    VerdictRevoked,
    VerdictSignatureInvalid,
    VerdictUnknown,
)
from judge.fingerprint import call_fingerprint, fingerprint
from judge.jev import Judge, format_usdc
from judge.records import VerdictRecords
from judge.request import CallRecord, PaidCallRequest
from judge.verdict import Verdict, VerdictSigner, verify_verdict

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
SELLER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
OTHER_TOKEN = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"
NOW = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def _request(**over: Any) -> PaidCallRequest:
    args = over.pop("args", {"symbol": "ETH"})
    tool = over.pop("tool", "price_feed")
    fields: dict[str, Any] = {
        "tool": tool,
        "args": args,
        "call_fingerprint": call_fingerprint(tool, args),
        "payload_fingerprint": fingerprint({"x402": "quote"}),
        "price": 100_000,
        "asset": USDC,
        "recipient": SELLER,
        "chain_id": 31337,
        "remaining_budget": 900_000,
        "balance": 100_000_000,
        "per_call_cap_atomic": 500_000,
        "spend_cap_atomic": 1_000_000,
        "approval_threshold_atomic": None,
        "missing": ("eth price usd", "base fee gwei"),
        "covered": ("block number", "gas price"),
        "tool_facts": ("eth_price_usd",),
        "declared_coverage": Decimal("0.8"),
        "history": (CallRecord("base_fee", True, ("gas price",), 0),),
    }
    fields.update(over)
    return PaidCallRequest(**fields)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def events() -> list[tuple[str, dict[str, Any]]]:
    return []


@pytest.fixture
def judge(signer: VerdictSigner, clock: Clock, events: list[Any]) -> Judge:
    return Judge(
        signer,
        FixedCalibrator(),
        allowed_assets={31337: {USDC}},
        clock=clock,
        emit=lambda name, data: events.append((name, data)),
    )


def _decide(judge: Judge, **over: Any) -> Verdict:
    verdict = judge.decide(_request(**over))
    verify_verdict(verdict, judge.address)
    return verdict


def test_format_usdc_has_two_or_more_decimals() -> None:
    assert format_usdc(400_000) == "0.40"
    assert format_usdc(1) == "0.000001"
    assert format_usdc(12_345_678) == "12.345678"
    assert format_usdc(Decimal("-0.5")) == "0.00"
    assert format_usdc(Decimal("122220.777778")) == "0.122221"
    assert format_usdc(-250_000) == "-0.25"


def test_approve(judge: Judge) -> None:
    v = _decide(judge)
    assert v.decision == "approve"
    assert v.reason == (
        "EV 0.10 USDC > 0: p 0.80 x value 0.25 USDC (1 missing item x 0.25 USDC) - price 0.10 USDC"
    )
    assert (v.p, v.ev) == ("0.8", "100000")
    req = _request()
    assert (v.amount, v.asset, v.recipient, v.chain_id) == (100_000, USDC, SELLER, 31337)
    assert v.call_fingerprint == req.call_fingerprint
    assert v.payload_fingerprint == req.payload_fingerprint
    assert v.expires_at - v.issued_at == 120 and v.issued_at == int(NOW)


def test_refuse_over_remaining_budget(judge: Judge) -> None:
    v = _decide(judge, price=400_000, remaining_budget=250_000)
    assert v.decision == "refuse"
    assert v.reason.startswith("price 0.40 USDC exceeds remaining budget 0.25 USDC (fix: `nib run --max-spend`")


def test_refuse_over_balance(judge: Judge) -> None:
    v = _decide(judge, balance=50_000)
    assert v.decision == "refuse"
    assert v.reason.startswith("price 0.10 USDC exceeds wallet balance 0.05 USDC (fix: fund the wallet")


def test_refuse_over_per_call_cap(judge: Judge) -> None:
    v = _decide(judge, per_call_cap_atomic=50_000)
    assert v.decision == "refuse"
    assert v.reason == ("price 0.10 USDC exceeds the per-call cap 0.05 USDC (fix: `nib run "
                        "--per-call-cap`, or per_call_cap_atomic in [limits])")


def test_refuse_when_nothing_missing_is_covered_whatever_the_model_says(
    signer: VerdictSigner, clock: Clock
) -> None:
    sure = Judge(signer, FixedCalibrator(Decimal(1)), allowed_assets={31337: [USDC]}, clock=clock)
    v = sure.decide(
        _request(tool_facts=("block_number", "gas_price"), declared_coverage=Decimal(1))
    )
    assert v.decision == "refuse"
    assert v.reason == (
        "price_feed covers none of the missing items (eth price usd, base fee gwei); it "
        "provides block_number, gas_price: a payment that covers nothing still missing "
        "is refused"
    )
    assert Decimal(v.p) == 0 and Decimal(v.ev) == -100_000


def test_refuse_unknown_asset(judge: Judge) -> None:
    v = _decide(judge, asset=OTHER_TOKEN)
    assert v.decision == "refuse"
    assert v.reason == (
        f"unknown asset {OTHER_TOKEN} on chain 31337 (for an authorization, its EIP-712 "
        f"verifyingContract): allowed assets are {USDC.lower()}; fix: pay in the configured USDC"
    )


def test_refuse_unknown_chain(judge: Judge) -> None:
    v = _decide(judge, chain_id=1)
    assert v.decision == "refuse"
    assert v.reason == (
        "unknown chain 1: the judge pays only on chains 31337; fix: quote on an allowed "
        "chain or configure allowed_assets"
    )


def test_refuse_non_positive_ev(judge: Judge) -> None:
    v = _decide(judge, price=200_000)
    assert v.decision == "refuse"
    assert v.reason == (
        "expected value 0.00 USDC is not positive: p 0.80 x value 0.25 USDC "
        "(1 missing item x 0.25 USDC) - price 0.20 USDC"
    )


def test_escalate_at_the_approval_threshold(judge: Judge) -> None:
    v = _decide(judge, approval_threshold_atomic=100_000)
    assert v.decision == "escalate"
    assert v.reason == (
        "price 0.10 USDC is at or above the approval threshold 0.10 USDC: a human must "
        "approve (EV 0.10 USDC = p 0.80 x value 0.25 USDC (1 missing item x 0.25 USDC) "
        "- price 0.10 USDC)"
    )
    assert _decide(judge, approval_threshold_atomic=100_001).decision == "approve"


def test_answer_when_nothing_is_missing(judge: Judge) -> None:
    v = _decide(judge, missing=(), covered=("a", "b", "c"))
    assert v.decision == "answer"
    assert v.reason == (
        "nothing on the checklist is missing (3 of 3 items covered): the history "
        "suffices to answer; no payment needed"
    )
    assert (v.p, v.ev) == ("0", "0")


def test_answer_takes_precedence_over_asset_checks(judge: Judge) -> None:
    assert _decide(judge, missing=(), chain_id=1).decision == "answer"


def test_ev_is_exact_and_value_counts_coverable_items(judge: Judge) -> None:
    # 3 checklist items: 1.00 USDC / 3 = 333_333 atomic per item, 2 of them coverable.
    v = _decide(
        judge,
        missing=("eth price usd", "base fee gwei"),
        covered=("gas price",),
        tool_facts=("eth_price_usd", "base_fee_gwei"),
        declared_coverage=Decimal("0.333333"),
        price=100_001,
    )
    assert Decimal(v.ev) == Decimal("0.333333") * 666_666 - 100_001
    assert v.ev == "122220.777778"
    assert "(2 missing items x 0.333333 USDC)" in v.reason


def test_value_per_item_override(signer: VerdictSigner, clock: Clock) -> None:
    j = Judge(
        signer,
        FixedCalibrator(),
        allowed_assets={31337: [USDC]},
        value_per_item=50_000,
        clock=clock,
    )
    v = j.decide(_request())
    assert v.decision == "refuse" and v.ev == "-60000"


def test_p_is_the_best_coverable_fact(signer: VerdictSigner, clock: Clock) -> None:
    cal = BetaCalibrator()
    for _ in range(8):
        cal.record("price_feed", "base_fee_gwei", Decimal("0.5"), False)
    j = Judge(signer, cal, allowed_assets={31337: [USDC]}, clock=clock)
    v = j.decide(_request(tool_facts=("eth_price_usd", "base_fee_gwei")))
    assert v.p == "0.8"  # eth_price_usd keeps its prior; base_fee_gwei fell to 0.16


def test_request_must_match_its_call_fingerprint(judge: Judge) -> None:
    req = _request()
    with pytest.raises(JudgeRequestInvalid, match="expected 0x.* for price_feed with these args"):
        judge.decide(replace(req, args={"symbol": "BTC"}))


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"price": -1}, r"found price=-1; expected an int >= 0"),
        ({"price": 0.5}, r"found price=0.5; expected an int >= 0"),
        ({"balance": True}, r"found balance=True"),
        ({"payload_fingerprint": "0xABC"}, r"found payload_fingerprint='0xABC'"),
        ({"declared_coverage": Decimal("1.5")}, r"declared_coverage=1.5"),
        ({"declared_coverage": 0.8}, r"declared_coverage=0.8 \(float\)"),
    ],
)
def test_malformed_requests_are_refused(over: dict[str, Any], message: str) -> None:
    with pytest.raises(JudgeRequestInvalid, match=message):
        _request(**over)


def test_wire_round_trip() -> None:
    req = _request(approval_threshold_atomic=300_000, checklist_size=4)
    wire = json.loads(json.dumps(req.to_wire()))
    assert PaidCallRequest.from_wire(wire) == req
    with pytest.raises(JudgeRequestInvalid, match="malformed paid-call request"):
        PaidCallRequest.from_wire({**wire, "surprise": 1})


def test_events_are_json_and_keyless(
    judge: Judge, events: list[Any], judge_account: LocalAccount
) -> None:
    v = _decide(judge)
    judge.recheck(v)
    judge.record_outcome(v.id, "eth_price_usd", True)
    dumped = json.dumps(events)
    assert [name for name, _ in events] == ["judge.verdict", "judge.consumed", "judge.outcome"]
    assert events[0][1]["verdict_id"] == v.id
    assert judge_account.key.hex().removeprefix("0x") not in dumped


def test_bad_value_per_item_is_a_config_error(signer: VerdictSigner) -> None:
    with pytest.raises(JudgeConfigError, match="value_per_item=0"):
        Judge(signer, allowed_assets={}, value_per_item=0)


# --- recheck ---------------------------------------------------------------------------


def test_recheck_accepts_a_standing_verdict(judge: Judge) -> None:
    judge.recheck(_decide(judge))


def test_recheck_refuses_a_revoked_verdict(judge: Judge) -> None:
    v = _decide(judge)
    judge.revoke(v.id)
    with pytest.raises(VerdictRevoked, match=f"verdict {v.id} was revoked by the judge"):
        judge.recheck(v)


def test_recheck_refuses_after_key_rotation(
    judge: Judge, outsider_account: LocalAccount, signer: VerdictSigner
) -> None:
    v = _decide(judge)
    judge.rotate(VerdictSigner(outsider_account))
    with pytest.raises(VerdictRevoked) as err:
        judge.recheck(v)
    assert str(err.value) == (
        f"verdict {v.id} is signed by {signer.address}, but the judge's current key is "
        f"{outsider_account.address}; expected a verdict from the current key. "
        "Fix: request a fresh verdict."
    )
    judge.recheck(judge.decide(_request()))


def test_recheck_refuses_expired_and_tampered(judge: Judge, clock: Clock) -> None:
    v = _decide(judge)
    with pytest.raises(VerdictSignatureInvalid, match="altered after signing"):
        judge.recheck(v.model_copy(update={"amount": v.amount + 1}))
    clock.now += 120
    with pytest.raises(VerdictExpired, match=f"verdict {v.id}: expired at {int(NOW) + 120}"):
        judge.recheck(v)


def test_record_outcome_moves_p(signer: VerdictSigner, clock: Clock) -> None:
    j = Judge(signer, BetaCalibrator(), allowed_assets={31337: [USDC]}, clock=clock)
    executed = [j.decide(_request()) for _ in range(3)]
    assert {v.p for v in executed} == {"0.8"}
    for v in executed:
        j.recheck(v)
        j.record_outcome(v.id, "eth price usd", False)
    # (0.8 * 2 + 0) / (2 + 3) = 0.32
    v = j.decide(_request())
    assert v.p == "0.32" and v.decision == "refuse"
    assert j.calibration()["n"] == 3


# ------------------------------------------------------------------ known recipients


def test_refuse_a_recipient_outside_known_recipients(judge: Judge) -> None:
    v = _decide(judge, known_recipients=(OTHER_TOKEN, USDC))
    assert v.decision == "refuse" and v.recipient == SELLER
    assert v.reason == (
        f"unknown recipient {SELLER}: this call may pay only the 2 addresses the task names "
        "or the user allowlisted; fix: name the recipient in the task or add it to the "
        "allowlist"
    )
    assert (v.p, v.ev) == ("0", "-100000")
    one = _decide(judge, known_recipients=(OTHER_TOKEN,))
    assert "may pay only the 1 address the task names" in one.reason
    assert _decide(judge, known_recipients=()).decision == "refuse"


def test_known_recipients_match_checksum_insensitively(judge: Judge) -> None:
    assert _decide(judge, known_recipients=(SELLER.lower(),)).decision == "approve"
    assert _decide(judge, known_recipients=(SELLER.upper().replace("0X", "0x"),)).decision == (
        "approve"
    )


def test_known_recipients_default_skips_the_check(judge: Judge) -> None:
    """Backward compatible: a request without the field is judged as before."""
    assert _request().known_recipients is None
    assert _decide(judge).decision == "approve"


def test_answer_takes_precedence_over_the_recipient_check(judge: Judge) -> None:
    v = _decide(judge, missing=(), known_recipients=())
    assert v.decision == "answer"


def test_known_recipients_on_the_wire() -> None:
    req = _request(known_recipients=[SELLER])
    assert req.known_recipients == (SELLER,)
    wire = json.loads(json.dumps(req.to_wire()))
    assert wire["known_recipients"] == [SELLER]
    assert PaidCallRequest.from_wire(wire) == req
    # Unset, the field is not sent: a judge service that predates it still parses.
    plain = _request().to_wire()
    assert "known_recipients" not in plain
    assert PaidCallRequest.from_wire(plain).known_recipients is None


def test_malformed_known_recipients_are_refused() -> None:
    with pytest.raises(JudgeRequestInvalid, match=r"found known_recipients='0x1'; expected a list"):
        _request(known_recipients="0x1")
    with pytest.raises(JudgeRequestInvalid, match="found known_recipients=\\(1,\\)"):
        _request(known_recipients=(1,))


# --- the judge's record: single use where issued, outcomes only for its own verdicts ---


def test_a_verdict_is_consumed_once_whichever_wallet_presents_it(judge: Judge) -> None:
    v = _decide(judge)
    assert judge.verdict_standing(v.id, v.payload_fingerprint) == "unconsumed"
    judge.recheck(v)  # the first wallet's pre-signing re-check
    with pytest.raises(VerdictConsumed, match=f"verdict {v.id} was already used"):
        judge.recheck(v)  # a second wallet (its own database) presents the same verdict
    assert judge.verdict_standing(v.id, v.payload_fingerprint) == "consumed"
    assert judge.verdict_standing(v.id, "0x" + "ab" * 32) == "fingerprint-mismatch"
    assert judge.verdict_standing("f" * 32, v.payload_fingerprint) == "not-issued"


def test_a_verdict_signed_by_the_judge_key_but_never_issued_is_refused(
    judge: Judge, signer: VerdictSigner
) -> None:
    forged = signer.issue(
        decision="approve",
        call_fingerprint=_request().call_fingerprint,
        payload_fingerprint=_request().payload_fingerprint,
        amount=1,
        asset=USDC,
        recipient=SELLER,
        chain_id=31337,
        p="0.9",
        ev="1",
        reason="minted outside the judge's decide",
        now=NOW,
    )
    with pytest.raises(VerdictUnknown, match="never issued by this judge"):
        judge.recheck(forged)


def test_consumption_survives_a_judge_restart(
    signer: VerdictSigner, clock: Clock, tmp_path: Path
) -> None:
    db = tmp_path / "nib.db"
    first = Judge(signer, allowed_assets={31337: [USDC]}, clock=clock, records=VerdictRecords(db))
    v = first.decide(_request())
    first.recheck(v)
    again = Judge(signer, allowed_assets={31337: [USDC]}, clock=clock, records=VerdictRecords(db))
    with pytest.raises(VerdictConsumed):
        again.recheck(v)
    assert again.verdict_standing(v.id, v.payload_fingerprint) == "consumed"


def test_outcomes_are_taken_only_for_executed_verdicts_of_this_judge(
    signer: VerdictSigner, clock: Clock
) -> None:
    j = Judge(signer, BetaCalibrator(), allowed_assets={31337: [USDC]}, clock=clock)
    v = j.decide(_request())
    with pytest.raises(OutcomeRefused, match="no wallet consumed"):
        j.record_outcome(v.id, "eth_price_usd", True)  # approved, never executed
    with pytest.raises(OutcomeRefused, match="never issued it"):
        j.record_outcome("0" * 32, "eth_price_usd", True)
    j.recheck(v)
    with pytest.raises(OutcomeRefused, match="not one the call could cover"):
        j.record_outcome(v.id, "btc_price_usd", True)
    j.record_outcome(v.id, "eth_price_usd", True)
    for _ in range(200):  # an attacker replaying the outcome to push p up
        with pytest.raises(OutcomeRefused, match="already recorded"):
            j.record_outcome(v.id, "eth_price_usd", True)
    assert j.calibration()["n"] == 1
    assert j.decide(_request()).p == "0.866667"  # (0.8*2 + 1) / 3, not ~0.99
