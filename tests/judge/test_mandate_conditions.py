"""Ordered payments on one address's balance (judge/mandates.py, issue 23): the condition
is read from the task text into the mandate, and the judge reads the balance from the
chain itself (the real Anvil here) before it approves the user's order; a model that
pays anyway when the balance does not hold is refused, naming the value the judge read."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from agent.cli.runtime import chain_fact_reader
from chain.devkeys import AGENT, dev_account
from judge.jev import Judge
from judge.mandates import CROWDED, MENTIONED, Mandate, mandates_in
from judge.verdict import VerdictSigner
from tests.judge.test_judge_tasks import SELLER, TASK, request, transfer

HOLDER = "0x" + "4" * 40
_BALANCE_OF = [{"name": "balanceOf", "type": "function", "stateMutability": "view",
                "inputs": [{"name": "a", "type": "address"}],
                "outputs": [{"name": "", "type": "uint256"}]}]
EMPTY = "0x00000000000000000000000000000000000000e1"


@pytest.mark.parametrize(
    "order",
    [f"If my USDC balance is above 5, send 0.02 USDC to {SELLER}.",
     f"If I hold more than 5 USDC, send 0.02 USDC to {SELLER}.",
     f"if the agent's balance is over 5 USDC, send 0.02 USDC to {SELLER}"],
)  # fmt: skip
def test_a_condition_on_the_agents_own_balance_names_its_wallet(order: str) -> None:
    from judge.mandates import SELF

    (mandate,) = mandates_in(order)
    cond = mandate.condition
    assert cond is not None and (cond.fact, cond.subject, cond.op) == ("usdc_balance", SELF, ">")
    assert Mandate.from_wire(mandate.to_wire()) == mandate


@pytest.mark.parametrize(
    ("order", "fact", "op", "threshold"),
    [
        (f"If {HOLDER} holds more than 10 USDC, send 0.02 USDC to {SELLER}.", "usdc_balance", ">", "10"),
        (f"Send 0.02 USDC to {SELLER} if the USDC balance of {HOLDER} is above 0.15.", "usdc_balance", ">", "0.15"),
        (f"If {HOLDER}'s USDC balance is at least 2 USDC, transfer 0.02 USDC to {SELLER}.", "usdc_balance", ">=", "2"),
        (f"When {HOLDER} has less than 5 USDC, pay 0.02 USDC to {SELLER}.", "usdc_balance", "<", "5"),
        (f"Provided that {HOLDER} owns over 1 ETH, send 0.02 USDC to {SELLER}.", "eth_balance", ">", "1"),
        (f"if the ETH balance of {HOLDER} exceeds 1000000000000000000 wei, send 0.02 USDC to {SELLER}", "eth_balance", ">", "1"),
        (f"If {HOLDER} holds 10 USDC or more, send 0.02 USDC to {SELLER}.", "usdc_balance", ">=", "10"),
        (f"Send 0.02 USDC to {SELLER} provided {HOLDER} has no more than 3 USDC.", "usdc_balance", "<=", "3"),
    ],
)
def test_a_condition_on_one_address_balance_is_read_into_the_mandate(
    order: str, fact: str, op: str, threshold: str
) -> None:
    (mandate,) = mandates_in(order)
    cond = mandate.condition
    assert cond is not None
    assert (cond.fact, cond.subject, cond.op, cond.threshold) == (fact, HOLDER, op, Decimal(threshold))
    assert Mandate.from_wire(mandate.to_wire()) == mandate


@pytest.mark.parametrize(
    "order",
    [
        f"If the balance of {HOLDER} is over 3, send 0.02 USDC to {SELLER}.",  # which balance?
        f"If {HOLDER} sent more than 10 USDC, send 0.02 USDC to {SELLER}.",  # not a balance
        # Two conditions: a mandate proves one, never half of two.
        f"If {HOLDER} holds over 5 USDC and the base fee is under 100 gwei, send 0.02 USDC to {SELLER}.",
    ],
)
def test_a_balance_condition_that_does_not_say_which_balance_is_unreadable(order: str) -> None:
    (mandate,) = mandates_in(order)
    assert mandate.condition is not None and mandate.condition.fact == "unreadable"


@pytest.mark.parametrize(("said", "fact"), [
    ("the base fee per gas of the latest block is under 100 gwei", "base_fee_gwei"),  # round 68
    ("the gas price reported by the node right now is under 100 gwei", "gas_price_gwei"),
    ("the base fee of block 5 is under 100 gwei", "unreadable"),  # a past block: never proven
])  # fmt: skip
def test_a_fee_condition_in_longer_words_is_read_and_a_past_blocks_is_not(said: str, fact: str) -> None:
    (mandate,) = mandates_in(f"If {said}, send 0.25 USDC to {SELLER}.")
    assert mandate.condition is not None and mandate.condition.fact == fact, mandate


def test_a_balance_condition_from_the_wire_without_an_address_is_unreadable() -> None:
    (mandate,) = mandates_in(f"If {HOLDER} holds more than 10 USDC, send 0.02 USDC to {SELLER}.")
    wire = mandate.to_wire()
    wire["condition"] = {**wire["condition"], "subject": None}  # type: ignore[dict-item]
    cond = Mandate.from_wire(wire).condition
    assert cond is not None and cond.fact == "unreadable"


@pytest.mark.parametrize(
    ("order", "fact", "threshold"),
    [
        (f"If {HOLDER} holds more than 1k USDC, send 0.02 USDC to {SELLER}.", "usdc_balance", "1000"),
        (f"If {HOLDER} holds more than 1,000 USDC, send 0.02 USDC to {SELLER}.", "usdc_balance", "1000"),
        (f"If {HOLDER} holds over 2.5K USDC, send 0.02 USDC to {SELLER}.", "usdc_balance", "2500"),
        (f"If {HOLDER} holds over 1 million USDC, send 0.02 USDC to {SELLER}.", "usdc_balance", "1000000"),
        (f"If {HOLDER} holds over 500000 atomic units of USDC, send 0.02 USDC to {SELLER}.", "usdc_balance", "0.5"),
        (f"If {HOLDER} holds over half a USDC, send 0.02 USDC to {SELLER}.", "usdc_balance", "0.5"),
        (f"If the base fee is above 5e1 gwei, send 0.02 USDC to {SELLER}.", "base_fee_gwei", "50"),
        (f"If the base fee is above 1k gwei, send 0.02 USDC to {SELLER}.", "base_fee_gwei", "1000"),
        (f"If the base fee is above 1 k gwei, send 0.02 USDC to {SELLER}.", "base_fee_gwei", "1000"),
    ],
)  # fmt: skip
def test_a_threshold_is_read_as_the_number_written(order: str, fact: str, threshold: str) -> None:
    """Outside round 56: "more than 1k USDC" was read as more than 1 by the planner; the
    judge read "above 5e1 gwei" as above 5, so it would have approved the order at 10 gwei.
    Both read a task's numbers through judge.amounts.plain_numbers now."""
    (mandate,) = mandates_in(order)
    cond = mandate.condition
    assert cond is not None and (cond.fact, cond.threshold) == (fact, Decimal(threshold))


