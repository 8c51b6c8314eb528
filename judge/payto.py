"""What a seller asks to be paid, read by the judge itself from the seller's own 402.

Allowlisting a seller by its origin (``NIB_SELLER_ALLOWLIST``) admits the terms that seller
advertises, bound at quote time: the judge fetches the resource's 402 unpaid (the method
and JSON body of the purchase, no redirects) and approves only a payload paying exactly
one offer the 402 states: its payTo, its amount, its asset, on its network. The agent's
word is never taken for it: a compromised agent that names an allowlisted origin and its
own address gets a 402 that does not name that address, and one that pays the seller's
real payTo 1 atomic unit of a 0.01 USDC price gets a 402 that does not ask for 1 (a
purchase so cheap it costs nothing would otherwise be credited to that seller's
calibration as a real one). A payTo or price the seller changes after the verdict changes
the payload, which the wallet then refuses (``verdict-void``).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from judge.mcp_terms import SELLER_READ_S, OfferedTerms
from judge.tls import tls_context

__all__ = ["TermsOf", "advertised_terms"]

_TIMEOUT_S = SELLER_READ_S
_MAX_BYTES = 64_000
#: An idle kept-alive connection to a seller is closed after this many seconds.
_IDLE_S = 2.0


#: ``(url, method, body) -> the offers`` the seller's own 402 for that resource states.
TermsOf = Callable[[str, str, object], tuple[OfferedTerms, ...]]


def advertised_terms(url: str, method: str = "GET", body: object = None) -> tuple[OfferedTerms, ...]:
    """The ``exact`` offers the x402 402 at ``url`` states; empty when the resource answers
    anything but a readable 402, or cannot be reached. The whole read (connect, headers,
    body) takes at most ``_TIMEOUT_S`` and reads at most ``_MAX_BYTES`` of the body: a
    seller that trickles or floods its answer is not read further."""
    try:
        status, header, content = _READER.read(url, method.upper(), body)
    except (httpx.HTTPError, TimeoutError):
        return ()
    if status != 402:
        return ()
    return tuple(a for a in (_asked(o) for o in _offers(header, content)) if a is not None)


class _Reader:
    """The event loop and the kept-alive HTTP client every 402 read of this process
    shares, made on first use (and again in a forked child, which has no loop thread).

    A read is made for each decision (never answered from an earlier one); only the
    connection is kept: a new client per read cost a thread, an event loop and a TCP
    connection, ~3 ms against ~1 ms on a kept-alive one (bench/roundtrip.py). The client
    keeps no cookies (a seller cannot tie one decision's read to another), follows no
    redirect, ignores proxy settings of the environment, and has no connection limit, so
    a seller holding its reads cannot make another seller's read wait for a connection.
    An idle connection is dropped after ``_IDLE_S``, before servers commonly drop theirs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None

    def read(self, url: str, method: str, body: object) -> tuple[int, str | None, bytes]:
        loop, client = self._started()
        future = asyncio.run_coroutine_threadsafe(_read(client, url, method, body), loop)
        try:  # _read gives up within _TIMEOUT_S; this bound only guards a wedged loop
            return future.result(timeout=_TIMEOUT_S + 5)
        finally:
            future.cancel()

    def _started(self) -> tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]:
        with self._lock:
            if self._loop is None or self._client is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="judge-402", daemon=True).start()
                self._loop, self._pid = loop, os.getpid()
                self._client = httpx.AsyncClient(
                    timeout=_TIMEOUT_S, follow_redirects=False, trust_env=False,
                    verify=tls_context(), headers={"Accept-Encoding": "identity"},
                    cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
                    limits=httpx.Limits(max_connections=None, keepalive_expiry=_IDLE_S))
            return self._loop, self._client


_READER = _Reader()


async def _read(
    client: httpx.AsyncClient, url: str, method: str, body: object
) -> tuple[int, str | None, bytes]:
    """The status, PAYMENT-REQUIRED header and first ``_MAX_BYTES`` of the body at ``url``,
    within ``_TIMEOUT_S`` in all. A kept-alive connection the seller closed just as it was
    reused fails before any answer: that read is made once more, on a new connection."""
    import anyio

    with anyio.fail_after(_TIMEOUT_S):
        try:
            return await _read_once(client, url, method, body)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
            return await _read_once(client, url, method, body)


async def _read_once(
    client: httpx.AsyncClient, url: str, method: str, body: object
) -> tuple[int, str | None, bytes]:
    async with client.stream(method, url, json=body if method == "POST" else None) as resp:
        content = bytearray()
        if resp.status_code == 402:
            async for chunk in resp.aiter_raw():  # as sent: nothing inflated past the cap
                content += chunk
                if len(content) >= _MAX_BYTES:
                    break
        return resp.status_code, resp.headers.get("payment-required"), bytes(content[:_MAX_BYTES])


def _offers(header: str | None, content: bytes) -> list[dict[str, object]]:
    """The 402's offers as plain dicts in v1 field names (payTo, maxAmountRequired)."""
    if header:  # x402 v2: base64 JSON in the PAYMENT-REQUIRED header
        from x402.http import decode_payment_required_header

        try:
            required = decode_payment_required_header(header)
        except ValueError:
            return []
        return [{"scheme": a.scheme, "network": a.network, "asset": a.asset,
                 "maxAmountRequired": a.get_amount(),
                 "payTo": a.pay_to} for a in required.accepts]  # fmt: skip
    try:  # x402 v1: the JSON body
        data = json.loads(content)
    except ValueError:
        return []
    accepts = data.get("accepts") if isinstance(data, dict) else None
    return [a for a in accepts or () if isinstance(a, dict)]


def _asked(offer: dict[str, object]) -> OfferedTerms | None:
    return OfferedTerms.stated(offer.get("scheme"), offer.get("network"),
                               offer.get("maxAmountRequired"), offer.get("payTo"),
                               offer.get("asset"))
