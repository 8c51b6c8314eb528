"""A block's fullness (the share of its gas limit its transactions used, gasUsed /
gasLimit) is a block fact, read at the block the task names (absent: the latest; relative
references resolve against the head like the base fee's). The offline planner declined
"How full is the latest block?" ("the offline planner does not know 'full' here"). A
threshold on it ("more than half full") is declined naming its words, never compared with
another fact's number; a block's gas used and gas limit are read as before."""

from __future__ import annotations

import pytest

from agent.loop.answers import asked_value, item_line
from agent.models._factpatterns import extract_checklist

A = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
TX = "0x" + "ab" * 32


def _kinds(task: str) -> list[tuple[str | None, str | None]]:
    return [(i["kind"], (i.get("params") or {}).get("block")) for i in extract_checklist(task)]


@pytest.mark.parametrize(
    ("task", "block"),
    [
        ("How full is the latest block?", None),
        ("How full is block 3?", "3"),
        ("How full was the newest block?", None),
        ("What is the fullness of the latest block?", None),
        ("What is the latest block's fullness?", None),
        ("What is the block fullness at block 4?", "4"),
        ("What was the gas utilization of block 2?", "2"),
        ("What is the latest block's utilization?", None),
        ("What is block 3's gas utilisation?", "3"),
        ("What is the block utilization?", None),
        ("What percentage of the gas limit was used in the latest block?", None),
        ("What share of its gas limit did block 3 use?", "3"),
        ("What fraction of the latest block's gas limit was consumed?", None),
        ("How much of the gas limit did block 2 use?", "2"),
        ("How much of block 2's gas limit was used?", "2"),
        ("What % of the gas limit did block 5 use?", "5"),
        ("What was the gas used as a percentage of the gas limit in block 1?", "1"),
        ("How full is the genesis block?", "0"),
    ],
)  # fmt: skip
def test_a_blocks_fullness_is_read_at_its_block(task: str, block: str | None) -> None:
    assert _kinds(task) == [("block_fullness", block)]


@pytest.mark.parametrize(
    ("task", "block"),
    [
        ("How full was the block 3 blocks ago?", "latest-3"),
        ("How full was the previous block?", "latest-1"),
        ("What's the block utilisation 2 blocks ago?", "latest-2"),
        ("What percentage of the gas limit was used 2 blocks back?", "latest-2"),
        ("How much of its gas limit did the block before the latest use?", "latest-1"),
        ("What was the fullness of the block before block 4?", "3"),
    ],
)  # fmt: skip
def test_a_relative_block_resolves_like_the_base_fees(task: str, block: str) -> None:
    assert _kinds(task) == [("block_fullness", block)]
    base_fee = task.replace("fullness", "base fee")
    if base_fee != task:  # the same reference read for the base fee names the same block
        assert _kinds(base_fee) == [("base_fee_gwei", block)]


def test_facts_listed_with_one_block_share_it() -> None:
    assert _kinds("What is the gas used and the fullness of block 2?") == [
        ("block_gas_used", "2"), ("block_fullness", "2")]  # fmt: skip
    assert _kinds("How full was block 2, and how many transactions did it hold?") == [
        ("block_fullness", "2"), ("block_tx_count", "2")]  # fmt: skip
    assert _kinds("Give me the block utilization and the base fee of block 3.") == [
        ("block_fullness", "3"), ("base_fee_gwei", "3")]  # fmt: skip


@pytest.mark.parametrize(
    ("task", "kind", "block"),
    [
        ("What is the gas used by the latest block?", "block_gas_used", None),
        ("How much gas did block 3 use?", "block_gas_used", "3"),
        ("How much gas was used in block 2?", "block_gas_used", "2"),
        ("What is the gas limit of the latest block?", "block_gas_limit", None),
        ("What was the gas limit of the previous block?", "block_gas_limit", "latest-1"),
        ("What is the full name of USDC?", "token_name", None),
    ],
)  # fmt: skip
def test_gas_used_and_gas_limit_questions_are_read_as_before(
    task: str, kind: str, block: str | None
) -> None:
    assert _kinds(task) == [(kind, block)]


def test_a_transactions_gas_used_stays_the_transactions() -> None:
    items = extract_checklist(f"How much gas did {TX} use?")
    assert [(i["kind"], i.get("params")) for i in items] == [("tx_gas_used", {"tx_hash": TX})]


