"""Transfers over a span the task names in other words than a window. A follow-up naming only another span of blocks ("How much USDC has 0xA sent since block 5?
And since block 4?", "..., and in blocks 4 to 5?") asks the transfer facts before it again
over that span; the planner declined it before. Graded against the chain on the eval's
private devnet (agent/eval/truth.py reads each total and count with web3): the two spans
hold different values, so an answer repeating the first span's value for the second fails.
"""

from __future__ import annotations

import pytest
from _graded import assert_answered_right, graded_fixture

from agent.eval.suite import EvalTask, TaskOutcome

ASKED = [
    EvalTask("sent-since-again", "spans", "window", "How much USDC has {outsider} sent since block 5? "
             "And since block 4?", "answer",
             ({"probe": "usdc_sent_total", "address": "{outsider}", "from_block": 5},
              {"probe": "usdc_sent_total", "address": "{outsider}", "from_block": 4})),
    EvalTask("count-since-again", "spans", "window",
             "How many USDC transfers were there since block 5? And since block 1?", "answer",
             ({"probe": "transfer_count", "from_block": 5}, {"probe": "transfer_count", "from_block": 1})),
    EvalTask("received-range-again", "spans", "window",
             "How much USDC did {seller} receive in blocks 1 to 3, and in blocks 4 to 5?", "answer",
             ({"probe": "usdc_received_total", "address": "{seller}", "from_block": 1, "to_block": 3},
              {"probe": "usdc_received_total", "address": "{seller}", "from_block": 4, "to_block": 5})),
    EvalTask("window-again", "spans", "window",
             "How much USDC has {outsider} sent in the last 1 blocks? And in the last 2 blocks?",
             "answer",
             ({"probe": "usdc_sent_total", "address": "{outsider}", "from_block": 5},
              {"probe": "usdc_sent_total", "address": "{outsider}", "from_block": 4})),
    # Outside round 58, Q52: transfers "in the latest block" were counted over the whole
    # chain, at exit 0. The head block (5) holds one of the chain's three transfers.
    EvalTask("count-latest-block", "spans", "window",
             "How many USDC transfers were there in the latest block?", "answer",
             ({"probe": "transfer_count", "from_block": 5, "to_block": 5},)),
    EvalTask("sent-latest-block", "spans", "window",
             "How much USDC has {outsider} sent in the most recent block?", "answer",
             ({"probe": "usdc_sent_total", "address": "{outsider}", "from_block": 5},)),
    EvalTask("largest-at-head", "spans", "window",
             "What was the largest USDC transfer at the head?", "answer",
             ({"probe": "transfer_max", "from_block": 5, "to_block": 5},)),
]  # fmt: skip


outcomes = graded_fixture("spans", ASKED)


@pytest.mark.parametrize("qid", [t.id for t in ASKED])
def test_each_span_is_answered_with_its_own_value(qid: str, outcomes: dict[str, TaskOutcome]) -> None:
    t = outcomes[qid]
    assert_answered_right(t)
