"""What a paid MCP tool asks to be paid, read by the judge itself from the MCP server.

An MCP purchase names a server, a tool and its arguments (``pay_mcp``). Before approving
one, the judge calls that tool unpaid over MCP (streamable HTTP at ``/mcp`` or SSE at
``/sse``, the transport the purchase names, else each in turn) with the official
``x402.mcp`` client's probe (``x402MCPClient.get_tool_payment_requirements``), and
approves only a payload whose payTo, amount, asset and chain are one of the ``exact``
requirements the tool's own 402 states. The agent's word is never taken for any of
them: a compromised agent naming an allowlisted MCP seller and its own address, a price
the seller does not ask, or a seller that tells the agent other terms than it tells the
judge, gets a refusal naming both. A change of terms after the verdict changes the
payload, which the wallet refuses (``verdict-void``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Literal

import anyio
import httpx

from judge.http_proxy import proxy_for
from judge.tls import tls_context

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult

    from judge.request import PaidCallRequest

__all__ = ["McpTermsUnread", "McpTool", "NoOffers", "OfferedTerms", "mcp_tool_of"]

Transport = Literal["streamable-http", "sse"]
#: Where each transport is served on an MCP server (the ecosystem's conventions).
_ENDPOINTS: dict[Transport, str] = {"streamable-http": "/mcp", "sse": "/sse"}
#: The longest one read of a seller's terms takes, over HTTP (judge.payto) or MCP (each
#: transport's whole read: connect, initialize, the unpaid call); the judge reads before
#: it takes its decision lock (judge.seller_terms), and its clients wait this long for a
#: decision on top of their own timeout (judge.client.DECIDE_TIMEOUT_S).
SELLER_READ_S = 10.0
_TIMEOUT_S = SELLER_READ_S
#: Bytes one response of a read may carry (a tool's unpaid answer is a few KB), however
#: fast the seller sends: past it the response is cut off.
_MAX_BYTES = 1_000_000
_CAIP2_EVM = re.compile(r"^eip155:(\d+)\Z")


class McpTermsUnread(Exception):
    """The tool's payment terms could not be read; the message names each transport tried."""


class NoOffers(tuple):  # type: ignore[type-arg]
    """A read of a seller's 402 that found no offer, saying why (``why``): no answer in
    time, an answer that is not a 402, or a 402 stating nothing payable. Empty, so it
    reads as "no offers" wherever offers are compared; the refusal names ``why``."""

    why: str
    #: No whole answer came within the read's bound: the seller stalled or trickled it.
    stalled: bool
    #: The HTTP status the read was answered with (None: no answer was read).
    status: int | None

    def __new__(cls, why: str, stalled: bool = False, status: int | None = None) -> NoOffers:
        found = super().__new__(cls, ())
        found.why = why
        found.stalled = stalled
        found.status = status
        return found


@dataclass(frozen=True)
class OfferedTerms:
    """One ``exact`` requirement a tool's 402 states (addresses lower case, atomic units)."""

    pay_to: str
    amount: int
    asset: str
    chain_id: int

    def __str__(self) -> str:
        return (f"payTo {self.pay_to} amount {self.amount} asset {self.asset} "
                f"chain {self.chain_id}")

    @classmethod
    def stated(cls, scheme: object, network: object, amount: object, pay_to: object,
               asset: object) -> OfferedTerms | None:
        """One offer of a 402 (HTTP or MCP; x402 v2, or v1's ``maxAmountRequired`` and
        network names) as terms a payload can be compared with; None when it is not an
        ``exact`` EVM offer (nothing this judge could approve a payload for)."""
        # Deferred: ~195 ms to import (min of 3 runs after judge.mcp_terms, 2 busy cores),
        # paid by the first ruling on a 402, not by every process that imports the judge.
        from x402.mechanisms.evm.v1.constants import V1_NETWORK_CHAIN_IDS

        found = _CAIP2_EVM.match(str(network or ""))
        chain_id = int(found.group(1)) if found else V1_NETWORK_CHAIN_IDS.get(str(network or ""))
        price = str(amount or "")
        if scheme != "exact" or chain_id is None or not price.isdigit() or not pay_to:
            return None
        return cls(str(pay_to).lower(), int(price), str(asset or "").lower(), int(chain_id))


