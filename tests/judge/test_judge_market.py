"""The judge in a market: p per (seller, fact kind) from a conservative prior, a floor
under which no seller is paid, and the best of several quoted offers."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from judge.calibration import (
    MIN_P_TO_PAY,
    NEW_SELLER_PRIOR,
    BetaCalibrator,
    calibration_subject,
)
from judge.errors import JudgeRequestInvalid
from judge.fingerprint import call_fingerprint, fingerprint
from judge.jev import Judge, PaidCallRequest
from judge.verdict import VerdictSigner, verify_verdict

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
CHEAP, HONEST, DEAR = "http://127.0.0.1:7001", "http://127.0.0.1:7002", "http://127.0.0.1:7003"


def offer(seller: str, price: int, **over: Any) -> PaidCallRequest:
    args = {"url": f"{seller}/tokens?symbol=USDC"}
    fields: dict[str, Any] = {
        "tool": "pay_http",
        "args": args,
        "call_fingerprint": call_fingerprint("pay_http", args),
        "payload_fingerprint": fingerprint({"quote": seller}),
        "price": price,
        "asset": USDC,
        "recipient": "0x" + seller[-4:].rjust(40, "0"),
        "chain_id": 31337,
        "remaining_budget": 1_000_000,
        "balance": 100_000_000,
        "per_call_cap_atomic": 500_000,
        "spend_cap_atomic": 1_000_000,
        "missing": ("token_factsheet",),
        "covered": ("block_number",),
        "tool_facts": ("token_factsheet",),
        "seller": seller,
    }
    fields.update(over)
    return PaidCallRequest(**fields)


@pytest.fixture
def judge(signer: VerdictSigner) -> Judge:
    return Judge(signer, BetaCalibrator(), allowed_assets={31337: {USDC}})


def test_a_new_seller_starts_conservative_and_each_keeps_its_own_p(judge: Judge) -> None:
    verdict = judge.decide(offer(CHEAP, 5_000))
    assert Decimal(verdict.p) == NEW_SELLER_PRIOR and verdict.decision == "approve"
    judge.recheck(verdict)  # the wallet's pre-signing re-check: the call was made
    judge.record_outcome(verdict.id, "token_factsheet", False)
    assert Decimal(judge.decide(offer(CHEAP, 5_000)).p) < NEW_SELLER_PRIOR
    assert Decimal(judge.decide(offer(HONEST, 10_000)).p) == NEW_SELLER_PRIOR


def test_an_over_claiming_seller_loses_approval_and_an_honest_one_keeps_it(judge: Judge) -> None:
    bought = {CHEAP: 0, HONEST: 0}
    for _ in range(20):
        for seller, delivers in ((CHEAP, False), (HONEST, True)):
            verdict = judge.decide(offer(seller, 10_000))  # a full outcome's price
            if verdict.decision != "approve":
                continue
            bought[seller] += 1
            judge.recheck(verdict)
            judge.record_outcome(verdict.id, "token_factsheet", delivers)
    assert bought == {CHEAP: 3, HONEST: 20}
    last = judge.decide(offer(CHEAP, 5_000))
    assert last.decision == "refuse" and Decimal(last.p) < MIN_P_TO_PAY
    assert f"below the {MIN_P_TO_PAY}" in last.reason and CHEAP in last.reason


def test_the_best_offer_wins_and_the_reason_names_the_others(judge: Judge) -> None:
    bought = judge.decide(offer(CHEAP, 5_000))
    judge.recheck(bought)
    judge.record_outcome(bought.id, "token_factsheet", False)
    request = offer(CHEAP, 5_000, alternatives=(offer(HONEST, 10_000), offer(DEAR, 2_000_000)))
    verdict = judge.decide(request)
    verify_verdict(verdict, judge.address)
    winner = request.alternatives[0]
    assert verdict.decision == "approve"
    assert verdict.payload_fingerprint == winner.payload_fingerprint
    assert verdict.call_fingerprint == winner.call_fingerprint
    assert verdict.amount == 10_000 and verdict.recipient == winner.recipient
    assert verdict.reason.startswith(f"best of 3 offers is {HONEST} at 0.01 USDC: EV ")
    assert f"{CHEAP} at 0.005 USDC lost on EV" in verdict.reason
    assert f"{DEAR} at 2.00 USDC refused: price 2.00 USDC exceeds the per-call cap" in (
        verdict.reason
    )


def test_when_no_offer_is_payable_the_proposed_one_is_refused(judge: Judge) -> None:
    request = offer(CHEAP, 900_000, alternatives=(offer(HONEST, 950_000),))
    verdict = judge.decide(request)
    assert verdict.decision == "refuse"
    assert verdict.payload_fingerprint == request.payload_fingerprint
    assert f"{HONEST} at 0.95 USDC refused" in verdict.reason


def test_alternatives_cross_the_wire_and_are_checked(judge: Judge) -> None:
    request = offer(CHEAP, 5_000, alternatives=(offer(HONEST, 10_000),))
    again = PaidCallRequest.from_wire(request.to_wire())
    assert again == request and again.alternatives[0].seller == HONEST
    forged = offer(CHEAP, 5_000, alternatives=(offer(HONEST, 10_000, call_fingerprint="0x" + "1" * 64),))
    with pytest.raises(JudgeRequestInvalid, match="call_fingerprint"):
        judge.decide(forged)
    with pytest.raises(JudgeRequestInvalid, match="nested alternatives"):
        offer(CHEAP, 5_000, alternatives=(request,))


def test_outcomes_are_filed_under_the_seller_the_verdict_was_issued_for(judge: Judge) -> None:
    # The caller cannot move another seller's p: the subject comes from the judge's record.
    verdict = judge.decide(offer(HONEST, 10_000))
    judge.recheck(verdict)
    judge.record_outcome(verdict.id, "token_factsheet", False)
    assert judge.calibrator.counts(calibration_subject("pay_http", HONEST), "token_factsheet") == (0, 1)
    assert judge.calibrator.counts(calibration_subject("pay_http", CHEAP), "token_factsheet") == (0, 0)


def _buy(judge: Judge, seller: str, covered: bool, delivery: Any = "delivered", *,
         task: str = "t-0", price: int = 10_000) -> Any:
    verdict = judge.decide(offer(seller, price, task_id=task))
    assert verdict.decision == "approve", verdict.reason
    judge.recheck(verdict)
    judge.record_outcome(verdict.id, "token_factsheet", covered, delivery)
    return verdict


@pytest.mark.parametrize("delivered_before", [0, 1, 10])
def test_a_settled_non_delivery_weighs_one_outcome_and_the_reporting_task_pays_it_no_more(
    judge: Judge, delivered_before: int
) -> None:
    # The task that paid for nothing does not pay that seller again, and says why; every
    # other task reads one failed outcome more (a task's word moves a shared p by one
    # outcome at most: the seller stays payable, p 0.40 -> 0.27 for a new one).
    for i in range(delivered_before):
        _buy(judge, CHEAP, True, task=f"t-good-{i}")
    _buy(judge, CHEAP, False, "paid-not-delivered", task="t-lost")
    again = judge.decide(offer(CHEAP, 10_000, task_id="t-lost"))
    assert again.decision == "refuse" and "took this task's payment without delivering" in again.reason
    other = judge.decide(offer(CHEAP, 10_000, task_id="t-other"))
    expected = (NEW_SELLER_PRIOR * 2 + delivered_before) / (3 + delivered_before)
    assert Decimal(other.p) == expected.quantize(Decimal("0.000001")), other.p
    assert other.decision == "approve" and "took payment without delivering once" in other.reason
    # Another seller and another fact kind of the same seller keep their own p.
    assert judge.decide(offer(HONEST, 10_000, task_id="t-lost")).decision == "approve"


def test_it_takes_three_tasks_paying_a_new_seller_in_full_to_take_it_under_the_floor(
    judge: Judge,
) -> None:
    for i in range(2):
        _buy(judge, CHEAP, False, "paid-not-delivered", task=f"t-{i}")
    assert judge.decide(offer(CHEAP, 10_000, task_id="t-next")).decision == "approve"  # p 0.20
    _buy(judge, CHEAP, False, "paid-not-delivered", task="t-2")
    last = judge.decide(offer(CHEAP, 10_000, task_id="t-next"))
    assert last.decision == "refuse" and Decimal(last.p) < MIN_P_TO_PAY, last.reason
    assert "took payment without delivering 3 times" in last.reason, last.reason


def test_an_outcome_weighs_what_was_paid_and_a_non_delivery_no_more(judge: Judge) -> None:
    subject = calibration_subject("pay_http", CHEAP)
    _buy(judge, CHEAP, False)
    assert judge.calibrator.counts(subject, "token_factsheet") == (0, 1)
    _buy(judge, CHEAP, False, "paid-not-delivered", task="t-1")
    assert judge.calibrator.counts(subject, "token_factsheet") == (0, 2)
    _buy(judge, HONEST, True, price=2_500)  # a quarter of a full outcome's price
    assert judge.calibrator.counts(calibration_subject("pay_http", HONEST), "token_factsheet") == (
        Decimal("0.25"), Decimal("0.25"))
    assert judge.calibrator.non_deliveries(subject, "token_factsheet") == 1


def test_a_covered_call_cannot_be_reported_as_not_delivered(judge: Judge) -> None:
    from judge.errors import JudgeConfigError

    verdict = judge.decide(offer(CHEAP, 5_000))
    judge.recheck(verdict)
    with pytest.raises(JudgeConfigError, match="covered=True with delivery='paid-not-delivered'"):
        judge.record_outcome(verdict.id, "token_factsheet", True, "paid-not-delivered")
    # Nothing was taken: the honest outcome can still be recorded.
    judge.record_outcome(verdict.id, "token_factsheet", True)
