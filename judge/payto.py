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

import json
from collections.abc import Callable

import httpx

from judge.mcp_terms import OfferedTerms
from judge.tls import tls_context

__all__ = ["TermsOf", "advertised_terms"]

_TIMEOUT_S = 10.0
_MAX_BYTES = 64_000


#: ``(url, method, body) -> the offers`` the seller's own 402 for that resource states.
TermsOf = Callable[[str, str, object], tuple[OfferedTerms, ...]]


def advertised_terms(url: str, method: str = "GET", body: object = None) -> tuple[OfferedTerms, ...]:
    """The ``exact`` offers the x402 402 at ``url`` states; empty when the resource answers
    anything but a readable 402, or cannot be reached. The whole read (connect, headers,
    body) takes at most ``_TIMEOUT_S`` and reads at most ``_MAX_BYTES`` of the body: a
    seller that trickles or floods its answer is not read further."""
    import asyncio
    import concurrent.futures

    try:
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="judge-402") as pool:
            # Its own event loop: the judge decides in a plain thread, or under a running loop.
            status, header, content = pool.submit(
                asyncio.run, _read(url, method.upper(), body)).result()
    except (httpx.HTTPError, TimeoutError):
        return ()
    if status != 402:
        return ()
    return tuple(a for a in (_asked(o) for o in _offers(header, content)) if a is not None)


async def _read(url: str, method: str, body: object) -> tuple[int, str | None, bytes]:
    """The status, PAYMENT-REQUIRED header and first ``_MAX_BYTES`` of the body at ``url``."""
    import anyio

    with anyio.fail_after(_TIMEOUT_S):
        async with (
            httpx.AsyncClient(timeout=_TIMEOUT_S, follow_redirects=False, trust_env=False,
                              verify=tls_context(),
                              headers={"Accept-Encoding": "identity"}) as client,
            client.stream(method, url, json=body if method == "POST" else None) as resp,
        ):
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
