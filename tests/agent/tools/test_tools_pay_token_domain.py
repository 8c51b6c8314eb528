"""Every seller advertises the token's own EIP-712 domain, and nib's buyers pay under it.

Circle's Ethereum-mainnet FiatTokenV2_2 is named "USD Coin": an authorization signed under
("USDC", "2") is rejected by it, so a seller that hard-codes the devnet's name sells to
nobody. Here a second TestUSDC is deployed under that name on the session's Anvil, and the
real buyers (pay_http, pay_mcp) pay the paywall, a market seller and the paid MCP server
in it; balances are read back from the chain and every ledger row is settled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _tools_support import approve

from agent.tools.base import Tool, ToolContext
from agent.tools.x402.offers import OfferBook
from agent.tools.x402.pay_http import PayHttpTool
from agent.tools.x402.pay_mcp import PayMcpTool
from chain.client import ChainClient
from chain.devkeys import AGENT, DEPLOYER, SELLER, dev_account
from chain.devnet import FUND_USDC
from chain.networks import get_network
from chain.paywall.app import DEFAULT_PRICES, PaywallServer
from chain.paywall.market import seller_named
from chain.paywall.mcp_seller import MCP_PAY_TO_INDEX, MCP_TOOL, MCP_TOOL_PRICE
from chain.usdc import deploy_test_usdc, mint, token_domain, usdc_contract
from judge.verdict import VerdictSigner
from tests._support import running_market
from wallet.keystore import KeyHandle
from wallet.signer import Wallet

AGENT_ADDR = dev_account(AGENT).address
MAINNET_NAME = "USD Coin"


def test_buyers_pay_every_seller_of_a_token_named_usd_coin(
    chain: Any,
    client: ChainClient,
    make_ctx: Callable[..., ToolContext],
    judge_signer: VerdictSigner,
    tmp_path: Path,
) -> None:
    deployer = dev_account(DEPLOYER)
    token = deploy_test_usdc(chain.w3, deployer, name=MAINNET_NAME)
    mint(chain.w3, token, deployer, AGENT_ADDR, FUND_USDC)
    assert token_domain(chain.w3, token) == (MAINNET_NAME, "2")
    wallet = Wallet(
        KeyHandle(dev_account(AGENT)),
        db_path=tmp_path / "nib.db",
        chain=client,
        usdc=token,
        trusted_judge=judge_signer.address,
    )
    network = get_network("anvil", rpc_url=chain.rpc_url, usdc=token)
    atlas = seller_named("atlas")
    mcp_pay_to = dev_account(MCP_PAY_TO_INDEX).address
    paid_to = [dev_account(SELLER).address, atlas.pay_to, mcp_pay_to]

    def balances() -> list[int]:
        usdc = usdc_contract(chain.w3, token)
        return [int(usdc.functions.balanceOf(a).call()) for a in [AGENT_ADDR, *paid_to]]

    before = balances()
    with (
        PaywallServer(chain.rpc_url, token) as paywall,
        running_market(chain.rpc_url, token) as market,
    ):
        ctx = make_ctx(
            wallet=wallet,
            network=network,
            allowlist=(paywall.url, market["atlas"], market["mcp"]),
        )

        def buy(tool: Tool, args: dict[str, Any]) -> Any:
            quote = asyncio.run(tool.quote(tool.parse_args(args), ctx))
            assert quote.asset == token
            return asyncio.run(tool.execute(quote, approve(judge_signer, quote), ctx))

        http = PayHttpTool(offers=OfferBook())
        got = [
            buy(http, {"url": paywall.url + "/analytics/gas"}),
            buy(http, {"url": market["atlas"] + "/tokens?symbol=USDC"}),
            buy(
                PayMcpTool(OfferBook()),
                {"server": market["mcp"], "tool": MCP_TOOL, "arguments": {"symbol": "USDC"}},
            ),
        ]
    prices = [DEFAULT_PRICES["gas"], 10_000, MCP_TOOL_PRICE]
    assert [o.ok for o in got] == [True] * 3 and [o.cost_usdc for o in got] == prices
    after = balances()
    assert after == [
        before[0] - sum(prices),
        *(b + p for b, p in zip(before[1:], prices, strict=True)),
    ]
    rows = wallet.meter.ledger.rows("run-test")
    assert sorted((r.status, r.amount) for r in rows) == sorted(("settled", p) for p in prices)
