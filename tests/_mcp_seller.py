"""An MCP seller that sells under any tool name it is called by: a real MCP server over
streamable HTTP (the official ``mcp`` package), answering every unpaid tools/call with the
devnet's paid MCP tool's own x402 402 (its bazaar declaration naming the tool called, so
the facilitator's probe lists whatever name it is registered under), and every paid call
with a JSON-RPC error (it takes nothing, delivers nothing)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

#: What the paid call is answered: a JSON-RPC error, as a seller's server raises it.
PAID_CALL_ERROR = (-32000, "upstream busy, try later")


def model_terms(mcp_server: str) -> dict[str, Any]:
    """The devnet paid MCP tool's 402 (x402's PaymentRequired), read by an unpaid call."""
    from chain.mcp_client import call_tool
    from chain.paywall.mcp_seller import MCP_TOOL

    result, _ = asyncio.run(call_tool(mcp_server, MCP_TOOL, {"symbol": "USDC"}))
    assert result.isError and isinstance(result.structuredContent, dict), result
    return result.structuredContent


def _terms_for(terms: dict[str, Any], base: str, tool: str) -> dict[str, Any]:
    """``terms`` made the 402 of ``tool`` at ``base``/mcp over streamable HTTP."""
    own = copy.deepcopy(terms)
    own["resource"]["url"] = f"{base}/mcp#{tool}"
    info = own["extensions"]["bazaar"]["info"]["input"]
    info["toolName"], info["transport"] = tool, "streamable-http"
    return own


def any_name_app(terms: dict[str, Any], base: str) -> Any:
    """The seller's ASGI app, served at ``base``: /mcp is its streamable HTTP endpoint."""
    import mcp.types as t
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.shared.exceptions import McpError
    from starlette.applications import Starlette
    from starlette.routing import Mount

    server: Server[Any, Any] = Server("any-name seller")

    async def call(req: t.CallToolRequest) -> t.ServerResult:
        meta = req.params.meta.model_dump() if req.params.meta else {}
        if meta.get("x402/payment") is not None:
            code, message = PAID_CALL_ERROR
            raise McpError(t.ErrorData(code=code, message=message))
        own = _terms_for(terms, base, req.params.name)
        return t.ServerResult(t.CallToolResult(
            isError=True, structuredContent=own,
            content=[t.TextContent(type="text", text="Payment required")]))

    server.request_handlers[t.CallToolRequest] = call
    manager = StreamableHTTPSessionManager(app=server, stateless=True)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Mount("/mcp", app=manager.handle_request)], lifespan=lifespan)


@contextlib.contextmanager
def any_name_seller(terms: dict[str, Any]) -> Iterator[str]:
    """The seller running on a free loopback port; its base URL."""
    from chain.paywall.serve import AppServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    with AppServer(any_name_app(terms, base), port=port, name="any-name-mcp", lifespan=True):
        yield base
