"""Two assets asked of one holder in one phrase are two balances, and a token fact of a
list naming USDC is USDC's. The outside round 20 follow-up: "How much USDC and ETH does
0xA hold?" read 'ETH' as a unit and answered only the USDC balance at exit 0; "the USDC and
ETH balances of 0xA" only the ETH one; "What are the total supply and the name of USDC?"
after a sentence naming a wallet read the supply of that wallet's address."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

W = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def _kinds(task: str) -> list[tuple[str | None, str | None]]:
    return [(i.get("kind"), (i.get("params") or {}).get("address") or
             (i.get("params") or {}).get("token")) for i in extract_checklist(task)
            if not i.get("unanswerable")]  # fmt: skip


@pytest.mark.parametrize(
    ("task", "kinds"),
    [
        (f"How much USDC and ETH does {W} hold?", {"usdc_balance", "eth_balance"}),
        (f"What are the USDC and ETH balances of {W}?", {"usdc_balance", "eth_balance"}),
        (f"Show the ETH & USDC holdings of {W}.", {"usdc_balance", "eth_balance"}),
        (f"What is the amount of ETH and USDC in {W}?", {"usdc_balance", "eth_balance"}),
        (f"How much ether and USDC does {W} have?", {"usdc_balance", "eth_balance"}),
    ],
)
def test_two_assets_of_one_holder_are_two_balances(task: str, kinds: set[str]) -> None:
    got = _kinds(task)
    assert {k for k, _ in got} == kinds and all(a == W for _, a in got), got
    assert len(extract_checklist(task)) == 2, extract_checklist(task)


def test_a_token_fact_of_a_sentence_naming_usdc_is_usdcs() -> None:
    task = f"How much USDC does {W} hold? What are the total supply and the name of USDC?"
    assert _kinds(task) == [("usdc_balance", W), ("token_supply", None), ("token_name", None)]
    # A token the task names by address is still the one asked of ("its symbol").
    assert _kinds(f"The token is at {W}. What is its symbol?") == [("token_symbol", W)]


B = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
C = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"


@pytest.mark.parametrize(
    "task",
    [
        f"How much USDC and how much ETH do {W} and {B} hold?",
        f"How many USDC and ETH do {W} and {B} hold?",
        f"How much ETH, and how much USDC, do {W} and {B} have?",
    ],
)
def test_a_part_naming_no_address_borrows_the_whole_list(task: str) -> None:
    # Before: the first part borrowed 0xA alone, and 0xB's USDC was never asked (exit 0).
    got = sorted(_kinds(task))
    assert got == sorted([("usdc_balance", W), ("usdc_balance", B), ("eth_balance", W),
                          ("eth_balance", B)]), got  # fmt: skip


def test_a_borrowed_address_outside_a_list_is_borrowed_alone() -> None:
    task = f"Send 1 USDC to {W}. How much USDC does {B} hold, and how much ETH?"
    assert _kinds(task)[1:] == [("usdc_balance", B), ("eth_balance", B)]


def _held(task: str) -> list[tuple[str, str]]:
    return [(i["kind"], (i.get("params") or {}).get("address", "self"))
            for i in extract_checklist(task) if i.get("kind")]  # fmt: skip


@pytest.mark.parametrize(
    ("task", "want"),
    [
        (f"What is the USDC balance of {C}? What about ETH?",
         [("usdc_balance", C), ("eth_balance", C)]),
        (f"How much ETH does {C} hold? And what about USDC?",
         [("eth_balance", C), ("usdc_balance", C)]),
        ("What is my USDC balance? How about ether?",
         [("usdc_balance", "self"), ("eth_balance", "self")]),
        ("What is my USDC balance? And ETH?", [("usdc_balance", "self"), ("eth_balance", "self")]),
        (f"How much USDC do {W} and {C} hold? And their ether?",
         [("usdc_balance", W), ("usdc_balance", C), ("eth_balance", W), ("eth_balance", C)]),
        (f"What is the USDC balance of {W} and {C}? How about their ETH balances?",
         [("usdc_balance", W), ("usdc_balance", C), ("eth_balance", W), ("eth_balance", C)]),
        # Outside round 21 (q19): the DAI part is declined, the ETH follow-up is the wallet's.
        ("What's my DAI balance, and what about ETH?", [("eth_balance", "self")]),
    ],
)  # fmt: skip
def test_a_follow_up_naming_only_an_asset_asks_it_of_the_same_holders(
    task: str, want: list[tuple[str, str]]
) -> None:
    # Outside rounds 21 and 22 (RE3, q19): "What about ETH?" was declined, not answered.
    assert _held(task) == want, extract_checklist(task)


def test_a_follow_up_takes_the_combined_value_of_the_question_before_it() -> None:
    items = extract_checklist(f"What is the combined USDC balance of {W} and {C}? What about "
                              "ETH?", max_items=6)  # fmt: skip
    assert [(i["kind"], (i.get("params") or {}).get("op")) for i in items] == [
        ("usdc_balance", None), ("usdc_balance", None), ("comparison", "sum"),
        ("eth_balance", None), ("eth_balance", None), ("comparison", "sum")], items  # fmt: skip
    assert items[5]["params"]["of"] == "c4,c5", items


@pytest.mark.parametrize(
    ("task", "why"),
    [
        ("What is the base fee? What about ETH?", "no question before it asked a balance"),
        ("What about ETH?", "no question before it asked a balance"),
        (f"What is the USDC balance of {C}? What about USDC?", "asked the USDC balance"),
        ("What's my DAI balance? What about USDC?", "asked the DAI balance"),
        (f"What is the total USDC sent by {C}? What about ETH?",
         "no question before it asked a balance"),
        (f"What is the average USDC balance of {C}? What about ETH?", "was not read in full"),
    ],
)  # fmt: skip
def test_a_follow_up_it_cannot_read_is_named_never_dropped(task: str, why: str) -> None:
    items = extract_checklist(task)
    assert items[-1]["kind"] is None and why in str(items[-1]["unanswerable"]), items
    assert "ask it in full" in str(items[-1]["unanswerable"]), items


OTHER = "0x1b06A865289756e73349De1149deD50DE0DC2316"


@pytest.mark.parametrize(
    "task",
    [
        f"What is the USDC balance of my wallet and of {OTHER}, and the ETH balance of each?",
        f"What are the USDC and ETH balances of my wallet and {OTHER}?",
    ],
)
def test_my_wallet_in_a_borrowed_list_is_a_holder(task: str) -> None:
    # Outside round 21 (W2): one of the agent's wallet's balances was dropped at exit 0.
    got = sorted((i["kind"], (i.get("params") or {}).get("address", "self"))
                 for i in extract_checklist(task))  # fmt: skip
    assert got == sorted([("usdc_balance", "self"), ("usdc_balance", OTHER),
                          ("eth_balance", "self"), ("eth_balance", OTHER)]), got  # fmt: skip


@pytest.mark.parametrize("task", ["How much ETH and USDC does my wallet hold?",
                                  "How much ETH and how much USDC do I hold?"])  # fmt: skip
def test_two_assets_of_my_wallet_are_two_balances_of_it(task: str) -> None:
    items = extract_checklist(task)
    assert [(i["kind"], i["params"]) for i in items] == [
        ("eth_balance", {"wallet": "self"}), ("usdc_balance", {"wallet": "self"})], items


@pytest.mark.parametrize(
    ("task", "symbol"),
    [
        ("What's my DAI balance?", "DAI"),
        (f"What is the DAI balance of {OTHER}?", "DAI"),
        ("What's my USDT balance in cents?", "USDT"),
        ("What is the WETH balance of my wallet?", "WETH"),
    ],
)
def test_a_balance_of_another_token_is_declined_never_the_usdc_one(task: str, symbol: str) -> None:
    # Outside round 21 (W1): "What's my DAI balance?" answered the USDC balance at exit 0.
    items = extract_checklist(task)
    assert not any(i.get("kind") == "usdc_balance" for i in items), items
    assert any(symbol in str(i.get("unanswerable")) for i in items), items


def test_a_part_it_cannot_read_of_my_wallet_names_the_wallet() -> None:
    # Outside round 22: "How much WETH does my wallet have?" was declined "asks of ;".
    [item] = extract_checklist("How much WETH does my wallet have?")
    assert "asks of the agent's wallet;" in str(item["unanswerable"]), item


@pytest.mark.parametrize(
    ("task", "kind", "holders"),
    [
        (f"What is the combined ETH of my wallet and {B} in ether?", "eth_balance", ["self", B]),
        (f"What's the total USDC of {W} and {B}?", "usdc_balance", [W, B]),
        (f"What is the combined USDC in {W} and {C}?", "usdc_balance", [W, C]),
    ],
)
def test_an_asset_of_its_holders_with_no_balance_word_is_their_balance(
    task: str, kind: str, holders: list[str]
) -> None:
    # Outside round 22: "the combined ETH of my wallet and 0xB" was declined ("balance" worked).
    items = extract_checklist(task)
    assert [(i["kind"], (i.get("params") or {}).get("address", "self")) for i in items[:-1]] == [
        (kind, h) for h in holders], items  # fmt: skip
    assert items[-1]["kind"] == "comparison" and items[-1]["params"]["op"] == "sum", items


def test_a_token_fact_of_the_usdc_at_an_address_is_no_balance() -> None:
    token = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
    for task in (f"What is the name of the USDC of {token}?",
                 f"What is the total supply of the USDC in {token}?"):  # fmt: skip
        assert "usdc_balance" not in [i["kind"] for i in extract_checklist(task)], task


def test_an_aggregate_of_them_is_over_the_holders_named_before() -> None:
    # Outside round 24 (P1): "What is their combined USDC balance?" was declined on 'their'.
    for task, op in ((f"How much ETH do {W} and {B} hold? What is their combined USDC balance?",
                      "sum"),
                     (f"How much ETH do {W} and {B} hold? Which of them has more USDC?", "max")):
        items = extract_checklist(task)
        assert items[-1]["kind"] == "comparison" and items[-1]["params"] == {
            "of": "c3,c4", "op": op}, items
        assert [(i["kind"], i["params"]["address"]) for i in items[2:4]] == [
            ("usdc_balance", W), ("usdc_balance", B)], items  # fmt: skip


@pytest.mark.parametrize(
    ("task", "want"),
    [
        (f"How much ETH do {W} and {B} hold? Do they hold any USDC?",
         [("eth_balance", W), ("eth_balance", B), ("usdc_balance", W), ("usdc_balance", B)]),
        (f"What is the USDC balance of {W} and {B}? And what is their ETH balance?",
         [("usdc_balance", W), ("usdc_balance", B), ("eth_balance", W), ("eth_balance", B)]),
        (f"How much ETH do my wallet and {B} hold? How much USDC do they have?",
         [("eth_balance", "self"), ("eth_balance", B), ("usdc_balance", "self"),
          ("usdc_balance", B)]),
        # "their USDC" with no balance word is their balance (it was declined on 'their').
        (f"What are the USDC balances of {W} and {B}? What is their ETH?",
         [("usdc_balance", W), ("usdc_balance", B), ("eth_balance", W), ("eth_balance", B)]),
        (f"How much ETH do {W} and {B} hold? What's their USDC?",
         [("eth_balance", W), ("eth_balance", B), ("usdc_balance", W), ("usdc_balance", B)]),
    ],
)  # fmt: skip
def test_they_after_a_question_naming_holders_are_those_holders(
    task: str, want: list[tuple[str, str]]
) -> None:
    assert _held(task) == want, extract_checklist(task)


@pytest.mark.parametrize("task", ["Do they hold any USDC?", "What is their USDC?",
                                  "What is the base fee? How much USDC do they have?"])  # fmt: skip
def test_they_with_no_holders_named_before_is_declined(task: str) -> None:
    items = extract_checklist(task)
    why = str(items[-1]["unanswerable"])
    assert items[-1]["kind"] is None and ("'they'" in why or "'their'" in why), items


def test_and_an_asset_after_a_question_of_no_balance_presents_its_value() -> None:
    # "What is the base fee? And ETH?": the fee in ETH, as before (no balance asked).
    items = extract_checklist("What is the base fee? And ETH?")
    assert [i["kind"] for i in items] == ["base_fee_gwei", "comparison"], items



@pytest.mark.parametrize(
    ("task", "kind", "holders"),
    [
        (f"How much ETH do {B} and {C} hold? What is their combined USDC?", "usdc_balance", [B, C]),
        (f"How much ETH do {B} and {C} hold? What is their total USDC?", "usdc_balance", [B, C]),
        (f"How much USDC do {B} and {C} hold? What is their combined ETH?", "eth_balance", [B, C]),
        (f"What is the ETH balance of my wallet and {C}? What is their combined USDC?",
         "usdc_balance", ["self", C]),
    ],
)  # fmt: skip
def test_an_aggregate_asked_back_of_another_asset_is_over_that_assets_balances(
    task: str, kind: str, holders: list[str]
) -> None:
    # Outside round 24 (N13, P2, P3, P12, Q5): the sum of the asset asked before, at exit 0.
    items = extract_checklist(task)
    total = items[-1]
    assert total["kind"] == "comparison" and total["params"]["op"] == "sum", items
    refs = [int(r[1:]) - 1 for r in total["params"]["of"].split(",")]
    assert [(items[n]["kind"], (items[n].get("params") or {}).get("address", "self"))
            for n in refs] == [(kind, h) for h in holders], items  # fmt: skip


def test_an_aggregate_of_another_asset_that_does_not_fit_is_declined_not_swapped() -> None:
    items = extract_checklist(f"What is the combined ETH of {B} and {C}? And their combined USDC?")
    sums = [i for i in items if i["kind"] == "comparison"]
    assert [s["text"] for s in sums] == ["combined ETH balance"], items
    assert "combined USDC balance" in str(items[-1]["text"]) and items[-1]["kind"] is None, items
