"""Two misreadings the outside tester's third run found (issue 23): "how much USDC has 0x..
sent (to 0x..) in total?" was answered with balances at exit 0, and questions naming the
run's own chain ("on the local chain", "on the local devnet", "here") were declined. A
total sent or received is no balance: declined by name. The run's own chain named in
words is no scope to decline; a local chain named on a run that is not local still is."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
SELLER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"


@pytest.mark.parametrize(
    "task",
    [f"How much USDC has {WALLET} sent in total?",
     f"How much USDC has {WALLET} sent to {SELLER} in total?",
     f"How much USDC has {SELLER} received?",
     f"What is the total amount of USDC {WALLET} has spent?",
     f"How much USDC did {WALLET} send to {SELLER}?",
     f"Total USDC sent by {WALLET}?"],
)  # fmt: skip
def test_a_total_sent_or_received_is_no_balance_and_is_declined(task: str) -> None:
    rows = extract_checklist(task, network="anvil")
    assert not any(r.get("kind") == "usdc_balance" for r in rows), rows
    assert any(r.get("unanswerable") for r in rows), rows


@pytest.mark.parametrize(
    ("task", "kind"),
    [("What's the latest block number on the local chain right now?", "block_number"),
     ("What is the total supply of USDC on the local devnet?", "token_supply"),
     ("How many USDC transfers have happened on the local chain so far?", "transfer_count"),
     ("How many decimals does USDC have here?", "token_decimals"),
     ("What is the gas price on this chain?", "gas_price_gwei"),
     (f"What's the USDC balance of {WALLET} on the local anvil node?", "usdc_balance")],
)  # fmt: skip
def test_the_runs_own_chain_named_in_words_is_read(task: str, kind: str) -> None:
    rows = extract_checklist(task, network="anvil")
    assert [r.get("kind") for r in rows] == [kind], rows


def test_a_local_chain_named_on_a_run_that_is_not_local_is_still_declined() -> None:
    rows = extract_checklist("What is the base fee on the local devnet?", network="base-sepolia")
    assert [r.get("kind") for r in rows] == [None] and rows[0].get("unanswerable"), rows
