"""The devnet facilitator's catalogue: x402 resources found through their ``bazaar`` declarations.

Entries come only from what a seller declares in its own 402 (the ``bazaar`` extension,
read with x402's ``extract_discovery_info``): after a verify on the facilitator, or when a
seller asks to be listed and the facilitator fetches its unpaid 402 itself. The catalogue
serves x402's discovery API shapes (``/discovery/resources`` and ``/discovery/search``).
A resource that cannot be listed gets the reason (:class:`Unlisted`), which the facilitator
answers to the seller that asked (:func:`register_resources`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypedDict

import httpx
from pydantic import ValidationError
from x402.extensions.bazaar import (
    BAZAAR,
    DiscoveryResource,
    extract_discovery_info,
    validate_discovery_extension,
)
from x402.extensions.bazaar.types import parse_discovery_extension
from x402.http import decode_payment_required_header
from x402.schemas import (
    PaymentPayload,
    PaymentRequired,
    PaymentRequirements,
    parse_payment_required,
)
from x402.schemas.v1 import PaymentPayloadV1, PaymentRequiredV1, PaymentRequirementsV1

from chain.http_proxy import proxy_for
from chain.mcp_client import McpErrorAnswer, McpTransport, McpUnreachable, call_tool, mcp_tool_name
from chain.seller_url import seller_origin, seller_url
from chain.tls import tls_context

__all__ = [
    "MAX_LISTED_PER_SELLER",
    "MAX_RESOURCES_PER_REGISTRATION",
    "Catalogue",
    "Refused",
    "Registration",
    "Unlisted",
    "probe_declaration",
    "probe_mcp_declaration",
    "register_resources",
    "unrequestable",
]

#: Generous: on a loaded machine the seller (and an MCP session) can take seconds to answer.
_PROBE_TIMEOUT_S = 15.0
#: One registration names at most this many resources; one seller origin
#: (scheme://host:port) keeps at most MAX_LISTED_PER_SELLER listed, so a seller that lists
#: many cannot crowd the others out of a buyer's page; the catalogue at most MAX_RESOURCES.
MAX_RESOURCES_PER_REGISTRATION = 32
MAX_LISTED_PER_SELLER = 8
MAX_RESOURCES = 1024

_Declared = tuple[dict[str, object], dict[str, object]]
"""(payload-shaped dict, requirement) as a seller's 402 declares them."""
#: What a refusal's fix says about the declaration itself.
_DECLARE = ("Fix: declare it with x402's declare_discovery_extension (an MCP tool: "
            "declare_mcp_discovery_extension) and register bazaar_resource_server_extension "
            "on the resource server")


@dataclass(frozen=True)
class Unlisted:
    """Why a resource was not listed, in one line: what its seller's answer held, what
    listing needs, and the fix."""

    why: str


class Refused(TypedDict):
    """One resource ``POST /discovery/register`` did not list, on the wire."""

    resource: str
    why: str


@dataclass(frozen=True)
class Registration:
    """The facilitator's answer to a seller that asked to be listed: the resources it
    listed, and each one it did not with the reason."""

    listed: tuple[str, ...]
    refused: tuple[Refused, ...] = ()

    def line(self) -> str:
        """One line for the seller's log, every refusal's reason in it."""
        refused = "".join(f"; not listed: {r['resource']}: {r['why']}" for r in self.refused)
        return f"listed: {list(self.listed)}{refused}"


def register_resources(
    facilitator_url: str, resources: list[dict[str, object]], *, timeout_s: float
) -> Registration:
    """Ask the facilitator at ``facilitator_url`` to list ``resources`` (``url``,
    ``method``; an MCP tool's ``tool``, ``arguments``, ``transport``): it reads each
    one's 402 itself."""
    resp = httpx.post(
        facilitator_url.rstrip("/") + "/discovery/register",
        json={"resources": resources},
        timeout=timeout_s,
        trust_env=False,
        proxy=proxy_for(facilitator_url),
        verify=tls_context(),
    )
    resp.raise_for_status()
    body = resp.json()
    refused = [r for r in body.get("refused") or () if isinstance(r, dict)]
    return Registration(
        listed=tuple(str(u) for u in body.get("listed") or ()),
        refused=tuple(Refused(resource=str(r.get("resource")), why=str(r.get("why")))
                      for r in refused),
    )


