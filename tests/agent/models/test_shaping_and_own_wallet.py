"""The outside tester's round 21: three answerable questions declined by the offline planner.

Q17, "When was block 10 mined? Give me the UTC time.": a sentence that only says how to
present another part's answer was a part "not answered" (exit 1). Q19, "Does my wallet
hold more USDC than 0xB, and by how much?": "my wallet" was read for a single balance
but not as one of the holders of a comparison ("a comparison needs two or more
addresses"). Q25, "... its base fee in gwei, and my ETH balance in ether": the unit said
right after each value was read as a conflict of two units for each kind."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

A = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
B = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"


def _declined(items: list) -> str:  # type: ignore[type-arg]
    return " | ".join(f"{i['text']}: {i['unanswerable']}" for i in items if i.get("unanswerable"))


def _unit(items: list, kind: str) -> str | None:  # type: ignore[type-arg]
    (item,) = [i for i in items if i.get("kind") == kind]
    return (item.get("params") or {}).get("unit")


@pytest.mark.parametrize(
    ("task", "kind", "unit"),
    [
        ("When was block 10 mined? Give me the UTC time.", "block_timestamp", "utc"),
        ("When was block 10 mined? The UTC time, please.", "block_timestamp", "utc"),
        ("When was block 10 mined? I want the UTC time.", "block_timestamp", "utc"),
        ("When was block 10 mined? Give me the date and time in UTC.", "block_timestamp", "utc"),
        ("When was block 10 mined? Format it as UTC.", "block_timestamp", "utc"),
        ("What is the base fee? In gwei please.", "base_fee_gwei", "gwei"),
        ("What is the base fee? Answer in wei.", "base_fee_gwei", "wei"),
        ("What is the base fee? Wei please.", "base_fee_gwei", "wei"),
        ("What is the base fee? Express it in wei.", "base_fee_gwei", "wei"),
        ("What is the base fee? Give me the value in wei.", "base_fee_gwei", "wei"),
        ("What is the base fee, wei please?", "base_fee_gwei", "wei"),
        ("What is my USDC balance? Show it in USDC.", "usdc_balance", "usdc"),
        ("What is my USDC balance? Show the result in atomic units.", "usdc_balance", "atomic"),
    ],
)  # fmt: skip
def test_a_sentence_that_only_says_how_to_present_shapes_the_answer(
    task: str, kind: str, unit: str
) -> None:
    """Before: "Give me the UTC time: not answered" (exit 1), "Express it" / "the value"
    declined, and "Wei please." dropped while the base fee was given in gwei."""
    items = extract_checklist(task)
    assert not _declined(items), items
    assert _unit(items, kind) == unit, items


@pytest.mark.parametrize(
    ("task", "named"),
    [
        ("Give me the UTC time.", "utc"),  # nothing asked to present: no question it reads
        ("When was block 10 mined? Give me the time.", "time"),  # no unit or format said
        ("When was block 10 mined? In gwei please.", "gwei"),  # no asked value takes it
        ("What is the base fee? Show it in USDC.", "usdc"),
        # Not a presentation: the follow-up asks the ETH balance (test_asset_pairs.py).
        ("What is my USDC balance? What about ETH?", None),
    ],
)
def test_a_presentation_no_asked_value_takes_is_still_named(task: str, named: str | None) -> None:
    items = extract_checklist(task)
    if named is None:
        assert [i["kind"] for i in items] == ["usdc_balance", "eth_balance"], items
        assert "unit" not in (items[0].get("params") or {}), items
    else:
        assert named in _declined(items).lower(), items


@pytest.mark.parametrize(
    ("task", "op", "holders"),
    [
        (f"Does my wallet hold more USDC than {B}, and by how much?", "diff", ["self", B]),
        (f"Does our wallet hold more USDC than {B}?", "max", ["self", B]),
        (f"Which holds more USDC, my wallet or {B}?", "max", ["self", B]),
        (f"Which holds more USDC, mine or {B}?", "max", ["self", B]),
        (f"Does {B} hold more ETH than me?", "max", [B, "self"]),
        (f"Does {B} hold more ETH than I do?", "max", [B, "self"]),
        (f"Who holds more ETH, {B} or the agent's wallet?", "max", [B, "self"]),
        (f"How much more USDC do I hold than {B}?", "diff", ["self", B]),
        (f"What is the difference between my USDC balance and that of {B}?", "diff", ["self", B]),
        (f"What is the combined USDC balance of {B} and my wallet?", "sum", [B, "self"]),
        (f"Add up the ETH balances of {A}, {B} and our wallet.", "sum", [A, B, "self"]),
        (f"Which of {A}, {B} and my wallet holds the most USDC?", "max", [A, B, "self"]),
        (f"How many of {A}, {B} and my wallet hold any USDC?", "count", [A, B, "self"]),
    ],
)  # fmt: skip
def test_the_agents_own_wallet_is_a_holder_of_comparisons_sums_and_differences(
    task: str, op: str, holders: list[str]
) -> None:
    """Before: "a comparison needs two or more addresses" for Q19, and a sum or a count
    over the named addresses alone, "my wallet" dropped."""
    items = extract_checklist(task)
    assert not _declined(items), items
    values = [i for i in items if i.get("kind") in ("usdc_balance", "eth_balance")]
    read = [(i.get("params") or {}).get("address") or (i.get("params") or {}).get("wallet")
            for i in values]  # fmt: skip
    assert read == holders, items
    assert [i["params"]["op"] for i in items if i.get("kind") == "comparison"][-1] == op, items
    last = items[-1]["params"]["of"]
    assert last == ",".join(f"c{n + 1}" for n in range(len(holders))), items


@pytest.mark.parametrize(
    "task",
    [
        f"What are the USDC balances of my wallet and {B}?",
        f"What is the USDC balance of {B}, and mine?",
    ],
)
def test_the_agents_own_wallet_listed_beside_an_address_is_read_too(task: str) -> None:
    """Before: only the address's balance was read, the agent's own dropped at exit 0."""
    items = extract_checklist(task)
    wallets = {(i.get("params") or {}).get("wallet") or (i.get("params") or {}).get("address")
               for i in items if i.get("kind") == "usdc_balance"}  # fmt: skip
    assert wallets == {"self", B} and not _declined(items), items


@pytest.mark.parametrize(
    "task",
    [
        f"Tell me which of {A} and {B} holds more USDC.",
        f"I want to know which of {A} and {B} holds more USDC.",
        f"Check for me which of {A} and {B} holds more USDC.",
    ],
)
def test_words_of_the_asker_that_name_no_holder_add_no_wallet(task: str) -> None:
    items = extract_checklist(task)
    assert all((i.get("params") or {}).get("wallet") != "self" for i in items), items
    assert [i["params"]["op"] for i in items if i.get("kind") == "comparison"] == ["max"], items


@pytest.mark.parametrize(
    ("task", "units"),
    [
        ("Tell me the latest block number, its base fee in gwei, and my ETH balance in ether.",
         {"base_fee_gwei": "gwei", "eth_balance": "ether"}),
        ("Tell me the latest block number, the base fee in gwei, and my ETH balance in ether.",
         {"base_fee_gwei": "gwei", "eth_balance": "ether"}),
        ("What is the base fee in wei, and my ETH balance in gwei?",
         {"base_fee_gwei": "wei", "eth_balance": "gwei"}),
        ("What is my ETH balance in ether and the gas price in wei?",
         {"eth_balance": "ether", "gas_price_gwei": "wei"}),
        (f"What is the ETH balance of {A} in wei, and the base fee in gwei?",
         {"eth_balance": "wei", "base_fee_gwei": "gwei"}),
        # A unit said right after another kind's value is that value's, not this one's.
        ("What is its base fee in gwei, and my ETH balance?",
         {"base_fee_gwei": "gwei", "eth_balance": None}),
        # A shared tail is still every value's ("the base fee and the gas price in wei").
        ("What are the base fee and the gas price in wei?",
         {"base_fee_gwei": "wei", "gas_price_gwei": "wei"}),
    ],
)  # fmt: skip
def test_a_unit_said_right_after_a_facts_phrase_is_that_facts(
    task: str, units: dict[str, str | None]
) -> None:
    """Before (Q25): "'gwei' and 'ether' are both asked for a base fee ... say each unit
    after its value", and "'gwei' is not a unit block number can be given in"."""
    items = extract_checklist(task)
    assert not _declined(items), items
    assert {kind: _unit(items, kind) for kind in units} == units, items
