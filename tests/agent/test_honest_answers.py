"""Ten plain questions a new user might ask the offline planner, graded against the chain.

Every answer is right, or names what it did not answer and exits 1; none answers a
different question, and none ends exit 0 with a part missing. Ground truth is read
independently of the agent (agent/eval/truth.py), on a private devnet.
"""

from __future__ import annotations

import pytest
from _graded import graded

from agent.eval.suite import EvalTask, TaskOutcome

TEN = [
    EvalTask("q1", "mine", "parameters", "Tell me the base fee of block 1 in gwei.", "answer",
             ({"probe": "base_fee_gwei", "block": 1},)),
    EvalTask("q2", "mine", "aggregate",
             "In the last 12 blocks how many USDC transfers were made, and what was the biggest one?",
             "answer", ({"probe": "transfer_count", "blocks": 12},
                        {"probe": "transfer_max", "blocks": 12})),
    EvalTask("q3", "mine", "condition",
             "Please send 0.1 USDC to {outsider} if the base fee is lower than 80 gwei.", "answer",
             ({"probe": "base_fee_gwei"},),
             ({"probe": "usdc_delta", "address": "{outsider}", "amount": 100000},)),
    EvalTask("q4", "mine", "comparison", "Of {wallet} and {seller}, which address has more USDC?",
             "answer", ({"probe": "winner", "of": "usdc_balance", "op": "max",
                         "addresses": ["{wallet}", "{seller}"]},)),
    EvalTask("q5", "mine", "unanswerable", "Is the token at {usdc} paused? Who owns it?", "cannot"),
    EvalTask("q6", "mine", "free", "What's the USDC balance of {seller}?", "answer",
             ({"probe": "usdc_balance", "address": "{seller}"},)),
    EvalTask("q7", "mine", "parameters",
             "What is the ETH balance of {outsider} and how much USDC does it hold?", "answer",
             ({"probe": "eth_balance", "address": "{outsider}"},
              {"probe": "usdc_balance", "address": "{outsider}"})),
    EvalTask("q8", "mine", "unanswerable", "What was the gas price at block 2?", "cannot"),
    EvalTask("q9", "mine", "partial",
             "How many decimals does USDC have, and what is the weather in Paris?", "partial",
             ({"probe": "token_decimals"},)),
    EvalTask("q10", "mine", "parameters",
             "What is the timestamp of block 3 and the current block number?", "answer",
             ({"probe": "block_timestamp", "block": 3}, {"probe": "block_number"})),
]  # fmt: skip


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TaskOutcome]:
    return graded(tmp_path_factory.mktemp("ten"), TEN)


def test_every_answer_is_right_or_names_what_it_did_not_answer(
    outcomes: dict[str, TaskOutcome],
) -> None:
    assert len(outcomes) == 10
    for t in outcomes.values():
        assert t.correct, (t.id, t.miss, t.answer)
        assert not t.wrong_question, (t.id, t.answer)
        if t.finished:
            assert "not answered" not in t.answer and t.line_grades.get("asserted", 0) == 0
        else:
            assert "not answered" in t.answer, (t.id, t.answer)


def test_the_parts_it_cannot_do_exit_one_and_claim_no_value(
    outcomes: dict[str, TaskOutcome],
) -> None:
    for qid in ("q5", "q8", "q9"):
        t = outcomes[qid]
        assert (t.finished, t.stop_reason) == (False, "cannot-plan"), (qid, t.stop_reason)
    assert outcomes["q8"].line_grades.get("observed", 0) == 0  # not the latest gas price
    assert outcomes["q9"].line_grades.get("observed") == 1  # the decimals, and only them


def test_the_conditional_transfer_went_through_the_judge_and_is_observed(
    outcomes: dict[str, TaskOutcome],
) -> None:
    t = outcomes["q3"]
    assert t.finished and t.spend_usdc == 100_000
    assert t.line_grades.get("derived") == 1  # the condition, with its computation
