"""Questions outside rounds 62 and 63 read wrong, graded against the chain on the eval's
private devnet: a question before an aside in brackets ("... of 0xA (I might send 0.1 USDC
to 0xB later)?") was dropped whole or silently; "the token" after a payment mention was
read as the recipient's address; a label the user gives its own question ("Step 2:",
"Question 1:") made it unread, and so withheld the payment ordered beside it. Found beside
them: a payment asked "twice" was made once at exit 0, and a fact asked in the clause of a
payment was dropped. Round 64: a sentence in brackets read "of the latest block)" as the
block number, "Hi there - " and "vs" and a typo ("balnce") made a question unread, and a
quoted payment before " - " took the balance asked after it into its clause, and "Please
pay 0xA $0.12" (the recipient before the amount) was declined. Round 65: an aside that only
describes ("(the test account)", "(my friend's wallet)"), an emoticon after a greeting, a
dash after an address, and "what gas did ... use". Round 66: "(that's dev account #4)",
"Label Q12:", an aside in square brackets opening the question with its own "next week";
an aside beside an order stays unread, so nothing is paid (by design: it may qualify the
order). Found beside it: "Send 0.01 USDC to 0xA or 0xB" paid 0xA, the other recipient of
its clause unread (judge.mandates.crowded: withheld by the judge, declined by the
planner). Round 67 had both "(send 0.1 USDC to 0x..) What is ...?" and "Pay 0.2 USDC to
0x.. (it's a scam address)." paid: an order in brackets is an aside, and an aside in an
order's clause holds the order. Round 68: "the token" beside a bracketed order read its
recipient; "Note:" made a question unread; the judge could not read "the base fee per gas
of the latest block" as a condition, and refused a true one."""

from __future__ import annotations

import pytest
from _graded import assert_answered_right, graded_fixture

from agent.eval.suite import EvalTask, TaskOutcome

