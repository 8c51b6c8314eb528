"""The offline planner's vocabulary table: every phrase of every fact kind is read as that
kind (one test per entry), scope words decline naming the word, presentation clauses
shape the answer and never become items, relative block references resolve exactly."""

from __future__ import annotations

import pytest

from agent.loop.checklist import Checklist, ChecklistItem, resolve_blocks
from agent.models._factpatterns import extract_checklist
from agent.models.vocabulary import KIND_WORDS, OTHER_CHAINS, STANDING, markdown_tables

A = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
B = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
TOKEN = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
TX = "0x" + "ab" * 32
#: A sheet's subject is DAI: the run's own USDC has fields a free read answers (its issuer).
SUBJECT = {"none": "", "account": A, "token": TOKEN, "tx": TX, "symbol": "DAI", "protocol": "aave"}
ENTRIES = [
    pytest.param(kw, phrase, id=f"{kw.kind}:{phrase.text}")
    for kw in KIND_WORDS
    for phrase in kw.phrases
]


def _question(kind_subject: str, phrase: str) -> str:
    words = " ".join(w.strip("[]") for w in phrase.split())
    subject = SUBJECT[kind_subject]
    if phrase == "[usdc] transfers":  # "Tell me the transfers" asks each (transfer_list)
        return f"How about the {words} of {subject}?"
    if "…" in words:
        return "Tell me " + words.replace("…", subject or "the chain") + "?"
    return f"Tell me the {words} of {subject}?" if subject else f"Tell me the {words}?"


@pytest.mark.parametrize(("kw", "phrase"), ENTRIES)
def test_every_vocabulary_entry_is_read_as_its_kind(kw, phrase) -> None:  # type: ignore[no-untyped-def]
    items = extract_checklist(_question(kw.subject, phrase.text))
    kinds = [i["kind"] for i in items]
    assert kw.kind in kinds, (phrase.text, items)
    if phrase.field:
        assert any(i.get("params", {}).get("field") == phrase.field for i in items), items


OTHER = f"What is the USDC balance of {A}"


@pytest.mark.parametrize("chain", OTHER_CHAINS)
def test_another_chain_declines_naming_it(chain: str) -> None:
    items = extract_checklist(f"{OTHER} on {chain}?")
    assert [i["kind"] for i in items] == [None]
    assert repr(chain) in items[0]["unanswerable"] and "another chain" in items[0]["unanswerable"]


def test_the_runs_own_network_is_no_other_chain() -> None:
    items = extract_checklist(f"{OTHER} on Base Sepolia?", network="base-sepolia")
    assert [i["kind"] for i in items] == ["usdc_balance"]


@pytest.mark.parametrize("word", STANDING)
def test_a_standing_or_future_request_declines_naming_it(word: str) -> None:
    items = extract_checklist(f"{word} the USDC balance of {A} under 50")
    assert all(i["kind"] is None for i in items), items
    assert any(repr(word) in (i.get("unanswerable") or "") for i in items), items


@pytest.mark.parametrize(
    "task",
    [
        f"What is the USDC balance of {A} on Ethereum mainnet?",
        f"What is the USDC balance of {A} on Polygon?",
        f"What is the USDC balance of {A} on Arbitrum?",
        "Ping me as soon as my USDC balance drops under 50",
        f"Alert me when the USDC balance of {A} changes",
        "Every day, tell me the base fee",
        "Who owns the USDC contract?",
    ],
)
def test_the_wrong_cases_of_issue_23_are_declined(task: str) -> None:
    items = extract_checklist(task)
    assert items and all(i["kind"] is None and i["unanswerable"] for i in items), items