@pytest.mark.parametrize("said", ["2x", "24h", "5q", "1e", "2 m", "5 x"])
def test_a_threshold_with_letters_nobody_reads_is_unreadable(said: str) -> None:
    (mandate,) = mandates_in(f"If the base fee is above {said} gwei, send 0.02 USDC to {SELLER}.")
    assert mandate.condition is not None and mandate.condition.fact == "unreadable"


def test_an_amount_in_thousands_orders_that_many_usdc() -> None:
    (mandate,) = mandates_in(f"Send 1k USDC to {SELLER}.")
    assert mandate.amount == 1_000_000_000  # the caps refuse it; never 1 USDC


def _judge(signer: VerdictSigner, anvil, order: str) -> Judge:  # type: ignore[no-untyped-def]
    reader = chain_fact_reader(anvil.rpc_url, anvil.chain_id, anvil.usdc, dev_account(AGENT).address)
    judge = Judge(
        signer, allowed_assets={31337: [anvil.usdc]}, balance_of=lambda asset: 5_000_000,
        require_task=True, fact_of=reader,
    )
    judge.register_task(replace(TASK, mandates=mandates_in(order)))
    return judge


def _order(amount: int) -> object:
    return request(transfer(SELLER, amount), missing=("transfer_receipt",),
                   tool_facts=("transfer_receipt",), checklist_size=3)


