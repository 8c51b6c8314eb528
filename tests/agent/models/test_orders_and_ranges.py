"""Two classes the outside tester's fifth run found (issue 23, commit 2ee9a63).

P12: "Send 0.01 USDC to 0xA and also 0.01 USDC to 0xB." registered one mandate, planned one
payment and exited 0 "every checklist item is covered": the second order vanished. Each
ordered payment of a list (and, also, plus, commas, then, each; with a condition or
without) is one mandate and one planned payment, or is declined naming it; the loop adds
an order a model's checklist left out.

A08: "the biggest USDC transfer between block 1 and the latest block" was read as block 1
alone plus a separate block-number question. A range whose end is the head ("the latest
block", "now", "the head"), "since block X", "from block X on", "the last ten blocks up to
the head" is one range; none of its words is a question of its own."""

from __future__ import annotations

import pytest

from agent.loop.checklist import Checklist, ChecklistItem, resolve_blocks
from agent.loop.orders import with_every_order
from agent.loop.proposal import Call, Done
from agent.models._factpatterns import extract_checklist
from judge.mandates import mandates_in

A = "0x2546BcD3c84621e976D8185a91A922aE77ECEc30"
B = "0xbDA5747bFD65F08deb54cb465eB87D40e51B197E"
C = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
TWO = [(A, 10_000), (B, 20_000)]


@pytest.mark.parametrize(
    ("task", "orders"),
    [
        (f"Send 0.01 USDC to {A} and also 0.02 USDC to {B}.", TWO),
        (f"Send 0.01 USDC to {A}, 0.02 USDC to {B}.", TWO),
        (f"Send 0.01 USDC to {A}, then 0.02 USDC to {B}.", TWO),
        (f"Send 0.01 USDC to {A} plus 0.02 USDC to {B}", TWO),
        (f"Transfer 0.01 USDC to {A} as well as 0.02 USDC to {B}.", TWO),
        (f"Send 0.01 USDC to {A} and then send 0.02 USDC to {B}.", TWO),
        (f"pay 0.01 usdc to {A}; 0.02 usdc to {B}", TWO),
        (f"Send 0.01 USDC to {A}, 0.02 USDC to {B}, and 0.03 USDC to {C}.",
         [*TWO, (C, 30_000)]),
        (f"Send 0.01 USDC each to {A} and {B}.", [(A, 10_000), (B, 10_000)]),
        (f"Send 0.01 USDC each to {A}, {B} and {C}.", [(A, 10_000), (B, 10_000), (C, 10_000)]),
        # The recipient before the amount (declined until outside round 64).
        (f"Send {A} 0.01 USDC and {B} 0.02 USDC.", TWO),
        (f"Pay {A} $0.01, {B} $0.02", TWO),
    ],
)  # fmt: skip
def test_each_order_of_a_list_is_a_mandate_and_a_planned_payment(
    task: str, orders: list[tuple[str, int]]
) -> None:
    assert [(m.recipient, m.amount) for m in mandates_in(task)] == [
        (to.lower(), amount) for to, amount in orders
    ]
    items = extract_checklist(task)
    assert [(i["params"]["to"].lower(), int(i["params"]["amount"])) for i in items] == [
        (to.lower(), amount) for to, amount in orders
    ], items
    assert all(i["kind"] == "transfer_receipt" for i in items), items


def test_each_order_of_a_list_waits_for_the_sentences_condition() -> None:
    task = f"If the base fee is under 100 gwei, send 0.01 USDC to {A} and also 0.02 USDC to {B}."
    mandates = mandates_in(task)
    assert [(m.recipient, m.amount) for m in mandates] == [(A.lower(), 10_000), (B.lower(), 20_000)]
    assert all(m.condition is not None and m.condition.fact == "base_fee_gwei" for m in mandates)
    items = extract_checklist(task)
    sends = [i for i in items if i["kind"] == "transfer_receipt"]
    assert len(sends) == 2 and all(s["params"]["if"] == "c2" for s in sends), items


