"""Outside round 58: transfers "in the latest block" were counted over the whole chain at
exit 0 (Q52: 5 for a head block with none), and with an address and "sent" the head's
block number was added as a question nobody asked; "Has 0xA ever sent any USDC?" stopped on
"ever"; "And the other one, 0xB?" split "the other one" off as a part of its own."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

A = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
B = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"


def _read(task: str) -> list[tuple[str | None, dict[str, object]]]:
    items = extract_checklist(task)
    assert all(i["kind"] for i in items), items  # nothing declined
    return [(i["kind"], dict(i.get("params") or {})) for i in items]


@pytest.mark.parametrize(
    ("task", "kind", "own"),
    [
        ("How many USDC transfers were there in the latest block?", "transfer_count", {}),
        ("Show the USDC transfers in the latest block", "transfer_list", {}),
        ("How many USDC transfers were in the most recent block?", "transfer_count", {}),
        ("What was the largest USDC transfer in the current block?", "transfer_max", {}),
        ("How many USDC transfers were there in the last block?", "transfer_count", {}),
        ("How many USDC transfers at the head?", "transfer_count", {}),
        (f"How much USDC did {A} receive in the latest block?", "usdc_received_total", {"address": A}),
        (f"How much USDC has {A} sent in the most recent block?", "usdc_sent_total", {"address": A}),
        (f"How many USDC transfers has {A} sent in the latest block?", "transfer_count", {"sender": A}),
    ],
)  # fmt: skip
def test_transfers_in_the_head_block_are_that_blocks_only(task: str, kind: str, own: dict[str, str]) -> None:
    assert _read(task) == [(kind, {**own, "from_block": "latest-0", "to_block": "latest-0"})]


def test_a_fact_of_one_block_at_the_head_keeps_no_block() -> None:
    # A balance or a base fee is read at the head anyway: no parameter, as before.
    assert _read("What is the base fee of the latest block?") == [("base_fee_gwei", {})]
    assert _read("How many transactions were in the latest block?") == [("block_tx_count", {})]


@pytest.mark.parametrize(
    ("task", "kind", "way"),
    [(f"Has {A} ever sent any USDC?", "transfer_count", "sender"),
     (f"Did {A} ever receive USDC?", "transfer_count", "recipient")],
)  # fmt: skip
def test_ever_is_the_whole_chain(task: str, kind: str, way: str) -> None:
    read = _read(task)
    assert read[0] == (kind, {way: A}) and read[1][0] == "condition", read


def test_the_other_one_names_the_address_after_it() -> None:
    assert _read(f"What is the USDC balance of {A}? And the other one, {B}?") == [
        ("usdc_balance", {"address": A}), ("usdc_balance", {"address": B})]


C = "0x976EA74026E726554dB657fA54763abd0C3a0aa9"


@pytest.mark.parametrize(
    ("task", "kind", "way"),
    [(f"How much USDC have {A}, {B} and {C} each sent?", "usdc_sent_total", "address"),
     (f"How much USDC did {A}, {B} and {C} send?", "usdc_sent_total", "address"),
     (f"How many USDC transfers did {A}, {B} and {C} each receive?", "transfer_count", "recipient")],
)  # fmt: skip
def test_a_list_of_three_is_asked_once_per_address(task: str, kind: str, way: str) -> None:
    # Outside round 59: the first was read as three balances at exit 0; the last as each
    # one's transfers either way, and the third address declined.
    assert _read(task) == [(kind, {way: x}) for x in (A, B, C)]


@pytest.mark.parametrize("then", ["Show me them all.", "Show them all please.", "And list them all."])
def test_show_me_them_all_after_a_count_lists_them(then: str) -> None:
    # Outside round 59, Q40: "show me them all" was dropped with nothing said.
    read = _read(f"How many USDC transfers happened since block 5? {then}")
    window = {"from_block": "5", "to_block": "latest-0"}
    assert read == [("transfer_count", window), ("transfer_list", window)]


def test_a_show_request_not_read_is_named_never_dropped() -> None:
    items = extract_checklist("How many USDC transfers happened since block 5? Show me every one of them.")
    assert items[-1]["kind"] is None and items[-1].get("unanswerable"), items


@pytest.mark.parametrize(
    ("task", "kinds"),
    [
        # Outside round 59's needless declines, and what was found beside them.
        (f"What is the USDC balance of {A} and {B} respectively?", ["usdc_balance", "usdc_balance"]),
        ("How many USDC transfers were in block 4 and in the latest block respectively?",
         ["transfer_count", "transfer_count"]),
        (f"How much USDC has {A} received and sent?", ["usdc_received_total", "usdc_sent_total"]),
        (f"How many USDC transfers has {A} sent and received?", ["transfer_count", "transfer_count"]),
        (f"How many USDC transfers has {A} ever received?", ["transfer_count"]),
        (f"Show me the USDC transfers from {A}, and how many did it send to date?",
         ["transfer_list", "transfer_count"]),
        (f"What are the ETH balances of {A} and {B}, and what is the difference between them?",
         ["eth_balance", "eth_balance", "comparison"]),
        ("What's the gas price right now, and the base fee of block 4?", ["gas_price_gwei", "base_fee_gwei"]),
    ],
)  # fmt: skip
def test_words_that_ask_nothing_more_are_read(task: str, kinds: list[str]) -> None:
    assert [k for k, _p in _read(task)] == kinds


@pytest.mark.parametrize(
    ("task", "kinds"),
    [
        # Outside round 60: courtesies and shorthand stopped these at exit 1 with the fact right.
        (f"Hi there! Hope your day is going well. Could you tell me the USDC balance of {A}? "
         "Thanks so much!", ["usdc_balance"]),
        ("Hey friend, what was the gas limit of block 5, if you don't mind?", ["block_gas_limit"]),
        (f"Hey there, I'd love to know how much USDC {A} has received in total. Cheers!",
         ["usdc_received_total"]),
        ("Good evening! Out of curiosity, what's the timestamp of block 6? Thank you kindly.",
         ["block_timestamp"]),
        ("Hi, hope all is well. What's the total supply of USDC, by the way?", ["token_supply"]),
        (f"bal of {A} in usdc pls", ["usdc_balance"]),
        ("how many txns in blk 4", ["block_tx_count"]),
        (f"usdc recv'd by {A}", ["usdc_received_total"]),
        ("gas limt of latest blk", ["block_gas_limit"]),
        ("how many usdc transfers in the last 5 blks", ["transfer_count"]),
        ("Were there more than 2 transactions in block 4?", ["block_tx_count", "condition"]),
        (f"How many USDC transfers did each of {A}, {B} and {C} receive?", ["transfer_count"] * 3),
    ],
)  # fmt: skip
def test_courtesies_and_shorthand_ask_nothing_more(task: str, kinds: list[str]) -> None:
    assert [k for k, _p in _read(task)] == kinds


def test_a_courtesy_beside_an_order_never_makes_the_order_more_than_the_judge_reads() -> None:
    # The courtesies are the planner's reading only: beside an order, "don't" still
    # withholds it for the judge (judge/mandates.py), and the planner declines it too.
    from judge.mandates import mandates_in

    task = f"Send 0.01 USDC to {A}, if you don't mind."
    (item,) = extract_checklist(task)
    assert item["kind"] is None and "don't" in item["unanswerable"], item
    assert [m.withheld for m in mandates_in(task)] == ["don't"]
