"""One HTTP exchange with an x402 seller, bounded: no redirects, at most
:data:`MAX_BODY_BYTES`, the whole response within one deadline; and the words for an
answer that was not the one expected. ``pay_http`` sends every request through
:func:`fetch` (the quote, the terms re-read before paying, the paid request, a re-send)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from agent.errors import PermanentToolError, ToolError
from agent.interrupts import innermost
from agent.tools.base import ToolContext
from agent.tools.x402.offers import seller_of
from agent.tools.x402.protocol import X402ProtocolError, parse_payment_required
from chain.mcp_client import split_endpoint
from judge.http_proxy import proxy_for
from judge.tls import tls_context

__all__ = [
    "MAX_BODY_BYTES",
    "POST_ROUTE",
    "bare",
    "fetch",
    "no_whole_response",
    "refusal",
    "seller_client",
    "unexpected_status",
    "unpaid_refusal",
]

#: A seller's response larger than this is refused: results must stay small.
MAX_BODY_BYTES = 256 * 1024
#: How a GET refused at a route that sells over POST is reported (planners read it).
POST_ROUTE = "the route sells over"


async def fetch(
    ctx: ToolContext,
    url: str,
    *,
    method: str = "GET",
    body: Mapping[str, object] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float | None = None,
) -> httpx.Response:
    """GET (or POST ``body`` as JSON) without redirects, reading at most MAX_BODY_BYTES,
    the whole response (headers and body) within one deadline (:func:`_deadline`);
    transport errors, an oversized body and a missed deadline -> ToolError."""
    limit = _deadline(ctx, timeout)
    client = ctx.http
    own = client is None
    if client is None:
        client = seller_client()
    try:
        # One deadline for the whole response: a seller dripping a byte at a time would
        # pass any per-read timeout.
        async with asyncio.timeout(limit):
            return await _read_response(client, method, url, body, headers, limit)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise no_whole_response(url, limit, type(exc).__name__) from exc
    except (httpx.TransportError, ExceptionGroup) as exc:
        # httpx's connect runs in an anyio task group: a socket error it does not map
        # (an OverflowError, say) arrives wrapped in an ExceptionGroup; name the cause.
        cause = innermost(exc)
        raise ToolError(
            f"pay_http: could not reach {seller_of(url)} ({type(cause).__name__}: {cause}); "
            "expected a running seller. Fix: start it (`nib devnet up` for the local paywall)."
        ) from exc
    finally:
        if own:
            await client.aclose()


def no_whole_response(url: str, limit: float, why: str,
                      fix: str = "check the seller, or raise response_deadline_s") -> ToolError:
    """The refusal of a seller that gave no whole answer to a read within ``limit``."""
    return ToolError(
        f"pay_http: no whole response (headers and body) within {limit:g} s from {url} "
        f"({why}); expected a complete answer within the response deadline. Fix: {fix}."
    )


def seller_client() -> httpx.AsyncClient:
    """A client for sellers' answers: the shared TLS context, no cookies kept (a seller
    cannot tie one request to another by them, as with a client per request), no
    redirects followed, each request sent by nib's proxy rule (:class:`_ByProxyRule`). The
    loop opens one per run (``ToolContext.http``), so a run's requests to a seller reuse a
    kept-alive connection."""
    return httpx.AsyncClient(verify=tls_context(), follow_redirects=False, trust_env=False,
                             transport=_ByProxyRule(),
                             cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])))


class _ByProxyRule(httpx.AsyncBaseTransport):
    """Sends each request straight to its seller or through the proxy
    :func:`judge.http_proxy.proxy_for` names for its URL (never one to a loopback seller,
    as the judge's read of the same 402), one connection pool per way: a run's one client
    reaches sellers on this machine and elsewhere. httpx's own reading of the environment
    would proxy a loopback seller."""

    def __init__(self) -> None:
        self._ways: dict[str | None, httpx.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        proxy = proxy_for(str(request.url))
        way = self._ways.get(proxy)
        if way is None:
            way = self._ways[proxy] = httpx.AsyncHTTPTransport(
                proxy=proxy, trust_env=False, verify=tls_context())
        return await way.handle_async_request(request)

    async def aclose(self) -> None:
        for way in self._ways.values():
            await way.aclose()


async def _read_response(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    body: Mapping[str, object] | None,
    headers: dict[str, str] | None,
    limit: float,
) -> httpx.Response:
    """One request's response, its body read in full but never past MAX_BODY_BYTES."""
    async with client.stream(
        method,
        url,
        json=body if method == "POST" else None,
        headers=headers,
        timeout=limit,
        follow_redirects=False,
    ) as resp:
        read = bytearray()
        async for chunk in resp.aiter_bytes():
            read += chunk
            if len(read) > MAX_BODY_BYTES:
                raise ToolError(
                    f"pay_http: the response from {url} exceeds {MAX_BODY_BYTES} bytes "
                    f"(read {len(read)} so far); expected a small result. Fix: ask for "
                    "a narrower resource."
                )
        kept = [
            (k, v)
            for k, v in resp.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return httpx.Response(
            resp.status_code, headers=kept, content=bytes(read), request=resp.request
        )


def _deadline(ctx: ToolContext, timeout: float | None) -> float:
    """Seconds a response may take: ``timeout`` or the run's response deadline
    (``Limits.response_deadline_s``), never past the time the run has left."""
    limit = float(timeout or ctx.response_deadline_s)
    if ctx.time_left is not None:
        limit = min(limit, max(ctx.time_left(), 0.001))
    return limit


def unexpected_status(url: str, resp: httpx.Response, *, paid: bool) -> str:
    """An answer that is neither data (200) nor terms (402), in words."""
    when = "the paid request" if paid else "an unpaid request"
    snippet = resp.text[:200].replace("\n", " ")
    server, transport = split_endpoint(url)
    fix = (
        f"Fix: {url} is an MCP server's {transport} endpoint, which answers MCP, not plain "
        f"HTTP: list its tools with mcp_tools and buy with pay_mcp (server {server})."
        if transport
        else "Fix: the fault is the seller's; buy from another seller, or try this one later."
        if resp.status_code >= 500
        else "Fix: check the URL against the seller's /catalog."
    )
    return (
        f"pay_http: {url} answered HTTP {resp.status_code} to {when}; expected 200 (data) or "
        f"402 (payment required). Body: {snippet!r}. {fix}"
    )


def refusal(resp: httpx.Response) -> str:
    """What a paid request's non-2xx answer was, in words."""
    status = resp.status_code
    if 300 <= status < 400:
        where = resp.headers.get("location", "")
        return (
            f"it answered {status} redirecting to {where[:200]!r}; a redirect after payment "
            "is never followed"
        )
    detail = ""
    if status == 402:
        with contextlib.suppress(X402ProtocolError):
            again = parse_payment_required(resp)
            detail = f" ({again.error})" if getattr(again, "error", None) else ""
    return f"it answered {status}{detail} to the paid request"


def bare(exc: BaseException) -> str:
    """An error's message without this tool's ``pay_http:`` prefix."""
    return str(exc).removeprefix("pay_http: ")


async def unpaid_refusal(
    ctx: ToolContext,
    url: str,
    resp: httpx.Response,
    *,
    method: str,
    body: Mapping[str, object] | None,
) -> ToolError:
    """The error for an unpaid request answered neither 200 nor 402. A GET answered
    404/405 at a route that sells over POST names the method and JSON body its 402
    declares (read unpaid), so the call is proposed again over POST (the judge rules on
    the method proposed, so the tool never switches it itself): that GET is refused for
    good. Any other status stays retryable (a 5xx may pass on a later try)."""
    if resp.status_code in (404, 405) and method == "GET" and body is None:
        declared = await _post_terms(ctx, url)
        if declared is not None:
            post_url, post, example = declared
            return PermanentToolError(
                f"pay_http: {POST_ROUTE} {post} {post_url} (GET answered "
                f"{resp.status_code}); nothing was paid. Its 402 declares a JSON body like "
                f"{json.dumps(example, separators=(',', ':'))[:200]}. Fix: propose pay_http "
                f"with method {post!r}, that URL and a JSON body for your question.",
                http_status=resp.status_code,
            )
    return ToolError(unexpected_status(url, resp, paid=False), http_status=resp.status_code)


async def _post_terms(ctx: ToolContext, url: str) -> tuple[str, str, object] | None:
    """(URL, method, example body) a route's 402 for POST declares (its bazaar input),
    asked unpaid with the URL's query as the JSON body; None when it sells no POST."""
    u = httpx.URL(url)
    query = dict(u.params.items())
    bare_url = str(u.copy_with(query=None))
    try:
        probe = await fetch(ctx, bare_url, method="POST", body=query)
        pr = parse_payment_required(probe) if probe.status_code == 402 else None
    except (ToolError, X402ProtocolError):
        return None
    if pr is None:
        return None
    bazaar = (getattr(pr, "extensions", None) or {}).get("bazaar")
    info = bazaar.get("info") if isinstance(bazaar, dict) else None
    declared = info.get("input") if isinstance(info, dict) else None
    if not isinstance(declared, dict):
        declared = {}
    example = declared.get("body") if isinstance(declared.get("body"), dict) else query
    return bare_url, str(declared.get("method") or "POST").upper(), example
