"""The devnet facilitator's catalogue: x402 resources found through their ``bazaar`` declarations.

Entries come only from what a seller declares in its own 402 (the ``bazaar`` extension,
read with x402's ``extract_discovery_info``): after a verify on the facilitator, or when a
seller asks to be listed and the facilitator fetches its unpaid 402 itself. The catalogue
serves x402's discovery API shapes (``/discovery/resources`` and ``/discovery/search``).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import httpx
from x402.extensions.bazaar import BAZAAR, DiscoveryResource, extract_discovery_info
from x402.http import decode_payment_required_header
from x402.schemas import (
    PaymentPayload,
    PaymentRequired,
    PaymentRequirements,
    parse_payment_required,
)
from x402.schemas.v1 import PaymentPayloadV1, PaymentRequiredV1, PaymentRequirementsV1

from chain.mcp_client import McpTransport, McpUnreachable, call_tool
from chain.tls import tls_context

__all__ = ["Catalogue", "probe_declaration", "probe_mcp_declaration"]

#: Generous: on a loaded machine the seller (and an MCP session) can take seconds to answer.
_PROBE_TIMEOUT_S = 15.0
#: A seller may list at most this many resources; the catalogue at most this many in all.
MAX_RESOURCES_PER_SELLER = 32
MAX_RESOURCES = 1024

_Declared = tuple[dict[str, object], dict[str, object]]
"""(payload-shaped dict, requirement) as a seller's 402 declares them."""


class Catalogue:
    """Thread-safe catalogue of discoverable resources, keyed by (resource URL, tool name)."""

    def __init__(self) -> None:
        self._items: dict[str, DiscoveryResource] = {}
        self._lock = threading.Lock()

    def add_from_payment(
        self,
        payload: PaymentPayload | PaymentPayloadV1 | dict[str, object],
        requirements: PaymentRequirements | PaymentRequirementsV1 | dict[str, object],
    ) -> DiscoveryResource | None:
        """Catalogue the resource a payment was for, from the ``bazaar`` extension the buyer
        echoed (v2) or the requirement's output schema (v1); None when not declared."""
        # A v1 payload as the dict x402 makes of any model (it reads the version there).
        if not isinstance(payload, dict | PaymentPayload):
            payload = payload.model_dump(by_alias=True)
        found = extract_discovery_info(payload, requirements, validate=True)
        if found is None:
            return None
        req = (
            requirements
            if isinstance(requirements, dict)
            else requirements.model_dump(by_alias=True, exclude_none=True)
        )
        item = DiscoveryResource(
            resource=found.resource_url,
            type="mcp" if found.tool_name else "http",
            x402_version=found.x402_version,
            accepts=[req],
            last_updated=datetime.now(UTC).isoformat(),
            description=found.description,
            mime_type=found.mime_type,
            service_name=found.service_name,
            tags=found.tags,
            icon_url=found.icon_url,
            extensions={BAZAAR.key: (found.extensions or {}).get(BAZAAR.key)},
        )
        key = f"{found.resource_url}#{found.tool_name or found.method}"
        with self._lock:
            if key in self._items or len(self._items) < MAX_RESOURCES:
                self._items[key] = item
        return item

    def items(
        self,
        *,
        type: str | None = None,
        pay_to: str | None = None,
        scheme: str | None = None,
        network: str | None = None,
        extensions: str | None = None,
        query: str | None = None,
    ) -> list[DiscoveryResource]:
        """The catalogued resources matching every given filter, oldest first."""
        with self._lock:
            items = list(self._items.values())

        def accepts(item: DiscoveryResource, key: str, want: str) -> bool:
            return any(str(a.get(key, "")).lower() == want.lower() for a in item.accepts or ())

        words = (query or "").lower().split()
        out = []
        for item in items:
            if type and item.type != type:
                continue
            if pay_to and not accepts(item, "payTo", pay_to):
                continue
            if scheme and not accepts(item, "scheme", scheme):
                continue
            if network and not accepts(item, "network", network):
                continue
            if extensions and extensions not in (item.extensions or {}):
                continue
            if words:
                text = " ".join(
                    [item.resource, item.description or "", item.service_name or ""]
                    + list(item.tags or ())
                ).lower()
                if not any(w in text for w in words):
                    continue
            out.append(item)
        return out


def probe_declaration(url: str, method: str) -> _Declared | None:
    """Fetch ``url`` unpaid and return (payload-shaped dict, requirement) from its 402, as
    :meth:`Catalogue.add_from_payment` reads them; None when it does not answer 402 v2."""
    try:
        resp = httpx.request(
            method.upper(), url, json={} if method.upper() == "POST" else None,
            timeout=_PROBE_TIMEOUT_S, follow_redirects=False, verify=tls_context(),
        )
    except httpx.HTTPError:
        return None
    header = resp.headers.get("payment-required")
    if resp.status_code != 402 or not header:
        return None
    try:
        required = decode_payment_required_header(header)
    except ValueError:
        return None
    return _declared(required)


async def probe_mcp_declaration(
    url: str, tool: str, arguments: dict[str, object], transport: McpTransport | None = None
) -> _Declared | None:
    """Call an MCP ``tool`` unpaid and return what its x402 402 result declares, like
    :func:`probe_declaration`; None when it does not answer with a v2 PaymentRequired.
    The transport is ``transport``, else the one ``url``'s endpoint names (``/mcp``,
    ``/sse``), else streamable HTTP and then SSE (``chain.mcp_client``)."""
    try:
        result, _ = await call_tool(url, tool, arguments, transport=transport,
                                    timeout_s=_PROBE_TIMEOUT_S)
    except McpUnreachable:  # anything but a 402 result lists nothing
        return None
    if not result.isError or not isinstance(result.structuredContent, dict):
        return None
    try:
        required = parse_payment_required(result.structuredContent)
    except (ValueError, TypeError):
        return None
    return _declared(required)


def _declared(required: PaymentRequired | PaymentRequiredV1) -> _Declared | None:
    if required.x402_version != 2 or not required.accepts:
        return None
    dumped = required.model_dump(by_alias=True, exclude_none=True)
    requirement = dumped["accepts"][0]
    payload = {
        "x402Version": 2,
        "resource": dumped.get("resource") or {},
        "extensions": dumped.get("extensions") or {},
        "accepted": requirement,
        "payload": {},
    }
    return payload, requirement
