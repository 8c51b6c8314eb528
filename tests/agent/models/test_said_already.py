"""A clause after a question that restates it, or asks only for what its answer states
already, is no question of its own. Outside round 22 had the right answer followed by a
decline at exit 1: "How full is block 3? I mean what share of its gas limit was used."
(RE2), "Does 0x... hold any USDC at all? Yes or no." (n5), and "What was the biggest USDC
transfer ..., with its transaction hash" (n8: the answer line gives the hash whole). Where no
question before it has such an answer, the clause is still declined by name."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

B = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
H = "0x" + "ab" * 32


def _asked(task: str) -> list[tuple[str | None, dict[str, str]]]:
    return [(i["kind"], dict(i.get("params") or {})) for i in extract_checklist(task)]


@pytest.mark.parametrize(
    ("task", "same_as"),
    [
        ("How full is block 3? I mean what share of its gas limit was used.",
         "How full is block 3?"),
        ("How full is the latest block? I mean, what share of its gas limit was used?",
         "How full is the latest block?"),
        ("What is my balance? I mean my USDC balance.", "What is my USDC balance?"),
        ("What is the base fee at block 3? In other words, the base fee of block 3.",
         "What is the base fee at block 3?"),
        ("What is the base fee? To be clear, the base fee of the latest block.",
         "What is the base fee?"),
        (f"How much ETH does {B} hold? i.e. the ETH balance of {B}.",
         f"How much ETH does {B} hold?"),
        # Outside round 23 (B2): "in that range" was declined on 'range'.
        ("How many USDC transfers were there between block 2 and 5? In other words, how many "
         "Transfer logs in that range?", "How many USDC transfers were there between block 2 and 5?"),
    ],
)  # fmt: skip
def test_a_restatement_asks_the_same_items_once(task: str, same_as: str) -> None:
    assert _asked(task) == _asked(same_as), extract_checklist(task)


def test_a_restatement_naming_something_else_is_still_read_as_such() -> None:
    # "I mean block 4" corrects the block, and names no fact: declined, never dropped.
    items = extract_checklist("How full is block 3? I mean block 4.")
    assert items[0]["kind"] == "block_fullness" and items[1]["kind"] is None, items


@pytest.mark.parametrize(
    "task",
    [
        f"Does {B} hold any USDC at all? Yes or no.",
        f"Does {B} hold any USDC, yes or no?",
        "Is the base fee above 1 gwei? Answer yes or no.",
        "Is the base fee above 1 gwei? Just yes/no please.",
        f"Did {H} succeed? Yes or no.",
    ],
)
def test_yes_or_no_after_a_yes_or_no_question_asks_nothing_more(task: str) -> None:
    items = extract_checklist(task)
    assert all(i.get("kind") for i in items), items
    assert any(i["kind"] in ("condition", "tx_status") for i in items), items


@pytest.mark.parametrize(
    "task",
    [
        "What was the biggest USDC transfer between block 1 and 6, with its tx hash?",
        "What was the biggest USDC transfer between block 1 and 6? Include its transaction hash.",
        "What was the largest USDC transfer in the last 10 blocks, and the transaction hash?",
    ],
)
def test_the_hash_of_the_largest_transfer_is_in_its_answer(task: str) -> None:
    assert [i["kind"] for i in extract_checklist(task)] == ["transfer_max"], extract_checklist(task)


@pytest.mark.parametrize(
    ("task", "wants"),
    [
        ("What is the base fee? Yes or no.", "asks yes or no"),
        (f"How much USDC does {B} hold? Answer yes or no.", "asks yes or no"),
        ("What is the base fee? Include its transaction hash.", "asks a transaction hash"),
        ("Yes or no.", "asks yes or no"),
    ],
)
def test_what_no_answer_before_it_states_is_declined_by_name(task: str, wants: str) -> None:
    items = extract_checklist(task)
    assert items[-1]["kind"] is None and wants in str(items[-1]["unanswerable"]), items


F = "0x1b06A865289756e73349De1149deD50DE0DC2316"
DEAD = "0x000000000000000000000000000000000000dEaD"
H2 = "0x" + "cd" * 32


@pytest.mark.parametrize(
    ("task", "first"),
    [
        (f"What is the USDC balance of {B}? I mean {F}.", B),
        (f"What is the USDC balance of {B}? I mean of {F}.", B),
        (f"What is the USDC balance of {B}? To be clear, {F}.", B),
        (f"What is the USDC balance of {B}? i.e. {F}.", B),
        (f"What is the USDC balance of {B}? In other words, {F}.", B),
        (f"Is there any USDC in {B}? I mean {F}.", B),
        (f"Does {DEAD} hold any USDC? I mean {B}. Yes or no.", DEAD),
        (f"How much ETH does my wallet have? I mean {F}.", "self"),
        (f"What is my USDC balance? I mean {DEAD}.", "self"),
        (f"When was {H} mined? I mean {H2}.", H),
        (f"How much gas did {H} use? To be clear, {H2}.", H),
        (f"Which block was {H} mined in? I mean {H2}.", H),
        (f"Did {H} succeed? I mean {H2}.", H),
        (f"What is the USDC balance of {B}? Sorry, {F}.", B),
        (f"What is the USDC balance of {B}? No wait, {F}.", B),
        (f"What is the USDC balance of {B}? Oops, I meant {F}.", B),
    ],
)
def test_a_correction_naming_only_another_subject_is_declined_never_answered_of_the_first(
    task: str, first: str
) -> None:
    # Outside round 23: twelve corrections were read as restatements and answered of the
    # first subject alone at exit 0 ("USDC balance of S? I mean F." gave S's balance).
    items = extract_checklist(task)
    asked = [(i.get("params") or {}) for i in items if i.get("kind")]
    assert all(first in (p.get("address"), p.get("tx_hash"), "self" if p.get("wallet") else None)
               for p in asked if "of" not in p), items  # fmt: skip
    later = F if first != H else H2
    assert later not in str(asked), items
    assert items[-1]["kind"] is None or any(i["kind"] is None for i in items), items


def test_it_is_the_transaction_said_before_it_not_the_next_one() -> None:
    items = extract_checklist(f"Did {H} succeed, and how much gas did it use? Then {H2}.")
    assert [(i["kind"], (i.get("params") or {}).get("tx_hash")) for i in items] == [
        ("tx_status", H), ("tx_gas_used", H), (None, None)], items  # fmt: skip


def test_what_about_an_address_in_the_same_sentence_is_read_with_it() -> None:
    items = extract_checklist(f"What is the USDC balance of {B} and what about {F}?")
    assert [(i["kind"], i["params"]["address"]) for i in items] == [
        ("usdc_balance", B), ("usdc_balance", F)], items  # fmt: skip


def test_a_comparison_cut_by_the_checklist_says_how_to_ask_it() -> None:
    items = extract_checklist(f"What is the combined USDC balance of my wallet and {F}? "
                              "What about ETH?")  # fmt: skip
    why = str(items[-1]["unanswerable"])
    assert "ask it in a question of its own (this task asks 6 items)" in why, why
    assert "at most 4 addresses" not in why, why


def test_in_that_range_is_the_range_said_before_it() -> None:
    items = extract_checklist("How many USDC transfers between block 2 and 5, and what was the "
                              "largest in that range?")  # fmt: skip
    assert [(i["kind"], i["params"]) for i in items] == [
        ("transfer_count", {"from_block": "2", "to_block": "5"}),
        ("transfer_max", {"from_block": "2", "to_block": "5"})], items  # fmt: skip


@pytest.mark.parametrize(
    "task",
    [
        f"What is the USDC balance of {B}? And for {F}?",
        f"What is the USDC balance of {B}? And of {F}?",
        f"What is the USDC balance of {B}? Also {F}.",
        f"What is the USDC balance of {B}? {F}.",
    ],
)
def test_a_holder_alone_after_a_question_asks_it_of_that_holder_too(task: str) -> None:
    # Outside round 24 (N10, P8, N23): declined; before this session, dropped at exit 0.
    items = extract_checklist(task)
    assert [(i["kind"], i["params"]["address"]) for i in items] == [
        ("usdc_balance", B), ("usdc_balance", F)], items  # fmt: skip


def test_a_holder_alone_after_a_question_of_no_holder_is_named() -> None:
    items = extract_checklist(f"What is the base fee? And for {F}?")
    assert items[-1]["kind"] is None and F in str(items[-1]["unanswerable"]), items


T2 = "0x" + "ef" * 32


@pytest.mark.parametrize(
    "task",
    [
        f"When was {H} mined? When was {T2} mined? How much gas did each use?",
        f"Did {H} succeed? Did {T2} succeed? How much gas did each use?",
        f"Did {H} succeed? Did {T2} succeed? How much gas did they both use?",
    ],
)
def test_each_transaction_said_before_is_asked_each(task: str) -> None:
    # Outside round 25 (X15, X16): only the last transaction's gas, at exit 0.
    gas = [i["params"]["tx_hash"] for i in extract_checklist(task) if i["kind"] == "tx_gas_used"]
    assert gas == [H, T2], extract_checklist(task)


@pytest.mark.parametrize(
    ("task", "op", "than"),
    [
        (f"Is the USDC balance of {F} above 3 USDC? What about {B}?", ">", "3"),
        (f"Is the USDC balance of {F} above 3 USDC? And {B}?", ">", "3"),
        (f"Does {F} hold any ETH? What about {DEAD}?", ">", "0"),
    ],
)
def test_a_holder_borrowed_by_a_yes_or_no_question_is_tested_too(task: str, op: str, than: str) -> None:
    # Outside round 25 (R19, X7, X8, X9): the borrowed holder's value came with no yes or no.
    items = extract_checklist(task)
    tests = [(i["params"]["of"], i["params"]["op"], i["params"]["than"])
             for i in items if i["kind"] == "condition"]  # fmt: skip
    assert tests == [("c1", op, than), ("c3", op, than)], items


def test_a_second_aggregate_of_another_asset_never_takes_the_first_ones_values() -> None:
    # Outside round 25 (R6): "And their combined ETH?" became the combined USDC again (one
    # item, deduplicated) and was dropped at exit 0; it is an ETH sum, here cut by the cap.
    items = extract_checklist(f"How much ETH do {B} and {F} hold? What is their combined "
                              "USDC? And their combined ETH?")  # fmt: skip
    assert "combined ETH balance" in str(items[-1]["text"]) and items[-1]["kind"] is None, items


@pytest.mark.parametrize("tail", [f"And for {F}?", f"What about {F}?", f"Also {F}."])
def test_a_holder_alone_after_an_order_is_never_read_as_a_question(tail: str) -> None:
    # "... Send 0.01 USDC to 0xS. And for 0xF?" may ask a second payment: it is named, never
    # answered with 0xF's balance borrowed from the question before the order (outside
    # round 27, Q10 and Q12: "What about 0xF?" gave the balance at exit 0).
    items = extract_checklist(f"What is my USDC balance? Send 0.01 USDC to {B}. {tail}")
    assert [i["kind"] for i in items] == ["usdc_balance", "transfer_receipt", None], items
    assert "payment" in str(items[-1]["unanswerable"]), items