@pytest.mark.parametrize(
    ("task", "kind", "params"),
    [
        ("What was the base fee in the previous block?", "base_fee_gwei", {"block": "latest-1"}),
        ("What was the base fee 2 blocks before the latest block?", "base_fee_gwei",
         {"block": "latest-2"}),
        ("base fee three blocks ago", "base_fee_gwei", {"block": "latest-3"}),
        ("the timestamp of the block before the latest one", "block_timestamp",
         {"block": "latest-1"}),
        ("base fee of the block before block 7", "base_fee_gwei", {"block": "6"}),
        ("base fee 2 blocks before block 9", "base_fee_gwei", {"block": "7"}),
        ("when was the block after block 3 mined?", "block_timestamp", {"block": "4"}),
        (f"How many USDC does {A} hold?", "usdc_balance", {"address": A}),
        ("How many USDC are in circulation?", "token_supply", {}),
        ("Count the Transfer events in the last 10 blocks", "transfer_count", {"blocks": "10"}),
        (f"How much gas did {TX} use?", "tx_gas_used", {"tx_hash": TX}),
        ("What is the base fee, expressed in gwei?", "base_fee_gwei", {"unit": "gwei"}),
        ("When was the latest block mined? unix time is fine", "block_timestamp",
         {"unit": "unix"}),
        ("What is the mean base fee over recent blocks?", "gas_stats",
         {"field": "base_fee_gwei_mean"}),
        # The issuer of the run's USDC is read for free (its owner()); a sheet is bought
        # only when the task asks for one (below).
        ("Who issues USDC?", "token_issuer", {}),
        ("Who issues USDC? Buy the token fact sheet.", "token_factsheet",
         {"symbol": "USDC", "field": "issuer"}),
        # The second outside question writer's phrasings, declined on main 73c83d6:
        ("Which company is behind USDC?", "token_factsheet", {"symbol": "USDC", "field": "issuer"}),
        ("What was the timestamp of the block just before block 6? Unix time is fine.",
         "block_timestamp", {"block": "5"}),
        ("base fee of the block right after block 3", "base_fee_gwei", {"block": "4"}),
    ],
)  # fmt: skip
def test_paraphrases_and_clauses_of_issue_23_are_read(task: str, kind: str, params: dict) -> None:  # type: ignore[type-arg]
    items = extract_checklist(task)
    assert all(i["kind"] is not None for i in items), items
    hit = [i for i in items if i["kind"] == kind]
    assert hit and all(hit[0].get("params", {}).get(k) == v for k, v in params.items()), items


def test_who_holds_more_is_a_comparison_of_two_balances() -> None:
    items = extract_checklist(f"Who holds more USDC, {A} or {B}?")
    assert [i["kind"] for i in items] == ["usdc_balance", "usdc_balance", "comparison"]


def _item(block: str) -> Checklist:
    return Checklist((ChecklistItem(id="c1", text=f"base fee at block {block}",
                                    kind="base_fee_gwei", params={"block": block}),))  # fmt: skip


def test_relative_blocks_resolve_against_the_head_at_run_start() -> None:
    item = resolve_blocks(_item("latest-2"), head=27).items[0]
    assert item.params["block"] == "25" and item.text == "base fee at block 25"
    assert item.unanswerable is None


@pytest.mark.parametrize(("block", "why"), [("latest-30", "before the first block"),
                                            ("99", "does not exist yet")])  # fmt: skip
def test_a_block_the_chain_contradicts_is_declined_naming_the_head(block: str, why: str) -> None:
    item = resolve_blocks(_item(block), head=27).items[0]
    assert item.unanswerable is not None and why in item.unanswerable and "27" in item.unanswerable


def test_a_relative_block_before_the_first_is_said_in_words_never_as_a_negative_block() -> None:
    """The outside tester's "base fee 3 blocks ago" on a chain at block 2 read "base fee at
    block -1: not answered (latest-3 is before the first block (...))"."""
    item = resolve_blocks(_item("latest-3"), head=2).items[0]
    assert item.text == "base fee at the block 3 before the latest", item
    assert item.unanswerable == ("the block 3 before the latest is before the first block: "
                                 "the head at run start is 2, so only blocks 0 to 2 exist"), item
    assert "-1" not in item.text + item.unanswerable and item.params["block"] == "latest-3"


def test_the_docs_table_lists_every_phrase() -> None:
    table = markdown_tables()
    assert all(f"`{p.text}`" in table for kw in KIND_WORDS for p in kw.phrases)


def test_docs_planner_md_holds_the_generated_table() -> None:
    from pathlib import Path

    doc = Path(__file__).resolve().parents[3] / "docs" / "planner.md"
    assert markdown_tables() in doc.read_text(), "regenerate: python -m agent.models.vocabulary"


def test_readme_holds_the_generated_summary() -> None:
    from pathlib import Path

    from agent.models.vocabulary import readme_summary

    readme = Path(__file__).resolve().parents[3] / "README.md"
    assert readme_summary() in readme.read_text(), (
        "regenerate: python -m agent.models.vocabulary --readme")