_REFUSED = ("compares a block's fullness with a threshold, and the offline planner compares a "
            "fact with a number only in gwei, wei, ETH, USDC or a count (a block's fullness is "
            "a percentage rounded to 2 places); ask how full the block is ('how full is the "
            "latest block?')")  # fmt: skip


@pytest.mark.parametrize(
    ("task", "words"),
    [
        ("Is the latest block more than half full?", "more than half full"),
        ("is block 3 over 50% full", "over 50% full"),
        ("Was block 5 at least 90 percent full?", "at least 90 percent full"),
        ("Is the latest block full?", "full"),
        ("Is block 3 half full?", "half full"),
        ("Is the latest block almost full?", "almost full"),
        ("Did block 3 use over 50% of its gas limit?", "over 50% of its gas limit"),
        ("Is the fullness of block 3 above 50%?", "above 50%"),
        ("Is the gas utilization of the latest block below 10?", "below 10"),
    ],
)  # fmt: skip
def test_a_threshold_on_a_blocks_fullness_is_declined_naming_its_words(
    task: str, words: str
) -> None:
    items = extract_checklist(task)
    assert [i["kind"] for i in items] == [None], items
    assert items[0]["unanswerable"] == f"{words!r} {_REFUSED}"


def test_an_order_on_a_fullness_threshold_waits_on_the_declined_condition() -> None:
    cond, order = extract_checklist(f"If the latest block is more than half full, send 1 USDC to {A}.")
    assert cond["kind"] is None
    assert cond["unanswerable"] == f"'more than half full' {_REFUSED}"
    # The order waits for a condition that is never covered: it is never made.
    assert order["kind"] == "transfer_receipt" and order["params"]["if"] == "c1"


def test_the_fullness_of_an_account_is_declined_naming_it() -> None:
    (item,) = extract_checklist(f"What is the gas utilization of {A}?")
    assert item["kind"] is None
    assert item["unanswerable"] == (
        f"the task asks the block fullness of {A}, and it is a block's: no tool reads it for "
        "an account or a transaction; ask it of a block ('the block fullness of the latest "
        "block')")


@pytest.mark.parametrize(
    ("task", "why"),
    [
        ("How full are the last 3 blocks?", "no tool reads block fullness over a range of blocks"),
        ("What is the average fullness of the last 10 blocks?", "'average'"),
        ("How full is my wallet?", "(full)"),
        # "full" that asks no share is no threshold: named as a word it does not know.
        ("What is the full timestamp of block 3?", "does not know 'full' here"),
        ("How full is the newest block, in gwei?", "'gwei' is not a unit block fullness can be"),
    ],
)  # fmt: skip
def test_what_no_fullness_read_answers_is_declined(task: str, why: str) -> None:
    items = extract_checklist(task)
    declined = [i for i in items if i.get("unanswerable")]
    assert declined, items
    assert why in declined[-1]["unanswerable"]


@pytest.mark.parametrize(
    ("params", "read_at", "shown"),
    [
        ({}, "2", "0.24% (72390 of 30000000 gas) at block 2, the latest"),
        ({"block": "3"}, None, "0.24% (72390 of 30000000 gas) at block 3"),
    ],
)
def test_the_fullness_is_shown_with_its_basis_and_its_block(
    params: dict[str, str], read_at: str | None, shown: str
) -> None:
    item = {"kind": "block_fullness", "value": "0.24% (72390 of 30000000 gas)",
            "params": params, "read_at": read_at}  # fmt: skip
    assert asked_value(item) == shown


def test_an_answer_line_states_the_share_of_used_of_limit_gas() -> None:
    item = {"kind": "block_fullness", "text": "block fullness", "value":
            "0.24% (72390 of 30000000 gas)", "params": {}, "read_at": "2", "evidence_id": "e1"}  # fmt: skip
    assert item_line(item) == (
        "block fullness: 0.24% (72390 of 30000000 gas) at block 2, the latest "
        "(observed, evidence e1)")
    zero = {**item, "value": "none: the gas limit is 0 (0 of 0 gas)", "params": {"block": "5"},
            "read_at": None}  # fmt: skip
    assert item_line(zero) == (
        "block fullness: none: the gas limit is 0 (0 of 0 gas) at block 5 (observed, evidence e1)")
