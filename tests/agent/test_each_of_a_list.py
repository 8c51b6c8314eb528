"""A question asked of each address of a list of three, graded against the chain on the
eval's private devnet. Outside round 59 (Q6): "How much USDC have 0xA, 0xB and 0xC each
sent in total, ...?" answered the three balances at exit 0, the sent totals missing (a list
of two was asked once per address; a list of three was read as balances)."""

from __future__ import annotations

import pytest
from _graded import assert_answered_right, graded_fixture

from agent.eval.suite import EvalTask, TaskOutcome

_WHO = ("{outsider}", "{seller}", "{wallet}")
ASKED = [
    EvalTask("sent-each-of-three", "lists", "account",
             "How much USDC have {outsider}, {seller} and {wallet} each sent?", "answer",
             tuple({"probe": "usdc_sent_total", "address": a} for a in _WHO)),
    EvalTask("received-each-of-three", "lists", "account",
             "How much USDC did {outsider}, {seller} and {wallet} receive?", "answer",
             tuple({"probe": "usdc_received_total", "address": a} for a in _WHO)),
    # Outside round 60 (A4): "each of 0xA, 0xB and 0xC" counted each one's transfers both ways.
    EvalTask("each-of-three", "lists", "account",
             "How much USDC did each of {outsider}, {seller} and {wallet} receive?", "answer",
             tuple({"probe": "usdc_received_total", "address": a} for a in _WHO)),
    # Found beside round 59's "respectively": the second verb of "received and sent" was
    # dropped at exit 0.
    EvalTask("received-and-sent", "lists", "account",
             "How much USDC has {outsider} received and sent, respectively?", "answer",
             ({"probe": "usdc_received_total", "address": "{outsider}"},
              {"probe": "usdc_sent_total", "address": "{outsider}"})),
]  # fmt: skip


outcomes = graded_fixture("lists", ASKED)


@pytest.mark.parametrize("qid", [t.id for t in ASKED])
def test_each_address_of_the_list_gets_its_own_total(qid: str, outcomes: dict[str, TaskOutcome]) -> None:
    t = outcomes[qid]
    assert_answered_right(t)
    asked = 2 if qid == "received-and-sent" else 3
    assert t.answer.count("total USDC") == asked and "USDC balance" not in t.answer, t.answer
