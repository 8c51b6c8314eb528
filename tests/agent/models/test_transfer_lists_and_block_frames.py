"""Outside round 32: "Show me / List / Which USDC transfers ... in the last 10 blocks" got
the count alone at exit 0 (E22, S01, S02); a fronted clause naming a transaction's block
("For the block where 0x<hash> was included, ...", "In the block that 0x<hash> landed in,
...") was declined as a part of its own with the facts read right (B09, B16); and "Which
block did 0x<hash> land in" declined "land" (B07). The transfers themselves are their own
fact kind (``transfer_list``); a frame is no question; "land in" names the block."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

H = "0x2adb957e623e54d32eb2b3c3e2e9adc539913e1ca186c596d731f73354f00dbb"
A = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def _rows(task: str) -> list[tuple[str | None, dict[str, str], bool]]:
    return [(i.get("kind"), dict(i.get("params") or {}), bool(i.get("unanswerable")))
            for i in extract_checklist(task)]  # fmt: skip


@pytest.mark.parametrize("task", [
    "Show me the USDC transfers in the last 10 blocks.",
    "List the USDC transfers in the last 10 blocks.",
    "Which USDC transfers happened in the last 10 blocks?",
    "What USDC transfers were made in the last 10 blocks?",
    "Tell me the USDC transfers in the last 10 blocks.",
    "What were the USDC transfers in the last 10 blocks?",
    "Give me a list of the USDC transfers in the last 10 blocks.",
])
def test_asking_for_the_transfers_lists_them_never_counts_them(task: str) -> None:
    assert _rows(task) == [("transfer_list", {"blocks": "10"}, False)]


@pytest.mark.parametrize("task", [
    "How many USDC transfers were there in the last 10 blocks?",
    "What is the number of USDC transfers in the last 10 blocks?",
    "Count the USDC transfers in the last 10 blocks.",
])
def test_asking_how_many_still_counts(task: str) -> None:
    assert _rows(task) == [("transfer_count", {"blocks": "10"}, False)]


def test_a_list_of_one_address_and_its_largest_one_are_both_that_address() -> None:
    rows = _rows(f"Which USDC transfers touched {A} in the last 20 blocks, and which of "
                 "them was the largest?")
    assert rows == [("transfer_list", {"blocks": "20", "address": A}, False),
                    ("transfer_max", {"blocks": "20", "address": A}, False)]
    # The same for a count: "the largest one" is of the transfers just asked, not the chain's.
    rows = _rows(f"How many USDC transfers touched {A} in the last 20 blocks, and what is "
                 "the largest one?")
    assert rows[1] == ("transfer_max", {"blocks": "20", "address": A}, False)


@pytest.mark.parametrize(("task", "kinds"), [
    (f"For the block where {H} was included, what were the gas limit and the number of "
     "transactions?", ["block_gas_limit", "block_tx_count"]),
    (f"In the block that {H} landed in, what was the base fee?", ["base_fee_gwei"]),
    (f"For the block in which {H} was mined, what was the gas used?",
     ["tx_time", "block_gas_used"]),
])
def test_a_fronted_clause_naming_a_transactions_block_frames_its_facts(task: str, kinds: list[str]) -> None:
    rows = _rows(task)
    assert [k for k, _, _ in rows] == kinds, rows
    assert all(not bad for _, _, bad in rows), rows
    assert all(p.get("of_tx") == H or p.get("tx_hash") == H for _, p, _ in rows), rows


@pytest.mark.parametrize("task", [
    # A fact of now beside the frame: the frame frames nothing, and is named.
    f"In the block that {H} landed in, what is the current base fee?",
    # A balance is no fact of a block: never read "at" it, the frame is named.
    f"For the block where {H} was included, what is the USDC balance of {A}?",
])
def test_a_frame_with_no_block_fact_of_that_block_is_named_not_dropped(task: str) -> None:
    rows = _rows(task)
    assert rows[0][0] is None and rows[0][2], rows


@pytest.mark.parametrize("task", [
    f"Which block did {H} land in?",
    f"Which block did {H} end up in?",
])
def test_land_in_and_end_up_in_ask_the_transactions_block(task: str) -> None:
    assert _rows(task) == [("tx_block", {"tx_hash": H}, False)]


def test_the_gas_of_the_block_it_landed_in_is_the_blocks() -> None:
    rows = _rows(f"Which block did {H} land in, and how much gas did the block it landed in use?")
    assert rows == [("tx_block", {"tx_hash": H}, False), ("block_gas_used", {"of_tx": H}, False)]


B = "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc"
D = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955"


@pytest.mark.parametrize(("task", "kind", "ends"), [
    # Outside round 33 (T07, T08, T19): the direction was dropped, at exit 0.
    (f"List the USDC transfers to {B} between block 1 and block 20.", "transfer_list",
     {"recipient": B, "from_block": "1", "to_block": "20"}),
    (f"List the USDC transfers from {B} in the last 45 blocks.", "transfer_list",
     {"sender": B, "blocks": "45"}),
    (f"List the USDC transfers from {A} to {D} in the last 45 blocks.", "transfer_list",
     {"sender": A, "recipient": D, "blocks": "45"}),
    (f"How many USDC transfers to {B} were there in the last 20 blocks?", "transfer_count",
     {"recipient": B, "blocks": "20"}),
    (f"What is the largest USDC transfer from {B} in the last 20 blocks?", "transfer_max",
     {"sender": B, "blocks": "20"}),
])
def test_transfers_to_or_from_an_address_are_read_one_way(task: str, kind: str, ends: dict[str, str]) -> None:
    assert _rows(task) == [(kind, ends, False)]


def test_transfers_of_an_address_are_either_way_and_two_recipients_are_named() -> None:
    assert _rows(f"List the USDC transfers of {B} in the last 20 blocks.") == [
        ("transfer_list", {"address": B, "blocks": "20"}, False)]
    rows = _rows(f"How many USDC transfers went to {B} or to {D} in the last 20 blocks?")
    assert rows[0][0] is None and rows[0][2], rows


@pytest.mark.parametrize(("task", "kinds"), [
    # Outside round 33 (E21): the node's current gas price, at exit 0.
    (f"What gas price did {H} pay?", ["tx_gas_price"]),
    (f"Did {H} succeed, and what gas price did it pay?", ["tx_status", "tx_gas_price"]),
    (f"What gas price did {H} pay, and what was its fee?", ["tx_gas_price", "tx_fee"]),
    (f"How much did {H} cost in gas?", ["tx_fee"]),
    (f"What is the transaction fee of {H}?", ["tx_fee"]),
])
def test_the_gas_price_a_transaction_paid_is_its_receipts_never_the_nodes(task: str, kinds: list[str]) -> None:
    rows = _rows(task)
    assert [k for k, _, _ in rows] == kinds, rows
    assert all(p == {"tx_hash": H} and not bad for _, p, bad in rows), rows


def test_the_nodes_gas_price_and_an_accounts_paid_price_and_a_blocks_base_fee() -> None:
    assert _rows("What is the current gas price?") == [("gas_price_gwei", {}, False)]
    rows = _rows(f"What gas price did {A} pay?")  # an account pays no one price: named
    assert rows[0][0] is None and rows[0][2], rows
    assert _rows(f"What base fee did {H} pay?") == [("base_fee_gwei", {"of_tx": H}, False)]


@pytest.mark.parametrize(("task", "kinds"), [
    # Outside round 33 (B03, B07, B12, B16, B17): "regarding" and "how much gas was used".
    (f"Regarding the block containing {H}, what was the gas limit and how much gas was used?",
     ["block_gas_limit", "block_gas_used"]),
    (f"For the block where {H} was included, how much gas was used?", ["block_gas_used"]),
    (f"In the block containing {H}, how many transactions were there?", ["block_tx_count"]),
])
def test_more_frames_and_how_much_gas_was_used(task: str, kinds: list[str]) -> None:
    rows = _rows(task)
    assert [k for k, _, _ in rows] == kinds, rows
    assert all(p == {"of_tx": H} for _, p, _ in rows), rows


def test_which_block_contains_is_still_asked_beside_a_fact_of_it() -> None:
    rows = _rows(f"Which block contains {H}, and what was its base fee?")
    assert rows == [("tx_block", {"tx_hash": H}, False), ("base_fee_gwei", {"of_tx": H}, False)]
    assert _rows(f"How much gas was used by {H}?") == [("tx_gas_used", {"tx_hash": H}, False)]


C = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"


@pytest.mark.parametrize(("task", "ends"), [
    # Outside round 34 (V3): the largest after "transfers from 0xA" was read either way.
    (f"What were the USDC transfers from {A} in the last 50 blocks, and which one was the "
     "largest?", {"sender": A}),
    (f"How many USDC transfers to {A} were there in the last 50 blocks, and what was the "
     "largest one?", {"recipient": A}),
    # Outside round 36 (T7, B2, B4): "of them" took the holder, not the way, at exit 0.
    (f"What were the USDC transfers sent from {A} in the last 50 blocks, and which of them was "
     "the largest?", {"sender": A}),
    (f"List the USDC transfers from {A} in the last 50 blocks. Which of them was the largest?",
     {"sender": A}),
    (f"How many USDC transfers were sent from {A} in the last 50 blocks, and what was the "
     "largest of them?", {"sender": A}),
    (f"List the USDC transfers to {A} in the last 50 blocks. What was the largest among them?",
     {"recipient": A}),
])
def test_the_largest_one_keeps_the_direction_of_the_transfers_asked_before(task: str, ends: dict[str, str]) -> None:
    rows = _rows(task)
    assert rows[1] == ("transfer_max", {"blocks": "50", **ends}, False), rows


@pytest.mark.parametrize(("task", "ends"), [
    # Outside round 34 (U17, V15): "went to" and "how much did it send" were declined.
    (f"Which USDC transfers went to {A} in the last 50 blocks?", {"recipient": A, "blocks": "50"}),
    (f"How many USDC transfers were sent from {A} to {B}?", {"sender": A, "recipient": B}),
    (f"How many USDC transfers did {A} make to {B}?", {"sender": A, "recipient": B}),
    (f"How many USDC transfers did {A} send?", {"sender": A}),
    (f"How many USDC transfers did {B} receive in the last 20 blocks?", {"recipient": B, "blocks": "20"}),
])
def test_verbs_of_sending_and_receiving_say_the_direction(task: str, ends: dict[str, str]) -> None:
    rows = _rows(task)
    assert len(rows) == 1 and rows[0][1] == ends and not rows[0][2], rows


def test_a_point_fact_of_its_own_beside_a_window_is_read_at_the_head() -> None:
    # Outside round 34 (U16): the balance was declined as "USDC balance in the last 40 blocks".
    rows = _rows(f"How many USDC transfers were there from {B} to {C} in the last 40 blocks, and "
                 f"what is the USDC balance of {C}?")
    assert rows[1] == ("usdc_balance", {"address": C}, False), rows
    # A bare list item shares the window, and a balance over one is named, as before.
    rows = _rows(f"What is the USDC balance of {C} and the transfer count in the last 10 blocks?")
    assert rows[0][0] is None and rows[0][2], rows


def test_outside_round_35_a_compared_one_way_count_is_named_and_a_balance_beside_a_window_read() -> None:
    # Q63: "how many more did 0xA send than 0xB" was read as the count from 0xA to 0xB, at exit 0.
    rows = _rows(f"How many more USDC transfers did {A} send than {B} in the last 30 blocks?")
    assert len(rows) == 1 and rows[0][0] is None and rows[0][2], rows
    # Q10, Q11, Q59: a balance asked on its own after a window ("went" is no past tense read).
    for whose in (A, C):
        rows = _rows(f"How many USDC transfers went to {A} in the last 30 blocks, and what is the "
                     f"USDC balance of {whose}?")
        assert rows[1] == ("usdc_balance", {"address": whose}, False), rows
    # Q24: a fee asked in ETH (its own unit) is answered as stated.
    rows = _rows(f"What is the transaction fee of {H} in ETH?")
    assert [(k, bad) for k, _, bad in rows] == [("tx_fee", False)], rows


def test_a_difference_is_labelled_as_the_size_it_states() -> None:
    # Round 35, Q47: "(the first minus the second): 3.0 ETH" beside a difference of -3.0 ETH.
    items = extract_checklist(f"What is the difference between the ETH balances of {A} and {B}?")
    diff = next(i for i in items if i.get("kind") == "comparison")
    assert diff["text"] == "difference of the ETH balances (its size, and which holds more)", diff


def test_them_after_the_transfers_of_two_ways_is_named_not_guessed() -> None:
    # "them" after two lists could be either (or both): declined by name, never one of them.
    rows = _rows(f"List the USDC transfers from {A} in the last 50 blocks and the transfers to "
                 f"{B}. Which of them was the largest?")
    assert rows[-1][0] is None and rows[-1][2], rows
    # A part naming its own address is its own, whatever it refers back to.
    rows = _rows(f"List the USDC transfers from {A} in the last 50 blocks. What is the largest one "
                 f"of {B}?")
    assert rows[-1] == ("transfer_max", {"blocks": "50", "address": B}, False), rows


@pytest.mark.parametrize(("task", "kind", "ends"), [
    # Outside round 36 (T4, T10): "received by 0xA" was declined.
    (f"How many USDC transfers were received by {A} in the last 20 blocks?", "transfer_count",
     {"recipient": A}),
    (f"What is the largest USDC transfer received by {A} in the last 20 blocks?", "transfer_max",
     {"recipient": A}),
    (f"List the USDC transfers sent by {A} to {B} in the last 20 blocks", "transfer_list",
     {"sender": A, "recipient": B}),
    (f"List the USDC transfers received by {B} from {A} in the last 20 blocks", "transfer_list",
     {"sender": A, "recipient": B}),
    # "the largest transfer that 0xA received" (a leftover of round 35) says the way too.
    (f"What is the largest USDC transfer that {A} received in the last 20 blocks?",
     "transfer_max", {"recipient": A}),
    (f"List the USDC transfers {A} has sent in the last 20 blocks", "transfer_list", {"sender": A}),
])
def test_received_by_and_sent_by_say_the_direction(task: str, kind: str, ends: dict[str, str]) -> None:
    assert _rows(task) == [(kind, {"blocks": "20", **ends}, False)]


def test_two_recipients_said_by_received_by_are_named() -> None:
    rows = _rows(f"How many USDC transfers to {A} were received by {B} in the last 20 blocks?")
    assert len(rows) == 1 and rows[0][0] is None and rows[0][2], rows


@pytest.mark.parametrize(("task", "unit"), [
    # Outside round 36 (F2, F9): a fee in gwei and "what did 0x<hash> cost" were declined.
    (f"What was the transaction fee of {H} in gwei?", "gwei"),
    (f"How much did {H} cost, in wei?", "wei"),
    (f"what did {H} cost", None),
])
def test_what_a_transaction_cost_is_its_fee_in_the_unit_asked(task: str, unit: str | None) -> None:
    items = extract_checklist(task)
    assert items[0]["kind"] == "tx_fee" and items[0]["params"].get("unit") == unit, items
    assert not any(i.get("unanswerable") for i in items), items


def test_an_elided_count_is_of_the_transfers_asked_before_it() -> None:
    # Outside round 36 (T12): "and how many did it receive" and a trailing ", since block 0"
    # were declined (the window as a payment's fragment).
    rows = _rows(f"How many USDC transfers did {A} send, and how many did it receive, since block 0?")
    window = {"from_block": "0", "to_block": "latest-0"}
    assert rows == [("transfer_count", {**window, "sender": A}, False),
                    ("transfer_count", {**window, "recipient": A}, False)], rows
    rows = _rows(f"How many USDC transfers did {A} send in the last 20 blocks, and how many did {B} send?")
    assert rows[1] == ("transfer_count", {"blocks": "20", "sender": B}, False), rows
    # "it" after two addresses of which none is the one that "did": named, never guessed.
    rows = _rows(f"How many USDC transfers went from {A} to {B} in the last 20 blocks, and how "
                 "many did it receive?")
    assert rows[-1][0] is None and rows[-1][2], rows
    # "it" is the one that did send, not the address said last.
    rows = _rows(f"How many USDC transfers did {A} send to {B} in the last 20 blocks, and how "
                 "many did it receive?")
    assert rows[-1] == ("transfer_count", {"blocks": "20", "recipient": A}, False), rows


@pytest.mark.parametrize(("task", "ways"), [
    # Outside round 37 (S5): "to 0xA and to 0xC" was read as from 0xC to 0xA, at exit 0.
    (f"Show me the USDC transfers to {A} and to {C} in the last 30 blocks.",
     [{"recipient": A}, {"recipient": C}]),
    # T12: "and from 0xB to 0xA" was dropped, at exit 0.
    (f"List the USDC transfers from {A} to {B} and from {B} to {A} in the last 30 blocks.",
     [{"sender": A, "recipient": B}, {"sender": B, "recipient": A}]),
    # S1: the second bare "transfers" of a list was given as a count.
    (f"Show me the USDC transfers from {A} to {B} and the USDC transfers from {B} to {A} in "
     "the last 30 blocks.", [{"sender": A, "recipient": B}, {"sender": B, "recipient": A}]),
    # A plain address listed after one said one way is that way too, never the other end.
    (f"List the USDC transfers from {A} and {B} in the last 30 blocks.",
     [{"sender": A}, {"sender": B}]),
    (f"List the USDC transfers sent by {A} and {B} in the last 30 blocks.",
     [{"sender": A}, {"sender": B}]),
    (f"How many USDC transfers went to {A} and to {B} in the last 30 blocks?",
     [{"recipient": A}, {"recipient": B}]),
    # The other end said plainly is still read as such.
    (f"List the USDC transfers {A} made to {B} in the last 30 blocks.",
     [{"sender": A, "recipient": B}]),
])
def test_transfers_of_several_ways_are_one_read_each(task: str, ways: list[dict[str, str]]) -> None:
    rows = _rows(task)
    assert [(bad, {k: v for k, v in params.items() if k != "blocks"}) for _, params, bad in rows] == [
        (False, w) for w in ways], rows
    assert len({kind for kind, _, _ in rows}) == 1, rows


def test_several_senders_to_one_recipient_split_across_parts_are_named() -> None:
    # "from 0xA and 0xB to 0xC": split into parts, it would read 0xA's to anyone; declined.
    rows = _rows(f"List the USDC transfers from {A} and {B} to {C} in the last 30 blocks.")
    assert any(bad for _, _, bad in rows) and not any(
        params.get("sender") == A and "recipient" not in params for _, params, _ in rows), rows


def test_them_after_transfers_not_read_is_not_the_whole_chains() -> None:
    # Round 37 (T16): "my wallet send" was declined and "which of them" gave the chain's largest.
    rows = _rows("How many USDC transfers did my wallet send in the last 30 blocks, and which of "
                 "them was the largest?")
    assert all(bad for _, _, bad in rows), rows
    # Transfers read of no address: "which one" is the largest of all of them, as asked.
    rows = _rows("How many USDC transfers were there in the last 10 blocks, and which one was "
                 "the largest?")
    assert rows[1] == ("transfer_max", {"blocks": "10"}, False), rows


def test_outside_round_38_a_window_and_the_ways_of_one_address() -> None:
    # Q64, Q66: another fact's window was taken by a question of its own, at exit 0.
    rows = _rows(f"What were the transfers from {A} to {B} in the last 20 blocks, and how many "
                 f"transfers did {B} send to {A}?")
    assert rows[0][0] == "transfer_list" and rows[1][0] is None and rows[1][2], rows
    # The same fact asked again, a list tail, or "which one" takes it, as before.
    rows = _rows(f"How many USDC transfers did {A} send in the last 20 blocks, and how many did "
                 f"{B} send?")
    assert rows[1] == ("transfer_count", {"blocks": "20", "sender": B}, False), rows
    # Q06: "And how many did it receive?" in the next sentence; Q27: "has 0xC received".
    rows = _rows(f"How many USDC transfers did {B} send? And how many did it receive?")
    assert rows == [("transfer_count", {"sender": B}, False),
                    ("transfer_count", {"recipient": B}, False)], rows
    assert _rows(f"How many USDC transfers has {B} received?") == [
        ("transfer_count", {"recipient": B}, False)]
    # Q24, Q25: incoming and outgoing.
    assert _rows(f"Show me the incoming transfers of {B}.") == [
        ("transfer_list", {"recipient": B}, False)]
    assert _rows(f"List the outgoing USDC transfers from {A}.") == [
        ("transfer_list", {"sender": A}, False)]
    # Q40: "my wallet's" is the agent's wallet.
    rows = _rows("What are my wallet's USDC balance and ETH balance?")
    assert rows == [("usdc_balance", {"wallet": "self"}, False),
                    ("eth_balance", {"wallet": "self"}, False)], rows


@pytest.mark.parametrize(("task", "kind"), [
    # Outside round 39 (E8, B1-B4): "... of block N and of the latest block" answered the
    # head's number in place of the fact at the head, at exit 0.
    ("What is the gas limit of block 10 and of the latest block?", "block_gas_limit"),
    ("What is the base fee of block 10 and of the latest block?", "base_fee_gwei"),
    ("What is the timestamp of block 5 and of the latest block?", "block_timestamp"),
    ("What is the gas used of block 17 and of the latest block?", "block_gas_used"),
    ("How many transactions are in block 17 and in the latest block?", "block_tx_count"),
])
def test_a_block_fact_and_of_the_latest_block_is_that_fact_at_the_head(task: str, kind: str) -> None:
    rows = _rows(task)
    assert [(k, "block" in p, bad) for k, p, bad in rows] == [(kind, True, False), (kind, False, False)], rows
    # The head's number asked as a question of its own is still the head's number.
    rows = _rows("What is the gas limit of block 10, and what is the latest block?")
    assert rows[1][0] == "block_number", rows


def test_outside_round_39_a_later_sentences_window_and_two_senders_each() -> None:
    # B7: the window of the next sentence was taken by the question before it, at exit 0.
    rows = _rows(f"How many USDC transfers did {B} receive? And how many did it send in the "
                 "last 20 blocks?")
    assert rows == [("transfer_count", {"recipient": B}, False),
                    ("transfer_count", {"blocks": "20", "sender": B}, False)], rows
    # D17: "did 0xA and 0xB each send"; B12: "and how many were received by 0xA".
    assert _rows(f"How many USDC transfers did {A} and {B} each send?") == [
        ("transfer_count", {"sender": A}, False), ("transfer_count", {"sender": B}, False)]
    rows = _rows(f"how many usdc transfers were sent by {A} in the last 30 blocks and how many "
                 f"were received by {A}")
    assert rows == [("transfer_count", {"blocks": "30", "sender": A}, False),
                    ("transfer_count", {"blocks": "30", "recipient": A}, False)], rows


def test_outside_round_40_the_latest_block_asked_again_and_show_me_them() -> None:
    # B19: "..., and how many are in the latest block?" answered the head's number, at exit 0.
    for tail in ("how many are in the latest block", "how many does the latest block contain"):
        rows = _rows(f"How many transactions were in blocks 9 and 16, and {tail}?")
        assert rows[-1] == ("block_tx_count", {}, False), rows
    assert _rows("How many transactions are in block 4, and what is the latest block?")[-1][0] == "block_number"
    # T23: "Show me them." after two counts was dropped: the transfers counted are listed.
    rows = _rows(f"How many USDC transfers did {A} send and how many did it receive? Show me them.")
    assert rows[2:] == [("transfer_list", {"sender": A}, False),
                        ("transfer_list", {"recipient": A}, False)], rows
    # After anything else it is declined by name, never dropped.
    rows = _rows(f"What is the ETH balance of {A}? Show me them.")
    assert rows[-1][0] is None and rows[-1][2], rows


def test_outside_round_40_what_was_asked_again_and_a_window_referred_to() -> None:
    # B18: "..., and what are they now?" was declined on "they"; it is both facts at the head.
    rows = _rows("What were the timestamp and base fee of block 9, and what are they now?")
    assert rows[2:] == [("block_timestamp", {}, False), ("base_fee_gwei", {}, False)], rows
    # A list asked again at another block is the whole list there, never its last fact alone.
    rows = _rows("What is the base fee and gas limit at block 5, and at block 7?")
    assert rows[2:] == [("base_fee_gwei", {"block": "7"}, False),
                        ("block_gas_limit", {"block": "7"}, False)], rows
    # T18, T22: "in those blocks" and "which was the largest" take the window said before.
    rows = _rows(f"List the USDC transfers from {B} in blocks 10 to 24, and how much USDC did {B} "
                 "send in those blocks?")
    assert rows[1] == ("usdc_sent_total", {"from_block": "10", "to_block": "24", "address": B}, False), rows
    rows = _rows(f"how many usdc transfers touching {A} happened in the last 15 blocks and which "
                 "was the largest")
    assert rows[1] == ("transfer_max", {"blocks": "15", "address": A}, False), rows


@pytest.mark.parametrize(("task", "kind"), [
    # Outside round 41 (M2, B3, B4): "..., and what is it at the latest block?" answered the
    # head's block number, at exit 0.
    ("What was the gas limit of block 9 and what is it at the latest block?", "block_gas_limit"),
    ("What was the timestamp of block 9 and what is it at the latest block?", "block_timestamp"),
    ("What was the transaction count of block 5, and what is it for the latest block?",
     "block_tx_count"),
])
def test_what_is_it_at_the_latest_block_is_that_fact_at_the_head(task: str, kind: str) -> None:
    rows = _rows(task)
    assert [(k, "block" in p, bad) for k, p, bad in rows] == [(kind, True, False), (kind, False, False)], rows


def test_outside_round_41_a_blocks_it_and_a_price_in_eth() -> None:
    # F8: "And how much gas did it use?" after a block was declined as a transaction's.
    rows = _rows("How many transactions are in block 10? And how much gas did it use?")
    assert rows[1] == ("block_gas_used", {"block": "10"}, False), rows
    # B1: "In ETH please." after an effective gas price was declined.
    rows = _rows(f"What was the effective gas price of {H}? In ETH please.")
    assert not any(bad for _, _, bad in rows), rows


@pytest.mark.parametrize(("follow", "kind"), [
    # Outside round 42 (R19, S1, S13): "it" after "Which block was 0x<hash> mined in?" was read
    # at the head, at exit 0.
    ("How full was it?", "block_fullness"),
    ("How many transactions are in it?", "block_tx_count"),
    ("How full is it?", "block_fullness"),
])
def test_it_after_a_transactions_block_is_that_block(follow: str, kind: str) -> None:
    rows = _rows(f"Which block was {H} mined in? {follow}")
    assert rows[1] == (kind, {"of_tx": H}, False), rows
    # "now" is the head's, as asked.
    assert _rows(f"Which block was {H} mined in? How full is it now?")[1] == ("block_fullness", {}, False)


def test_that_block_is_the_transactions_beside_another_parts_block() -> None:
    # S11: "the gas limit of that block, and ... of block 7" read both at block 7, at exit 0.
    rows = _rows(f"Which block was {H} mined in? What was the gas limit of that block, and what is "
                 "the gas limit of block 7?")
    assert rows[1:] == [("block_gas_limit", {"of_tx": H}, False),
                        ("block_gas_limit", {"block": "7"}, False)], rows


def test_the_largest_of_values_that_are_not_transfers_is_not_a_transfer() -> None:
    # "Which of them was the largest?" after two balances gave each one's largest transfer
    # (at exit 0, found while fixing round 42's S17): declined by name now.
    rows = _rows(f"How much USDC do {A} and {B} hold? Which of them was the largest?")
    assert [k for k, _, _ in rows[:2]] == ["usdc_balance", "usdc_balance"], rows
    assert rows[2][0] is None and rows[2][2], rows
    # Round 42 (S17): "Which of those was the largest?" after a count of transfers.
    rows = _rows("How many USDC transfers were there in blocks 4 to 6? Which of those was the largest?")
    assert rows[1] == ("transfer_max", {"from_block": "4", "to_block": "6"}, False), rows


def test_it_two_sentences_after_a_transactions_block_is_still_that_block() -> None:
    # Outside round 43 (Q15, Q46, Q48, Q49): the third sentence's "it" was read at the head.
    rows = _rows(f"Which block was {H} mined in? How full was it? And how many transactions are in it?")
    assert rows[1:] == [("block_fullness", {"of_tx": H}, False),
                        ("block_tx_count", {"of_tx": H}, False)], rows
    # "it" after another block named since is that block, as before.
    rows = _rows(f"Which block was {H} mined in? What is the base fee of block 3? And how many "
                 "transactions are in it?")
    assert rows[2] == ("block_tx_count", {"block": "3"}, False), rows