def test_a_payment_in_another_word_order_is_named_not_dropped() -> None:
    items = extract_checklist(f"Pay the seller {A} 0.10 USDC, then report the base fee.")
    assert [i["kind"] for i in items] == [None, "base_fee_gwei"]
    assert "send N USDC to 0x" in items[0]["unanswerable"]
    assert [i["kind"] for i in extract_checklist("What is the base fee? Pay if needed.")] == [
        "base_fee_gwei"
    ]


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("Give me the number and the timestamp of the latest block.",
         [("block_number", {}), ("block_timestamp", {})]),
        ("the timestamp and the number of the latest block",
         [("block_timestamp", {}), ("block_number", {})]),
        ("the base fee, timestamp and number of block 5",
         [("base_fee_gwei", {"block": "5"}), ("block_timestamp", {"block": "5"}),
          ("block_number", {"block": "5"})]),
        ("What are the height and the base fee of the previous block?",
         [("block_number", {"block": "latest-1"}), ("base_fee_gwei", {"block": "latest-1"})]),
        (f"What are the symbol and decimals of {TOKEN}?",
         [("token_symbol", {"token": TOKEN}), ("token_decimals", {"token": TOKEN})]),
    ],
)  # fmt: skip
def test_each_fact_of_a_coordinated_list_is_its_own_item_with_the_shared_parameters(
    task: str, expected: list[tuple[str, dict[str, str]]]
) -> None:
    items = extract_checklist(task)
    assert [i["kind"] for i in items] == [k for k, _ in expected], items
    for item, (_, params) in zip(items, expected, strict=True):
        assert all(item.get("params", {}).get(k) == v for k, v in params.items()), items


@pytest.mark.parametrize(
    ("task", "word"),
    [
        # A block's gas used is read at a block now (test_block_gas_and_txs.py); the gas
        # price is the node's suggestion, read at no block.
        ("the base fee and gas price of block 5", "gas price"),
        ("colour and decimals of USDC", "colour"),
        (f"Tell me the USDC balance of {A} and the number", "number"),
        ("Give me the value and the timestamp of the latest block.", "value"),
    ],
)
def test_a_part_of_a_list_it_cannot_read_is_declined_naming_it(task: str, word: str) -> None:
    items = extract_checklist(task)
    declined = [i for i in items if i["kind"] is None]
    assert declined and any(word in i["text"] + i["unanswerable"] for i in declined), items


@pytest.mark.parametrize(
    ("task", "unit"),
    [
        ("What is the timestamp of the latest block? UTC is fine", "utc"),
        ("timestamp of the latest block pls", None),
        ("base fee pls, in gwei", "gwei"),
    ],
)
def test_presentation_words_shape_the_answer_and_are_never_items(task: str, unit: str | None) -> None:
    items = extract_checklist(task)
    assert len(items) == 1 and items[0]["kind"] is not None, items
    assert items[0].get("params", {}).get("unit") == unit, items


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        ("What is the timestamp of the head?", "block_timestamp"),
        ("base fee of the head block", "base_fee_gwei"),
        ("Which block is the head?", "block_number"),
    ],
)
def test_the_head_is_the_latest_block(task: str, kind: str) -> None:
    items = extract_checklist(task)
    assert [i["kind"] for i in items] == [kind], items
    assert "block" not in items[0].get("params", {}), items


@pytest.mark.parametrize(
    ("task", "item"),
    [
        ("Buy the cheapest fact sheet about USDC from the market and tell me what it contains.",
         ("token_factsheet", {"symbol": "USDC", "pick": "cheapest"})),
        ("Buy the cheapest dataset about uniswap. Tell me what it contains.",
         ("protocol_factsheet", {"name": "uniswap", "pick": "cheapest"})),
        ("Get me the least expensive USDC data and describe it.",
         ("token_factsheet", {"symbol": "USDC", "pick": "cheapest"})),
        ("Purchase the lowest-priced research sheet on DAI available in the market, "
         "and show me its contents", ("token_factsheet", {"symbol": "DAI", "pick": "cheapest"})),
    ],
)  # fmt: skip
def test_a_request_to_buy_the_cheapest_is_one_item_of_the_sold_kind(task: str, item: tuple) -> None:  # type: ignore[type-arg]
    items = extract_checklist(task)
    assert [(i["kind"], i.get("params")) for i in items] == [item], items


def test_a_request_to_buy_keeps_the_tasks_other_questions() -> None:
    items = extract_checklist("Purchase the cheapest sheet on USDC, then tell me the base fee.")
    assert [i["kind"] for i in items] == ["token_factsheet", "base_fee_gwei"]


