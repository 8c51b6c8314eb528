"""Yes-or-no questions outside rounds 50 to 52 asked and the offline planner declined,
graded against the chain.

A threshold asked with a verb ("did block 1 use at least ... gas", "does block 4 contain
at least 2 transactions"), of the value asked just before it ("How much has 0xA sent? Is
it more than 3 USDC?", "..., and was it over 3 USDC?", "Is that address holding more than
4 USDC?"), of a sent or received total or the largest transfer, and "more than 2 USDC
transfers" as a count: each answers the value and yes or no, at exit 0, and the yes or
no is the chain's (agent/eval/truth.py's ``test`` probe reads it with web3, on the
eval's private devnet).
"""

from __future__ import annotations

from typing import Any

import pytest
from _graded import assert_answered_right, graded_fixture

from agent.eval.suite import EvalTask, TaskOutcome


def _test(of: dict[str, Any], op: str, than: str) -> dict[str, Any]:
    return {"probe": "test", "of": of, "op": op, "than": than}


ASKED = [
    EvalTask("verb-gas-yes", "round50", "condition", "Did block 1 use at least 100000 gas?",
             "answer", (_test({"probe": "block_gas_used", "block": 1}, ">=", "100000"),)),
    EvalTask("verb-gas-no", "round50", "condition", "Did block 3 use more than 1000000 gas?",
             "answer", (_test({"probe": "block_gas_used", "block": 3}, ">", "1000000"),)),
    EvalTask("verb-txs-no", "round50", "condition",
             "Does block 4 contain at least 2 transactions?", "answer",
             (_test({"probe": "block_tx_count", "block": 4}, ">=", "2"),)),
    EvalTask("verb-txs-yes", "round50", "condition", "Did block 4 have less than 2 transactions?",
             "answer", (_test({"probe": "block_tx_count", "block": 4}, "<", "2"),)),
    EvalTask("sent-then-it", "round50", "condition",
             "How much USDC has {outsider} sent? Is it more than 3 USDC?", "answer",
             (_test({"probe": "usdc_sent_total", "address": "{outsider}"}, ">", "3"),)),
    EvalTask("received-and-it", "round50", "condition",
             "How much USDC did {seller} receive, and was it over 3 USDC?", "answer",
             (_test({"probe": "usdc_received_total", "address": "{seller}"}, ">", "3"),)),
    EvalTask("that-address", "round50", "condition",
             "What is the USDC balance of {outsider}? Is that address holding more than 4 USDC?",
             "answer", (_test({"probe": "usdc_balance", "address": "{outsider}"}, ">", "4"),)),
    EvalTask("largest", "round50", "condition",
             "Was the largest USDC transfer in the last 20 blocks bigger than 5 USDC?", "answer",
             (_test({"probe": "transfer_max", "blocks": 20}, ">", "5"),)),
    EvalTask("count-usdc-transfers", "round50", "condition",
             "Were there more than 5 USDC transfers in the last 20 blocks?", "answer",
             (_test({"probe": "transfer_count", "blocks": 20}, ">", "5"),)),
    # Outside round 51: a total tested with its verb, declined as "sent"/"received".
    EvalTask("has-sent", "round51", "condition", "Has {outsider} sent more than 3 USDC?", "answer",
             (_test({"probe": "usdc_sent_total", "address": "{outsider}"}, ">", "3"),)),
    EvalTask("has-received", "round51", "condition", "Has {seller} received at least 3 USDC?",
             "answer", (_test({"probe": "usdc_received_total", "address": "{seller}"}, ">=", "3"),)),
    # Outside round 52: a windowed total's test kept "latest-0" in its line and stopped
    # unbacked; "has it received" after a balance was declined.
    EvalTask("since-window", "round52", "condition", "Has {seller} received more than 1 USDC since block 2?",
             "answer", (_test({"probe": "usdc_received_total", "address": "{seller}", "from_block": 2},
                              ">", "1"),)),
    EvalTask("count-since", "round52", "condition",
             "How many USDC transfers were there since block 3, and is that more than 5?", "answer",
             (_test({"probe": "transfer_count", "from_block": 3}, ">", "5"),)),
    EvalTask("has-it", "round52", "condition",
             "What is the USDC balance of {outsider}, and has it received more than 5 USDC?", "answer",
             ({"probe": "usdc_balance", "address": "{outsider}"},
              _test({"probe": "usdc_received_total", "address": "{outsider}"}, ">", "5"))),
    EvalTask("differ", "round50", "comparison",
             "What is the USDC balance of {seller} and of {outsider}, and by how much do they "
             "differ?", "answer",
             ({"probe": "diff", "of": "usdc_balance", "addresses": ["{seller}", "{outsider}"]},)),
]  # fmt: skip


outcomes = graded_fixture("round50", ASKED)


@pytest.mark.parametrize("qid", [t.id for t in ASKED])
def test_each_is_answered_at_exit_0_with_the_chains_yes_or_no(
    qid: str, outcomes: dict[str, TaskOutcome]
) -> None:
    t = outcomes[qid]
    assert_answered_right(t)


def test_no_line_names_a_block_relative_to_the_head(outcomes: dict[str, TaskOutcome]) -> None:
    # Every label names blocks by number: "latest-0" is no number the evidence holds.
    assert not any("latest-" in t.answer for t in outcomes.values())


def test_both_answers_occur(outcomes: dict[str, TaskOutcome]) -> None:
    # The thresholds are set so that some tests hold and some do not: a planner that said
    # "yes" (or "no") to every one fails above, whichever it says.
    said = " ".join(t.answer for t in outcomes.values())
    assert ": yes (derived" in said and ": no (derived" in said, said
