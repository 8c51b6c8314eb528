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

__all__ = ["TermsOf", "advertised_terms"]

_TIMEOUT_S = 10.0
_MAX_BYTES = 64_000


#: ``(url, method, body) -> the offers`` the seller's own 402 for that resource states.
TermsOf = Callable[[str, str, object], tuple[OfferedTerms, ...]]


def advertised_terms(url: str, method: str = "GET", body: object = None) -> tuple[OfferedTerms, ...]:
    """The ``exact`` offers the x402 402 at ``url`` states; empty when the resource answers
    anything but a readable 402, or cannot be reached."""
    try:
        resp = httpx.request(
            method.upper(), url, json=body if method.upper() == "POST" else None,
            timeout=_TIMEOUT_S, follow_redirects=False, trust_env=False,
        )
    except httpx.HTTPError:
        return ()
    if resp.status_code != 402:
        return ()
    return tuple(a for a in (_asked(o) for o in _offers(resp)) if a is not None)


def _offers(resp: httpx.Response) -> list[dict[str, object]]:
    """The 402's offers as plain dicts in v1 field names (payTo, maxAmountRequired)."""
    header = resp.headers.get("payment-required")
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
        data = json.loads(resp.content[:_MAX_BYTES])
    except ValueError:
        return []
    accepts = data.get("accepts") if isinstance(data, dict) else None
    return [a for a in accepts or () if isinstance(a, dict)]


def _asked(offer: dict[str, object]) -> OfferedTerms | None:
    return OfferedTerms.stated(offer.get("scheme"), offer.get("network"),
                               offer.get("maxAmountRequired"), offer.get("payTo"),
                               offer.get("asset"))
