"""A yes/no question about one value answers yes or no first, then the value (the outside
tester's round 21, Q3: "Does 0xb3a2... hold any USDC?" gave "0.00 USDC" alone)."""

from __future__ import annotations

import pytest

from agent.loop.proposal import Call, SubmitAnswer
from agent.models._factpatterns import extract_checklist
from tests.agent.models.test_offline import Sim

A, B = "0xb3a2A00B087e4086a8073Da65204191262DB1F65", "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
ABOVE_0 = {"of": "c1", "op": ">", "than": "0"}


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        (f"Does {A} hold any USDC?", "usdc_balance"),
        (f"Does {A} have any USDC?", "usdc_balance"),
        (f"Does {A} hold any USDC? What is its balance?", "usdc_balance"),
        (f"Does {A} have any ETH?", "eth_balance"),
        ("Does my wallet hold any USDC?", "usdc_balance"),
        ("Were there any USDC transfers in the last 20 blocks?", "transfer_count"),
    ],
)
def test_an_any_question_about_one_value_is_the_condition_that_it_is_above_0(task: str, kind: str) -> None:
    items = extract_checklist(task)
    assert [i["kind"] for i in items] == [kind, "condition"], items
    assert items[1]["params"] == ABOVE_0, items


@pytest.mark.parametrize(
    ("task", "kinds"),
    [
        # A count of holders is its own aggregate.
        (f"How many of {A} and {B} hold any USDC?", ["usdc_balance", "usdc_balance", "comparison"]),
        # An order's condition is the judge's to read: "any" there is still declined.
        (f"If {A} holds any USDC, send 1 USDC to {B}", ["usdc_balance", None, "transfer_receipt"]),
    ],
)
def test_other_any_questions_read_as_before(task: str, kinds: list[str | None]) -> None:
    assert [i["kind"] for i in extract_checklist(task)] == kinds


@pytest.mark.parametrize(
    ("task", "call", "facts", "first", "second"),
    [
        (f"Does {A} hold any USDC?", Call("token_balance", {"address": A}),
         {"usdc_balance": "0.00 USDC"},
         f"USDC balance of {A} > 0 usdc: no (derived: c1 0.00 > 0 = false)",
         f"USDC balance of {A}: 0.00 USDC (observed, evidence e1)"),
        (f"Does {B} hold any USDC?", Call("token_balance", {"address": B}),
         {"usdc_balance": "0.16 USDC"},
         f"USDC balance of {B} > 0 usdc: yes (derived: c1 0.16 > 0 = true)",
         f"USDC balance of {B}: 0.16 USDC (observed, evidence e1)"),
        ("Is the base fee above 1 gwei?", Call("base_fee", {}), {"base_fee_gwei": "0.269239746"},
         "base fee > 1 gwei: no (derived: c1 0.269239746 > 1 = false)",
         "base fee: 0.269239746 gwei (observed, evidence e1)"),
    ],
)  # fmt: skip
def test_a_yes_no_question_answers_yes_or_no_first_then_the_value(
    task: str, call: Call, facts: dict[str, str], first: str, second: str
) -> None:
    sim = Sim(task)
    assert sim.propose() == call
    sim.record(call, "ok", facts, "read")
    final = sim.propose()
    assert isinstance(final, SubmitAnswer) and final.answer.splitlines() == [first, second]


C = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"


@pytest.mark.parametrize(
    ("task", "holders"),
    [
        (f"Do {A} and {B} hold any USDC?", [A, B]),
        (f"Do my wallet and {B} hold any USDC?", ["self", B]),
        (f"Does my wallet or {B} have any ETH?", ["self", B]),
        # No balance word: the asset of its holder (outside round 22).
        (f"Is there any USDC in {B}?", [B]),
        (f"Is there any ETH in {A}?", [A]),
    ],
)
def test_an_any_question_about_each_of_a_few_holders_answers_each_yes_or_no(
    task: str, holders: list[str]
) -> None:
    # Outside round 22: "Do 0xA and 0xB hold any USDC?" gave the balances with no yes or no.
    items = extract_checklist(task)
    values = [i for i in items if i["kind"] != "condition"]
    assert [(i.get("params") or {}).get("address", "self") for i in values] == holders, items
    tests = [i["params"] for i in items if i["kind"] == "condition"]
    assert tests == [{"of": f"c{n}", "op": ">", "than": "0"} for n in range(1, len(holders) + 1)]


def test_more_holders_than_the_checklist_holds_with_a_yes_or_no_each_give_their_balances() -> None:
    items = extract_checklist(f"Do {A}, {B} and {C} hold any USDC?")
    assert [i["kind"] for i in items] == ["usdc_balance"] * 3, items


def test_a_question_of_its_own_after_an_any_question_is_no_yes_or_no() -> None:
    items = extract_checklist(f"Does {A} hold any USDC, and how much ETH does {B} hold?")
    assert [i["kind"] for i in items] == ["usdc_balance", "condition", "eth_balance"], items
