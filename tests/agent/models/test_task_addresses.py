"""An address the task writes with a broken EIP-55 checksum (the outside tester's Q17,
round 18): the offline planner declines what needs it, in the address rule's words, and
every aggregate over it says which value it lacks. Before, it proposed the read three
times, the tool refused each, and the run stopped on skips with a message meant for a
model ("fix them and propose again")."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

GOOD = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
OTHER = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"
#: Anvil's account 3 with two digits of its checksum case flipped: no valid EIP-55 form.
TYPO = "0x90F79bf6EB2c4f870B0dfd2C29d1ec5f5c4aC7e5"


@pytest.mark.parametrize(
    ("task", "aggregate"),
    [(f"What is the ETH balance of {TYPO}?", None),
     (f"How much USDC does {TYPO} hold?", None),
     (f"How much USDC did {GOOD} receive from {TYPO}?", None),
     (f"How much USDC has {TYPO} sent in total?", None),
     (f"What do the ETH balances of {GOOD}, {TYPO} and {OTHER} add up to?", "combined"),
     (f"Which holds more USDC, {GOOD} or {TYPO}?", "which holds more"),
     (f"What is the difference between the ETH balances of {GOOD} and {TYPO}?", "difference")],
)  # fmt: skip
def test_a_mistyped_checksum_is_declined_with_the_address_rules_words(
    task: str, aggregate: str | None
) -> None:
    rows = extract_checklist(task, network="anvil")
    typo = [r for r in rows if TYPO in r["text"] and "unanswerable" in r]
    assert typo and all(r.get("kind") is None for r in typo), rows
    assert "not a valid EIP-55 checksum" in typo[0]["unanswerable"], typo
    assert "fix: copy the address again" in typo[0]["unanswerable"], typo
    # Nothing is asked of the chain with the mistyped address.
    assert not [r for r in rows if TYPO in str(r.get("params", {}))], rows
    if aggregate is not None:
        (agg,) = [r for r in rows if r["text"].startswith(aggregate)]
        assert agg.get("kind") is None and TYPO in agg["unanswerable"], agg
        assert "cannot be read" in agg["unanswerable"], agg
    # The well-written addresses are still read.
    for address in (GOOD, OTHER):
        if address in task and aggregate is not None:
            assert [r for r in rows if r.get("params", {}).get("address") == address], rows


def test_an_address_in_lower_case_carries_no_checksum_and_is_read() -> None:
    (row,) = extract_checklist(f"What is the ETH balance of {TYPO.lower()}?", network="anvil")
    assert row.get("kind") == "eth_balance" and row["params"] == {"address": TYPO.lower()}, row
