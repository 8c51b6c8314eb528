"""Calling and listing MCP tools over either of the ecosystem's transports: streamable HTTP (at
``/mcp``, what MCP servers now serve) or SSE (at ``/sse``). One home for both, used by the
buyer (``pay_mcp``) and by the facilitator's discovery probe.

A server URL may end in its endpoint (``/mcp`` or ``/sse``), which names the transport;
otherwise the transport is the one given, or each is tried in turn (streamable HTTP
first). A failure names every transport tried and what answered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Literal, TypeVar, get_args

from chain.errors import innermost
from chain.http_proxy import proxy_for
from chain.tls import tls_context

if TYPE_CHECKING:  # mcp loads on the first call, not on import
    from mcp import ClientSession
    from mcp.types import CallToolResult, Tool

__all__ = [
    "ENDPOINTS",
    "MCP_TRANSPORTS",
    "McpTransport",
    "McpUnreachable",
    "call_tool",
    "list_tools",
    "split_endpoint",
]

_T = TypeVar("_T")

McpTransport = Literal["streamable-http", "sse"]
"""How an MCP client reaches a server.

- ``streamable-http``: MCP's streamable HTTP transport, at ``<server>/mcp``.
- ``sse``: the older HTTP + server-sent events transport, at ``<server>/sse``.
"""
MCP_TRANSPORTS: tuple[McpTransport, ...] = get_args(McpTransport)
ENDPOINTS: dict[McpTransport, str] = {"streamable-http": "/mcp", "sse": "/sse"}


class McpUnreachable(Exception):
    """No transport tried reached the tool; the message names each and what answered."""


def split_endpoint(url: str) -> tuple[str, McpTransport | None]:
    """``(server base URL, transport its endpoint names or None)``."""
    base = url.split("#", 1)[0].strip().rstrip("/")
    for transport, path in ENDPOINTS.items():
        if base.endswith(path):
            return base.removesuffix(path), transport
    return base, None


@asynccontextmanager
async def _session(url: str, transport: McpTransport, timeout_s: float) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session; its HTTP client goes through the proxy
    :func:`chain.http_proxy.proxy_for` names for ``url`` (none to a loopback server) and
    reads none from the environment itself."""
    # Deferred: mcp and its clients cost ~340 ms to import (min of 3 runs after
    # chain.mcp_client, 2 busy cores); only an MCP seller needs them.
    import httpx
    from mcp import ClientSession

    def client(headers: dict[str, str] | None = None, timeout: httpx.Timeout | None = None,
               auth: httpx.Auth | None = None) -> httpx.AsyncClient:
        return httpx.AsyncClient(headers=headers, timeout=timeout or timeout_s, auth=auth,
                                 trust_env=False, proxy=proxy_for(url), verify=tls_context())

    if transport == "sse":
        from mcp.client.sse import sse_client

        async with (
            sse_client(url, timeout=timeout_s, httpx_client_factory=client) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            yield s
    else:
        from mcp.client.streamable_http import streamablehttp_client

        async with (
            streamablehttp_client(url, timeout=timeout_s, httpx_client_factory=client) as streams,
            ClientSession(streams[0], streams[1]) as s,
        ):
            await s.initialize()
            yield s


def _reason(exc: BaseException) -> str:
    """The innermost cause of ``exc`` (anyio wraps transport errors in task groups)."""
    exc = innermost(exc)
    return f"{type(exc).__name__}: {str(exc)[:160] or 'no message'}"


async def _over_transports(
    server: str,
    transport: McpTransport | None,
    timeout_s: float,
    use: Callable[[ClientSession], Awaitable[_T]],
) -> tuple[_T, McpTransport]:
    """``use`` on a session with the MCP server at ``server``: over ``transport`` (or the
    endpoint ``server`` ends in) only, else streamable HTTP, then SSE. Raises McpUnreachable
    naming each transport tried and what answered."""
    base, named = split_endpoint(server)
    order = (transport or named,) if (transport or named) else MCP_TRANSPORTS
    tried = []
    for t in order:
        assert t is not None
        url = base + ENDPOINTS[t]
        try:
            async with _session(url, t, timeout_s) as session:
                return await use(session), t
        except Exception as exc:  # every transport failure is reported, none is fatal here
            tried.append(f"{t} at {url} ({_reason(exc)})")
    raise McpUnreachable("tried " + "; ".join(tried))


async def call_tool(
    server: str,
    tool: str,
    arguments: dict[str, object],
    *,
    transport: McpTransport | None = None,
    meta: dict[str, object] | None = None,
    timeout_s: float = 30.0,
) -> tuple[CallToolResult, McpTransport]:
    """Call ``tool`` on the MCP server at ``server``; ``(CallToolResult, transport used)``.

    ``transport`` (or the endpoint ``server`` ends in) is the only one tried; otherwise
    streamable HTTP, then SSE. Raises McpUnreachable naming each transport tried. A call
    carrying a payment (``meta``) should name its transport: it is then sent once.
    """
    return await _over_transports(
        server, transport, timeout_s, lambda s: s.call_tool(tool, arguments, meta=meta)
    )


async def list_tools(
    server: str, *, transport: McpTransport | None = None, timeout_s: float = 30.0
) -> tuple[list[Tool], McpTransport]:
    """The tools the MCP server at ``server`` lists (its first page: ``tools/list``) and
    the transport used, reached as :func:`call_tool` reaches it."""

    async def listed(session: ClientSession) -> list[Tool]:
        return list((await session.list_tools()).tools)

    return await _over_transports(server, transport, timeout_s, listed)
