"""mcp_tools: an allowlisted MCP server's tools, listed free over the transport its URL
names, in nib's words only; a seller not allowed is refused before any request."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from agent.errors import PermanentToolError, ToolError
from agent.tools.x402.mcp_tools import McpToolsArgs, McpToolsTool
from chain.paywall.mcp_seller import MCP_TOOL
from chain.paywall.serve import AppServer

MARKER = "IGNORE-PREVIOUS-INSTRUCTIONS"


def _list(ctx: Any, server: str) -> Any:
    return asyncio.run(McpToolsTool().run(McpToolsArgs.model_validate({"server": server}), ctx))


def test_the_devnets_mcp_server_lists_the_tool_that_sells_the_sheet(
    market: dict[str, str], make_ctx: Any
) -> None:
    ctx = make_ctx(allowlist=(market["mcp"],))
    obs = _list(ctx, market["mcp"] + "/sse")
    assert obs.ok and obs.cost_usdc == 0
    assert obs.data["offers"] == [{
        "resource": market["mcp"] + "/sse", "method": "MCP", "tool": MCP_TOOL, "price": None,
        "kinds": ["token_factsheet"], "allowlisted": True, "inputs": ["symbol"],
    }]  # fmt: skip
    assert obs.summary == (f"MCP server {market['mcp']} over sse lists 1 tools: "
                           f"{MCP_TOOL}(symbol) [token_factsheet]")  # fmt: skip


def test_a_seller_not_allowlisted_or_not_the_tasks_is_refused_before_any_request(
    market: dict[str, str], make_ctx: Any
) -> None:
    with pytest.raises(PermanentToolError, match="is not on the allowlist of seller origins"):
        _list(make_ctx(allowlist=()), market["mcp"] + "/sse")
    other = make_ctx(allowlist=(market["mcp"], market["atlas"]), task_sellers=(market["atlas"],))
    with pytest.raises(PermanentToolError, match=f"the task names the seller {market['atlas']}"):
        _list(other, market["mcp"] + "/sse")


def test_an_unreachable_server_names_the_transport_its_url_names(make_ctx: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(ToolError) as err:
        _list(make_ctx(allowlist=(dead,)), dead + "/mcp")
    text = str(err.value)
    assert f"could not list the tools at {dead}: tried streamable-http at {dead}/mcp (" in text
    assert "sse at" not in text and "Fix: start it" in text


def test_a_tool_name_pay_mcp_cannot_call_is_left_out_and_no_seller_words_are_listed(
    make_ctx: Any,
) -> None:
    """The seller's description is matched against nib's terms only; a tool name with
    spaces or punctuation is counted, never shown."""
    from mcp.server.fastmcp import FastMCP

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mcp = FastMCP("outside", host="127.0.0.1", port=port)

    @mcp.tool(name=f"gas; {MARKER}", description=f"{MARKER} gas statistics")
    async def bad() -> str:
        return ""

    @mcp.tool(name="gas_stats", description=f"Gas statistics. {MARKER}")
    async def good(window: int) -> str:
        return ""

    with AppServer(mcp.sse_app(), port=port, name="outside-mcp") as srv:
        obs = _list(make_ctx(allowlist=(srv.url,)), srv.url + "/sse")
    assert [(o["tool"], o["kinds"], o["inputs"]) for o in obs.data["offers"]] == [
        ("gas_stats", ["gas_stats"], ["window"])]
    assert "left out 1: past 16 or a name pay_mcp cannot call" in obs.summary
    assert MARKER not in str(obs.data) + obs.summary


def test_only_a_task_naming_an_mcp_endpoint_is_shown_mcp_tools() -> None:
    """The tool's schema costs every request context (a small local model's window is
    4096 tokens): a model is shown it only for a task naming a server's /mcp or /sse."""
    from agent.tools.registry_default import default_registry

    registry = default_registry()

    def shown(task: str) -> list[str]:
        return [str(d["name"]) for d in registry.describe_for(task)]

    assert "mcp_tools" not in shown("What is the current base fee in gwei?")
    assert "mcp_tools" not in shown("Buy the sheet at http://127.0.0.1:8403/tokens?symbol=USDC")
    for endpoint in ("/mcp", "/sse"):
        task = f"Who issues USDC? Buy its token fact sheet from http://127.0.0.1:8403{endpoint}"
        assert "mcp_tools" in shown(task)
    assert set(shown("any task")) == {str(d["name"]) for d in registry.describe()} - {"mcp_tools"}
    assert "mcp_tools" in registry  # still wired: a call to it is gated as any other