@pytest.mark.parametrize(
    ("task", "why"),
    [
        ("Buy the best-value research dataset on the market and tell me what it contains",
         "no measure of an offer's value"),
        ("Buy the best deal on the market and describe it.", "no measure"),
        ("Buy the cheapest dataset and tell me what it contains",
         "name the seller (the local paywall, its URL, or the market)"),
        ("Buy the cheapest shiny dataset about USDC", "does not know 'shiny' in a request to buy"),
        ("Buy the cheapest sheet about USDC on Polygon", "'polygon' names another chain"),
    ],
)  # fmt: skip
def test_a_request_to_buy_it_cannot_read_in_full_is_declined_naming_why(task: str, why: str) -> None:
    items = extract_checklist(task)
    assert [i["kind"] for i in items] == [None] and why in items[0]["unanswerable"], items


@pytest.mark.parametrize(
    ("task", "kind", "unit"),
    [
        ("What is the base fee in wei?", "base_fee_gwei", "wei"),
        (f"What is the ETH balance of {A} in gwei?", "eth_balance", "gwei"),
        (f"How much ether does {A} hold, in wei?", "eth_balance", "wei"),
        (f"What is the USDC balance of {A} in atomic units?", "usdc_balance", "atomic"),
        ("What is the total supply of USDC in whole USDC?", "token_supply", "usdc"),
        (f"What is the ETH balance of {A} in ether?", "eth_balance", "ether"),
    ],
)
def test_an_answer_asked_in_a_unit_carries_the_unit(task: str, kind: str, unit: str) -> None:
    items = extract_checklist(task)
    assert [(i["kind"], i.get("params", {}).get("unit")) for i in items] == [(kind, unit)], items


def test_a_unit_no_asked_fact_takes_is_declined_by_name() -> None:
    items = extract_checklist(f"What is the USDC balance of {A} in wei?")
    assert items[-1]["kind"] is None and "'wei' is not a unit" in items[-1]["unanswerable"]


@pytest.mark.parametrize(
    ("kind", "unit", "value", "shown"),
    [
        ("base_fee_gwei", "wei", "0.597484432", "597484432 wei (0.597484432 gwei)"),
        ("eth_balance", "wei", "10000 ETH", "10000000000000000000000 wei (10000 ETH)"),
        ("eth_balance", "gwei", "1.5 ETH", "1500000000 gwei (1.5 ETH)"),
        ("usdc_balance", "atomic", "2.50 USDC", "2500000 atomic units (2.50 USDC)"),
        ("eth_balance", "ether", "1.5 ETH", "1.5 ETH"),
    ],
)
def test_the_answer_gives_the_value_in_the_asked_unit_first(
    kind: str, unit: str, value: str, shown: str
) -> None:
    from agent.loop.answers import asked_value

    assert asked_value({"kind": kind, "value": value, "params": {"unit": unit}}) == shown


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        # The outside tester's Q12 (round 18) read "transfer volume ...: 100.1", no unit.
        ("volume_usdc", "100.1", "100.1 USDC"),
        ("base_fee_gwei_mean", "0.9634505", "0.9634505 gwei"),
        ("block_time_s_mean", "17.462", "17.462 s"),
        ("gas_used_mean", "638190", "638190"),
        ("unique_senders", "1", "1"),
        ("volume_atomic", "100100000", "100100000"),
        ("volume_usdc", "100.1 USDC", "100.1 USDC"),
        ("issuer", "Circle", "Circle"),
    ],
)
def test_a_sheet_field_is_shown_with_the_unit_its_name_says(
    field: str, value: str, shown: str
) -> None:
    from agent.loop.answers import asked_value

    item = {"kind": "transfer_stats", "value": f"token=0x5F; {field}={value}; to_block=4",
            "params": {"field": field}}
    assert asked_value(item) == shown


def test_a_block_is_named_once_and_a_timestamp_gives_both_clocks() -> None:
    """The outside tester's round 19: "block gas limit at block 4: 30000000 gas at block 4",
    and "When was block 2 mined?" answered in unix seconds only."""
    from agent.loop.answers import item_line

    limit = {"text": "block gas limit at block 4", "kind": "block_gas_limit", "value": "30000000",
             "params": {"block": "4"}, "evidence_id": "e1"}  # fmt: skip
    assert item_line(limit) == "block gas limit at block 4: 30000000 gas (observed, evidence e1)"
    fee = {"text": "Base fee", "kind": "base_fee_gwei", "value": "0.4", "params": {"block": "8"},
           "evidence_id": "e2"}  # fmt: skip
    assert item_line(fee) == "Base fee: 0.4 gwei at block 8 (observed, evidence e2)"
    when = {"text": "block timestamp at block 2", "kind": "block_timestamp", "value": "1796580364",
            "params": {"block": "2"}, "evidence_id": "e3"}  # fmt: skip
    assert item_line(when) == ("block timestamp at block 2: 1796580364 (unix seconds; "
                               "2026-12-06T18:06:04Z) (observed, evidence e3)")