def test_the_judge_reads_the_balance_from_the_chain_and_approves_only_when_it_holds(
    signer: VerdictSigner, chain  # type: ignore[no-untyped-def]
) -> None:
    agent = dev_account(AGENT).address
    held = _judge(signer, chain, f"If {agent} holds more than 10 USDC, send 0.25 USDC to {SELLER}.")
    verdict = held.decide(_order(250_000))  # type: ignore[arg-type]
    assert verdict.decision == "approve", verdict.reason
    balance = Decimal(chain.w3.eth.contract(chain.usdc, abi=_BALANCE_OF).functions.balanceOf(agent).call())
    assert balance > 10_000_000
    shown = f"{balance.scaleb(-6):f}".rstrip("0").rstrip(".")
    assert f"the judge read usdc_balance of {agent.lower()} {shown} > 10" in verdict.reason

    eth = _judge(signer, chain, f"If {agent} has at least 1 ETH, send 0.25 USDC to {SELLER}.")
    assert eth.decide(_order(250_000)).decision == "approve"  # type: ignore[arg-type]

    # "my balance": the agent's own wallet, read by the judge from its keystore's address.
    mine = _judge(signer, chain, f"If my USDC balance is under 1 USDC, send 0.25 USDC to {SELLER}.")
    refused_mine = mine.decide(_order(250_000))  # type: ignore[arg-type]
    assert refused_mine.decision == "refuse"
    assert f"the judge read usdc_balance of the agent's wallet {shown} < 1: false" in refused_mine.reason

    # "1k" is a thousand: the agent's balance is over 10 USDC and under 1000 (outside round
    # 56 found "more than 1k USDC" tested as more than 1).
    assert balance < 1_000_000_000
    thousand = _judge(signer, chain, f"If {agent} holds more than 1k USDC, send 0.25 USDC to {SELLER}.")
    refused_k = thousand.decide(_order(250_000))  # type: ignore[arg-type]
    assert refused_k.decision == "refuse" and "> 1000: false" in refused_k.reason, refused_k.reason

    # A model that sends anyway when the balance does not hold: refused, the value named.
    unmet = _judge(signer, chain, f"If {EMPTY} holds more than 1 USDC, send 0.25 USDC to {SELLER}.")
    refused = unmet.decide(_order(250_000))  # type: ignore[arg-type]
    assert refused.decision == "refuse"
    assert f"the judge read usdc_balance of {EMPTY} 0 > 1: false" in refused.reason, refused.reason