@pytest.mark.parametrize(
    ("task", "named"),
    [
        (f"Pay 0.01 USDC to {A} and {B}", B),
        (f"Send 0.01 USDC to {A}. Also 0.02 USDC to {B}.", B),
        (f"send 0.01 usdc to {A} and 0.02 to {B}", B),
        (f"Send {A} 0.01 USDC and {B} 0.02.", B),
    ],
)
def test_an_order_of_a_list_it_cannot_read_is_declined_naming_it(task: str, named: str) -> None:
    items = extract_checklist(task)
    declined = [i for i in items if i.get("unanswerable")]
    assert declined and named in declined[0]["text"], items
    # Every recipient the task names is in an item: made, or named as not made.
    assert all(any(a in str(i) for i in items) for a in (A, B)), items


def test_an_order_a_models_checklist_left_out_becomes_an_item() -> None:
    """Whatever the planner: an order the model's checklist does not name is added (made or
    named as not made), one it names (as a payment, or declined) is not added twice."""
    task = f"Send 0.01 USDC to {A} and also 0.02 USDC to {B}."
    model = Checklist((ChecklistItem(id="c1", text="send to A", kind="transfer_receipt",
                                     params={"to": A, "amount": "0.01"}),))  # fmt: skip
    out, added = with_every_order(model, task)
    assert added == [f"send 0.02 USDC to {B.lower()}"]
    assert out.items[1].id == "c2" and out.items[1].kind == "transfer_receipt"
    assert out.items[1].params == {"to": B.lower(), "amount": "20000"}
    declined = Checklist((*model.items, ChecklistItem(id="c2", text=f"pay {B}",
                                                      unanswerable="not read")))  # fmt: skip
    assert with_every_order(declined, task)[1] == []
    # The wrong amount to the right recipient is not the order.
    wrong = Checklist((ChecklistItem(id="c1", text="send", kind="transfer_receipt",
                                     params={"to": A, "amount": "20000"}),))  # fmt: skip
    assert len(with_every_order(wrong, f"Send 0.01 USDC to {A}.")[1]) == 1
    # A withheld order orders nothing: nothing is added.
    assert with_every_order(Checklist(()), f"Send 0.01 USDC to {A}. Never mind.")[1] == []


HEAD = {"from_block": "1", "to_block": "latest-0"}


@pytest.mark.parametrize(
    ("task", "kind", "params"),
    [
        ("What was the biggest USDC transfer between block 1 and the latest block?",
         "transfer_max", HEAD),
        ("What was the biggest USDC transfer between the latest block and block 1?",
         "transfer_max", HEAD),
        ("largest USDC transfer from block 1 to the head", "transfer_max", HEAD),
        ("How many USDC transfers from block 1 to now?", "transfer_count", HEAD),
        ("How many USDC transfers happened since block 1?", "transfer_count", HEAD),
        ("How many USDC transfers from block 1 onwards?", "transfer_count", HEAD),
        ("How many USDC transfers in blocks 1 through the latest one?", "transfer_count", HEAD),
        ("How many USDC transfers between block 2 and block 7?", "transfer_count",
         {"from_block": "2", "to_block": "7"}),
        ("How many USDC transfers between 5 blocks ago and now?", "transfer_count",
         {"from_block": "latest-5", "to_block": "latest-0"}),
        ("biggest USDC transfer between the previous block and the latest block", "transfer_max",
         {"from_block": "latest-1", "to_block": "latest-0"}),
        ("How many USDC transfers in the last ten blocks up to the latest block?",
         "transfer_count", {"blocks": "10"}),
        ("How many USDC transfers since the genesis block?", "transfer_count",
         {"from_block": "0", "to_block": "latest-0"}),
        ("How many USDC transfers were there up to block 5?", "transfer_count",
         {"from_block": "0", "to_block": "5"}),
        ("How many USDC transfers before block 5?", "transfer_count",
         {"from_block": "0", "to_block": "4"}),
        ("How many USDC transfers after block 3?", "transfer_count",
         {"from_block": "4", "to_block": "latest-0"}),
        ("How many USDC transfers in block 3 up to block 5?", "transfer_count",
         {"from_block": "3", "to_block": "5"}),
    ],
)  # fmt: skip
def test_a_block_range_to_the_head_is_one_range_item(task: str, kind: str, params: dict[str, str]) -> None:
    items = extract_checklist(task)
    assert len(items) == 1 and items[0]["kind"] == kind, items
    assert items[0]["params"] == params, items


