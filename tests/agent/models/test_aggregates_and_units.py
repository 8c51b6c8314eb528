"""Aggregates over several addresses' values and answers in cents: every aggregate word of
the vocabulary is read as its operation (one test per entry), with too few addresses or a
fact kind it does not take it is named, never dropped; the computed value is exact
(Decimal of the values the tools state) and cites the values it came from."""

from __future__ import annotations

import pytest

from agent.loop.answers import asked_value, in_unit, item_line
from agent.loop.checklist import Checklist, ChecklistItem
from agent.models._factpatterns import extract_checklist
from agent.models.vocabulary import AGGREGATES, COUNT_TESTS, OVER_WORDS, markdown_tables

A = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
B = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
C = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
ENTRIES = [pytest.param(op, word, id=f"{op}:{word}") for op, words in AGGREGATES for word in words]
#: Aggregate words that, said of one address, read as that address's value itself ("the
#: total USDC balance of 0xA" is its balance), as they did before aggregates were read.
_PLAIN_WITH_ONE = frozenset({"total", "in all", "between them"})


def _kinds(items: list) -> list:  # type: ignore[type-arg]
    return [i.get("kind") for i in items]


@pytest.mark.parametrize(("op", "word"), ENTRIES)
def test_every_aggregate_word_is_read_as_its_operation(op: str, word: str) -> None:
    over = f"{A} and {B}" if op == "diff" else f"{A}, {B} and {C}"
    items = extract_checklist(f"Tell me the {word} USDC balance of {over}.")
    n = 2 if op == "diff" else 3
    assert _kinds(items) == ["usdc_balance"] * n + ["comparison"], items
    assert items[-1]["params"]["op"] == op
    assert items[-1]["params"]["of"] == ",".join(f"c{k}" for k in range(1, n + 1))


@pytest.mark.parametrize(("op", "word"), ENTRIES)
def test_an_aggregate_word_said_of_one_address_is_never_a_silent_aggregate(op: str, word: str) -> None:
    items = extract_checklist(f"Tell me the {word} USDC balance of {A}.")
    assert "comparison" not in _kinds(items), items
    if word not in _PLAIN_WITH_ONE:
        assert any(i.get("unanswerable") for i in items), items


@pytest.mark.parametrize(
    ("task", "op", "n"),
    [
        (f"What is the combined USDC balance of {A} and {B}?", "sum", 2),
        (f"How much USDC do {A} and {B} hold together?", "sum", 2),
        (f"What is the USDC balance of {A} and {B} combined?", "sum", 2),
        (f"What are the USDC balances of {A} and {B}, combined?", "sum", 2),
        (f"How much ETH do {A}, {B} and {C} hold in total?", "sum", 3),
        (f"Which of {A}, {B} and {C} holds the most USDC?", "max", 3),
        (f"What is the largest USDC balance among {A}, {B} and {C}?", "max", 3),
        (f"Who has the least USDC: {A}, {B} or {C}?", "min", 3),
        (f"What is the USDC balance of {A}, {B} and {C}, and which is lowest?", "min", 3),
        (f"What are the USDC balances of {A} and {B}? Which is larger?", "max", 2),
        (f"How many of {A}, {B} and {C} hold any USDC?", "count", 3),
        (f"How many of these addresses hold USDC: {A}, {B}, {C}?", "count", 3),
        (f"How many of {A}, {B} and {C} have a nonzero USDC balance?", "count", 3),
        (f"What is the difference between the USDC balances of {A} and {B}?", "diff", 2),
        (f"How much more USDC does {A} hold than {B}?", "diff", 2),
        (f"Who holds more USDC, {A} or {B}?", "max", 2),
    ],
)  # fmt: skip
def test_plain_aggregate_questions_are_one_value_per_address_and_the_aggregate(
    task: str, op: str, n: int
) -> None:
    items = extract_checklist(task)
    assert _kinds(items)[-1] == "comparison" and items[-1]["params"]["op"] == op, items
    assert len(items) == n + 1 and all(i.get("params", {}).get("address") for i in items[:n])


@pytest.mark.parametrize(("cmp", "than", "word"),
                         [pytest.param(c, t, w, id=f"{c}{t}:{w}") for c, t, ws in COUNT_TESTS for w in ws])
def test_every_count_test_word_is_read_as_its_test(cmp: str, than: str, word: str) -> None:
    items = extract_checklist(f"How many of {A}, {B} and {C} hold {word} USDC?")
    assert _kinds(items) == ["usdc_balance"] * 3 + ["comparison"], items
    assert (items[-1]["params"]["cmp"], items[-1]["params"]["than"]) == (cmp, than)


