"""A block reference belongs to the part it is said in. A part asking its own question in
the present tense ("What is the base fee, and what was the timestamp 3 blocks ago?") is
read at the head; a part sharing one tail by grammar ("the base fee and the timestamp at
block 5") reads that block; a part where it is unclear is declined naming the block. Each
leak case here answered the other part's block at exit 0 before (outside test 8,
REPORT3 section D: the base fee of block 12 given as the current one)."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

A = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
B = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
E = "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc"
F = "0x976EA74026E726554dB657fA54763abd0C3a0aa9"


def _by_kind(task: str) -> dict[str, list[object]]:
    got: dict[str, list[object]] = {}
    for item in extract_checklist(task):
        if item.get("unanswerable"):
            continue
        got.setdefault(str(item["kind"]), []).append((item.get("params") or {}).get("block"))
    return got


@pytest.mark.parametrize(
    ("task", "head_kind", "other_kind", "block"),
    [
        ("What is the base fee, and what was the timestamp 3 blocks ago?", "base_fee_gwei",
         "block_timestamp", "latest-3"),
        ("What is the base fee, and what was the timestamp at block 3?", "base_fee_gwei",
         "block_timestamp", "3"),
        ("What is the timestamp, and what was the base fee 2 blocks ago?", "block_timestamp",
         "base_fee_gwei", "latest-2"),
        ("What is the base fee in gwei, and what was the timestamp 3 blocks ago?",
         "base_fee_gwei", "block_timestamp", "latest-3"),
        ("What's the base fee right now, and what was the timestamp 3 blocks ago?",
         "base_fee_gwei", "block_timestamp", "latest-3"),
        ("What is the block number, and what was the timestamp 4 blocks ago?", "block_number",
         "block_timestamp", "latest-4"),
        ("What was the timestamp 3 blocks ago, and what is the base fee?", "base_fee_gwei",
         "block_timestamp", "latest-3"),
        ("What is the base fee, and what was the timestamp of the previous block?",
         "base_fee_gwei", "block_timestamp", "latest-1"),
        ("What is the base fee, and when was block 7 mined?", "base_fee_gwei",
         "block_timestamp", "7"),
        ("What is the block number, and what was the base fee at block 5?", "block_number",
         "base_fee_gwei", "5"),
    ],
)
def test_a_present_tense_question_is_at_the_head(
    task: str, head_kind: str, other_kind: str, block: str
) -> None:
    items = extract_checklist(task)
    assert not [i for i in items if i.get("unanswerable")], items
    got = _by_kind(task)
    assert got[head_kind] == [None], items
    assert got[other_kind] == [block], items


@pytest.mark.parametrize(
    ("task", "block"),
    [
        ("What is the base fee, and the timestamp 3 blocks ago?", "latest-3"),
        ("What was the base fee at block 5, and what was the timestamp?", "5"),
        ("What is the base fee at block 5, and what is the timestamp?", "5"),
    ],
)
def test_an_ambiguous_part_is_declined_naming_the_block(task: str, block: str) -> None:
    items = extract_checklist(task)
    declined = [i for i in items if i.get("unanswerable")]
    assert len(declined) == 1, items
    assert f"block {block}" in str(declined[0]["unanswerable"]), items
    answered = [i for i in items if not i.get("unanswerable")]
    assert [(i.get("params") or {}).get("block") for i in answered] == [block], items


@pytest.mark.parametrize(
    ("task", "block"),
    [
        ("What were the base fee and the timestamp 3 blocks ago?", "latest-3"),
        ("What is the base fee and the timestamp at block 5?", "5"),
        ("What are the base fee and the timestamp of block 5?", "5"),
        ("What was the base fee at block 5, and the timestamp?", "5"),
        ("What was the base fee at block 5, and what about the timestamp?", "5"),
        ("What is the base fee and the timestamp, at block 5?", "5"),
    ],
)
def test_a_shared_tail_is_still_shared(task: str, block: str) -> None:
    got = _by_kind(task)
    assert got == {"base_fee_gwei": [block], "block_timestamp": [block]}, got


@pytest.mark.parametrize(
    "task",
    [
        f"What is the USDC balance of {A}, and what was the base fee 3 blocks ago?",
        f"Which of {A} and {B} has more USDC, and what was the base fee 4 blocks ago?",
        f"Which of {E} and {F} holds more ETH, and what was the base fee at block 4?",
    ],
)
def test_a_balance_part_is_at_the_head_not_declined_at_the_other_block(task: str) -> None:
    items = extract_checklist(task)
    assert not [i for i in items if i.get("unanswerable")], items
    balances = [i for i in items if str(i["kind"]).endswith("_balance")]
    assert balances and all("block" not in (i.get("params") or {}) for i in balances), items


def test_a_window_is_still_shared_by_the_next_question() -> None:
    got = extract_checklist("How many USDC transfers in the last 10 blocks, and what was "
                            "the largest one?")
    assert [(i["kind"], (i.get("params") or {}).get("blocks")) for i in got] == [
        ("transfer_count", "10"), ("transfer_max", "10")]


@pytest.mark.parametrize(
    ("task", "words"),
    [
        ("What were the base fees 2 and 4 blocks after the latest block?", "after"),
        ("What are the timestamps of the latest block and of the blocks 1 and 4 before it?",
         "before"),
        ("What are the timestamps of block 15 and of the blocks 2 and 5 before it?", "before"),
        ("What is the timestamp of the latest block, and the base fees 2 and 3 blocks before "
         "it?", "before"),
        ("What was the timestamp of block 10, and of the blocks 1 and 2 before it?", "before"),
    ],
)
def test_blocks_after_the_head_or_before_it_are_declined_each(task: str, words: str) -> None:
    """No value for a block that does not exist, or for "it" read as an absolute block
    number (main: the head's base fee for "2 blocks after the latest block", block 1's
    timestamp for "the blocks 1 and 4 before it", at exit 1 with one number declined)."""
    items = extract_checklist(task)
    declined = [i for i in items if i.get("unanswerable")]
    assert len(declined) == 2 and all(words in str(i["unanswerable"]) for i in declined), items
    for item in items:
        block = (item.get("params") or {}).get("block")
        assert item.get("unanswerable") or block in (None, "15", "10"), items
    answered = [i for i in items if not i.get("unanswerable")]
    assert len(answered) == (0 if "after the latest" in task else 1), items