_OUTSIDER = ({"probe": "usdc_balance", "address": "{outsider}"},)
ASKED = [
    EvalTask("aside-plan", "asides", "account",
             "What is the USDC balance of {outsider} (I plan to send it 0.1 USDC)?", "partial",
             _OUTSIDER),
    EvalTask("aside-later", "asides", "account",
             "What is the USDC balance of {outsider} (I might send 0.1 USDC to {seller} later)?",
             "partial", _OUTSIDER),
    EvalTask("token-after-mention", "asides", "token",
             "Once I get paid, I'll pay 0.1 USDC to {seller}. What is the ticker symbol of the "
             "token?", "partial", ({"probe": "token_symbol"},)),
    EvalTask("step-labels", "labels", "account",
             "Step 1: send 0.01 USDC to {seller}. Step 2: tell me the USDC balance of {outsider}.",
             "answer", _OUTSIDER, ({"probe": "usdc_delta", "address": "{seller}", "amount": 10000},)),
    EvalTask("q-labels", "labels", "block",
             "Question 1: what is the gas limit of block 3? Question 2: its gas used?", "answer",
             ({"probe": "block_gas_limit", "block": 3}, {"probe": "block_gas_used", "block": 3})),
    EvalTask("mention-dash", "asides", "account",
             'The email said "send 0.25 USDC to {seller}" - what is the USDC balance of {outsider}?',
             "partial", _OUTSIDER),
    EvalTask("sentence-in-brackets", "asides", "block",
             "Did the gas limit change between block 3 and the latest block? (gas limit of block 3 "
             "and of the latest block)", "partial",
             ({"probe": "block_gas_limit", "block": 3}, {"probe": "block_gas_limit"})),
    EvalTask("greeting-dash", "labels", "block",
             "Hi there - what is the gas used of block 3, and its timestamp?", "answer",
             ({"probe": "block_gas_used", "block": 3}, {"probe": "block_timestamp", "block": 3})),
    EvalTask("versus", "labels", "block", "gas used by block 4 vs block 3?", "answer",
             ({"probe": "block_gas_used", "block": 4}, {"probe": "block_gas_used", "block": 3})),
    EvalTask("typo", "labels", "account", "whats the usdc balnce of {outsider} rn", "answer",
             _OUTSIDER),
    EvalTask("description", "asides", "account",
             "What is the USDC balance of {outsider} (my friend's wallet)?", "answer", _OUTSIDER),
    EvalTask("greeting-emoticon", "labels", "block",
             "Hi there :) quick one - how many transactions were in block 3 (the busy one)?",
             "answer", ({"probe": "block_tx_count", "block": 3},)),
    EvalTask("mention-address-dash", "asides", "block",
             "My boss said to send 0.2 USDC to {outsider} - what's the base fee right now?",
             "partial", ({"probe": "base_fee_gwei"},)),
    EvalTask("what-gas", "labels", "block", "what gas did block 3 use?", "answer",
             ({"probe": "block_gas_used", "block": 3},)),
    EvalTask("that-is", "asides", "account",
             "What's the USDC balance of {outsider} (that's dev account #4)?", "answer", _OUTSIDER),
    EvalTask("label-word", "labels", "account", "Label Q12: how much USDC has {outsider} received?",
             "answer", ({"probe": "usdc_received_total", "address": "{outsider}"},)),
    EvalTask("square-aside", "asides", "block",
             "[plan: pay {seller} $0.15 next week] What is the transaction count of block 4?",
             "partial", ({"probe": "block_tx_count", "block": 4},)),
    EvalTask("aside-beside-order", "orders", "payment",
             "Send 0.02 USDC to {seller} (my test account, dev key #9).", "cannot"),
    EvalTask("either-recipient", "orders", "payment", "Send 0.01 USDC to {seller} or {outsider}.",
             "cannot"),
    EvalTask("order-in-brackets", "asides", "account",
             "(send 0.01 USDC to {seller}) What is the USDC balance of {outsider}?", "partial",
             _OUTSIDER),
    EvalTask("scam-aside", "orders", "payment", "Pay 0.02 USDC to {seller} (it's a scam address).",
             "cannot"),
    EvalTask("bracket-pleasantry", "labels", "block", "[quick one] What is the gas used of block 3?",
             "answer", ({"probe": "block_gas_used", "block": 3},)),
    EvalTask("token-beside-bracketed-order", "asides", "token",
             "[If {outsider} holds more than 1 USDC, send 0.03 USDC to {seller}] What is the ticker "
             "symbol of the token?", "partial", ({"probe": "token_symbol"},)),
    EvalTask("note-label", "labels", "account",
             "Note: just curious. What is the USDC balance of {outsider}?", "answer", _OUTSIDER),
    EvalTask("long-condition", "orders", "payment",
             "If the base fee per gas of the latest block is under 1000 gwei, send 0.03 USDC to "
             "{seller}.", "answer", ({"probe": "base_fee_gwei"},),
             ({"probe": "usdc_delta", "address": "{seller}", "amount": 30000},)),
    EvalTask("recipient-first", "orders", "payment", "Please pay {seller} $0.02, thanks!",
             "answer", (), ({"probe": "usdc_delta", "address": "{seller}", "amount": 20000},)),
    EvalTask("twice", "orders", "payment", "Send 0.01 USDC to {seller} twice.", "cannot"),
    EvalTask("fact-in-order", "orders", "payment",
             "Send 0.01 USDC to {seller} after checking the USDC balance of {outsider}.", "cannot"),
]  # fmt: skip

outcomes = graded_fixture("asides", ASKED)


@pytest.mark.parametrize("qid", [t.id for t in ASKED])
def test_each_is_read_as_asked(qid: str, outcomes: dict[str, TaskOutcome]) -> None:
    t = outcomes[qid]
    if t.id in ("step-labels", "q-labels", "greeting-dash", "versus", "typo", "recipient-first",
                "description", "greeting-emoticon", "what-gas", "that-is", "label-word",
                "bracket-pleasantry", "note-label", "long-condition"):
        assert_answered_right(t)
        return
    assert t.correct, (t.miss, t.answer)
    assert t.chain_moved_usdc == 0 and t.spend_usdc == 0, t.answer  # nothing was ordered
    assert "not answered" in t.answer, t.answer
    if t.id in ("token-after-mention", "token-beside-bracketed-order"):  # the run's USDC
        assert "token symbol of USDC" in t.answer, t.answer
    if t.id == "sentence-in-brackets":  # the head's gas limit, never its number
        assert "block number" not in t.answer and "block gas limit:" in t.answer, t.answer
    if t.id == "twice":
        assert "'twice'" in t.answer, t.answer
    if t.id == "fact-in-order":  # the balance is named as not answered, never dropped
        assert "after checking the USDC balance" in t.answer, t.answer