#: Tasks that mention a payment without ordering it (outside round 61 had each kind paid):
#: asked about, planned, quoted, someone else's, hypothetical, the user's own.
MENTIONS = [
    f"Should I send 0.25 USDC to {SELLER}?",
    f"Should I pay {SELLER} 0.25 USDC?",
    f"(send 0.25 USDC to {SELLER}) What is the base fee?",  # in brackets: an aside (round 67)
    f"What is the base fee? [send 0.25 USDC to {SELLER}]",
    f"My boss said to send 0.25 USDC to {SELLER}; what is the base fee?",
    f"Someone told me to pay 0.25 USDC to {SELLER} if the base fee is below 1000 gwei.",
    f'"Send 0.25 USDC to {SELLER}" is what the email said. What is its USDC balance?',
    f"What is the gas price? Someone suggested I send 0.25 USDC to {SELLER}.",
    f"Before I send 0.25 USDC to {SELLER} myself, how much USDC does my wallet hold?",
    f"If I were to send 0.25 USDC to {SELLER}, how much gas would it use?",
    f"I'm asking because I want to pay 0.25 USDC to {SELLER} at some point.",
    f"Would it be possible to transfer 0.25 USDC to {SELLER}?",
    f"Yesterday my colleague wanted me to transfer 0.25 USDC to {SELLER} but I refused.",
    # Outside round 62: what follows a colon is said of it, not ordered.
    f"Note to self: send 0.25 USDC to {SELLER}. What is the gas price?",
    f"My friend asked: can you send 0.25 USDC to {SELLER}? What is its balance?",
    f"The seller's invoice says: Send 0.25 USDC to {SELLER}. What is the base fee?",
    f"Someone told me: if the base fee is below 1000 gwei, send 0.25 USDC to {SELLER}.",
]
#: Orders: the verb alone, after words addressing nib, or after a condition.
ORDERS = [
    f"Send 0.25 USDC to {SELLER}.",
    f"Please send 0.25 USDC to {SELLER}.",
    f"Can you send 0.25 USDC to {SELLER}?",
    f"Could you please transfer 0.25 USDC to {SELLER}?",
    f"I'd like you to pay 0.25 USDC to {SELLER}.",
    f"I want you to send 0.25 USDC to {SELLER}.",
    f"Check the base fee and send 0.25 USDC to {SELLER}.",
    f"What is my balance? Then send 0.25 USDC to {SELLER}.",
    f"If the base fee is below 1000 gwei, send 0.25 USDC to {SELLER}.",
    f"If the base fee is below 1000 gwei send 0.25 USDC to {SELLER}.",
    f"Go ahead and send 0.25 USDC to {SELLER}.",
    f"Task: send 0.25 USDC to {SELLER}.",
    f"Step 1: send 0.25 USDC to {SELLER}. Step 2: tell me its USDC balance.",
    f"Question 2: send 0.25 USDC to {SELLER}.",
    f"Pay {SELLER} 0.25 USDC.",  # the recipient before the amount (rounds 61 and 64)
    f"Please pay {SELLER} $0.25, thanks!",
    f"If the base fee is below 1000 gwei: send 0.25 USDC to {SELLER}.",
    f"Buy the gas stats from http://127.0.0.1:8402, then send 0.25 USDC to {SELLER}.",  # no colon of speech
]


@pytest.mark.parametrize("task", MENTIONS)
def test_a_payment_the_task_only_mentions_is_no_order(task: str) -> None:
    (mandate,) = mandates_in(task)
    assert mandate.withheld and Mandate.from_wire(mandate.to_wire()) == mandate
    assert mandate.withheld in (MENTIONED, "at some point"), mandate  # a word that withholds keeps its name


@pytest.mark.parametrize("task", ORDERS)
def test_a_payment_the_task_orders_is_one(task: str) -> None:
    (mandate,) = mandates_in(task)
    assert mandate.recipient == SELLER.lower() and mandate.amount == 250_000 and not mandate.withheld


@pytest.mark.parametrize("tail", [f"or {HOLDER}", "rather than 0.5 USDC", "or maybe 0.5 USDC.",
                                  f"vs {HOLDER} 0.5 USDC", f"instead of paying {HOLDER}",
                                  "(it's a scam address).", "(compromised!) and what is the base fee?"])  # fmt: skip
def test_an_order_naming_another_recipient_or_amount_in_its_clause_is_withheld(tail: str) -> None:
    """Found beside outside round 66: 'Send 0.25 USDC to 0xA or 0xB' paid 0xA, the other
    recipient or amount of its own clause unread; which is meant is the user's to say.
    Outside round 67 had 'Pay 0.2 USDC to 0xA (it's a scam address)' paid: an aside in
    brackets in the order's clause is held the same way."""
    (mandate, *_) = mandates_in(f"Send 0.25 USDC to {SELLER} {tail}")
    assert mandate.recipient == SELLER.lower() and mandate.withheld in (CROWDED, "instead"), mandate


@pytest.mark.parametrize("task", [
    f"Send 0.25 USDC to {SELLER} if {HOLDER} holds more than 5 USDC.",
    f"Send 0.25 USDC to {SELLER} and tell me the USDC balance of {HOLDER}.",
    f"Send 0.25 USDC to {SELLER}, then 0.5 USDC to {HOLDER}.",
    f"Send 0.25 USDC to {SELLER} only if {HOLDER} has over 2 USDC.",
])  # fmt: skip
def test_other_amounts_and_addresses_outside_an_orders_clause_leave_it_an_order(task: str) -> None:
    (mandate, *_) = mandates_in(task)
    assert mandate.recipient == SELLER.lower() and mandate.amount == 250_000 and not mandate.withheld