def _brief(exc: BaseException) -> str:
    """An exception's message on one line, bounded (a pydantic error spans many)."""
    if isinstance(exc, ValidationError):
        return _oneline("; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()
        ))
    return _oneline(str(exc) or type(exc).__name__)


def _oneline(text: str, limit: int = 300) -> str:
    """``text`` on one line, at most ``limit`` characters (a seller's words are bounded)."""
    return " ".join(text.split())[:limit]


def unrequestable(url: str, tool: str | None = None) -> Unlisted | None:
    """Why ``url`` (and ``tool``, an MCP tool's name) cannot be listed when no buyer could
    call it (not http(s), no host, a port no socket takes, credentials in it; a tool name
    outside the MCP specification's: the rules nib's paid tools apply), else None."""
    try:
        seller_url(url, what="resource URL", example="http://127.0.0.1:8402/tokens")
        if tool is not None:
            mcp_tool_name(tool)
    except ValueError as exc:
        return Unlisted(str(exc))
    return None


@dataclass(frozen=True)
class _Entry:
    """One listing as the catalogue keeps it: its key (resource URL and tool name or
    method), its seller origin and the x402 discovery item."""

    key: str
    seller: str
    item: DiscoveryResource


def _entry(
    payload: PaymentPayload | PaymentPayloadV1 | dict[str, object],
    requirements: PaymentRequirements | PaymentRequirementsV1 | dict[str, object],
) -> _Entry | Unlisted:
    """The listing a payment (or a probed 402) declares, or why it cannot be listed: no
    bazaar declaration, or a URL or tool name no buyer could call."""
    # A v1 payload as the dict x402 makes of any model (it reads the version there).
    if not isinstance(payload, dict | PaymentPayload):
        payload = payload.model_dump(by_alias=True)
    found = extract_discovery_info(payload, requirements, validate=True)
    if found is None:
        dumped = payload if isinstance(payload, dict) else payload.model_dump(by_alias=True)
        return Unlisted(_undeclared(dumped))
    refused = unrequestable(found.resource_url, found.tool_name or None)
    if refused is not None:
        return refused
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
    return _Entry(key, seller_origin(found.resource_url), item)