def test_statistics_asked_for_whole_show_every_field_with_its_unit() -> None:
    """The outside tester's Q10 (round 18): "the gas usage statistics" showed four fields
    and "and more fields"; the rest was only in `nib show`."""
    from agent.loop.answers import asked_value

    value = ("latest_block=2; blocks_sampled=3; base_fee_gwei_mean=0.9634505; "
             "base_fee_gwei_min=0.8903515; base_fee_gwei_max=1; gas_used_mean=638190; "
             "tx_count=3; block_time_s_mean=1.5")
    shown = asked_value({"kind": "gas_stats", "value": value, "params": {}})
    assert shown == ("latest_block 2; blocks_sampled 3; base_fee_gwei_mean 0.9634505 gwei; "
                     "base_fee_gwei_min 0.8903515 gwei; base_fee_gwei_max 1 gwei; "
                     "gas_used_mean 638190; tx_count 3; block_time_s_mean 1.5 s"), shown


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        ("Which block is the chain at right now?", "block_number"),
        ("How far along is the chain?", "block_number"),
        ("What is the full name of USDC?", "token_name"),
        (f"What is the token {TOKEN} called?", "token_name"),
        (f"Count the transfers that involve {A}.", "transfer_count"),
    ],
)
def test_the_outside_writers_paraphrases_are_read(task: str, kind: str) -> None:
    assert [i["kind"] for i in extract_checklist(task)] == [kind]


# -- payments ordered on one address's balance (issue 23, third pass) -----------------------

_HOLDER, _TO = "0x" + "4" * 40, "0x" + "5" * 40


@pytest.mark.parametrize(
    ("task", "kind", "op", "than"),
    [
        (f"If {_HOLDER} holds more than 10 USDC, send 0.02 USDC to {_TO}.", "usdc_balance", ">", "10"),
        (f"If {_HOLDER} holds more than 0.15 USDC, send 0.02 USDC to {_TO}.", "usdc_balance", ">", "0.15"),
        (f"Send 0.02 USDC to {_TO} if the USDC balance of {_HOLDER} is above 10 USDC.", "usdc_balance", ">", "10"),
        (f"If {_HOLDER}'s USDC balance exceeds 10 USDC, send 0.02 USDC to {_TO}.", "usdc_balance", ">", "10"),
        (f"When {_HOLDER} holds less than 5 USDC, transfer 0.5 USDC to {_TO}.", "usdc_balance", "<", "5"),
        (f"Provided that {_HOLDER} owns over 2 USDC, pay 0.1 USDC to {_TO}.", "usdc_balance", ">", "2"),
        (f"If {_HOLDER} has at least 1 ETH, send 0.02 USDC to {_TO}.", "eth_balance", ">=", "1"),
        (f"if the ETH balance of {_HOLDER} is below 100 ether, send 0.02 USDC to {_TO}", "eth_balance", "<", "100"),
    ],
)
def test_a_payment_ordered_on_one_address_balance_is_gated_by_that_balance(
    task: str, kind: str, op: str, than: str
) -> None:
    """The balance is an item, the condition compares it with the number (the threshold's
    "more than" is no comparison of two addresses), and the payment waits for it: never
    a condition dropped, so never a payment proposed as if unconditional."""
    items = extract_checklist(task)
    balance = next(n for n, i in enumerate(items, 1) if i["kind"] == kind)
    cond = next(n for n, i in enumerate(items, 1) if i["kind"] == "condition")
    send = next(i for i in items if i["kind"] == "transfer_receipt")
    assert not [i for i in items if i.get("unanswerable")], items
    assert items[balance - 1]["params"] == {"address": _HOLDER}
    assert items[cond - 1]["params"] == {"of": f"c{balance}", "op": op, "than": than}
    assert send["params"]["if"] == f"c{cond}"


def test_a_threshold_on_nothing_the_planner_reads_gates_the_payment_and_is_named() -> None:
    items = extract_checklist(f"If the chain looks busy over 5, send 0.02 USDC to {_TO}.")
    assert items[0]["kind"] is None and "condition" in items[0]["text"]
    assert items[1]["params"]["if"] == "c1"


