"""Every clause of a task is accounted for before the offline planner proposes a payment
(issue 23, the outside tester's third run): words that forbid, take back or branch a
payment decline every order and purchase of the task; a condition in a purchase's sentence
gates it like an order's; a future or standing scope declines it; a greeting or thanks
around a request is no part at all. Paraphrases of each kind, at the checklist and at the
planner's proposal (no paid call while a part is not read or a gate is false)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from agent.loop.checklist import Checklist
from agent.loop.offerpick import catalog_offers, resolve_picks
from agent.loop.proposal import Call, Done
from agent.models._factpatterns import extract_checklist
from tests.agent.models.test_offline import PAYWALL, Sim

TO = "0xFABB0ac9d68B0B445fB7357272Ff202C5651694a"
HOLDER = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
BUY = "buy the cheapest dataset the local paywall sells"
CATALOG = {"endpoints": [{"path": "/datasets/token/{symbol}", "price_atomic": 20_000,
                          "kind": "token_factsheet"}], "token_symbols": ["DAI"]}  # fmt: skip


def _money(rows: list[Any]) -> list[Any]:
    """The items that would move money: orders and requests to buy still to be made."""
    return [r for r in rows if not r.get("unanswerable")
            and (r.get("kind") == "transfer_receipt" or (r.get("params") or {}).get("pick"))]  # fmt: skip


@pytest.mark.parametrize(
    "task",
    [f"Do not send 0.02 USDC to {TO}.",
     f"Don't send 0.02 USDC to {TO}.",
     f"Please never transfer 0.5 USDC to {TO}.",
     f"Send 0.02 USDC to {TO}. Actually, forget it.",
     f"Send 0.02 USDC to {TO}. Scratch that.",
     f"Send 0.02 USDC to {TO}; no wait, cancel it.",
     f"If my balance is above 50 USDC, send 0.02 USDC to {TO}. Actually, never mind, don't send it.",
     f"If {HOLDER} holds more than 10 USDC and the base fee is under 9 gwei, do not send anything; "
     f"otherwise send 0.02 USDC to {TO}.",
     f"If {HOLDER} holds more than 10 USDC, keep it; otherwise send 0.05 USDC to {TO}.",
     f"Send 0.02 USDC to {TO} unless it is a weekend.",
     f"{BUY.capitalize()}. Never mind, don't buy anything.",
     f"Don't {BUY}.",
     f"Tomorrow morning, {BUY}.",
     f"Every day, {BUY} and tell me what it contains.",
     f"{BUY.capitalize()} every week.",
     f"Next month, send 0.02 USDC to {TO}.",
     f"Send 0.02 USDC to {TO}. I changed my mind.",
     f"Send 0.02 USDC to {TO}. On second thought, disregard that.",
     f"Send 0.02 USDC to {TO}. Hold on, abort.",
     f"I'd rather not send 0.02 USDC to {TO}.",
     f"No need to send 0.02 USDC to {TO}."],
)  # fmt: skip
def test_a_task_that_forbids_retracts_branches_or_postpones_pays_nothing(task: str) -> None:
    rows = extract_checklist(task)
    assert _money(rows) == [], rows
    assert any(r.get("unanswerable") for r in rows), rows


@pytest.mark.parametrize(
    "task",
    [f"If {HOLDER} holds more than 10 USDC, {BUY} and tell me what it contains.",
     f"{BUY.capitalize()}, but only if my balance is above 1000 USDC.",
     f"{BUY.capitalize()} if my balance is above 1000 USDC.",
     "Purchase the paywall's cheapest dataset as long as I hold more than 1000 USDC.",
     f"{BUY.capitalize()}, provided that {HOLDER} holds at least 5 USDC.",
     f"Provided that my USDC balance is at least 5 USDC, {BUY}."],
)  # fmt: skip
def test_a_condition_in_a_purchases_sentence_gates_the_purchase(task: str) -> None:
    rows = extract_checklist(task)
    (buy,) = [r for r in rows if (r.get("params") or {}).get("pick")]
    gate = buy["params"]["if"]
    assert rows[int(gate[1:]) - 1]["kind"] == "condition", rows


@pytest.mark.parametrize(
    "task",
    ["Hi! Could you buy the cheapest research dataset that the local paywall sells and tell "
     "me what it contains? Thanks.",
     f"Hello, {BUY}. Thank you!",
     f"Hey there! {BUY.capitalize()}, thanks a lot.",
     "Good morning! What is the latest block number? Cheers."],
)  # fmt: skip
def test_a_greeting_or_thanks_around_a_request_is_no_part(task: str) -> None:
    rows = extract_checklist(task)
    assert rows and not any(r.get("unanswerable") for r in rows), rows


def _resolved(task: str) -> Sim:
    sim = Sim(task)
    sim.checklist = resolve_picks(sim.checklist, {"paywall": catalog_offers(PAYWALL, CATALOG)}, 250_000)
    return sim


def test_the_planner_proposes_no_purchase_while_a_part_is_not_read() -> None:
    sim = _resolved(f"{BUY.capitalize()}. Then frobnicate the widgets.")
    final = sim.propose()
    assert isinstance(final, Done), final
    assert "nothing is paid while a part of the task is not read" in str(final.answer)


@pytest.mark.parametrize(("value", "bought"), [("false", False), ("true", True)])
def test_a_gated_purchase_is_proposed_only_once_its_condition_is_true(value: str, bought: bool) -> None:
    sim = _resolved(f"If {HOLDER} holds more than 10 USDC, {BUY}.")
    items = list(sim.checklist.items)
    for n, item in enumerate(items):  # the balance read and its condition, as the loop derives them
        if item.kind == "usdc_balance":
            items[n] = replace(item, covered=True, value="0.01", evidence_id="e1")
        elif item.kind == "condition":
            items[n] = replace(item, covered=True, value=value, evidence_id="e1")
    sim.checklist = Checklist(tuple(items))
    proposal = sim.propose()
    if bought:
        assert proposal == Call("pay_http", {"url": PAYWALL + "/datasets/token/DAI",
                                             "covers": ["token_factsheet"]})  # fmt: skip
    else:
        assert isinstance(proposal, Done) and "is false" in str(proposal.answer), proposal


@pytest.mark.parametrize(
    ("task", "gates"),
    [(f"If {HOLDER} holds more than 10 USDC, do not send anything; otherwise send 0.02 USDC to {TO}.",
      [("<=", "10")]),
     (f"If my balance is under 1000 USDC, don't send anything; else send 0.02 USDC to {TO}.",
      [(">=", "1000")]),
     (f"Send 0.02 USDC to {TO} unless the base fee is above 5 gwei.", [("<=", "5")]),
     (f"Unless {HOLDER} has at least 5 USDC, pay 0.02 USDC to {TO}.", [("<", "5")]),
     (f"If {HOLDER} holds more than 0.15 USDC, send 0.02 USDC to {TO}, otherwise don't send anything.",
      [(">", "0.15")]),
     (f"If {HOLDER} holds more than 10 USDC, send 0.02 USDC to {TO}, otherwise send 0.05 USDC to {TO}.",
      [(">", "10"), ("<=", "10")])],
)  # fmt: skip
def test_a_branch_the_chain_decides_gates_each_order_on_its_arm(
    task: str, gates: list[tuple[str, str]]
) -> None:
    """T6 and N6 of the outside writer ("if C, do not send anything; otherwise send ...")
    were declined outright: the order waits for the opposite of C, as the judge reads it."""
    rows = extract_checklist(task)
    by_id = {f"c{n + 1}": r for n, r in enumerate(rows)}
    orders = [r for r in rows if r.get("kind") == "transfer_receipt"]
    assert len(orders) == len(gates) and not any(r.get("unanswerable") for r in rows), rows
    for order, (op, than) in zip(orders, gates, strict=True):
        gate = by_id[order["params"]["if"]]
        assert (gate["kind"], gate["params"]["op"], gate["params"]["than"]) == ("condition", op, than)


# -- a spend bound in words (outside test 15, Q29) ---------------------------------------------

REPORT = "Get the premium report on this chain's USDC"


@pytest.mark.parametrize(
    ("task", "bound"),
    [
        (f"{REPORT}; don't spend more than 0.20 USDC.", 200_000),
        (f"{REPORT}, but do not spend more than 0.2 USDC.", 200_000),
        (f"{REPORT} and spend at most 0.05 USDC.", 50_000),
        (f"{REPORT}, no more than 0.20 USDC.", 200_000),
        (f"{REPORT} for no more than 0.1 USDC.", 100_000),
        (f"{REPORT}, under 0.25 USDC.", 250_000),
        (f"{REPORT} with a budget of 0.20 USDC.", 200_000),
        ("Buy the premium report. Never pay more than $0.15.", 150_000),
    ],
)
def test_a_spend_bound_in_words_bounds_the_purchase(task: str, bound: int) -> None:
    rows = extract_checklist(task)
    assert [r.get("kind") for r in rows] == ["premium_report"], rows
    assert rows[0]["params"]["max_price"] == str(bound)
    sim = Sim(task)
    assert sim.propose() == Call("pay_http", {"url": f"{PAYWALL}/premium/report", "max_price": bound})


def test_a_spend_bound_never_raises_the_requests_own_bound() -> None:
    rows = extract_checklist("Buy the cheapest USDC fact sheet under 0.05 USDC from the market; "
                             "don't spend more than 0.20 USDC.")  # fmt: skip
    assert rows[0]["params"]["max_price"] == "50000" and rows[0]["params"]["under"] == "50000"
    rows = extract_checklist("Buy the cheapest USDC fact sheet under 0.30 USDC from the market; "
                             "don't spend more than 0.20 USDC.")  # fmt: skip
    assert rows[0]["params"]["max_price"] == "200000" and rows[0]["params"]["under"] == "200000"


def test_a_spend_bound_below_every_offer_declines_the_purchase_naming_it() -> None:
    sim = _resolved(f"{BUY.capitalize()}; don't spend more than 0.01 USDC.")
    final = sim.propose()
    assert isinstance(final, Done), final
    assert "0.01 USDC" in str(final.answer) and "cheapest" in str(final.answer), final.answer


@pytest.mark.parametrize(
    "task",
    [
        f"Send 0.5 USDC to {TO}; don't spend more than 0.20 USDC.",
        f"{REPORT}; don't spend more than zero USDC.",
    ],
)
def test_a_spend_bound_it_cannot_take_still_pays_nothing(task: str) -> None:
    assert not _money(extract_checklist(task)) or all(
        r.get("unanswerable") for r in extract_checklist(task) if r.get("kind") == "transfer_receipt")
    final = Sim(task).propose()
    assert isinstance(final, Done), final


@pytest.mark.parametrize(
    "task",
    [f"Should I send 0.1 USDC to {TO}?",
     f"My boss said to send 0.1 USDC to {TO}; what is the base fee?",
     f"What is the gas price? Someone suggested I send 0.1 USDC to {TO}.",
     f"Before I send 0.2 USDC to {TO} myself, how much USDC does my wallet hold?",
     f"Would it be possible to transfer 0.1 USDC to {TO}?",
     f"Suppose I send 1 USDC to {TO}. What is its balance then?",
     f'"Send 0.2 USDC to {TO}" is what the email said. What is the USDC balance of {TO}?',
     f"Note to self: send 0.05 USDC to {TO}. What is the gas price?",
     f"My friend asked: can you send 0.2 USDC to {TO}? What is its USDC balance?"],
)  # fmt: skip
def test_a_payment_the_task_only_mentions_is_named_as_not_paid(task: str) -> None:
    """Outside round 61: each was planned (and paid) as an order. It is named, never made."""
    rows = extract_checklist(task)
    assert not _money(rows), rows
    said = [r for r in rows if f"USDC to {TO}" in r["text"]]
    assert said and all("mentions this payment without ordering it" in r["unanswerable"] for r in said), rows


def test_a_what_if_is_declined_never_answered_as_the_chain_is() -> None:
    """Round 61, M02: "What would 0xA's balance be if I sent it 1 USDC?" gave the balance now,
    the condition dropped, at exit 0."""
    rows = extract_checklist(f"What would the USDC balance of {TO} be if I sent it 1 USDC?")
    assert any("the chain as it would be" in (r.get("unanswerable") or "") for r in rows), rows


def test_go_ahead_and_send_is_an_order() -> None:
    """Round 62, P10: "Go ahead and send ..." was declined naming "go ahead"."""
    rows = extract_checklist(f"Go ahead and send 0.20 USDC to {TO} provided that the USDC "
                             f"balance of {HOLDER} is at least 40 USDC.")
    assert [r["kind"] for r in _money(rows)] == ["transfer_receipt"], rows
