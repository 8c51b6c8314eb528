"""Who a seller asks to be paid, read by the judge itself from the seller's own 402.

Allowlisting a seller by its origin (``NIB_SELLER_ALLOWLIST``) admits the payTo that seller
advertises, bound at quote time: the judge fetches the resource's 402 unpaid (the method
and JSON body of the purchase, no redirects) and approves only a payload paying an address
the 402 names. The agent's word is never taken for it: a compromised agent that names an
allowlisted origin and its own address gets a 402 that does not name that address. A payTo
the seller changes after the verdict changes the payload, which the wallet then refuses
(``verdict-void``).
"""

from __future__ import annotations

import json

import httpx

__all__ = ["advertised_pay_to"]

_TIMEOUT_S = 10.0
_MAX_BYTES = 64_000


def advertised_pay_to(url: str, method: str = "GET", body: object = None) -> frozenset[str]:
    """The payTo addresses (lower case) the x402 402 at ``url`` advertises; empty when the
    resource answers anything but a readable 402, or cannot be reached."""
    try:
        resp = httpx.request(
            method.upper(), url, json=body if method.upper() == "POST" else None,
            timeout=_TIMEOUT_S, follow_redirects=False, trust_env=False,
        )
    except httpx.HTTPError:
        return frozenset()
    if resp.status_code != 402:
        return frozenset()
    return frozenset(str(a).lower() for a in _pay_tos(resp) if a)


def _pay_tos(resp: httpx.Response) -> list[object]:
    header = resp.headers.get("payment-required")
    if header:  # x402 v2: base64 JSON in the PAYMENT-REQUIRED header
        from x402.http import decode_payment_required_header

        try:
            required = decode_payment_required_header(header)
        except ValueError:
            return []
        return [getattr(a, "pay_to", None) for a in required.accepts]
    try:  # x402 v1: the JSON body
        data = json.loads(resp.content[:_MAX_BYTES])
    except ValueError:
        return []
    accepts = data.get("accepts") if isinstance(data, dict) else None
    return [a.get("payTo") for a in accepts or () if isinstance(a, dict)]