@pytest.mark.parametrize(
    ("task", "params"),
    [
        ("Buy the cheapest research dataset the local paywall sells and tell me what it contains",
         {"pick": "cheapest", "seller": "paywall"}),
        ("Purchase the least expensive data the paywall offers, and describe it.",
         {"pick": "cheapest", "seller": "paywall"}),
        ("Buy the dataset about gas from the local paywall and tell me what it contains.",
         {"pick": "only", "seller": "paywall", "about": "gas"}),
        ("Buy the one about transfers from the local paywall.",
         {"pick": "only", "seller": "paywall", "about": "transfers"}),
        ("Buy a dataset under 0.10 USDC from the local paywall and show me its contents.",
         {"pick": "any", "seller": "paywall", "under": "100000"}),
        ("Buy the most expensive dataset the local paywall sells for at most 0.3 USDC.",
         {"pick": "priciest", "seller": "paywall", "under": "300000"}),
        ("Buy the cheapest dataset about tokens from http://127.0.0.1:8402 and tell me what it contains.",
         {"pick": "cheapest", "seller": "http://127.0.0.1:8402", "about": "tokens"}),
    ],
)  # fmt: skip
def test_a_request_to_buy_naming_a_seller_but_no_subject_waits_for_its_offers(
    task: str, params: dict[str, str]
) -> None:
    """No kind yet: the loop resolves the pick against the seller's catalog at run start
    (tests/agent/test_offerpick.py); every word of the request is read."""
    items = extract_checklist(task)
    assert [(i["kind"], i.get("params"), i.get("unanswerable")) for i in items] == [
        (None, params, None)], items


def test_a_price_bound_on_a_named_subject_caps_the_purchase() -> None:
    (item,) = extract_checklist("Buy the cheapest sheet about USDC from the local paywall under 0.05 USDC.")
    assert item["kind"] == "token_factsheet" and item["params"]["max_price"] == "50000"


@pytest.mark.parametrize(
    "task",
    [
        "Who issues USDC? Buy the token fact sheet from the local paywall.",
        "Who issues USDC? Buy the token fact sheet at http://127.0.0.1:7003/lookup",
        # "Buy the USDC fact sheet from the market" names its subject in its own words: a
        # request to buy, bought once (test_orders_and_ranges.py, outside run 5's S03).
    ],
)
def test_a_request_naming_its_subject_or_its_resource_is_no_pick_among_offers(task: str) -> None:
    """The subject named elsewhere in the task, or a resource named by its URL path: the
    fact the task asks, bought where it says (tests/agent/test_loop_market.py buys the
    second over POST)."""
    items = extract_checklist(task)
    kinds = [(i["kind"], i.get("params", {}).get("symbol")) for i in items]
    assert ("token_factsheet", "USDC") in kinds and all(k for k, _ in kinds), kinds
    assert not any("pick" in i.get("params", {}) for i in items), items


@pytest.mark.parametrize(
    "task",
    [f"If I hold more than 5 USDC, send 0.01 USDC to {_TO}.",
     f"If my balance is over 5 USDC, send 0.01 USDC to {_TO}.",
     f"if the agent's balance is over 5 USDC, send 0.01 USDC to {_TO}"],
)  # fmt: skip
def test_a_payment_ordered_on_the_agents_own_balance_reads_its_wallet_never_the_recipients(
    task: str,
) -> None:
    items = extract_checklist(task)
    assert items[0]["kind"] == "usdc_balance" and items[0]["params"] == {"wallet": "self"}, items
    assert items[1]["params"] == {"of": "c1", "op": ">", "than": "5"}
    assert items[2]["params"]["if"] == "c2"


def test_a_condition_naming_no_address_borrows_none_from_the_payment() -> None:
    items = extract_checklist(f"If the USDC balance is above 5, send 1 USDC to {_TO}.")
    assert items[0]["unanswerable"] == "the task names no address for the USDC balance"
    assert items[2]["params"]["if"] == "c2" and items[1]["kind"] is None


@pytest.mark.parametrize(
    ("task", "kinds"),
    [
        ("Is the base fee above 1 gwei?", ["base_fee_gwei", "condition"]),
        (f"Does {_HOLDER} hold more than 5 USDC?", ["usdc_balance", "condition"]),
        (f"What is the USDC balance of {_HOLDER} and {_TO}, which holds more?",
         ["usdc_balance", "usdc_balance", "comparison"]),
        (f"What is the USDC balance of {_HOLDER}? Is it above 5 USDC?",
         ["usdc_balance", "condition"]),
        (f"What are the USDC balances of {_HOLDER} and {_TO}? Is it above 5 USDC?",
         ["usdc_balance", "usdc_balance", None]),
        ("What is the base fee? Which is bigger?", ["base_fee_gwei", None]),
    ],
)  # fmt: skip
def test_a_comparison_asked_is_answered_or_named_never_dropped(task: str, kinds: list[str | None]) -> None:
    assert [i["kind"] for i in extract_checklist(task)] == kinds


