"""Yes-or-no tests outside round 50 found declined (each graded against the chain in
tests/agent/test_tests_asked_back.py): a block's fact tested with a verb, a test of the
value asked just before it, and "N USDC transfers" as a count. Nearby wordings that ask
something else stay declined, never answered as another question."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

A = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
B = "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc"
H = "0xc93dc230a990adb168fe398d0a1786edcc96f0094620363567f967edb9136b5d"


def _kinds(task: str) -> list[str | None]:
    return [i["kind"] for i in extract_checklist(task)]


def _test_of(task: str) -> tuple[str, dict[str, object]]:
    """The kind and params of the value the task's one condition tests, and its op/than."""
    items = extract_checklist(task)
    [cond] = [i for i in items if i["kind"] == "condition"]
    params = cond["params"]
    source = items[int(str(params["of"]).removeprefix("c")) - 1]
    return str(source["kind"]), {**source.get("params", {}), "op": params["op"],
                                 "than": params["than"]}  # fmt: skip


@pytest.mark.parametrize(
    ("task", "kind", "want"),
    [
        ("Did block 1 use at least 1842180 gas?", "block_gas_used",
         {"block": "1", "op": ">=", "than": "1842180"}),
        ("Did the latest block use more than 1000 gas?", "block_gas_used", {"op": ">", "than": "1000"}),
        ("Did block 6 have less than 2 transactions?", "block_tx_count",
         {"block": "6", "op": "<", "than": "2"}),
        ("Does block 6 contain at least 2 transactions?", "block_tx_count",
         {"block": "6", "op": ">=", "than": "2"}),
        ("Has block 5 included more than 3 txs?", "block_tx_count",
         {"block": "5", "op": ">", "than": "3"}),
        (f"How much USDC has {A} sent? Is it more than 8 USDC?", "usdc_sent_total",
         {"address": A, "op": ">", "than": "8"}),
        (f"How much USDC did {B} receive, and was it over 3 USDC?", "usdc_received_total",
         {"address": B, "op": ">", "than": "3"}),
        (f"What is the USDC balance of {A}? Is that address holding more than 4 USDC?",
         "usdc_balance", {"address": A, "op": ">", "than": "4"}),
        ("What is the gas limit of block 9? Is that above 20000000?", "block_gas_limit",
         {"block": "9", "op": ">", "than": "20000000"}),
        ("What is the base fee? Is it above 1 gwei?", "base_fee_gwei", {"op": ">", "than": "1"}),
        ("Was the largest USDC transfer in the last 10 blocks bigger than 10 USDC?",
         "transfer_max", {"blocks": "10", "op": ">", "than": "10"}),
        ("Were there more than 5 USDC transfers in the last 12 blocks?", "transfer_count",
         {"blocks": "12", "op": ">", "than": "5"}),
        # Outside round 51.
        (f"Has {A} sent more than 10 USDC?", "usdc_sent_total", {"address": A, "op": ">", "than": "10"}),
        (f"Has {B} received more than 1 USDC?", "usdc_received_total",
         {"address": B, "op": ">", "than": "1"}),
        (f"Did {A} send more than 5 USDC to {B}?", "usdc_sent_total",
         {"address": A, "counterparty": B, "op": ">", "than": "5"}),
        (f"Has {A} received at least 2 USDC in the last 10 blocks?", "usdc_received_total",
         {"address": A, "blocks": "10", "op": ">=", "than": "2"}),
        (f"Did {A} send more than 3 USDC transfers between blocks 3 and 5?", "transfer_count",
         {"sender": A, "from_block": "3", "to_block": "5", "op": ">", "than": "3"}),
        (f"Did the transaction {H} use more than 50000 gas?", "tx_gas_used",
         {"tx_hash": H, "op": ">", "than": "50000"}),
        (f"Did {H} use at least 21000 gas?", "tx_gas_used", {"tx_hash": H, "op": ">=", "than": "21000"}),
        (f"How much gas did transaction {H} use, and is it under 40000?", "tx_gas_used",
         {"tx_hash": H, "op": "<", "than": "40000"}),
        # A threshold in cents is the same amount in USDC (round 51's Q57 declined "cents").
        (f"What is the USDC balance of {B} in cents, and is it more than 900 cents?",
         "usdc_balance", {"address": B, "unit": "cents", "op": ">", "than": "9.00"}),
        (f"Does {A} hold at least 250 cents?", "usdc_balance", {"address": A, "op": ">=", "than": "2.50"}),
        # Outside round 52: "it" is the one address said before it.
        (f"What is the USDC balance of {B}, and has it received more than 2 USDC?",
         "usdc_received_total", {"address": B, "op": ">", "than": "2"}),
    ],
)  # fmt: skip
def test_the_test_is_of_the_value_it_names(task: str, kind: str, want: dict[str, object]) -> None:
    got_kind, got = _test_of(task)
    assert got_kind == kind and got == want, (got_kind, got)