@pytest.mark.parametrize("when", ["tomorrow", "later this week", "next month", "in 2 hours", "at some point",
                                  "on Friday", "by Monday", "by the end of the week"])  # fmt: skip
def test_a_payment_put_off_to_another_time_is_withheld(when: str) -> None:
    (mandate,) = mandates_in(f"Send 0.25 USDC to {SELLER} {when}.")
    assert mandate.withheld, mandate


def test_the_judge_refuses_a_payment_the_task_only_mentions(signer: VerdictSigner, chain) -> None:  # type: ignore[no-untyped-def]
    """A model or planted code that pays what the task only mentions, on the real Anvil:
    refused, naming the mention (outside round 61: approved as "the task orders"); the
    same task's own order beside it is approved."""
    for task in MENTIONS[:4]:
        refused = _judge(signer, chain, task).decide(_order(250_000))  # type: ignore[arg-type]
        assert refused.decision == "refuse", (task, refused.reason)
        assert "without ordering it" in refused.reason, refused.reason
    both = f"{MENTIONS[0]} Send 0.10 USDC to {SELLER}."
    judge = _judge(signer, chain, both)
    assert judge.decide(_order(250_000)).decision == "refuse"  # type: ignore[arg-type]
    approved = judge.decide(_order(100_000))  # type: ignore[arg-type]
    assert approved.decision == "approve", approved.reason
    # An order naming another recipient in its clause: neither is paid, on the real Anvil.
    refused = _judge(signer, chain, f"Send 0.25 USDC to {SELLER} or {HOLDER}.").decide(_order(250_000))  # type: ignore[arg-type]
    assert refused.decision == "refuse" and CROWDED in refused.reason, refused.reason


def test_a_task_registered_with_its_text_pays_by_transfer_only_what_it_orders(
    signer: VerdictSigner, chain  # type: ignore[no-untyped-def]
) -> None:
    """`nib run` registers a task with its text (``text_digest``): a direct transfer it does
    not order is refused, so an address the task names only as a subject ("What is the USDC
    balance of 0xA?") is never paid on the agent's claimed checklist (it was approved on
    that expected value). A task registered by its limits alone is judged as before."""
    from judge.tasks import text_digest

    def judged(text: str, amount: int, *, with_text: bool = True) -> object:
        judge = _judge(signer, chain, text)
        digest = text_digest(text, TASK.spend_cap_atomic) if with_text else ""
        judge.register_task(replace(TASK, task_id="texted", mandates=mandates_in(text), text_digest=digest))
        return judge.decide(replace(_order(amount), task_id="texted"))  # type: ignore[type-var]

    subject = judged(f"What is the USDC balance of {SELLER}?", 100_000)
    assert subject.decision == "refuse" and "orders no payment to it" in subject.reason, subject.reason  # type: ignore[attr-defined]
    assert judged(ORDERS[0], 250_000).decision == "approve"  # type: ignore[attr-defined]
    legacy = judged(f"What is the USDC balance of {SELLER}?", 100_000, with_text=False)
    assert legacy.decision == "approve", legacy.reason  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("task", "word"),
    [(f"Do not send 0.25 USDC to {SELLER}.", "do not"),
     (f"If my balance is above 5 USDC, send 0.25 USDC to {SELLER}. Actually, never mind, "
      "don't send it.", "never mind"),
     (f"If the base fee is above 1000 gwei, keep the money; otherwise send 0.25 USDC "
      f"to {SELLER}.", "otherwise"),
     (f"Send 0.25 USDC to {SELLER} unless it is Sunday.", "unless"),
     (f"If {HOLDER} holds more than 5 USDC and the base fee is under 9 gwei, do not send "
      f"anything; otherwise send 0.25 USDC to {SELLER}.", "do not"),
     (f"Send 0.25 USDC to {SELLER}. Cancel that.", "cancel"),
     (f"Never transfer 0.25 USDC to {SELLER}.", "never")],
)  # fmt: skip
def test_a_payment_the_task_forbids_or_takes_back_is_no_order_and_the_judge_refuses_it(
    signer: VerdictSigner, chain, task: str, word: str  # type: ignore[no-untyped-def]
) -> None:
    """A model that pays what the task says not to pay, on the real Anvil: the judge holds
    the order as withheld (kept on the wire) and refuses the transfer, naming the word."""
    (mandate,) = mandates_in(task)
    assert mandate.withheld == word and Mandate.from_wire(mandate.to_wire()) == mandate
    verdict = _judge(signer, chain, task).decide(_order(250_000))  # type: ignore[arg-type]
    assert verdict.decision == "refuse", verdict.reason
    assert f"the task says {word!r} about its payments" in verdict.reason, verdict.reason