@pytest.mark.parametrize(
    ("task", "op", "than"),
    [
        (f"Transfer 0.02 USDC to {_TO} provided {_HOLDER} holds at least 5 USDC.", ">=", "5"),
        (f"If {_HOLDER} holds 10 USDC or more, send 0.02 USDC to {_TO}.", ">=", "10"),
        (f"If the USDC balance of {_HOLDER} is greater than or equal to 5, send 0.02 USDC to {_TO}.", ">=", "5"),
        (f"Assuming {_HOLDER} has no more than 3 USDC, send 0.02 USDC to {_TO}.", "<=", "3"),
    ],
)  # fmt: skip
def test_every_way_of_writing_the_condition_gates_the_order(task: str, op: str, than: str) -> None:
    """Before, "provided" opened no condition and the order was read as unconditional;
    "10 USDC or more" was no threshold."""
    items = extract_checklist(task)
    cond = next(n for n, i in enumerate(items, 1) if i["kind"] == "condition")
    assert items[cond - 1]["params"]["op"] == op and items[cond - 1]["params"]["than"] == than
    assert next(i for i in items if i["kind"] == "transfer_receipt")["params"]["if"] == f"c{cond}"


def test_an_order_on_two_conditions_is_named_never_made_on_one_of_them() -> None:
    items = extract_checklist(
        f"If {_HOLDER} holds over 5 USDC and the base fee is under 100 gwei, send 0.02 USDC to {_TO}.")
    (order,) = [i for i in items if "send" in i["text"]]
    assert order["kind"] is None and "several conditions" in order["unanswerable"]


def test_each_order_waits_only_for_its_own_sentences_condition() -> None:
    items = extract_checklist(
        f"If the base fee is under 50 gwei, send 0.1 USDC to {_HOLDER}. Also send 0.2 USDC to {_TO}.")
    sends = [i for i in items if i["kind"] == "transfer_receipt"]
    assert sends[0]["params"]["if"] == "c2" and "if" not in sends[1]["params"]


@pytest.mark.parametrize(
    "task",
    ["Purchase the cheapest data product from the paywall and report its contents.",
     "Buy the cheapest item in the local paywall's catalog.",
     "Please buy the least expensive dataset offered by the local paywall, then tell me what's inside.",
     "Buy the cheapest report the local x402 paywall sells and summarise it"],
)  # fmt: skip
def test_more_ways_to_ask_for_the_cheapest_offer_of_the_paywall(task: str) -> None:
    assert [(i["kind"], i.get("params")) for i in extract_checklist(task)] == [
        (None, {"pick": "cheapest", "seller": "paywall"})]


def test_a_pick_by_a_measure_nib_has_not_is_declined_naming_it() -> None:
    (item,) = extract_checklist("Buy the best dataset the local paywall sells.")
    assert item["kind"] is None and "'best'" in item["unanswerable"]


def test_the_word_after_a_gap_starts_a_word() -> None:
    """An outside question, "How much USDC has 0x.. received altogether?", was answered
    with balances at exit 0: "has … ether" matched "has 0x.. received altogETHER", which
    hid "received" (declined: no fact kind holds a total received)."""
    from agent.models.vocabulary import compile_phrase

    phrase = compile_phrase("has … ether")
    assert not phrase.search("How much USDC has 0x70997970C51812dc3A010C7d01b50e0d17dc79C8 received altogether?")
    assert phrase.search("How much has 0x70997970C51812dc3A010C7d01b50e0d17dc79C8 in ether?")


