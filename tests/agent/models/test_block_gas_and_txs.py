"""A block's gas used, gas limit and transaction count are block facts, read at the block
the task names (absent: the latest; relative references resolve against the head like the
base fee's). The outside tester's "What is the gas used by the latest block?" was read as a
transaction's gas used and declined; "how many transactions are in the latest block" was
read as the block number. A transaction's gas used (with its hash) and a count of USDC
transfers stay what they were, and a block fact asked of an address or a transaction is
declined naming it, never read at the head."""

from __future__ import annotations

import pytest

from agent.loop.answers import asked_value, item_line
from agent.models._factpatterns import extract_checklist

A = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
TX = "0x" + "ab" * 32


def _kinds(task: str) -> list[tuple[str | None, str | None]]:
    return [(i["kind"], (i.get("params") or {}).get("block")) for i in extract_checklist(task)]


@pytest.mark.parametrize(
    ("task", "kind", "block"),
    [
        ("What is the gas used by the latest block?", "block_gas_used", None),
        ("gas used in the latest block", "block_gas_used", None),
        ("What is the gas used in block 5?", "block_gas_used", "5"),
        ("What is the block gas used?", "block_gas_used", None),
        ("How much gas did block 3 use?", "block_gas_used", "3"),
        ("How much gas did the latest block use?", "block_gas_used", None),
        ("How much gas was used in block 2?", "block_gas_used", "2"),
        ("What is the latest block's gas used?", "block_gas_used", None),
        ("What was the gas used 3 blocks ago?", "block_gas_used", "latest-3"),
        ("gas used by the block before the latest", "block_gas_used", "latest-1"),
        ("What is the gas limit of the latest block?", "block_gas_limit", None),
        ("What is the block gas limit at block 4?", "block_gas_limit", "4"),
        ("What was the gas limit of the previous block?", "block_gas_limit", "latest-1"),
        ("How many transactions are in block 4?", "block_tx_count", "4"),
        ("How many transactions are in the latest block?", "block_tx_count", None),
        ("What is the transaction count of the latest block?", "block_tx_count", None),
        ("What is the latest block's transaction count?", "block_tx_count", None),
        ("How many transactions does the newest block contain?", "block_tx_count", None),
        ("How many transactions did block 2 include?", "block_tx_count", "2"),
        ("How many txs were in the block 2 blocks before the latest?", "block_tx_count",
         "latest-2"),
        ("What is the number of transactions in the genesis block?", "block_tx_count", "0"),
    ],
)  # fmt: skip
def test_a_blocks_gas_and_transactions_are_read_at_its_block(
    task: str, kind: str, block: str | None
) -> None:
    assert _kinds(task) == [(kind, block)]


def test_the_outside_testers_question_reads_both_facts_of_the_latest_block() -> None:
    task = "What is the gas used by the latest block, and how many transactions does it hold?"
    assert _kinds(task) == [("block_gas_used", None), ("block_tx_count", None)]


def test_facts_listed_with_one_block_share_it() -> None:
    assert _kinds("What are the gas used and the gas limit of block 2?") == [
        ("block_gas_used", "2"), ("block_gas_limit", "2")]  # fmt: skip
    assert _kinds("What is the timestamp and gas used of block 5?") == [
        ("block_timestamp", "5"), ("block_gas_used", "5")]  # fmt: skip
    assert _kinds("What is the gas used and the transaction count of the latest block?") == [
        ("block_gas_used", None), ("block_tx_count", None)]  # fmt: skip


def test_gas_used_naming_neither_a_block_nor_a_transaction_asks_for_the_hash() -> None:
    items = extract_checklist("What is the gas used?")
    assert [i["kind"] for i in items] == [None]
    assert items[0]["unanswerable"] == "the task gives no transaction hash"


@pytest.mark.parametrize(
    ("task", "kind", "params"),
    [
        (f"What is the gas used by {TX}?", "tx_gas_used", {"tx_hash": TX}),
        (f"How much gas did {TX} use?", "tx_gas_used", {"tx_hash": TX}),
        (f"gas used by {TX}", "tx_gas_used", {"tx_hash": TX}),
        ("How many transfers in the last 10 blocks?", "transfer_count", {"blocks": "10"}),
        ("How many USDC transfers happened in block 3?", "transfer_count",
         {"from_block": "3", "to_block": "3"}),
        ("What is the average gas used over recent blocks?", "gas_stats",
         {"field": "gas_used_mean"}),
    ],
)  # fmt: skip
def test_a_transactions_gas_used_and_a_transfer_count_stay_theirs(
    task: str, kind: str, params: dict[str, str]
) -> None:
    items = extract_checklist(task)
    assert [i["kind"] for i in items] == [kind], items
    assert items[0]["params"] == params


@pytest.mark.parametrize(
    ("task", "named"),
    [
        (f"What is the transaction count of {A}?", A),
        (f"What is the gas limit of {TX}?", TX),
        (f"What is the gas used by {TX} in block 5?", "block 5"),
    ],
)
def test_a_block_fact_asked_of_an_account_or_a_transaction_is_declined(task: str, named: str) -> None:
    items = extract_checklist(task)
    assert [i["kind"] for i in items] == [None], items
    assert named in items[0]["text"] + items[0]["unanswerable"]


def test_the_transaction_count_of_an_address_says_what_it_found_and_the_fix() -> None:
    (item,) = extract_checklist(f"What is the transaction count of {A}?")
    assert item["unanswerable"] == (
        f"the task asks the block transaction count of {A}, and it is a block's: no tool "
        "reads it for an account or a transaction; ask it of a block ('the block transaction "
        "count of the latest block')")


@pytest.mark.parametrize(
    "task",
    ["What was the gas used by the last 3 blocks?", "How many transactions are in blocks 1 to 4?"],
)
def test_a_block_fact_over_a_range_is_declined(task: str) -> None:
    items = extract_checklist(task)
    assert [i["kind"] for i in items] == [None], items
    assert "over a range of blocks" in items[0]["unanswerable"]


def test_a_unit_the_gas_used_has_not_is_named() -> None:
    items = extract_checklist("What is the gas used by the latest block in gwei?")
    assert [i["kind"] for i in items] == ["block_gas_used", None], items
    assert "'gwei' is not a unit block gas used can be given in" in items[1]["unanswerable"]


@pytest.mark.parametrize(
    ("kind", "block", "value", "shown"),
    [
        ("block_gas_used", None, "61234", "61234 gas"),
        ("block_gas_used", "5", "0", "0 gas at block 5"),
        ("block_gas_limit", None, "30000000", "30000000 gas"),
        ("block_tx_count", "3", "2", "2 at block 3"),
        ("block_tx_count", None, "1", "1"),
    ],
)
def test_gas_is_shown_in_gas_and_a_count_in_no_unit(
    kind: str, block: str | None, value: str, shown: str
) -> None:
    params = {"block": block} if block else {}
    assert asked_value({"kind": kind, "value": value, "params": params}) == shown


def test_an_answer_line_names_the_gas_unit() -> None:
    item = {"kind": "block_gas_used", "text": "block gas used", "value": "61234",
            "params": {}, "evidence_id": "e1"}  # fmt: skip
    assert item_line(item) == "block gas used: 61234 gas (observed, evidence e1)"