@dataclass(frozen=True)
class McpTool:
    """The paid MCP tool a purchase names: its server's base URL, tool, arguments and
    transport (None: streamable HTTP, then SSE)."""

    server: str
    tool: str
    arguments: Mapping[str, object]
    transport: Transport | None

    def offered_terms(self) -> frozenset[OfferedTerms]:
        """The exact requirements the tool's own 402 states now (empty: its unpaid call
        answered no x402 402); raises McpTermsUnread when no transport answered."""
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="judge-mcp") as pool:
            # Its own event loop: the judge decides in a plain thread, or under a running loop.
            return pool.submit(asyncio.run, self._read()).result()

    def refusal(self, offer: PaidCallRequest, recipient: str,
                read: Callable[[McpTool], frozenset[OfferedTerms]] | None = None) -> str | None:
        """Why ``offer`` does not pay what this tool's own 402 asks (as ``read`` has it, else
        read now), else None. The payload's (payTo, amount, asset, chain) must be one of the
        tool's exact requirements."""
        paid = OfferedTerms(recipient.lower(), offer.price, offer.asset.lower(), offer.chain_id)
        try:
            offered = read(self) if read is not None else self.offered_terms()
        except McpTermsUnread as exc:
            return (
                f"the purchase pays {paid} for MCP tool {self.tool!r} at {self.server}, but the "
                f"judge could not read the tool's payment terms ({exc}); expected the tool to "
                "answer an unpaid call with its x402 402; fix: check that the MCP server runs, "
                "or name the transport its discovery entry gives"
            )
        if paid in offered:
            return None
        asks = "; ".join(sorted(str(t) for t in offered)) or (
            "nothing payable (its unpaid call answered no x402 402 with an exact EVM requirement)")
        return (
            f"the payload pays {paid}, but MCP tool {self.tool!r} at {self.server} asks (its "
            f"own 402, read by the judge) for {asks}; a payment on other terms would be "
            "credited to a seller that did not ask for it; expected the payTo, amount, asset "
            "and chain of one of the tool's requirements; fix: pay the terms of the tool's "
            "current 402"
        )

    async def _read(self) -> frozenset[OfferedTerms]:
        tried = []
        for transport in (self.transport,) if self.transport else tuple(_ENDPOINTS):
            url = self.server + _ENDPOINTS[transport]
            try:
                with anyio.fail_after(_TIMEOUT_S):
                    async with _session(url, transport) as session:
                        return await _probe(session, self.tool, dict(self.arguments))
            except Exception as exc:  # every transport's failure is named, none is fatal here
                tried.append(f"{transport} at {url} ({_innermost(exc)})")
        raise McpTermsUnread("tried " + "; ".join(tried))


def mcp_tool_of(args: Mapping[str, object]) -> McpTool | None:
    """The MCP tool a purchase's arguments name (``server`` and ``tool``), else None (not
    an MCP purchase). A ``server`` ending in its endpoint (``/mcp``, ``/sse``) names its
    transport, as the buyer reads it."""
    server, tool = args.get("server"), args.get("tool")
    if not isinstance(server, str) or not isinstance(tool, str):
        return None
    base = server.split("#", 1)[0].strip().rstrip("/")
    named: Transport | None = None
    for endpoint_transport, path in _ENDPOINTS.items():
        if base.endswith(path):
            base, named = base.removesuffix(path), endpoint_transport
    given = args.get("transport")
    if given == "streamable-http" or given == "sse":
        named = given
    arguments = args.get("arguments")
    return McpTool(base, tool, arguments if isinstance(arguments, Mapping) else {}, named)