@pytest.mark.parametrize(
    "task",
    [
        # Which block, not the head's value; a comparison of two blocks, not one block's value.
        "Which block used the most gas?",
        "Which block contains the most transactions?",
        "Did the latest block use more gas than block 5?",
        "Did block 4 have more transactions than block 5?",
        # One chain fact compared between blocks (outside round 51 got block 10's value
        # alone, at exit 0, for the first).
        "Is the gas limit of the latest block lower than the gas limit of block 10?",
        "Is the base fee of the latest block higher than the base fee of block 5?",
        "Is the base fee now lower than at block 5?",
        "Was the gas used of block 4 bigger than the gas used of block 5?",
        # "it" after two values (or none) is not read as either.
        f"What are the USDC balances of {A} and {B}? Is it more than 4 USDC?",
        f"What is the largest USDC transfer and the USDC balance of {A}? Is it above 3 USDC?",
        "Is it above 1 gwei?",
        f"What are the balances of {A} and {B}, and has it received more than 2 USDC?",
        "Has it received more than 2 USDC?",
        # A unit the value is not in.
        "What is the base fee? Is it more than 4 USDC?",
        "Is the base fee above 5 cents?",
        "What is the base fee? What is the gas limit? Is it above 3 gwei?",
    ],
)
def test_nearby_wordings_are_declined_never_answered_as_another_question(task: str) -> None:
    items = extract_checklist(task)
    assert None in [i["kind"] for i in items], items
    assert not any(i["kind"] == "condition" for i in items), items


def test_how_much_do_they_differ_is_their_difference() -> None:
    for ask in ("by how much do they differ?", "how much do they differ by?"):
        items = extract_checklist(f"What is the USDC balance of {A} and of {B}, and {ask}")
        assert [i["kind"] for i in items] == ["usdc_balance", "usdc_balance", "comparison"]
        assert items[2]["params"] == {"of": "c1,c2", "op": "diff"}


def test_a_transaction_named_by_its_hash_is_read_beside_another_parts_block() -> None:
    # Outside round 52 (Q35): the status was declined as "'at block 4' is said in another
    # part"; a transaction is in its own block, whatever else the task names.
    items = extract_checklist(f"How many transactions are in block 4, and did {H} succeed?")
    assert [(i["kind"], i.get("params")) for i in items] == [
        ("block_tx_count", {"block": "4"}), ("tx_status", {"tx_hash": H})]


@pytest.mark.parametrize(
    ("task", "want"),
    [
        # Outside round 53, Q05: "at the head" is the latest block, not the block number
        # (the head's number was given for its gas limit, at exit 0).
        ("what was the block gas limit at block 5, and at the head?",
         [("block_gas_limit", {"block": "5"}), ("block_gas_limit", {})]),
        ("What is the base fee at the chain head?", [("base_fee_gwei", {})]),
        ("What is the head?", [("block_number", {})]),
        # Q50: the transfers between two addresses are those each way, never every
        # transfer of each (listed at exit 0).
        (f"Show me the usdc transfers between {A} and {B}.",
         [("transfer_list", {"sender": A, "recipient": B}),
          ("transfer_list", {"sender": B, "recipient": A})]),
        (f"List the transfers between {A} and {B} in the last 10 blocks.",
         [("transfer_list", {"blocks": "10", "sender": A, "recipient": B}),
          ("transfer_list", {"blocks": "10", "sender": B, "recipient": A})]),
        ("How many USDC transfers were there between blocks 3 and 5?",
         [("transfer_count", {"from_block": "3", "to_block": "5"})]),
        # Q02, Q10, Q18, Q33: a greeting, thanks or a typo is no part of the question.
        (f"hi! quick one: what's the ETH balance of {B} please?", [("eth_balance", {"address": B})]),
        ("whats the gas price rite now in gwei", [("gas_price_gwei", {"unit": "gwei"})]),
        ("Hey there, I'm new to this. Could you tell me the total supply of USDC on this chain? "
         "Thanks a bunch!", [("token_supply", {})]),
        (f"what is the usdc balanse of {B}", [("usdc_balance", {"address": B})]),
        # Outside round 55, Q35: a fact at a block, asked again "at the head", is read at
        # the head (the head's number was read), and transfers "in the latest block" are
        # the head block's, never the whole chain's (the block number was read, at exit 0).
        (f"What is the ETH balance of {A} at block 4, and at the head?",
         [(None, {}), ("eth_balance", {"address": A})]),
        ("How many USDC transfers were in block 4, and in the latest block?",
         [("transfer_count", {"from_block": "4", "to_block": "4"}),
          ("transfer_count", {"from_block": "latest-0", "to_block": "latest-0"})]),
        (f"What is the ETH balance of {A}, and the latest block?",
         [("eth_balance", {"address": A}), ("block_number", {})]),
        # Outside round 54, Q42: "teh", and "it" after "how much usdc".
        (f"whats teh USDC balance of {A} and and how much usdc has it sent?",
         [("usdc_balance", {"address": A}), ("usdc_sent_total", {"address": A})]),
    ],
)  # fmt: skip
def test_outside_round_53s_wordings_are_read_as_asked(
    task: str, want: list[tuple[str, dict[str, str]]]
) -> None:
    got = [(i["kind"], i.get("params", {})) for i in extract_checklist(task)]
    assert got == want, got


@pytest.mark.parametrize("ask", ["How many USDC transfers between", "How much USDC moved between"])
def test_anything_else_between_two_addresses_is_declined_by_its_words(ask: str) -> None:
    # A count or an amount "between 0xA and 0xB" read each address's own (or their
    # balances), at exit 0: declined now, naming the two ways to ask.
    [item] = extract_checklist(f"{ask} {A} and {B}?")
    assert item["kind"] is None and f"from {A} to {B}" in str(item["unanswerable"]), item
