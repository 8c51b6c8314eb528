"""A list of transactions in one question asks its fact of each of them (outside round 28:
"Did 0xA and 0xB succeed?" read 0xB alone and declined "Did 0xA"; "Did 0xA or 0xB fail?"
read 0xB alone at exit 0), and a holder after an asset follow-up is asked every fact asked
before it."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

T1, T2, T3 = ("0x" + c * 64 for c in "abc")
A = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
B = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"


def _read(task: str) -> list[tuple[str | None, str]]:
    items = extract_checklist(task)
    assert all(i["kind"] for i in items), items  # nothing declined
    return [(i["kind"], str((i.get("params") or {}).get("tx_hash") or (i.get("params") or {}).get("address")))
            for i in items]  # fmt: skip


@pytest.mark.parametrize(
    ("task", "kinds"),
    [
        (f"Did {T1} and {T2} succeed?", ["tx_status"]),
        (f"Did {T1} and {T2} both succeed?", ["tx_status"]),
        (f"Did {T1} or {T2} fail?", ["tx_status"]),
        (f"Did {T1}, {T2} succeed?", ["tx_status"]),
        (f"Were {T1} and {T2} successful?", ["tx_status"]),
        (f"What is the status of {T1} and {T2}?", ["tx_status"]),
        (f"How much gas did {T1} and {T2} use?", ["tx_gas_used"]),
        (f"Which blocks were {T1} and {T2} mined in?", ["tx_block"]),
        (f"When were {T1} and {T2} mined?", ["tx_time"]),
        (f"Did {T1} and {T2} succeed? How much gas did each use?", ["tx_status", "tx_gas_used"]),
    ],
)  # fmt: skip
def test_a_fact_of_a_list_of_transactions_is_asked_of_each(task: str, kinds: list[str]) -> None:
    assert _read(task) == [(k, t) for k in kinds for t in (T1, T2)]


def test_a_list_of_three_with_commas_is_three() -> None:
    assert _read(f"How much gas did {T1}, {T2} and {T3} use?") == [
        ("tx_gas_used", t) for t in (T1, T2, T3)]


def test_transactions_of_separate_questions_keep_their_own_facts() -> None:
    assert _read(f"Did {T1} succeed, and how much gas did {T2} use?") == [
        ("tx_status", T1), ("tx_gas_used", T2)]
    assert _read(f"What is the status of {T1} and how much gas did {T2} use?") == [
        ("tx_status", T1), ("tx_gas_used", T2)]


@pytest.mark.parametrize(
    "task",
    [f"What is the USDC balance of {A}? And ETH? And for {B}?",
     f"What is the USDC balance of {A}? What about ETH? Also {B}."],
)  # fmt: skip
def test_a_holder_after_an_asset_follow_up_is_asked_both_assets(task: str) -> None:
    assert _read(task) == [("usdc_balance", A), ("eth_balance", A), ("usdc_balance", B),
                           ("eth_balance", B)]  # fmt: skip


def test_a_holder_after_a_follow_up_of_no_balance_is_still_declined() -> None:
    items = extract_checklist(f"What is the base fee? And ETH? And for {B}?")
    assert any(i["kind"] is None and B in str(i["unanswerable"]) for i in items), items


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        (f"What was the gas used by transaction {T1} and by transaction {T2}?", "tx_gas_used"),
        (f"What was the gas used by transaction {T1} and transaction {T2}?", "tx_gas_used"),
        (f"What was the gas used by {T1} and by {T2}?", "tx_gas_used"),
        (f"What was the gas used in {T1} and in {T2}?", "tx_gas_used"),
        (f"What was the gas used by {T1}? And by transaction {T2}?", "tx_gas_used"),
        (f"What is the status of {T1} and that of {T2}?", "tx_status"),
        (f"Which block was tx {T1} in, and tx {T2}?", "tx_block"),
    ],
)  # fmt: skip
def test_the_word_transaction_names_a_hash_and_asks_nothing_of_its_own(task: str, kind: str) -> None:
    """Outside round 55 left "the gas used by 0x<h1> and by 0x<h2>" declined; beside it,
    "... by transaction 0x<h1> and by transaction 0x<h2>" gave the second one's status
    instead of its gas used, at exit 0 ("transaction" was read as asking a status)."""
    assert _read(task) == [(kind, T1), (kind, T2)]


def test_a_transaction_named_alone_still_asks_its_status() -> None:
    assert _read(f"What is transaction {T1}?") == [("tx_status", T1)]
    assert _read(f"What is the block number of the transaction {T1}?") == [("tx_block", T1)]


@pytest.mark.parametrize(
    ("task", "read"),
    [
        # Outside round 56, Q6: "the other one" named the second hash, and was declined.
        (f"Did {T1} succeed? And the other one, {T2}?", [("tx_status", T1), ("tx_status", T2)]),
        (f"What was the gas used by the tx with hash {T1}?", [("tx_gas_used", T1)]),
        (f"What is the gas used by txn {T1}?", [("tx_gas_used", T1)]),
        (f"Did transaction hash {T1} succeed?", [("tx_status", T1)]),
        # Q57: "how much did 0x<hash> use" after gas was said is its gas used.
        (f"How much gas did block 4 use, and how much did {T2} use?",
         [("block_gas_used", "None"), ("tx_gas_used", T2)]),
    ],
)  # fmt: skip
def test_a_transaction_named_in_other_words_is_that_transaction(
    task: str, read: list[tuple[str, str]]
) -> None:
    assert _read(task) == read


@pytest.mark.parametrize(
    "task",
    [f"Which block has transaction {T1}?", f"When did transaction {T1} happen?",
     f"How many tokens moved in transaction {T1}?", f"What is transaction {T1}'s block?",
     f"How much did {T1} use?"],
)  # fmt: skip
def test_transaction_beside_words_it_does_not_read_is_declined_never_its_status(task: str) -> None:
    """They were answered with the transaction's status alone, at exit 0."""
    (item,) = extract_checklist(task)
    assert item["kind"] is None and item.get("unanswerable"), item


@pytest.mark.parametrize(("said", "digits"), [("0x" + "a1" * 31 + "a", 63), ("0x" + "12" * 20 + "3", 41),
                                             ("0x" + "12" * 19, 38), ("0x0", 1)])  # fmt: skip
def test_a_hex_number_of_the_wrong_length_is_named_with_its_length(said: str, digits: int) -> None:
    """Outside round 56: a hash one digit short was declined naming fragments of it ('aef')
    as unknown words; an address one digit long, as "the task names no address"."""
    (item,) = extract_checklist(f"Did {said} succeed, and what is its USDC balance?")[:1]
    assert item["kind"] is None and f"has {digits} hex digit" in item["unanswerable"], item
    assert "an address has 40 and a transaction hash 64" in item["unanswerable"]


def test_the_gas_price_of_a_transaction_is_what_it_paid() -> None:
    # Outside round 57, Q32: declined as "an account's" gas price.
    assert _read(f"What was the gas price of the transaction {T1}?") == [("tx_gas_price", T1)]
    assert _read(f"What is the gas price of tx {T1}?") == [("tx_gas_price", T1)]


def test_a_hash_between_commas_is_the_transaction_it_names() -> None:
    # Outside round 57, Q34: "the other one, 0x<hash>, use" was split at the commas.
    assert _read(f"Did transaction {T1} succeed, and how much gas did the other one, {T2}, use?") == [
        ("tx_status", T1), ("tx_gas_used", T2)]
