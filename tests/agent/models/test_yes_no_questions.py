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
        # Several values: each is read as before (a count of holders is its own aggregate).
        (f"Do {A} and {B} hold any USDC?", ["usdc_balance", "usdc_balance"]),
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
