"""The block a transaction was mined in is the transaction's (its receipt), never the
head's. The outside tester's round 20 (Q11): "Which block was transaction 0x<hash> mined
in?" was answered with the latest block's timestamp at exit 0. A block fact asked of a
transaction's block ("when was 0x<hash> mined", "the base fee when 0x<hash> was mined") is
declined naming the transaction, never read at the head."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import BLOCK_KINDS, extract_checklist

H = "0x1a2580050492494d7b7e1668229844eaa73819a48809c202c3d0269e5c101a16"


def _items(task: str) -> list[tuple[str | None, str | None, bool]]:
    return [(i.get("kind"), (i.get("params") or {}).get("tx_hash") or
             (i.get("params") or {}).get("block"), bool(i.get("unanswerable")))
            for i in extract_checklist(task)]  # fmt: skip


@pytest.mark.parametrize(
    "task",
    [
        f"Which block was transaction {H} mined in?",
        f"What block was {H} included in?",
        f"In which block is {H}?",
        f"In what block was tx {H} confirmed?",
        f"{H} was mined in which block?",
        f"What is the block number of {H}?",
        f"What block number contains tx {H}?",
        f"Give me the block that contains {H}.",
    ],
)
def test_the_block_of_a_transaction_is_read_from_its_receipt(task: str) -> None:
    kinds = _items(task)
    assert ("tx_block", H, False) in kinds, kinds
    assert not any(k in ("block_timestamp", "block_number") for k, _, _ in kinds), kinds


def test_a_pronoun_after_the_transaction_asks_its_block() -> None:
    assert _items(f"Did transaction {H} succeed? Which block was it mined in?") == [
        ("tx_status", H, False), ("tx_block", H, False)]  # fmt: skip


@pytest.mark.parametrize(
    ("task", "asked"),
    [
        (f"When was transaction {H} mined?", [("tx_time", H, False)]),
        (f"When was {H} mined?", [("tx_time", H, False)]),
        (f"At what time was {H} mined?", [("tx_time", H, False)]),
        (f"At what time was tx {H} included?", [("tx_time", H, False)]),
        (f"Did transaction {H} succeed? When was it mined?",
         [("tx_status", H, False), ("tx_time", H, False)]),
        (f"Which block was {H} mined in, and when?", [("tx_block", H, False), ("tx_time", H, False)]),
        (f"When was {H} mined? Give me the UTC time.", [("tx_time", H, False)]),
        (f"What block and time was {H} mined at?", [("tx_block", H, False), ("tx_time", H, False)]),
    ],
)  # fmt: skip
def test_when_a_transaction_was_mined_is_its_blocks_time_read_through_its_receipt(
    task: str, asked: list[tuple[str, str | None, bool]]
) -> None:
    # Outside round 22 (RE5): "When was transaction 0x... mined?" was declined, with a
    # status line nobody asked; "..., and when?" was dropped at exit 0.
    assert _items(task) == asked, extract_checklist(task)


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        (f"What was the base fee when {H} was mined?", "base_fee_gwei"),
        (f"What was the gas limit of the block that included {H}?", "block_gas_limit"),
        (f"How many transactions are in the block containing {H}?", "block_tx_count"),
        (f"What was the fullness of the block containing {H}?", "block_fullness"),
        (f"Which block contains {H}? Also give the same block's base fee in gwei.", "base_fee_gwei"),
    ],
)  # fmt: skip
def test_a_block_fact_of_a_transactions_block_is_read_at_that_block_never_the_heads(
    task: str, kind: str
) -> None:
    # Outside round 28 (A1-A11): declined as a block fact through a transaction. It is
    # read at the block the receipt names (``of_tx``), never at the head.
    items = [i for i in extract_checklist(task) if i.get("kind") == kind]
    assert [(i["params"]["of_tx"], i["params"].get("block")) for i in items] == [(H, None)], items


def test_a_block_fact_said_of_a_transaction_alone_is_declined() -> None:
    # "the gas limit of 0x<hash>" is no block's: a transaction's own gas limit is not read.
    items = extract_checklist(f"What is the gas limit of {H}?")
    assert [i["kind"] for i in items] == [None], items


@pytest.mark.parametrize(
    ("task", "kinds"),
    [
        ("Which block was mined most recently?", [("block_number", None, False)]),
        ("When was block 5 mined?", [("block_timestamp", "5", False)]),
        (f"Did {H} succeed? What time was block 3 mined?",
         [("tx_status", H, False), ("block_timestamp", "3", False)]),
        (f"Did {H} succeed? When was block 3 mined?",
         [("tx_status", H, False), ("block_timestamp", "3", False)]),
        ("What is the base fee of block 5, and when?",
         [("base_fee_gwei", "5", False), ("block_timestamp", "5", False)]),
        (f"What is the gas used by {H}? And what is the base fee?",
         [("tx_gas_used", H, False), ("base_fee_gwei", None, False)]),
        (f"Did {H} succeed, and what is the base fee?",
         [("tx_status", H, False), ("base_fee_gwei", None, False)]),
    ],
)  # fmt: skip
def test_block_questions_beside_a_transaction_keep_their_own_block(
    task: str, kinds: list[tuple[str, str | None, bool]]
) -> None:
    assert _items(task) == kinds


@pytest.mark.parametrize(
    "task",
    [
        f"Which block was {H} mined in? What was the base fee of that block?",
        f"How much gas did {H} use? What was the base fee of its block?",
        f"Which block was {H} mined in? How much gas did that block use?",
        f"Did {H} succeed? What was the gas limit of its block?",
    ],
)
def test_that_block_after_a_transaction_is_its_block_never_the_heads(task: str) -> None:
    # Outside round 26 (P1, P2, P13): read at the latest block, at exit 0; then declined
    # until round 28. Now read at the block the transaction was mined in.
    items = extract_checklist(task)
    read = [i for i in items if i.get("kind") in ("base_fee_gwei", "block_gas_used",
                                                   "block_gas_limit")]  # fmt: skip
    assert [i["params"] for i in read] == [{"of_tx": H}] and all(i["kind"] for i in items), items


@pytest.mark.parametrize("block", ["that block", "the block it was in", "the block it was mined in"])
def test_the_timestamp_of_that_block_after_a_transaction_is_when_it_was_mined(block: str) -> None:
    # Outside rounds 26 (P14) and 27 (Q4): the head's timestamp, at exit 0.
    items = _items(f"Which block was {H} mined in? What was the timestamp of {block}?")
    assert items == [("tx_block", H, False), ("tx_time", H, False)], items


def test_an_order_after_when_a_transaction_was_mined_stays_gated() -> None:
    items = extract_checklist(f"Send 1 USDC to 0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC when {H} "
                              "was mined")  # fmt: skip
    order = items[0]
    assert order["kind"] == "transfer_receipt" and "if" in order["params"], items
    gate = items[int(order["params"]["if"][1:]) - 1]
    assert gate["kind"] is None, items  # a condition it cannot read: the order is never made


def test_the_base_fee_when_a_transaction_was_mined_is_one_item() -> None:
    items = extract_checklist(f"What was the base fee when {H} was mined?")
    assert [i["kind"] for i in items] == ["base_fee_gwei"], items


@pytest.mark.parametrize(
    ("task", "kinds"),
    [
        (f"For transaction {H}, what were the gas limit and the transaction count of the block it "
         "was in?", ["block_gas_limit", "block_tx_count"]),
        (f"Which block was {H} mined in? What were the gas limit and gas used of that block?",
         ["block_gas_limit", "block_gas_used"]),
        (f"How many transactions were in the block containing {H}, and what was its base fee?",
         ["block_tx_count", "base_fee_gwei"]),
        (f"What was the gas used by the block containing {H}, and when was {H} mined?",
         ["block_gas_used"]),
        (f"How much gas did the block that included {H} use?", ["block_gas_used"]),
        (f"{H}: how many transactions were in its block?", ["block_tx_count"]),
        (f"What is the block gas used of the block {H} was in?", ["block_gas_used"]),
        (f"Which block contains {H}, and how full is it?", ["block_fullness"]),
        # Outside round 30: the first of two facts, before the transaction is named, was
        # read at the head (D03, D04), and "the block that 0x... was in" was declined.
        (f"What were the transaction count and the base fee of the block {H} was in?",
         ["block_tx_count", "base_fee_gwei"]),
        (f"The gas limit and the transaction count of the block containing {H}, please.",
         ["block_gas_limit", "block_tx_count"]),
        (f"What were the gas used and the gas limit of the block that {H} was in?",
         ["block_gas_used", "block_gas_limit"]),
        (f"How full was the block that {H} landed in?", ["block_fullness"]),
        # Outside round 31 (A7, C1, C2, C4, C6): "the block in which 0x... was mined" gave
        # the transaction's gas used at exit 0.
        (f"For the block in which {H} was mined, give the gas used and the timestamp.",
         ["block_gas_used"]),
        (f"Give the gas used and the gas limit for the block in which {H} was mined.",
         ["block_gas_used", "block_gas_limit"]),
        (f"What were the timestamp and the gas used of the block where {H} was included?",
         ["block_gas_used"]),
    ],
)  # fmt: skip
def test_every_block_fact_said_of_a_transactions_block_is_read_there(
    task: str, kinds: list[str]
) -> None:
    # Outside round 29: the first of two such facts was read at the head at exit 0 (A11,
    # D1, D3, D7), "the gas used by the block containing 0x..." gave the transaction's gas
    # (A13, D2), and four wordings were declined (A2, A4, D5).
    items = extract_checklist(task)
    block_facts = [i for i in items if i["kind"] in BLOCK_KINDS]
    assert [(i["kind"], i["params"].get("of_tx")) for i in block_facts] == [(k, H) for k in kinds], items
    assert all(i["kind"] for i in items) and not any(i["kind"] == "tx_gas_used" for i in items), items


@pytest.mark.parametrize(
    "task",
    [f"Which block was {H} mined in, and what is the current base fee?",
     f"Which block was {H} mined in, and what is the base fee of the latest block?",
     f"What is the base fee now and when was {H} mined?"],
)  # fmt: skip
def test_a_block_fact_said_of_now_beside_a_transaction_is_the_heads(task: str) -> None:
    items = [i for i in extract_checklist(task) if i["kind"] == "base_fee_gwei"]
    assert [i.get("params", {}).get("of_tx") for i in items] == [None], items


def test_they_each_after_transactions_in_the_same_part_is_each_of_them() -> None:
    other = "0x" + "cd" * 32
    items = extract_checklist(f"Check {H} and {other}: how much gas did they each use?")
    assert [(i["kind"], i["params"]["tx_hash"]) for i in items] == [
        ("tx_gas_used", H), ("tx_gas_used", other)], items


def test_a_block_fact_before_a_transaction_takes_the_one_said_after_it_not_the_last() -> None:
    other = "0x" + "cd" * 32
    items = extract_checklist(f"What were the gas limit and base fee of the block with {H}, and "
                              f"which block was {other} mined in?")  # fmt: skip
    assert [(i["kind"], i["params"].get("of_tx") or i["params"].get("tx_hash")) for i in items] == [
        ("block_gas_limit", H), ("base_fee_gwei", H), ("tx_block", other)], items