def test_a_range_to_the_head_resolves_against_the_head_at_run_start() -> None:
    row = extract_checklist("What was the biggest USDC transfer between block 1 and the latest block?")[0]
    item = ChecklistItem(id="c1", text=row["text"], kind=row["kind"], params=dict(row["params"]))
    resolved = resolve_blocks(Checklist((item,)), head=14).items[0]
    assert resolved.params == {"from_block": "1", "to_block": "14"}
    assert resolved.text == "largest USDC transfer in blocks 1 to 14" and resolved.unanswerable is None


def test_two_blocks_asked_apart_are_no_range() -> None:
    items = extract_checklist("What is the timestamp of block 3 and the current block number?")
    assert [(i["kind"], i.get("params")) for i in items] == [
        ("block_timestamp", {"block": "3"}), ("block_number", None)
    ]  # fmt: skip


def test_a_range_of_a_one_block_fact_is_declined_not_read_as_one_block() -> None:
    items = extract_checklist("What was the base fee between block 1 and the latest block?")
    assert len(items) == 1 and items[0]["kind"] is None, items
    assert "range of blocks" in items[0]["unanswerable"]


REQUESTS = [
    "buy the USDC factsheet from the market and tell me who the issuer is",
    "Purchase the USDC token fact sheet from a seller in the market and tell me its issuer.",
    "Get me the USDC fact sheet from the market and tell me who issues it.",
    "Order the USDC factsheet from the marketplace, then tell me the issuer.",
    "Fetch the USDC fact sheet from the local paywall and tell me who the issuer is.",
    "Can you buy USDC's fact sheet from the market and tell me its issuer?",
    "Buy USDC fact sheet from the market, who is the issuer?",
    "Buy the USDC fact sheet.",
]


@pytest.mark.parametrize("task", REQUESTS)
def test_every_request_to_buy_a_named_sheet_is_one_purchase_and_its_question(task: str) -> None:
    """S03: a request naming its subject is a request to buy (``pick``), never the research
    path that pays a second seller; a question about the sheet ("who the issuer is") asks
    the same sheet's field."""
    items = extract_checklist(task)
    assert items[0]["kind"] == "token_factsheet" and items[0]["params"]["symbol"] == "USDC", items
    assert items[0]["params"]["pick"], items
    rest = items[1:]
    assert all(i["kind"] == "token_factsheet" and i["params"] == {"field": "issuer", "symbol": "USDC"}
               for i in rest), items  # fmt: skip
    assert len(rest) == (0 if task.startswith("Buy the USDC fact sheet.") else 1), items


@pytest.mark.parametrize("task", ["get me the base fee of block 3", "Get me the Uniswap fact sheet",
                                  "Who issues USDC? Buy its token fact sheet from a seller in the market.",
                                  "Buy the gas stats again."])
def test_get_without_a_seller_and_a_subject_is_a_question_not_a_request_to_buy(task: str) -> None:
    assert not any(i.get("params", {}).get("pick") for i in extract_checklist(task))


@pytest.mark.parametrize("task", REQUESTS[:4])
def test_a_request_to_buy_and_its_question_pay_one_seller(task: str) -> None:
    """The seller bought from delivered nothing: the next proposal is the end, naming that
    purchase, never the next seller (for the request's item nor for its question)."""
    from tests.agent.models.test_offline import _DISCOVERED, Sim

    sim = Sim(task)
    first = sim.propose()
    assert first == Call("discover", {"query": "token fact sheet"})
    sim.record(first, "ok", {}, _DISCOVERED)
    buy = sim.propose()
    assert isinstance(buy, Call) and buy.tool == "pay_http", buy
    sim.record(buy, "ok", {}, "paid 0.005 USDC for /tokens from http://127.0.0.1:7001: 0 facts")
    final = sim.propose()
    assert isinstance(final, Done), final
    assert final.answer is not None and "a request to buy buys once" in final.answer
    assert "paid 0.005 USDC for /tokens from http://127.0.0.1:7001" in final.answer