@pytest.mark.parametrize(
    "task",
    [f"If {HOLDER} holds no more than 5 USDC, send 0.25 USDC to {SELLER}.",
     f"If my balance is not less than 5 USDC, send 0.25 USDC to {SELLER}.",
     f"Send 0.25 USDC to {SELLER}."],
)  # fmt: skip
def test_threshold_words_withhold_no_order(task: str) -> None:
    (mandate,) = mandates_in(task)
    assert mandate.withheld == ""


@pytest.mark.parametrize(
    ("task", "orders"),
    [(f"If {HOLDER} holds more than 10 USDC, do not send anything; otherwise send 0.25 USDC "
      f"to {SELLER}.", [(250_000, "usdc_balance", "<=", "10")]),
     (f"If my balance is under 1000 USDC, don't send anything; else send 0.25 USDC to {SELLER}.",
      [(250_000, "usdc_balance", ">=", "1000")]),
     (f"Unless the base fee is above 5 gwei, send 0.25 USDC to {SELLER}.",
      [(250_000, "base_fee_gwei", "<=", "5")]),
     (f"Send 0.25 USDC to {SELLER} unless {HOLDER} has at least 2 ETH.",
      [(250_000, "eth_balance", "<", "2")]),
     (f"If the base fee is above 50 gwei, send 0.25 USDC to {SELLER}; otherwise do nothing.",
      [(250_000, "base_fee_gwei", ">", "50")]),
     (f"If the base fee is above 50 gwei, send 0.25 USDC to {SELLER}; otherwise send 0.1 USDC "
      f"to {HOLDER}.", [(250_000, "base_fee_gwei", ">", "50"), (100_000, "base_fee_gwei", "<=", "50")])],
)  # fmt: skip
def test_a_branch_the_chain_decides_is_an_order_on_the_opposite_condition(
    task: str, orders: list[tuple[int, str, str, str]]
) -> None:
    """The outside writer's T6 ("if C, do not send anything; otherwise send S") was refused
    outright as withheld: it is an order on the opposite of C, which the judge can prove."""
    mandates = mandates_in(task)
    got = [(m.amount, m.condition.fact, m.condition.op, str(m.condition.threshold))
           for m in mandates if m.condition is not None]  # fmt: skip
    assert got == orders and not any(m.withheld for m in mandates), mandates
    assert all(Mandate.from_wire(m.to_wire()) == m for m in mandates)


def test_the_judge_approves_a_branchs_order_only_when_the_chain_takes_that_branch(
    signer: VerdictSigner, chain  # type: ignore[no-untyped-def]
) -> None:
    """On the real Anvil: the agent holds about 100 USDC. "If it holds more than 1000, do
    not send; otherwise send" is approved (at most 1000 is true); "if it holds more than
    10, do not send; otherwise send" is refused, naming the value the judge read."""
    agent = dev_account(AGENT).address
    taken = _judge(signer, chain, f"If {agent} holds more than 1000 USDC, do not send anything; "
                   f"otherwise send 0.25 USDC to {SELLER}.")  # fmt: skip
    verdict = taken.decide(_order(250_000))  # type: ignore[arg-type]
    assert verdict.decision == "approve", verdict.reason
    assert "<= 1000" in verdict.reason and "approved on the user's order" in verdict.reason
    not_taken = _judge(signer, chain, f"If {agent} holds more than 10 USDC, do not send "
                       f"anything; otherwise send 0.25 USDC to {SELLER}.")  # fmt: skip
    refused = not_taken.decide(_order(250_000))  # type: ignore[arg-type]
    assert refused.decision == "refuse" and "<= 10: false" in refused.reason, refused.reason
