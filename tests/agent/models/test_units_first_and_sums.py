"""Units, labels and sums as an outside writer said them (outside test 15): an answer line's
label never names a unit its value is not stated in; a unit said before its asset ("how many
cents of USDC does 0x.. have") is read as "in cents"; a sum said with another verb ("add up
..., what is the total?") is the sum aggregate. Each is a class of phrasings, tested as such."""

from __future__ import annotations

import pytest

from agent.loop.answers import item_line
from agent.loop.checklist import Checklist, ChecklistItem
from agent.models._factpatterns import extract_checklist

A = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
B = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
C = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
#: What each free read states, as its tool does (a fee in gwei, a balance with its asset).
_STATED = {"base_fee_gwei": "0.400507877", "gas_price_gwei": "1.5",
           "eth_balance": "10001.5 ETH", "usdc_balance": "15.50 USDC"}  # fmt: skip


def _lines(task: str) -> list[str]:
    """The answer lines of ``task`` once every free read is covered with ``_STATED``."""
    rows = extract_checklist(task)
    assert not [r for r in rows if r.get("unanswerable")], rows
    items = [
        ChecklistItem(id=f"c{n}", text=r["text"], kind=r.get("kind"), params=dict(r.get("params") or {}),
                      **({"covered": True, "value": _STATED[str(r["kind"])], "evidence_id": f"e{n}",
                          "provenance": "observed"} if r.get("kind") in _STATED else {}))
        for n, r in enumerate(rows, 1)
    ]  # fmt: skip
    return [item_line(i.as_dict()) for i in Checklist(tuple(items)).derive().items]


#: Units a label may carry, and the unit a value line states first.
_UNIT_WORDS = ("gwei", "wei", "ether", "eth", "usdc", "cents", "atomic")


@pytest.mark.parametrize(
    ("task", "first"),
    [
        ("What is the base fee of the latest block, in wei?", "400507877 wei"),
        ("What is the base fee in gwei?", "0.400507877 gwei"),
        ("What is the base fee in ether?", "0.400507877 gwei"),
        ("What is the gas price in wei?", "1500000000 wei"),
        ("How many wei is the gas price?", "1500000000 wei"),
        ("What was the base fee at block 5, in wei?", "400507877 wei"),
        (f"What is the ETH balance of {A} in gwei?", "10001500000000 gwei"),
        (f"What is the ETH balance of {A} in wei?", "10001500000000000000000 wei"),
        (f"What is the USDC balance of {B} in cents?", "15.50 USDC"),
        (f"What is the USDC balance of {B} in atomic units?", "15500000 atomic units"),
    ],
)
def test_a_label_never_names_a_unit_its_value_is_not_stated_in(task: str, first: str) -> None:
    """Outside test 15, Q4: "base fee (gwei): 400507877 wei (0.400507877 gwei)"."""
    lines = _lines(task)
    assert first in lines[0], lines
    for line in lines:
        label, _, shown = line.partition(": ")
        stated = shown.split(" (")[0].split()[-1].lower()
        named = [u for u in _UNIT_WORDS if f"({u})" in label.lower() or label.lower().endswith(f" in {u}")]
        assert all(u == stated or (u, stated) == ("atomic", "units") for u in named), line


def test_a_models_label_in_another_unit_is_made_to_agree_with_its_value() -> None:
    """A model writes its own labels ("Base fee (gwei)"): the unit in them follows the value."""
    item = {"text": "Base fee (gwei)", "kind": "base_fee_gwei", "value": "0.400507877",
            "params": {"unit": "wei"}, "provenance": "observed", "evidence_id": "e1"}  # fmt: skip
    assert item_line(item) == "Base fee (wei): 400507877 wei (0.400507877 gwei) (observed, evidence e1)"
    same = dict(item, params={})
    assert item_line(same) == "Base fee (gwei): 0.400507877 gwei (observed, evidence e1)"
    balance = {"text": "Balance (ETH)", "kind": "eth_balance", "value": "1.5 ETH",
               "params": {"unit": "gwei"}, "provenance": "observed", "evidence_id": "e2"}  # fmt: skip
    assert item_line(balance).startswith("Balance (gwei): 1500000000 gwei (1.5 ETH)")


