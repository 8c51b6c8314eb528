"""Every part of a task is its own: a second question about a comparison ("and by how
much?") is the difference or is named, a ratio is named, every block reference is its own
item (answered at that block or declined naming it, never a value of another block), a
unit belongs to the part it is said in, and a comparison between an address and a group of
addresses ("0xA, or 0xB plus 0xC") is named. Each case here answered wrongly at exit 0
before (outside test 6: a part dropped, or a value of another block or unit given)."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

A = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
B = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
C = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"


def _ops(items: list) -> list:  # type: ignore[type-arg]
    return [i["params"]["op"] for i in items if i.get("kind") == "comparison"]


def _declined(items: list) -> str:  # type: ignore[type-arg]
    return " | ".join(f"{i['text']}: {i['unanswerable']}" for i in items if i.get("unanswerable"))


@pytest.mark.parametrize(
    "task",
    [
        f"Which address holds more USDC, {A} or {B}, and by how much?",
        f"Who holds more ETH, {A} or {B}, and by how much?",
        f"Which has more USDC, {A} or {B}? By how much?",
        f"Which of {A} and {B} holds less USDC, and by how much?",
        f"Which of {A} and {B} has more USDC; by how much?",
        f"Which holds more USDC, {A} or {B}, and by how many USDC?",
    ],
)
def test_by_how_much_after_a_comparison_is_their_difference(task: str) -> None:
    items = extract_checklist(task)
    assert _ops(items)[-1] == "diff", items
    diff = items[-1]
    assert diff["params"]["of"] == "c1,c2" and not _declined(items), items


@pytest.mark.parametrize(
    "task",
    [
        f"Which holds more USDC, {A} or {B}, and how many times more?",
        f"Which holds more USDC, {A} or {B}? How many times more?",
        f"Does {A} hold three times as much USDC as {B}?",
        f"What is the ratio of the USDC balances of {A} and {B}?",
    ],
)
def test_a_ratio_is_named_never_dropped(task: str) -> None:
    items = extract_checklist(task)
    assert any(w in _declined(items) for w in ("how many times", "times as", "ratio")), items


@pytest.mark.parametrize(
    ("task", "blocks"),
    [
        ("What were the base fees of block 3 and block 4?", ["3", "4"]),
        ("What are the timestamps of blocks 5 and 9?", ["5", "9"]),
        ("What are the timestamps of blocks 5, 7 and 9?", ["5", "7", "9"]),
        ("What are the timestamps of blocks 5 & 9?", ["5", "9"]),
        ("What's the base fee now? And at block 5?", [None, "5"]),
        ("What was the base fee at block 5 and 6?", ["5", "6"]),
        ("Timestamps of block 3, block 4 and block 5?", ["3", "4", "5"]),
        ("What was the base fee in block 3 and what is it now?", ["3", None]),
        ("What is the base fee now, and the timestamp of block 5?", [None, "5"]),
        ("What was the base fee at block 3, and at block 12?", ["3", "12"]),
        ("What is the timestamp of the latest block and of block 3?", [None, "3"]),
        ("What's the base fee now and what was it at block 5?", [None, "5"]),
        ("What's the base fee of the latest block and what was it 3 blocks ago?",
         [None, "latest-3"]),
        ("What is the base fee, and what was it at block 5?", [None, "5"]),
    ],
)  # fmt: skip
def test_every_block_reference_is_its_own_item(task: str, blocks: list) -> None:  # type: ignore[type-arg]
    items = extract_checklist(task)
    assert not _declined(items), items
    assert [i.get("params", {}).get("block") for i in items] == blocks, items


@pytest.mark.parametrize(
    "task",
    [
        "Give me the timestamps of blocks 5 or 9.",
        "What is the timestamp? Use block 5 and block 9.",
    ],
)
def test_a_block_no_item_read_is_named_and_no_head_value_stands_in(task: str) -> None:
    items = extract_checklist(task)
    assert _declined(items), items
    for item in items:
        if item.get("kind") == "block_timestamp":
            assert item.get("params", {}).get("block"), items


def test_a_balance_at_a_past_block_asked_with_one_now_is_declined_naming_the_block() -> None:
    items = extract_checklist(f"How much USDC does {A} hold now, and how much did it hold at block 2?")
    assert items[0]["kind"] == "usdc_balance" and "block" not in items[0].get("params", {})
    assert "block 2" in _declined(items), items


def test_a_bare_trailing_block_is_still_the_whole_sentences() -> None:
    items = extract_checklist("What is the base fee and the timestamp, at block 5?")
    assert [i.get("params", {}).get("block") for i in items] == ["5", "5"], items


def test_how_much_higher_at_another_block_keeps_the_value_asked_now() -> None:
    items = extract_checklist("What is the base fee, and how much higher was it at block 5?")
    assert items[0]["kind"] == "base_fee_gwei" and "block" not in items[0].get("params", {})
    assert "higher" in _declined(items), items


@pytest.mark.parametrize(
    ("task", "units"),
    [
        (f"How much USDC does {A} hold, in cents, and how much does {B} hold, in atomic units?",
         ["cents", "atomic"]),
        (f"What's the USDC balance of {A} in cents and of {B} in atomic units?",
         ["cents", "atomic"]),
        (f"What's the USDC balance of {A} in atomic units and of {B} in cents?",
         ["atomic", "cents"]),
        (f"What are the USDC balances of {A} and {B} in cents?", ["cents", "cents"]),
    ],
)  # fmt: skip
def test_a_unit_belongs_to_the_part_it_is_said_in(task: str, units: list) -> None:  # type: ignore[type-arg]
    items = extract_checklist(task)
    assert [i["params"].get("unit") for i in items if i.get("kind") == "usdc_balance"] == units


def test_two_fee_units_each_for_its_own_block() -> None:
    items = extract_checklist(
        "What's the base fee of the latest block in gwei and what was it 3 blocks ago in wei?")
    fees = [i for i in items if i.get("kind") == "base_fee_gwei"]
    assert [(i["params"].get("block"), i["params"].get("unit")) for i in fees] == [
        (None, "gwei"), ("latest-3", "wei")], items


@pytest.mark.parametrize(
    ("task", "word"),
    [
        (f"Which holds more USDC: {A}, or {B} plus {C}?", "plus"),
        (f"Which holds more USDC: {B}, or {C} plus {A}?", "plus"),
        (f"Who has less USDC, {A} or {B} together with {C}?", "together with"),
        (f"Which is larger: the USDC of {A}, or that of {B} + {C}?", "+"),
    ],
)
def test_a_comparison_with_a_group_is_named(task: str, word: str) -> None:
    items = extract_checklist(task)
    assert "comparison" not in [i.get("kind") for i in items], items
    assert repr(word) in _declined(items), items


@pytest.mark.parametrize(
    "task",
    [
        f"In cents, what is the USDC balance of {A}, and in atomic units, that of {B}?",
        f"Give me in cents the USDC balance of {A} and in atomic units the USDC balance of {B}.",
    ],
)
def test_two_units_said_before_their_values_are_named_never_paired_wrongly(task: str) -> None:
    items = extract_checklist(task)
    assert not [i for i in items if i.get("kind") == "usdc_balance"], items
    assert "'cents' and 'atomic'" in _declined(items), items
