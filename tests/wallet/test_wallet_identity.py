"""The wallet decides from what it can prove, not from what its caller says (issue 22):
the run a payment is booked under and its cap come from the verdict's task, a reported
failure counts only when the chain proves it, and the signing domain is the token's."""

from __future__ import annotations

from typing import Any

import pytest
from _wallet_support import DIME, ONE_USDC, approve, quote, submit_authorization

from judge.verdict import VerdictSigner
from wallet.errors import CapExceeded, FailureUnproven, PayloadMismatch, TaskMismatch


def test_a_payment_is_booked_under_the_verdicts_task_and_held_to_its_cap(
    chain: Any, make_wallet: Any, judge_signer: VerdictSigner
) -> None:
    wallet = make_wallet()
    payload = quote(chain)
    verdict = approve(judge_signer, payload, task_id="task-a", task_cap=DIME)
    with pytest.raises(TaskMismatch) as refused:
        wallet.sign_typed_data(payload, verdict, run_id="task-victim", spend_cap_atomic=10**12)
    assert "'task-victim'" in str(refused.value) and "'task-a'" in str(refused.value)
    assert wallet.meter.usage("task-victim").committed == 0
    signed = wallet.sign_typed_data(payload, verdict, run_id="", spend_cap_atomic=10**12)
    assert signed.run_id == "task-a" and wallet.meter.usage("task-a").committed == DIME
    # The cap is the task's registered one (0.10), not the 10^12 the caller named.
    again = quote(chain)
    with pytest.raises(CapExceeded):
        wallet.sign_typed_data(again, approve(judge_signer, again, task_id="task-a",
                                              task_cap=DIME), run_id="task-a", spend_cap_atomic=10**12)


def test_a_reported_failure_counts_only_once_the_chain_proves_it(
    chain: Any, make_wallet: Any, judge_signer: VerdictSigner
) -> None:
    wallet = make_wallet()
    payload = quote(chain)
    signed = wallet.sign_typed_data(payload, approve(judge_signer, payload), run_id="r", spend_cap_atomic=ONE_USDC)
    with pytest.raises(FailureUnproven) as refused:
        wallet.fail(signed, "the seller refused")
    assert "still use it" in str(refused.value)
    assert wallet.spend_row(signed.ledger_id).status == "signed"
    submit_authorization(chain, signed)  # the agent uses it all the same
    with pytest.raises(FailureUnproven):
        wallet.fail(signed, "the seller refused")
    assert wallet.spend_row(signed.ledger_id).status == "settled"  # the chain says so
    assert wallet.meter.usage("r").settled == DIME


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"name": "Not USDC"}, "EIP-712 domain name"),
        # Found by an outside red team: the four right fields plus a salt is another
        # domain's separator, which the token never verifies under.
        ({"salt": "0x" + "11" * 32}, "EIP-712 domain fields"),
    ],
)
def test_an_authorization_under_another_domain_is_not_signed(
    chain: Any, make_wallet: Any, judge_signer: VerdictSigner, change: dict[str, str],
    named: str,
) -> None:
    wallet = make_wallet()
    payload = quote(chain)
    payload["domain"] = {**payload["domain"], **change}
    payload["types"] = {k: v for k, v in payload["types"].items() if k != "EIP712Domain"}
    with pytest.raises(PayloadMismatch) as refused:
        wallet.sign_typed_data(payload, approve(judge_signer, payload), run_id="r", spend_cap_atomic=ONE_USDC)
    assert named in str(refused.value), refused.value
    assert wallet.meter.usage("r").committed == 0