@pytest.mark.parametrize(
    ("task", "kind", "unit"),
    [
        (f"How many cents of USDC does {B} have?", "usdc_balance", "cents"),
        (f"How many cents does {B} have?", "usdc_balance", "cents"),
        (f"How many USD cents does {B} hold?", "usdc_balance", "cents"),
        (f"How many atomic units of USDC does {B} hold?", "usdc_balance", "atomic"),
        (f"How many base units of USDC does {B} own?", "usdc_balance", "atomic"),
        (f"How many wei of ETH does {A} hold?", "eth_balance", "wei"),
        (f"How many wei of ether does {A} have?", "eth_balance", "wei"),
        (f"How many gwei does {A} have?", "eth_balance", "gwei"),
        (f"How many ether does {A} own?", "eth_balance", "ether"),
        (f"How many cents is the USDC balance of {B}?", "usdc_balance", "cents"),
        (f"How many wei is the ETH balance of {A}?", "eth_balance", "wei"),
        ("How many wei is the base fee?", "base_fee_gwei", "wei"),
        ("How many gwei was the base fee at block 5?", "base_fee_gwei", "gwei"),
        ("How many wei is the gas price right now?", "gas_price_gwei", "wei"),
    ],
)
def test_a_unit_said_before_its_asset_is_the_unit_of_the_answer(task: str, kind: str, unit: str) -> None:
    """Outside test 15, Q17: "How many cents of USDC does 0x.. have?" was declined while
    "... in cents" was read; "How many wei is the base fee?" was answered in gwei."""
    items = extract_checklist(task)
    assert items[0]["kind"] == kind and items[0]["params"]["unit"] == unit, items
    assert not [i for i in items if i.get("unanswerable")], items


def test_a_unit_said_first_gives_the_same_lines_as_in_that_unit() -> None:
    assert _lines(f"How many cents of USDC does {B} have?") == _lines(f"How much USDC does {B} have, in cents?")
    assert _lines(f"How many wei of ETH does {A} hold?") == _lines(f"How much ETH does {A} hold, in wei?")


@pytest.mark.parametrize(
    ("task", "why"),
    [
        (f"How many cents of ETH does {A} have?", "'cents' is not a unit"),
        ("How many cents is the base fee?", "'cents' is not a unit"),
        (f"How many wei of USDC does {B} have?", "'wei' is not a unit"),
        ("How many gwei does the base fee come to?", "'come'"),
        # Two units said first for one kind are not paired: declined, never swapped.
        (f"How many cents of USDC does {B} have, and how many atomic units of USDC does {A} "
         "have?", "pairs a unit only"),
    ],
)  # fmt: skip
def test_a_unit_said_first_that_no_fact_takes_is_still_declined(task: str, why: str) -> None:
    items = extract_checklist(task)
    assert any(why in str(i.get("unanswerable")) for i in items), items


@pytest.mark.parametrize(
    ("task", "kind", "n"),
    [
        (f"Add up the ETH balances of {C}, {A} and {B}. What is the total?", "eth_balance", 3),
        (f"Add up the ETH balances of {C}, {A} and {B}.", "eth_balance", 3),
        (f"Add the USDC balances of {A} and {B}.", "usdc_balance", 2),
        (f"Add the ETH balances of {A} and {B} together.", "eth_balance", 2),
        (f"Sum up the USDC balances of {A}, {B} and {C}.", "usdc_balance", 3),
        (f"Sum the USDC balances of {A} and {B}.", "usdc_balance", 2),
        (f"What do the USDC balances of {A} and {B} add up to?", "usdc_balance", 2),
        (f"Get the USDC balances of {A} and {B} and add them up.", "usdc_balance", 2),
        (f"What is the sum of the ETH balances of {A}, {B} and {C}?", "eth_balance", 3),
        (f"What are the USDC balances of {A} and {B}? What is the total?", "usdc_balance", 2),
    ],
)
def test_a_sum_said_with_another_verb_is_the_sum_aggregate(task: str, kind: str, n: int) -> None:
    """Outside test 15, Q15: "Add up ... What is the total?" was declined ('add')."""
    items = extract_checklist(task)
    assert [i["kind"] for i in items] == [kind] * n + ["comparison"], items
    assert items[-1]["params"] == {"of": ",".join(f"c{k}" for k in range(1, n + 1)), "op": "sum"}


def test_the_outside_writers_sum_is_computed_exactly() -> None:
    lines = _lines(f"Add up the ETH balances of {C}, {A} and {B}. What is the total?")
    assert lines[-1].startswith("combined ETH balance: 30004.5 ETH (derived: c1 10001.5 ETH"), lines


@pytest.mark.parametrize(
    "task",
    [
        f"Add up the ETH balance of {A}.",  # one address: no sum
        f"Add up the transfer counts of {A} and {B}.",  # a sum of counts counts twice
        f"Add up the USDC balance of {A} and the ETH balance of {B}.",  # two kinds
    ],
)
def test_a_sum_it_cannot_take_is_still_declined(task: str) -> None:
    items = extract_checklist(task)
    assert "comparison" not in [i.get("kind") for i in items], items
    assert any(i.get("unanswerable") for i in items), items
