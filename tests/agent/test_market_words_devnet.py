"""The outside tester's round 21, through the real nib command on its own devnet.

Q23: "I'd like gas usage statistics — buy them from the data market if you need to." paid
the local paywall 0.05 USDC, which discovery does not list; said "from the market", the
same request pays nothing and is declined, as docs/market.md promises. Every wording that
asks to buy from the market pays only an offer discovery listed, or nothing. Q17, Q19 and
Q25, answerable questions the offline planner declined, are answered with the values read
from the chain. Payments are read back from the chain's Transfer logs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.tools.chain_reads import format_gwei
from chain.client import ChainClient
from chain.devkeys import dev_account
from chain.money import format_usdc
from chain.paywall.market import MARKET
from chain.paywall.mcp_seller import MCP_PAY_TO_INDEX
from tests.agent._nib_devnet import own_devnet, run_json, run_paying, settled_rows

#: Who the market's sellers pay (atlas, meridian, bargain and the MCP seller).
MARKET_PAY_TO = {s.pay_to.lower() for s in MARKET} | {dev_account(MCP_PAY_TO_INDEX).address.lower()}


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    yield from own_devnet(tmp_path_factory, "market-words-home")


@pytest.mark.parametrize(
    "task",
    [
        "I'd like gas usage statistics — buy them from the data market if you need to.",
        "Buy the gas stats from market sellers.",
        "Get the transfer statistics via the marketplace.",
        "Use the x402 data market for gas statistics.",
    ],
)
def test_a_request_to_buy_from_the_market_never_pays_another_seller(devnet, task: str) -> None:  # type: ignore[no-untyped-def]
    """No market seller sells statistics: nothing is paid (the paywall, which does, is no
    market seller), and the run is declined saying why (exit 1)."""
    home, info = devnet
    out, paid = run_paying(home, info, task)
    assert paid == [], (paid, out["answer"])
    assert settled_rows(home, out["run_id"]) == []
    assert out["returncode"] == 1 and not out["finished"], out["answer"]
    assert "the local paywall included" in out["answer"], out["answer"]


def test_a_market_wording_buys_from_a_market_seller_only(devnet) -> None:  # type: ignore[no-untyped-def]
    """A sheet the market sells is bought there: one payment, to a seller discovery
    listed, never to the paywall's payTo."""
    home, info = devnet
    task = "Buy the USDC fact sheet from the data market and tell me who the issuer is."
    out, paid = run_paying(home, info, task)
    assert len(paid) == 1 and paid[0][0] in MARKET_PAY_TO, (paid, out["answer"])
    assert paid[0][0] != info["seller"].lower(), paid
    assert settled_rows(home, out["run_id"]) == [(paid[0][1], "settled")]


def test_round_21s_declined_questions_are_answered_from_the_chain(devnet) -> None:  # type: ignore[no-untyped-def]
    """Q17 ("Give me the UTC time." shapes the block's time), Q19 ("my wallet" is a holder
    of the comparison and its difference) and Q25 (each unit said after its own value)."""
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    seller, wallet = info["seller"], info["wallet"]

    when = run_json(home, "When was block 1 mined? Give me the UTC time.")
    assert when["returncode"] == 0 and when["finished"], when["answer"]
    stamp = int(chain.block(1)["timestamp"])
    utc = datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"block timestamp at block 1: {utc} ({stamp} unix seconds)" in when["answer"], when

    more = run_json(home, f"Does my wallet hold more USDC than {seller}, and by how much?")
    assert more["returncode"] == 0 and more["finished"], more["answer"]
    mine, theirs = chain.token_balance(info["usdc"], wallet), chain.token_balance(info["usdc"], seller)
    assert mine > theirs, (mine, theirs)
    assert f"which holds more (USDC balance): the agent's wallet ({format_usdc(mine)})" in more["answer"]
    assert f"{format_usdc(mine - theirs)}: the agent's wallet holds more than {seller}" in more["answer"]

    three = run_json(home, "Tell me the latest block number, its base fee in gwei, and my ETH balance in ether.")
    assert three["returncode"] == 0 and three["finished"], three["answer"]
    head = chain.block_number()  # nothing mines during a read-only run
    fee = format_gwei(int(chain.block(head)["baseFeePerGas"]))
    assert f"block number: {head} (observed" in three["answer"], three["answer"]
    assert f"base fee: {fee} gwei at block {head}, the latest" in three["answer"], three["answer"]
    ether = chain.eth_balance(wallet) // 10**18
    assert f"ETH balance of the agent's wallet: {ether} ETH" in three["answer"], three["answer"]