def test_a_count_above_a_threshold_takes_the_threshold_in_the_values_unit() -> None:
    items = extract_checklist(f"How many of {A}, {B} and {C} hold more than 3 USDC?")
    assert items[-1]["params"] == {"of": "c1,c2,c3", "op": "count", "cmp": ">", "than": "3"}
    items = extract_checklist(f"How many of {A}, {B} and {C} hold more than 3 wei?")
    assert "comparison" not in _kinds(items) and items[-1]["kind"] is None, items


@pytest.mark.parametrize(
    ("task", "word"),
    [
        (f"Which holds more USDC in total, {A} or {B}?", "in total"),  # two questions
        (f"What is the total transfer count of {A} and {B}?", "total"),  # counted twice
        ("How many addresses made USDC transfers in the last 20 blocks?", "how many addresses"),
        (f"How many of {A} and {B} made USDC transfers?", "how many of"),
        (f"How many of {A} hold USDC?", "how many of"),
        (f"What is the difference between the USDC balances of {A}, {B} and {C}?", "difference"),
        (f"What is the average USDC balance of {A} and {B}?", "average"),
        (f"What is the combined USDC balance of {A} and {B} yesterday?", "yesterday"),
    ],
)  # fmt: skip
def test_an_aggregate_it_cannot_take_is_declined_naming_the_word(task: str, word: str) -> None:
    items = extract_checklist(task)
    assert "comparison" not in _kinds(items), items
    assert any(word in (i.get("unanswerable") or "") for i in items), items


def test_before_aggregates_a_total_or_a_count_was_dropped_at_exit_0() -> None:
    """On main before this change both answered the separate balances and dropped the
    asked total or count (every part "read", so the run finished)."""
    for task in (f"What is the total USDC balance of {A} and {B}?",
                 f"How many of {A}, {B} and {C} hold any USDC?",
                 "How many addresses made USDC transfers in the last 20 blocks?"):  # fmt: skip
        items = extract_checklist(task)
        assert any(i.get("kind") == "comparison" or i.get("unanswerable") for i in items), items


def _balance(n: int, address: str, value: str, unit: str | None = None) -> ChecklistItem:
    params = {"address": address} | ({"unit": unit} if unit else {})
    return ChecklistItem(id=f"c{n}", text=f"USDC balance of {address}", kind="usdc_balance",
                         covered=True, value=value, evidence_id=f"e{n}", params=params,
                         provenance="observed")  # fmt: skip


def _derive(op: str, *values: str, unit: str | None = None, **params: str) -> ChecklistItem:
    inputs = [_balance(n, a, v, unit) for n, (a, v) in enumerate(zip((A, B, C)[: len(values)], values, strict=True), 1)]
    of = ",".join(i.id for i in inputs)
    agg = ChecklistItem(id="c9", text="the aggregate", kind="comparison",
                        params={"of": of, "op": op, **params})  # fmt: skip
    return Checklist((*inputs, agg)).derive().items[-1]


@pytest.mark.parametrize(
    ("op", "values", "params", "value"),
    [
        ("sum", ("0.000001 USDC", "0.000002 USDC"), {}, "0.000003 USDC"),  # a float gives ...04
        ("sum", ("100.00 USDC", "2.50 USDC", "3.75 USDC"), {}, "106.25 USDC"),
        ("max", ("100.00 USDC", "2.50 USDC", "3.75 USDC"), {}, f"{A} (100.00 USDC)"),
        ("min", ("2.50 USDC", "2.50 USDC", "3.75 USDC"), {},
         f"a tie for the least: {A} and {B}, 2.50 USDC each"),
        ("max", ("1 USDC", "1 USDC", "1 USDC"), {}, "none: all 3 hold 1 USDC"),
        ("count", ("100.00 USDC", "0.00 USDC", "3.75 USDC"), {"cmp": ">", "than": "0"},
         f"2 of 3 ({A}, {C})"),
        ("count", ("100.00 USDC", "0.00 USDC", "3.75 USDC"), {"cmp": ">", "than": "3"},
         f"2 of 3 ({A}, {C})"),
        ("diff", ("2.50 USDC", "3.75 USDC"), {}, f"1.25 USDC: {A} holds less than {B}"),
    ],
)  # fmt: skip
def test_an_aggregate_is_computed_exactly_from_the_values_it_cites(
    op: str, values: tuple[str, ...], params: dict[str, str], value: str
) -> None:
    item = _derive(op, *values, **params)
    assert item.covered and item.provenance == "derived" and item.value == value
    assert all(f"c{n} {v}" in (item.computation or "") for n, v in enumerate(values, 1))


