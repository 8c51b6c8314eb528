"""Thresholds written as people write numbers ("1k", "1,000", "3.5e0", "half a USDC",
"3500000 atomic units of USDC", "1M gas"), graded against the chain on the eval's private
devnet. Outside round 56 got "Does 0xA hold more than 1k USDC?" answered "yes" for 90.25
USDC, at exit 0: the "k" was dropped and the test was against 1. Each is read as the
number said (judge.amounts.plain_numbers, which the judge's mandates read through too),
and a number with letters nobody reads ("2x") is declined, never read as 2.
"""

from __future__ import annotations

from typing import Any

import pytest
from _graded import assert_answered_right, graded_fixture

from agent.eval.suite import EvalTask, TaskOutcome


def _test(of: dict[str, Any], op: str, than: str) -> dict[str, Any]:
    return {"probe": "test", "of": of, "op": op, "than": than}


_OUTSIDER = {"probe": "usdc_balance", "address": "{outsider}"}
ASKED = [
    EvalTask("thousand-k", "numbers", "condition", "Does {outsider} hold more than 1k USDC?",
             "answer", (_test(_OUTSIDER, ">", "1000"),)),
    EvalTask("thousand-comma", "numbers", "condition",
             "Is the USDC balance of {outsider} above 1,000 USDC?", "answer", (_test(_OUTSIDER, ">", "1000"),)),
    EvalTask("atomic-units", "numbers", "condition",
             "Does {outsider} hold more than 3500000 atomic units of USDC?", "answer",
             (_test(_OUTSIDER, ">", "3.5"),)),
    EvalTask("half-a", "numbers", "condition", "Is the USDC balance of {seller} above half a USDC?",
             "answer", (_test({"probe": "usdc_balance", "address": "{seller}"}, ">", "0.5"),)),
    EvalTask("exponent", "numbers", "condition", "Has {outsider} sent more than 3e0 USDC?", "answer",
             (_test({"probe": "usdc_sent_total", "address": "{outsider}"}, ">", "3"),)),
    EvalTask("million-gas", "numbers", "condition", "Did block 3 use more than 1M gas?", "answer",
             (_test({"probe": "block_gas_used", "block": 3}, ">", "1000000"),)),
    EvalTask("kilo-gwei", "numbers", "condition", "Is the base fee above 1k gwei?", "answer",
             (_test({"probe": "base_fee_gwei", "block": "latest"}, ">", "1000"),)),
    # Outside round 57: "$2" with no "of USDC", atomic units with no "of USDC", and the
    # total supply tested against a number were declined.
    EvalTask("dollars", "numbers", "condition", "Is the USDC balance of {outsider} above $2?",
             "answer", (_test(_OUTSIDER, ">", "2"),)),
    EvalTask("atomic-bare", "numbers", "condition",
             "Is the USDC balance of {seller} more than 3000000 atomic units?", "answer",
             (_test({"probe": "usdc_balance", "address": "{seller}"}, ">", "3"),)),
    EvalTask("supply-million", "numbers", "condition", "Is the total supply of USDC more than 1M USDC?",
             "answer", (_test({"probe": "token_supply"}, ">", "1000000"),)),
    EvalTask("supply-exponent", "numbers", "condition", "Is the total supply of USDC at least 7e0 USDC?",
             "answer", (_test({"probe": "token_supply"}, ">=", "7"),)),
]  # fmt: skip
UNREAD = EvalTask("glued-letter", "numbers", "condition", "Does {outsider} hold more than 2x USDC?",
                  "answer", (_test(_OUTSIDER, ">", "2"),))


outcomes = graded_fixture("numbers", [*ASKED, UNREAD])


@pytest.mark.parametrize("qid", [t.id for t in ASKED])
def test_each_threshold_is_the_number_written(qid: str, outcomes: dict[str, TaskOutcome]) -> None:
    t = outcomes[qid]
    assert_answered_right(t)


def test_both_answers_occur(outcomes: dict[str, TaskOutcome]) -> None:
    said = " ".join(outcomes[t.id].answer for t in ASKED)
    assert ": yes (derived" in said and ": no (derived" in said, said


def test_a_number_with_letters_nobody_reads_is_declined_not_read_as_the_number(
    outcomes: dict[str, TaskOutcome],
) -> None:
    t = outcomes[UNREAD.id]
    assert not t.finished and t.stop_reason == "cannot-plan", (t.stop_reason, t.answer)
    assert "2x" in t.answer and ": yes (derived" not in t.answer, t.answer