@pytest.mark.parametrize(
    ("task", "kind"),
    [("Who issues USDC?", "token_issuer"),
     ("Who is the issuer of USDC?", "token_issuer"),
     ("Tell me who is behind USDC.", "token_issuer"),
     (f"Who is the issuer of the token {TOKEN}?", "token_issuer"),
     ("Who is the issuer of the USDC token?", "token_issuer"),
     # A name only a seller has, another token's sheet, or a task asking for the sheet: bought.
     ("Which company is behind USDC?", "token_factsheet"),
     ("Who issues DAI?", "token_factsheet"),
     ("Who is the issuer of USDC? Buy the token fact sheet if you need to.", "token_factsheet"),
     ("Who issues USDC according to the token fact sheet?", "token_factsheet"),
     ("Who issues USDC? Ask a seller in the market.", "token_factsheet")],
)  # fmt: skip
def test_a_question_never_buys_what_a_free_read_answers(task: str, kind: str) -> None:
    """The outside writer's R6, "Who issues USDC?", bought the token fact sheet (0.02 USDC)
    though the task asked to buy nothing and the chain says who controls the run's USDC
    (its contract's owner()). A sheet field a free read answers is read for free unless the
    task asks for something sold; a field only a seller has is still bought."""
    kinds = [i["kind"] for i in extract_checklist(task)]
    assert kind in kinds, kinds
    if kind == "token_issuer":
        assert kinds == ["token_issuer"], kinds  # nothing sold is asked for


@pytest.mark.parametrize(
    ("task", "params"),
    [("Buy the cheapest research dataset on the market and tell me what it contains",
      {"pick": "cheapest", "seller": "market"}),
     ("Purchase the cheapest dataset any seller in the x402 market sells and describe it.",
      {"pick": "cheapest", "seller": "market"}),
     ("Buy the most expensive report on the market under 0.5 USDC.",
      {"pick": "priciest", "seller": "market", "under": "500000"})],
)  # fmt: skip
def test_a_request_to_buy_naming_the_market_but_no_subject_waits_for_its_offers(
    task: str, params: dict[str, str]
) -> None:
    """Declined before ("name the seller"): the market's offers are read through its
    discovery API at run start and the request's pick is made among them
    (agent/loop/offerpick.py ``market_offers``). "x402 market" names no protocol "x402"."""
    (item,) = extract_checklist(task)
    assert item["kind"] is None and not item.get("unanswerable") and item["params"] == params, item


# -- the words in a phrase's gap, and a window's "in" (answered wrongly at exit 0 before) -----


@pytest.mark.parametrize(
    ("task", "word"),
    [
        (f"Who has sent more USDC, {A} or {B}?", "sent"),  # was: which holds more (balance)
        (f"Which of {A} and {B} has lost more USDC?", "lost"),  # was: which holds more
        (f"Has {A} lost any USDC?", "lost"),  # was: the balance
        (f"How much USDC has {A} transferred in the last 20 blocks?", "transferred"),  # received
        (f"How much USDC has {A} transferred in blocks 1 to 5?", "transferred"),  # received
    ],
)  # fmt: skip
def test_a_word_in_a_phrases_gap_or_a_windows_in_is_read_never_swallowed(task: str, word: str) -> None:
    items = extract_checklist(task)
    assert all(i["kind"] is None for i in items), items
    assert any(word in i["unanswerable"] for i in items), items


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        (f"What's the USDC balance held by {A}?", "usdc_balance"),  # the gap restates it
        (f"What amount of USDC does {A} own right now?", "usdc_balance"),
        (f"Tell me how much ether {A} possesses.", "eth_balance"),
        (f"Does {A} still hold any USDC?", "usdc_balance"),
        ("What was the largest amount of USDC transferred in the last 20 blocks?", "transfer_max"),
        (f"How much USDC was transferred in by {A}?", "usdc_received_total"),
        (f"How much USDC has {A} sent in the last 20 blocks?", "usdc_sent_total"),
    ],
)
def test_the_verb_after_its_subject_and_a_restating_gap_are_read(task: str, kind: str) -> None:
    # "Does 0xA still hold any USDC?" is a yes/no question: the balance, and whether it is
    # above 0 (tests/agent/models/test_yes_no_questions.py).
    asked = [kind, "condition"] if task.startswith("Does ") else [kind]
    assert [i["kind"] for i in extract_checklist(task)] == asked


@pytest.mark.parametrize(
    ("task", "tokens"),
    [
        (f"What is the symbol of the token {TOKEN} and the total supply of USDC?", [TOKEN, None]),
        (f"What is the total supply of USDC and the USDC balance of {A}?", [None, None]),
        (f"What is the total supply of the token {TOKEN} and its decimals?", [TOKEN, TOKEN]),
    ],
)
def test_a_part_naming_usdc_asks_the_runs_usdc_never_another_parts_address(
    task: str, tokens: list[str | None]
) -> None:
    """On main the supply of USDC took the token address of the other part (a wrong answer
    at exit 0 when that address is another token)."""
    items = extract_checklist(task)
    assert [i.get("params", {}).get("token") for i in items] == tokens, items