@pytest.mark.parametrize("task", [
    "Which company is behind USDC? Buy the fact sheet from a seller in the market.",
    "Who issues USDC? Buy its token fact sheet from a seller in the market."])
def test_a_buy_request_naming_no_subject_of_its_own_serves_the_question(task: str) -> None:
    """The outside tester's Q14 (round 18): a request to buy that names its subject only in
    the question before it is where to buy the question's answer, not a request of its own
    (docs/planner.md "Requests to buy"): no pick, and when the seller paid delivers
    nothing, the next proposal buys the fact from another seller."""
    from tests.agent.models.test_offline import _DISCOVERED, Sim

    assert not any(i.get("params", {}).get("pick") for i in extract_checklist(task))
    sim = Sim(task)
    first = sim.propose()
    assert isinstance(first, Call) and first.tool == "discover", first
    sim.record(first, "ok", {}, _DISCOVERED)
    buy = sim.propose()
    assert isinstance(buy, Call) and buy.tool == "pay_http", buy
    sim.record(buy, "ok", {}, f"paid 0.005 USDC for /tokens from {buy.args['url']}: 0 facts")
    again = sim.propose()
    assert isinstance(again, Call) and again.tool == "pay_http", again
    assert again.args["url"] != buy.args["url"], (buy, again)


def test_a_purchase_that_delivered_nothing_is_named_once_in_the_answer() -> None:
    from agent.loop.answers import with_paid_for_nothing
    from agent.loop.result import EvidenceItem

    nothing = EvidenceItem(id="e2", step=2, tool="pay_http", args={}, cost_usdc=5_000,
                           summary="paid 0.005 USDC for /tokens from http://h:1: 0 facts")  # fmt: skip
    bought = EvidenceItem(id="e3", step=3, tool="pay_http", args={}, cost_usdc=10_000,
                          summary="paid 0.01 USDC: 1 facts", facts={"token_factsheet": "issuer=Circle"})  # fmt: skip
    out = with_paid_for_nothing("issuer: Circle (observed, evidence e3)", [nothing, bought])
    assert out.splitlines()[1] == ("a purchase that delivered nothing: paid 0.005 USDC for "
                                   "/tokens from http://h:1: 0 facts (evidence e2)")  # fmt: skip
    assert len(out.splitlines()) == 2
    # Already named (the request to buy's line): not said twice.
    said = "c1: not answered (paid 0.005 USDC for /tokens from http://h:1; a request to buy buys once)"
    assert with_paid_for_nothing(said, [nothing]) == said


def test_a_named_sheet_at_a_sellers_bare_url_is_its_offer_about_the_subject() -> None:
    items = extract_checklist("Buy the lido sheet from http://127.0.0.1:7003 and tell me its governance token.")
    assert items[0]["kind"] is None and items[0]["params"] == {
        "pick": "only", "seller": "http://127.0.0.1:7003", "about": "lido"}, items  # fmt: skip
    assert items[1]["params"] == {"field": "governance_token", "name": "lido"}, items


@pytest.mark.parametrize(
    "condition",
    [f"{C} holds more than $2 of ETH", f"{C} holds more than two USDC", "my balance is over twenty",
     "the base fee is below 2x gwei"],
)
def test_an_order_whose_threshold_is_not_read_waits_on_it_and_is_never_made(condition: str) -> None:
    """A threshold word with a number the planner does not read ("$2" then, "two") left no
    condition item: the order was planned ungated (the judge refused it, as its condition
    was unreadable; the planner must not plan it either)."""
    items = extract_checklist(f"If {condition}, send 0.01 USDC to {A}.")
    (order,) = [i for i in items if i["kind"] == "transfer_receipt"]
    gate = order["params"].get("if")
    assert gate is not None, items
    assert items[int(str(gate).removeprefix("c")) - 1].get("unanswerable"), items
    (mandate,) = mandates_in(f"If {condition}, send 0.01 USDC to {A}.")
    assert mandate.condition is not None and mandate.condition.fact == "unreadable"
