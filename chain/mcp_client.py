"""Calling and listing MCP tools over either of the ecosystem's transports: streamable HTTP (at
``/mcp``, what MCP servers now serve) or SSE (at ``/sse``). One home for both, used by the
buyer (``pay_mcp``) and by the facilitator's discovery probe.

A server URL may end in its endpoint (``/mcp`` or ``/sse``), which names the transport;
otherwise the transport is the one given, or each is tried in turn (streamable HTTP
first). A failure names every transport tried and what answered. What a tool's name may
be (:func:`mcp_tool_name`) has its home here too: pay_mcp's arguments, the facilitator's
registration and the agent's ``discover`` all apply it.
"""

from __future__ import annotations

import string
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
    "MAX_TOOL_NAME",
    "MCP_TRANSPORTS",
    "McpErrorAnswer",
    "McpTransport",
    "McpUnreachable",
    "call_tool",
    "list_tools",
    "mcp_tool_name",
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


#: The MCP specification's tool name (revision 2025-11-25, server/tools, "Tool Names"):
#: 1 to MAX_TOOL_NAME characters, each an ASCII letter, a digit, "_", "-" or ".".
MAX_TOOL_NAME = 128
_TOOL_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_-.")
_TOOL_NAME_RULE = (
    f"1 to {MAX_TOOL_NAME} characters, each an ASCII letter, a digit, '_', '-' or '.' (the "
    "MCP specification's tool name)"
)


class McpUnreachable(Exception):
    """No transport tried reached the tool; the message names each and what answered."""


class McpErrorAnswer(Exception):
    """The server was reached and answered a request (tools/call, tools/list) with a
    JSON-RPC error, not a result: ``code`` and the server's ``text`` (one line, bounded)."""

    def __init__(self, transport: McpTransport, code: int, text: str) -> None:
        super().__init__(f"{transport} answered JSON-RPC error {code}: {text!r}")
        self.transport, self.code, self.text = transport, code, text


def mcp_tool_name(name: str) -> str:
    """``name`` when it is an MCP tool name as the specification writes one, else a
    ValueError that says what was found, what was expected and the fix.

    WARNING: a tool name is the seller's text and reaches a model's prompt wherever an
    offer is shown; a name outside the rule may be prose (an instruction to pay someone).
    The message therefore gives its length and the characters outside the rule, never
    the name itself."""
    fix = (
        "Fix: name the tool as the server's tools/list does, and give a server whose tool "
        "breaks this rule a name that keeps it"
    )
    if not name:
        raise ValueError(f"found an empty MCP tool name; expected {_TOOL_NAME_RULE}. {fix}")
    outside = sorted(set(name) - _TOOL_NAME_CHARS)
    if len(name) <= MAX_TOOL_NAME and not outside:
        return name
    found = f"found an MCP tool name of {len(name)} characters"
    if outside:
        shown = " ".join(ascii(c) for c in outside[:8]) + (" ..." if len(outside) > 8 else "")
        count = sum(c not in _TOOL_NAME_CHARS for c in name)
        found += f", {count} of them outside the rule ({shown})"
    raise ValueError(f"{found}; expected {_TOOL_NAME_RULE}. {fix}")


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


def _said_by_client(exc: BaseException) -> bool:
    """Whether an McpError is the MCP client's own word for no answer (the connection
    closed, a streamable HTTP session the server no longer knows, a read timeout), not a
    JSON-RPC error the server sent."""
    from mcp.types import CONNECTION_CLOSED

    error = getattr(exc, "error", None)
    said = (getattr(error, "code", None), getattr(error, "message", None))
    return said in ((CONNECTION_CLOSED, "Connection closed"), (32600, "Session terminated")) or (
        said[0] == 408 and str(said[1]).startswith("Timed out while waiting for response"))


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
    naming each transport tried and what answered, and McpErrorAnswer when a server that
    is up answers with a JSON-RPC error (no other transport is tried: it was reached)."""
    from mcp.shared.exceptions import McpError

    base, named = split_endpoint(server)
    order = (transport or named,) if (transport or named) else MCP_TRANSPORTS
    tried = []
    for t in order:
        assert t is not None
        url = base + ENDPOINTS[t]
        answered: McpError | None = None
        try:
            async with _session(url, t, timeout_s) as session:
                try:
                    return await use(session), t
                except McpError as exc:
                    if not _said_by_client(exc):  # the session is up: the server's answer
                        answered = exc
                    raise
        except Exception as exc:  # every transport failure is reported, none is fatal here
            if answered is not None:
                text = " ".join(answered.error.message.split())[:160] or "no message"
                raise McpErrorAnswer(t, answered.error.code, text) from answered
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
    streamable HTTP, then SSE. Raises McpUnreachable naming each transport tried, or
    McpErrorAnswer when a server that was reached answers the call with a JSON-RPC error
    (no other transport is tried then: the server is up, and it answered). A call carrying
    a payment (``meta``) should name its transport: it is then sent once.
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