def test_an_aggregate_asked_in_cents_states_its_value_in_cents_first() -> None:
    item = _derive("sum", "100.00 USDC", "2.50 USDC", unit="cents")
    assert item.value == "10250 cents (102.50 USDC)"
    line = item_line(item.as_dict())
    assert line.startswith("the aggregate: 10250 cents (102.50 USDC) (derived: c1 100.00 USDC")


@pytest.mark.parametrize(
    "task",
    [
        f"What is the USDC balance of {A} in cents?",
        f"What is the USDC balance of {A} in USD cents?",
        f"How much USDC does {A} hold, in cents?",
        f"Give me the USDC balance of {A}, expressed in cents.",
        f"How many USDC does {A} hold? Answer in cents.",
    ],
)
def test_usdc_asked_in_cents_is_a_derived_line_converted_from_the_stated_value(task: str) -> None:
    items = extract_checklist(task)
    assert _kinds(items) == ["usdc_balance", "comparison"], items
    assert items[1]["params"] == {"of": "c1", "op": "unit", "unit": "cents"}
    done = Checklist((_balance(1, A, "2.50 USDC", "cents"),
                      ChecklistItem(id="c2", text=items[1]["text"], kind="comparison",
                                    params=items[1]["params"]))).derive().items[1]  # fmt: skip
    assert done.value == "250 cents (2.50 USDC)" and done.computation == "c1 2.50 USDC = 250 cents"


@pytest.mark.parametrize(
    ("kind", "unit", "value", "shown"),
    [
        ("usdc_balance", "cents", "2.50 USDC", "250 cents"),
        ("usdc_balance", "cents", "0.000001 USDC", "0.0001 cents"),  # 1 atomic unit
        ("token_supply", "cents", "107.00 USDC", "10700 cents"),
        ("usdc_received_total", "cents", "2.50 USDC (2500000 atomic) received by 0x..", "250 cents"),
        ("transfer_max", "atomic", "100.00 USDC from 0x.. to 0x.. in block 2", "100000000 atomic units"),
        ("transfer_max", "cents", "none: no USDC transfers in blocks 5..9", None),
        ("base_fee_gwei", "ether", "0.597484432", "0.000000000597484432 ether"),
        ("gas_price_gwei", "wei", "1.5", "1500000000 wei"),
        ("eth_balance", "cents", "1 ETH", None),
    ],
)  # fmt: skip
def test_a_value_in_another_unit_is_exact(kind: str, unit: str, value: str, shown: str | None) -> None:
    assert in_unit(kind, unit, value) == shown


def test_a_largest_transfer_asked_in_atomic_units_is_no_longer_given_in_usdc_only() -> None:
    """Before, the item carried the unit and the line gave the USDC value alone."""
    items = extract_checklist("What was the largest USDC transfer in the last 20 blocks in atomic units?")
    assert _kinds(items) == ["transfer_max", "comparison"], items
    plain = {"kind": "transfer_max", "value": "0.35 USDC from 0xa to 0xb", "params": {"unit": "atomic"}}
    assert asked_value(plain) == "0.35 USDC from 0xa to 0xb"  # the derived line converts


def test_a_fee_in_ether_is_read_and_a_unit_no_fact_takes_is_still_declined() -> None:
    assert _kinds(extract_checklist("What is the base fee in ether?")) == ["base_fee_gwei", "comparison"]
    items = extract_checklist("What is the block number in cents?")
    assert items[-1]["kind"] is None and "'cents' is not a unit" in items[-1]["unanswerable"]


def test_the_docs_table_lists_every_aggregate_word() -> None:
    table = markdown_tables()
    words = [w for _op, ws in AGGREGATES for w in ws] + list(OVER_WORDS)
    words += [w for _cmp, _than, ws in COUNT_TESTS for w in ws]
    assert all(f"`{w}`" in table for w in words)


def test_how_many_of_the_transfers_is_the_transfer_count_not_a_count_of_holders() -> None:
    items = extract_checklist(f"How many of the USDC transfers in the last 20 blocks involved {A}?")
    assert items == [{"text": f"USDC transfer count of {A} in the last 20 blocks",
                      "kind": "transfer_count", "params": {"blocks": "20", "address": A}}]  # fmt: skip