@asynccontextmanager
async def _session(url: str, transport: Transport) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session over ``transport``; its HTTP client goes through
    the proxy :func:`judge.http_proxy.proxy_for` names for ``url`` (none to a loopback
    server) and reads none from the environment itself, as the judge's 402 read
    (judge.payto) and the agent's MCP client do."""
    # Deferred: mcp and its clients cost ~220 ms to import (min of 3 runs after
    # judge.mcp_terms, 2 busy cores); only a seller's MCP tool needs them.
    from mcp import ClientSession

    def client(headers: dict[str, str] | None = None, timeout: httpx.Timeout | None = None,
               auth: httpx.Auth | None = None) -> httpx.AsyncClient:
        return httpx.AsyncClient(headers={**(headers or {}), "Accept-Encoding": "identity"},
                                 timeout=timeout or _TIMEOUT_S, auth=auth, trust_env=False,
                                 verify=tls_context(), transport=_CappedTransport(proxy_for(url)))

    if transport == "sse":
        from mcp.client.sse import sse_client

        async with (
            sse_client(url, timeout=_TIMEOUT_S, httpx_client_factory=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    else:
        from mcp.client.streamable_http import streamablehttp_client

        async with (
            streamablehttp_client(url, timeout=_TIMEOUT_S, httpx_client_factory=client) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()
            yield session


class _CappedTransport(httpx.AsyncBaseTransport):
    """HTTP for the MCP read with every response cut off past ``_MAX_BYTES`` (as sent: a
    ``Content-Encoding`` is dropped, so nothing is inflated past the cap)."""

    def __init__(self, proxy: str | None) -> None:
        self._inner = httpx.AsyncHTTPTransport(trust_env=False, proxy=proxy, verify=tls_context())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)  # an async transport's
        headers = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-encoding"]
        return httpx.Response(response.status_code, headers=headers, request=request,
                              stream=_CappedStream(response.stream),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedStream(httpx.AsyncByteStream):
    """A response body that raises past ``_MAX_BYTES``."""

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > _MAX_BYTES:
                raise McpTermsUnread(f"it answered more than {_MAX_BYTES} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Probe:
    """The MCP client ``x402MCPClient`` wraps: one unpaid tools/call over ``session``,
    answered in the shape x402's result reader takes (content items as dicts)."""

    def __init__(self, session: ClientSession) -> None:
        self._session = session

    async def call_tool(self, params: Mapping[str, object]) -> SimpleNamespace:
        arguments = params.get("arguments")
        result: CallToolResult = await self._session.call_tool(
            str(params.get("name")), dict(arguments) if isinstance(arguments, Mapping) else {})
        return SimpleNamespace(
            content=[item.model_dump() for item in result.content],
            isError=result.isError,
            structuredContent=result.structuredContent,
            _meta={},
        )


async def _probe(session: ClientSession, tool: str, arguments: dict[str, object]) -> frozenset[OfferedTerms]:
    """The tool's exact requirements, through x402's own probe (it calls the tool unpaid
    and parses its 402, x402 v1 or v2); empty when the tool asked for no payment."""
    from x402.mcp import x402MCPClient  # deferred with mcp (_session)

    client = x402MCPClient(_Probe(session), None, auto_payment=False,
                           on_payment_requested=lambda _context: False)
    required = await client.get_tool_payment_requirements(tool, arguments)
    return frozenset(t for t in map(_terms, required.accepts if required else ()) if t)


def _terms(requirement: object) -> OfferedTerms | None:
    """One requirement x402 parsed (v2 ``amount``, v1 ``max_amount_required``) as terms."""
    return OfferedTerms.stated(
        getattr(requirement, "scheme", None), getattr(requirement, "network", None),
        getattr(requirement, "amount", None) or getattr(requirement, "max_amount_required", None),
        getattr(requirement, "pay_to", None), getattr(requirement, "asset", None))


def _innermost(exc: BaseException) -> str:
    """The innermost cause (anyio wraps transport errors in task groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return f"no answer within {_TIMEOUT_S:g} s"
    return f"{type(exc).__name__}: {str(exc)[:160] or 'no message'}"
