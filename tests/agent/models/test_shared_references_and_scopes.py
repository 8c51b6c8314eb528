"""Two numbers sharing one relative block reference ("the base fees 2 and 4 blocks ago")
are one item each at its own block, and an aggregate over two addresses is over exactly
the addresses of its own part: the address of a following part ("..., and how much does
0xC hold?") is that part's own item. Each case here answered wrongly at exit 0 before
(outside test 7: the head's value for the first number; a sum, count or winner over
three addresses, or the next part dropped)."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

A = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
B = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
C = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"
E = "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc"
F = "0x976EA74026E726554dB657fA54763abd0C3a0aa9"


def _declined(items: list) -> str:  # type: ignore[type-arg]
    return " | ".join(f"{i['text']}: {i['unanswerable']}" for i in items if i.get("unanswerable"))


@pytest.mark.parametrize(
    ("task", "blocks"),
    [
        ("What were the base fees 2 and 4 blocks ago?", ["latest-2", "latest-4"]),
        ("What was the base fee 1 and 3 blocks ago?", ["latest-1", "latest-3"]),
        ("What were the timestamps 2 and 5 blocks ago?", ["latest-2", "latest-5"]),
        ("What were the base fees 3 and 5 blocks ago, in wei?", ["latest-3", "latest-5"]),
        ("What were the timestamps 1 and 2 blocks ago?", ["latest-1", "latest-2"]),
        ("What were the base fees two and four blocks before the latest block?",
         ["latest-2", "latest-4"]),
        ("What were the base fees one and three blocks back?", ["latest-1", "latest-3"]),
        ("What were the timestamps 1, 2 and 3 blocks ago?", ["latest-1", "latest-2", "latest-3"]),
        ("What were the base fees 2 and 4 blocks before block 10?", ["8", "6"]),
        ("What was the base fee of the block two before block 9, and of block 10?", ["7", "10"]),
        ("What was the base fee of the block 2 after block 12?", ["14"]),
        ("What was the base fee at block 12 and 5 blocks ago?", ["12", "latest-5"]),
        ("What was the base fee 2 blocks ago and 4 blocks ago?", ["latest-2", "latest-4"]),
        ("What was the base fee 2 blocks and 4 blocks ago?", ["latest-2", "latest-4"]),
        ("What were the base fees 2 and also 4 blocks ago?", ["latest-2", "latest-4"]),
        ("What were the base fees 2 and 4 blocks prior?", ["latest-2", "latest-4"]),
        ("What was the base fee 2 blocks ago and also 4?", ["latest-2", "latest-4"]),
        ("What were the timestamps of the blocks 2 and 4 blocks ago?", ["latest-2", "latest-4"]),
        ("Base fee 2 and 4 blocks ago, please.", ["latest-2", "latest-4"]),
    ],
)  # fmt: skip
def test_each_number_of_a_shared_relative_reference_is_its_own_block(
    task: str, blocks: list  # type: ignore[type-arg]
) -> None:
    items = extract_checklist(task)
    assert not _declined(items), items
    assert [i.get("params", {}).get("block") for i in items] == blocks, items


@pytest.mark.parametrize(
    "task",
    [
        "What was the base fee 12 blocks before block 9?",
        "What was the base fee of the block 12 before block 9?",
        "What was the timestamp of the block before block 0?",
    ],
)
def test_a_block_before_block_zero_is_named_never_the_heads(task: str) -> None:
    items = extract_checklist(task)
    assert "genesis" in _declined(items), items
    assert all(i.get("kind") is None for i in items), items


def _address(item: dict) -> str:  # type: ignore[type-arg]
    return str((item.get("params") or {}).get("address", ""))


@pytest.mark.parametrize(
    ("task", "op", "kind", "over", "alone"),
    [
        (f"How much USDC do {A} and {B} hold together, and how much does {C} hold?",
         "sum", "usdc_balance", [A, B], C),
        (f"How much USDC do {A} and {B} hold in total, in cents, and how much does {C} hold, "
         "in atomic units?", "sum", "usdc_balance", [A, B], C),
        (f"How much ETH do {E} and {F} have between them, and how much does {B} have?",
         "sum", "eth_balance", [E, F], B),
        (f"How many of {A} and {B} hold more than 5 USDC, and how much does {C} hold?",
         "count", "usdc_balance", [A, B], C),
        (f"Which of {A} and {B} has the least USDC, and how much does {C} hold?",
         "min", "usdc_balance", [A, B], C),
        (f"Which of {B} and {C} holds the most USDC, and how much does {A} hold?",
         "max", "usdc_balance", [B, C], A),
        (f"How much USDC do {A} and {B} hold together? How much does {C} hold?",
         "sum", "usdc_balance", [A, B], C),
        (f"Which of {A} and {B} has the least USDC? How much does {C} hold?",
         "min", "usdc_balance", [A, B], C),
        (f"How many of {A} and {B} hold more than 5 USDC? And what about {C}?",
         "count", "usdc_balance", [A, B], C),
        (f"How much more USDC does {A} have than {B}, and what does {C} hold?",
         "diff", "usdc_balance", [A, B], C),
        (f"Which of {A} and {B} has more USDC, and does {C} hold any?",
         "max", "usdc_balance", [A, B], C),
        (f"What's the total USDC held by {A} and {B}, and what about {C}?",
         "sum", "usdc_balance", [A, B], C),
        (f"How much USDC do {A} and {B} hold together and how much does {C} hold?",
         "sum", "usdc_balance", [A, B], C),
    ],
)  # fmt: skip
def test_an_aggregate_is_over_its_own_parts_addresses_only(
    task: str, op: str, kind: str, over: list, alone: str  # type: ignore[type-arg]
) -> None:
    items = extract_checklist(task)
    assert not _declined(items), items
    aggregate = [i for i in items if i.get("kind") == "comparison"]
    assert [i["params"]["op"] for i in aggregate] == [op], items
    refs = str(aggregate[0]["params"]["of"]).split(",")
    assert [_address(items[int(r[1:]) - 1]) for r in refs] == over, items
    assert [i["kind"] for i in items if _address(i) == alone] == [kind], items


@pytest.mark.parametrize(
    "task",
    [
        f"What is the combined wealth of {E} and {F}, and what is the USDC balance of {C}?",
        f"What is the total worth of {E} and {F}, and the ETH balance of {B}?",
    ],
)
def test_an_aggregate_whose_value_is_not_read_is_named_never_taken_over_the_next_part(
    task: str,
) -> None:
    # Before, 0xF (the list's tail) was read with the next part's fact: an unasked line.
    items = extract_checklist(task)
    assert not [i for i in items if i.get("kind") == "comparison"], items
    assert "wealth" in _declined(items) or "worth" in _declined(items), items
    for addr in (E, F):
        assert not [i for i in items if _address(i) == addr and not i.get("unanswerable")], items
        assert addr in _declined(items), items


@pytest.mark.parametrize(
    ("task", "other"),
    [
        (f"What is the combined ETH of {E} and {F}, and what is the USDC balance of {C}?",
         ("usdc_balance", C)),
        (f"What is the total ETH of {E} and {F}, and the ETH balance of {B}?", ("eth_balance", B)),
    ],
)  # fmt: skip
def test_an_aggregate_of_an_asset_is_taken_over_its_own_holders_only(
    task: str, other: tuple[str, str]
) -> None:
    items = extract_checklist(task)
    assert [(i["kind"], _address(i)) for i in items] == [
        ("eth_balance", E), ("eth_balance", F), ("comparison", ""), other], items  # fmt: skip
    assert items[2]["params"] == {"of": "c1,c2", "op": "sum"}, items


def test_a_question_naming_only_an_address_after_another_fact_is_named() -> None:
    items = extract_checklist(f"What is the base fee? How much does {C} hold?")
    assert C in _declined(items), items


def test_an_aggregate_over_five_addresses_names_the_items_it_needs() -> None:
    items = extract_checklist(f"What is the combined USDC balance of {A}, {B}, {C}, {E} and {F}?")
    assert "needs 6 items" in _declined(items) and "at most 4 addresses" in _declined(items), items
    assert not [i for i in items if i.get("kind") == "comparison"], items


@pytest.mark.parametrize(
    ("task", "ops"),
    [
        (f"How much USDC do {A} and {B} hold together, and how much do {B} and {C} hold "
         "together?", [("sum", "c1,c2"), ("sum", "c2,c4")]),
        (f"Which of {A} and {B} holds the most USDC? Which of {B} and {C} holds the least?",
         [("max", "c1,c2"), ("min", "c2,c4")]),
        (f"How much USDC does {C} hold, and how much do {A} and {B} hold together?",
         [("sum", "c2,c3")]),
        (f"What is the USDC balance of {C}, and how much do {A} and {B} hold combined?",
         [("sum", "c2,c3")]),
        (f"How much ETH does {C} hold, and which of {A} and {B} holds the most ETH?",
         [("max", "c2,c3")]),
        (f"What is the base fee, and which of {A} and {B} has more USDC?", [("max", "c2,c3")]),
    ],
)  # fmt: skip
def test_an_aggregate_asked_after_another_part_is_over_its_own_addresses(
    task: str, ops: list  # type: ignore[type-arg]
) -> None:
    items = extract_checklist(task)
    assert not _declined(items), items
    got = [(i["params"]["op"], i["params"]["of"]) for i in items if i.get("kind") == "comparison"]
    assert got == ops, items


@pytest.mark.parametrize(
    "task",
    [
        "How many USDC transfers were there in the last 3 and 5 blocks?",
        "How many USDC transfers were there in the last 3 and the last 5 blocks?",
    ],
)
def test_two_windows_one_item_reads_are_named_never_one_for_both(task: str) -> None:
    items = extract_checklist(task)
    assert "the last 3 blocks" in _declined(items) and "the last 5 blocks" in _declined(items)
    assert not [i for i in items if i.get("kind") == "transfer_count"], items


def test_a_window_asked_again_in_its_own_part_is_its_own_item() -> None:
    # "..., and in the last 5 blocks": the count asked again over that span, an item each.
    items = extract_checklist("How many USDC transfers were there in the last 3 blocks and in "
                              "the last 5 blocks?")
    assert [(i["kind"], i["params"]) for i in items] == [
        ("transfer_count", {"blocks": "3"}), ("transfer_count", {"blocks": "5"})], items


def test_two_windows_each_read_by_its_own_item_stay_answered() -> None:
    items = extract_checklist("How many USDC transfers were there in the last 10 blocks, and "
                              "what was the largest USDC transfer in the last 20 blocks?")  # fmt: skip
    assert [(i["kind"], i["params"]["blocks"]) for i in items] == [
        ("transfer_count", "10"), ("transfer_max", "20")], items  # fmt: skip
