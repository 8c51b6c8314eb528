"""Two misreadings the outside tester's third run found (issue 23): "how much USDC has 0x..
sent (to 0x..) in total?" was answered with balances at exit 0, and questions naming the
run's own chain ("on the local chain", "on the local devnet", "here") were declined. A
total sent or received is no balance: it is read as a total (usdc_sent_total,
usdc_received_total: the Transfer logs summed over a stated block range). The run's own
chain named in words is no scope to decline; a local chain named on a run that is not
local still is."""

from __future__ import annotations

import pytest

from agent.models._factpatterns import extract_checklist

WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
SELLER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
OTHER = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"


@pytest.mark.parametrize(
    ("task", "kind", "params"),
    [(f"How much USDC has {WALLET} sent in total?", "usdc_sent_total", {"address": WALLET}),
     (f"How much USDC has {WALLET} sent to {SELLER} in total?", "usdc_sent_total",
      {"address": WALLET, "counterparty": SELLER}),
     (f"How much USDC has {SELLER} received?", "usdc_received_total", {"address": SELLER}),
     (f"What is the total amount of USDC {WALLET} has spent?", "usdc_sent_total",
      {"address": WALLET}),
     (f"How much USDC did {WALLET} send to {SELLER}?", "usdc_sent_total",
      {"address": WALLET, "counterparty": SELLER}),
     (f"Total USDC sent by {WALLET}?", "usdc_sent_total", {"address": WALLET}),
     # The outside writer's N9 and N10 (fourth run), then its T9 and R25 above.
     (f"What is the total amount of USDC that {WALLET} has transferred out so far?",
      "usdc_sent_total", {"address": WALLET}),
     (f"How much USDC has {WALLET} received altogether?", "usdc_received_total",
      {"address": WALLET}),
     (f"How much USDC did {SELLER} receive from {WALLET} overall?", "usdc_received_total",
      {"address": SELLER, "counterparty": WALLET}),
     ("How much USDC have I spent in total?", "usdc_sent_total", {"wallet": "self"}),
     (f"How much USDC did {SELLER} receive in the last 20 blocks?", "usdc_received_total",
      {"address": SELLER, "blocks": "20"}),
     (f"Total USDC received by {SELLER} in blocks 1 to 5", "usdc_received_total",
      {"address": SELLER, "from_block": "1", "to_block": "5"})],
)  # fmt: skip
def test_a_total_sent_or_received_is_read_as_a_total_never_a_balance(
    task: str, kind: str, params: dict[str, str]
) -> None:
    (row,) = extract_checklist(task, network="anvil")
    assert row.get("kind") == kind and row.get("params") == params, row
    # The block range is stated: the one asked, else every block from the first.
    assert "since block 0" in row["text"] or " block" in row["text"], row


@pytest.mark.parametrize(
    ("task", "why"),
    [("How much USDC was sent in total?", "names no address"),
     (f"What is the USDC balance of {WALLET} in total?", "'in total'"),
     (f"How much ETH has {WALLET} sent?", "'sent'"),
     (f"How much USDC has {WALLET} sent to {SELLER} and to {OTHER}?", "one counterparty"),
     (f"How much USDC has {WALLET} sent to {SELLER} or {OTHER}?", "one counterparty")],
)  # fmt: skip
def test_a_total_it_cannot_take_is_declined_naming_why(task: str, why: str) -> None:
    rows = extract_checklist(task, network="anvil")
    assert not any(r.get("kind") == "usdc_balance" for r in rows), rows
    assert any(why in str(r.get("unanswerable")) for r in rows), rows


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
