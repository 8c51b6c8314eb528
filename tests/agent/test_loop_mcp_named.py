"""A task that names an MCP server by its URL, through the whole run with the offline
planner: the server's tools listed (free), the one selling the fact paid with ``pay_mcp``,
never ``pay_http``. Real wallet, real judge, real Anvil, the devnet's MCP seller built with
the official ``x402.mcp``; balances and reconcile read back from the chain.

Before, the planner sent ``pay_http`` GET to the server URL, the server answered 406 and
the run stopped ``failure-budget``, leaving a lesson to "check the URL against the seller's
/catalog" (outside tester 12, rough edge 3)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _loop_support import paid_deps, usdc_balance

from agent.loop.run import run_task
from agent.models.offline import OfflinePlanner
from agent.tools.discover import DiscoverTool
from agent.tools.x402.mcp_tools import McpToolsTool
from agent.tools.x402.offers import OfferBook
from agent.tools.x402.pay_http import PayHttpTool
from agent.tools.x402.pay_mcp import PayMcpTool
from chain.devkeys import AGENT, dev_account
from chain.paywall.mcp_seller import MCP_PAY_TO_INDEX, MCP_TOOL, MCP_TOOL_PRICE, create_mcp_app
from chain.paywall.serve import AppServer
from wallet.ledger import Ledger
from wallet.reconcile import reconcile

AGENT_ADDR = dev_account(AGENT).address
MCP_SELLER = dev_account(MCP_PAY_TO_INDEX).address


@pytest.fixture(scope="module")
def streamable_mcp(anvil: Any, market: dict[str, str]) -> Iterator[str]:
    """The devnet's paid MCP server over streamable HTTP (what ``nib devnet up`` serves),
    settling through the market's facilitator; its base URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    app = create_mcp_app(base, market["facilitator"], anvil.usdc, rpc_url=anvil.rpc_url,
                         transport="streamable-http")  # fmt: skip
    with AppServer(app, port=port, name="mcp-streamable", lifespan=True):
        yield base


#: The outside testers' tasks: test 12's, and test 15's Q30 (declined before: "does not
#: know 'mcp' in a request to buy").
_PLAIN = "Who issues USDC? Buy its token fact sheet from {url}"
_DESCRIBED = "Buy the USDC token fact sheet from the MCP seller at {url} and tell me who issues the token."


@pytest.mark.parametrize(("endpoint", "said"), [("/mcp", _PLAIN), ("/sse", _PLAIN), ("/mcp", _DESCRIBED)])
def test_a_task_naming_an_mcp_servers_url_buys_its_fact_over_mcp(
    tmp_path: Path, chain: Any, market: dict[str, str], streamable_mcp: str, endpoint: str, said: str
) -> None:
    """The outside testers' tasks, over each transport the URL's endpoint names: one
    listing of the server's tools, one pay_mcp call of the tool that sells the sheet, the
    run finishes evidence-covered answering "Circle", and the tool's price moves once."""
    server = streamable_mcp if endpoint == "/mcp" else market["mcp"]  # the market's is SSE
    book = OfferBook()
    tools = (DiscoverTool(book), McpToolsTool(), PayHttpTool(offers=book), PayMcpTool(book))
    deps = paid_deps(tmp_path, chain, OfflinePlanner(), extra_tools=tools)
    deps = dataclasses.replace(deps, allowlist=(server,),
                               extras={"discovery_urls": market["facilitator"]})  # fmt: skip
    before = usdc_balance(chain, MCP_SELLER), usdc_balance(chain, AGENT_ADDR)
    head = chain.w3.eth.block_number
    task = said.format(url=f"{server}{endpoint}")
    r = asyncio.run(run_task(task, deps))

    assert (r.stop_reason, r.finished) == ("evidence-covered", True), r.answer
    assert "Circle" in r.answer, r.answer
    calls = [(e["data"]["tool"], e["data"]["ok"]) for e in deps.store.events(r.run_id, "tool.call")]
    assert calls == [("mcp_tools", True), ("pay_mcp", True)], calls
    paid = deps.store.events(r.run_id, "tool.call")[-1]["data"]
    transport = "streamable-http" if endpoint == "/mcp" else "sse"
    assert paid["args"]["server"] == server and paid["args"]["tool"] == MCP_TOOL
    assert paid["args"]["transport"] == transport and paid["args"]["arguments"] == {"symbol": "USDC"}
    # Money moved once, to the MCP seller, read from the chain.
    assert usdc_balance(chain, MCP_SELLER) == before[0] + MCP_TOOL_PRICE
    assert usdc_balance(chain, AGENT_ADDR) == before[1] - MCP_TOOL_PRICE
    rows = Ledger(deps.wallet.meter.store).rows(r.run_id)
    assert [(row.status, row.amount) for row in rows] == [("settled", MCP_TOOL_PRICE)]
    report = reconcile(deps.wallet.meter.store, deps.wallet.chain, chain.usdc, AGENT_ADDR, head + 1)
    assert report.clean and [m.ledger_id for m in report.matched] == [rows[0].id]
    assert deps.store.lessons() == []  # a finished run leaves none
