"""Questions outside round 60 declined, graded against the chain on the eval's private
devnet: a terse count of a block's transactions ("txs in latest block?", N2; "ended up in",
C2), "each" asked again after a list of addresses (A2), a list of blocks framing the
question ("For block 3, block 4 and block 5, ...", A8), and a list of facts sharing its
tail beside another block (A3)."""

from __future__ import annotations

import pytest
from _graded import assert_answered_right, graded_fixture

from agent.eval.suite import EvalTask, TaskOutcome

_TWO = ("{outsider}", "{seller}")
_EACH_WAY = tuple({"probe": p, "address": a} for p in ("usdc_sent_total", "usdc_received_total") for a in _TWO)
ASKED = [
    EvalTask("terse-txs", "lists", "block", "txs in latest block?", "answer",
             ({"probe": "block_tx_count"},)),
    EvalTask("ended-up-in", "lists", "block",
             "Good morning :) no rush at all, how many transactions ended up in block 4?", "answer",
             ({"probe": "block_tx_count", "block": 4},)),
    EvalTask("for-each-way", "lists", "account",
             "For {outsider} and {seller}, how much USDC did each send and how much did each receive?",
             "answer", _EACH_WAY),
    EvalTask("each-again", "lists", "account",
             "How much USDC did {outsider} and {seller} each send, and how much did each receive?",
             "answer", _EACH_WAY),
    EvalTask("blocks-frame", "lists", "block",
             "For block 3, block 4 and block 5, give the transaction count of each.", "answer",
             tuple({"probe": "block_tx_count", "block": b} for b in (3, 4, 5))),
    EvalTask("list-tail", "lists", "block",
             "What are the gas limit, gas used and number of transactions of block 4, and the gas "
             "limit of the latest block?", "answer",
             ({"probe": "block_gas_limit", "block": 4}, {"probe": "block_gas_used", "block": 4},
              {"probe": "block_tx_count", "block": 4}, {"probe": "block_gas_limit"})),
    EvalTask("they-sent", "lists", "account",
             "What are the USDC balances of {outsider} and {seller}? How many USDC transfers did "
             "they send?", "answer", tuple({"probe": "usdc_balance", "address": a} for a in _TWO)),
]  # fmt: skip


outcomes = graded_fixture("said-once", ASKED)


@pytest.mark.parametrize("qid", [t.id for t in ASKED])
def test_each_is_answered_right_and_whole(qid: str, outcomes: dict[str, TaskOutcome]) -> None:
    t = outcomes[qid]
    assert_answered_right(t)
    if qid == "list-tail":  # the first gas limit is block 4's, the last the head's
        assert "block gas limit at block 4" in t.answer, t.answer
    if qid == "they-sent":  # each one's, the way asked: the outsider sent 2, the seller none
        lines = [line for line in t.answer.splitlines() if "USDC transfer count from" in line]
        assert [line.split("): ")[1].split()[0] for line in lines] == ["2", "0"], t.answer