class Catalogue:
    """Thread-safe catalogue of discoverable resources, keyed by (resource URL, tool name),
    at most :data:`MAX_LISTED_PER_SELLER` per seller origin (counted as entries come and go)."""

    def __init__(self) -> None:
        self._items: dict[str, DiscoveryResource] = {}
        self._per_seller: dict[str, int] = {}
        self._lock = threading.Lock()

    def add_from_payment(
        self,
        payload: PaymentPayload | PaymentPayloadV1 | dict[str, object],
        requirements: PaymentRequirements | PaymentRequirementsV1 | dict[str, object],
    ) -> DiscoveryResource | Unlisted:
        """Catalogue the resource a payment was for, from the ``bazaar`` extension the buyer
        echoed (v2) or the requirement's output schema (v1); why not when it cannot be."""
        entry = _entry(payload, requirements)
        if isinstance(entry, Unlisted):
            return entry
        with self._lock:
            return self._put(entry)

    def register(
        self, declared: list[tuple[str, _Declared | Unlisted]]
    ) -> list[DiscoveryResource | Unlisted]:
        """List what one registration declared, ``(URL registered, what its 402 declares)``
        in order (each as :meth:`add_from_payment`, or why not). The MCP tools it lists for
        a server URL replace the tools listed for that URL before: a server that renamed its
        tool is not listed under the old name as well, and the old entries do not count
        against its bound. Only a server's own registration replaces (the URL its 402
        declares is the one registered), and a server URL none of whose tools can be listed
        now keeps what it had: a registration that fails, or names another's URL in its 402,
        de-lists nothing."""
        entries = [(url, d if isinstance(d, Unlisted) else _entry(*d)) for url, d in declared]
        kept = [e for _, e in entries if isinstance(e, _Entry)]
        servers = {e.item.resource for url, e in entries if isinstance(e, _Entry)
                   and e.item.type == "mcp" and e.item.resource == url.split("#", 1)[0].strip()}
        keys = {e.key for e in kept}
        with self._lock:
            stale = [k for k, i in self._items.items()
                     if i.type == "mcp" and i.resource in servers and k not in keys]
            for key in stale:
                self._drop(key)
            return [self._put(e) if isinstance(e, _Entry) else e for _, e in entries]

    def _put(self, entry: _Entry) -> DiscoveryResource | Unlisted:
        """Add or replace ``entry`` within the bounds (the caller holds the lock)."""
        if entry.key not in self._items:
            full = self._full(entry.seller, entry.item.resource)
            if full is not None:
                return full
            self._per_seller[entry.seller] = self._per_seller.get(entry.seller, 0) + 1
        self._items[entry.key] = entry.item
        return entry.item

    def _drop(self, key: str) -> None:
        """Remove a listed entry, counted off its seller (the caller holds the lock)."""
        seller = seller_origin(self._items.pop(key).resource)
        self._per_seller[seller] -= 1

    def _full(self, seller: str, resource: str) -> Unlisted | None:
        """Why a new entry of ``seller`` cannot be added (the caller holds the lock)."""
        if len(self._items) >= MAX_RESOURCES:
            return Unlisted(
                f"found the catalogue full ({MAX_RESOURCES} resources); expected room for "
                f"{resource}. Fix: restart the facilitator (`nib devnet down`, then "
                "`nib devnet up`)"
            )
        listed = self._per_seller.get(seller, 0)
        if listed >= MAX_LISTED_PER_SELLER:
            return Unlisted(
                f"found {listed} resources of the seller {seller} already listed; expected at "
                f"most {MAX_LISTED_PER_SELLER} per seller origin (so one seller cannot crowd "
                f"the others out of discovery), not {resource} as well. Fix: register your "
                f"{MAX_LISTED_PER_SELLER} most useful resources (registering a listed URL "
                "again replaces it)"
            )
        return None

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


def probe_declaration(url: str, method: str) -> _Declared | Unlisted:
    """Fetch ``url`` unpaid and return (payload-shaped dict, requirement) from its 402, as
    :meth:`Catalogue.add_from_payment` reads them; why not when it does not answer 402 v2."""
    verb = method.upper()
    try:
        resp = httpx.request(
            verb, url, json={} if verb == "POST" else None,
            timeout=_PROBE_TIMEOUT_S, follow_redirects=False, trust_env=False,
            proxy=proxy_for(url), verify=tls_context(),
        )
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return Unlisted(
            f"found no answer to an unpaid {verb} {url} ({type(exc).__name__}: {_brief(exc)}); "
            "expected HTTP 402 from the seller. Fix: check that the seller serves that URL and "
            "that the facilitator can reach it"
        )
    if resp.status_code != 402:
        return Unlisted(
            f"found HTTP {resp.status_code} for an unpaid {verb} {url}; expected 402 with a "
            f"payment-required header. Fix: sell the route under {verb} behind x402's payment "
            "middleware, or register it with the method it is sold under"
        )
    header = resp.headers.get("payment-required")
    if not header:
        return Unlisted(
            f"found a 402 without a payment-required header for {verb} {url}; expected x402 "
            "v2's payment-required header. Fix: serve the route with x402 v2's payment middleware"
        )
    try:
        required = decode_payment_required_header(header)
    except ValueError as exc:
        return Unlisted(
            f"found a payment-required header for {verb} {url} that x402 cannot read "
            f"({_brief(exc)}); expected base64 JSON of a v2 PaymentRequired. Fix: let x402's "
            "payment middleware write the header"
        )
    return _declared(required, f"{verb} {url}")


async def probe_mcp_declaration(
    url: str, tool: str, arguments: dict[str, object], transport: McpTransport | None = None
) -> _Declared | Unlisted:
    """Call an MCP ``tool`` unpaid and return what its x402 402 result declares, like
    :func:`probe_declaration`; why not when it does not answer with a v2 PaymentRequired.
    The transport is ``transport``, else the one ``url``'s endpoint names (``/mcp``,
    ``/sse``), else streamable HTTP and then SSE (``chain.mcp_client``)."""
    where = f"MCP tool {tool!r} at {url}"
    try:
        result, _ = await call_tool(url, tool, arguments, transport=transport,
                                    timeout_s=_PROBE_TIMEOUT_S)
    except McpErrorAnswer as exc:
        return Unlisted(
            f"found the server at {url} up, answering an unpaid call of the {where} with "
            f"JSON-RPC error {exc.code} ({exc.text!r}); expected x402's payment-required "
            'result. Fix: check the tool\'s name against the server\'s tools/list and the '
            '"arguments" its call takes'
        )
    except McpUnreachable as exc:  # anything but a 402 result lists nothing
        return Unlisted(
            f"found no answer from the {where} ({_brief(exc)}); expected its unpaid call to "
            "answer with x402's payment-required result. Fix: check that the server is up at "
            'that URL, and name its transport ("streamable-http" or "sse")'
        )
    x402 = "Fix: sell the tool with x402.mcp's payment wrapper"
    if not result.isError:
        return Unlisted(
            f"found the {where} answering an unpaid call with its result; expected x402's "
            f"payment-required error result (a tool given away is not sold). {x402}"
        )
    if not isinstance(result.structuredContent, dict):
        said = " ".join(getattr(c, "text", "") for c in result.content or ())
        return Unlisted(
            f"found the {where} answering an unpaid call with an error ({_oneline(said, 200) or 'no text'}) "
            f"and no structuredContent; expected x402's PaymentRequired as its structuredContent. "
            f"{x402}, and check the tool's name"
        )
    try:
        required = parse_payment_required(result.structuredContent)
    except (ValueError, TypeError) as exc:
        return Unlisted(
            f"found the {where} answering with structuredContent that is not an x402 "
            f"PaymentRequired ({_brief(exc)}); expected one. {x402}"
        )
    return _declared(required, where)


def _declared(required: PaymentRequired | PaymentRequiredV1, where: str) -> _Declared | Unlisted:
    if required.x402_version != 2:
        return Unlisted(
            f"found x402Version {required.x402_version} in the 402 of {where}; expected 2 "
            "(discovery lists what a v2 402's bazaar extension declares). Fix: serve it with x402 v2"
        )
    if not required.accepts:
        return Unlisted(
            f"found no payment requirement in the accepts of {where}'s 402; expected at least "
            "one. Fix: give the route a price (x402's PaymentOption)"
        )
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


def _undeclared(payload: Mapping[str, object]) -> str:
    """Why x402's ``extract_discovery_info`` found nothing to list in a 402's payload: the
    first step of its reading that fails, named (x402 only logs it)."""
    version = payload.get("x402Version", 1)
    if version != 2:
        return (f"found an x402 v{version} payment whose requirement declares no output "
                f"schema; expected a v2 402 with a bazaar extension. {_DECLARE}")
    extensions = payload.get("extensions")
    bazaar = extensions.get(BAZAAR.key) if isinstance(extensions, Mapping) else None
    if not bazaar:
        names = ", ".join(sorted(extensions)) if isinstance(extensions, Mapping) else ""
        return (f"found no bazaar extension in the 402 (its extensions: {names or 'none'}); "
                f"expected extensions.bazaar with info and schema. {_DECLARE}")
    if not isinstance(bazaar, dict):
        return (f"found extensions.bazaar of type {type(bazaar).__name__}; expected an object "
                f"with info and schema. {_DECLARE}")
    try:
        parsed = parse_discovery_extension(bazaar)
    except (ValueError, TypeError, AttributeError) as exc:  # the seller's JSON, any shape
        return (f"found a bazaar extension x402 cannot read ({_brief(exc)}); expected info and "
                f"schema as declare_discovery_extension writes them. {_DECLARE}")
    checked = validate_discovery_extension(parsed)
    if not checked.valid:
        return (f"found bazaar info that its own schema refuses ({'; '.join(checked.errors)}); "
                "expected info valid against extensions.bazaar.schema. Fix: make the info "
                "match the schema, or declare both with declare_discovery_extension")
    return ("found bazaar info naming neither an HTTP method nor an MCP tool; expected "
            f"info.input.method or info.input.toolName. {_DECLARE}")
