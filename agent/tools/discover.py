"""discover: find x402 sellers through discovery APIs (the x402 Bazaar), free.

Asks every configured discovery URL (``NIB_DISCOVERY_URL``, comma-separated; on the devnet
its facilitator service) through the ``x402`` package's bazaar client, filters the answers
on our side too (network, asset, price), spreads what it keeps across sellers (one seller
listing many resources cannot crowd the others out), and records the offers in the run's
:class:`~agent.tools.x402.offers.OfferBook`, where paying tools and the judge's best-offer
comparison find them. Listing an offer never allowlists its seller.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from itertools import zip_longest

import httpx
from pydantic import BaseModel, ConfigDict, Field
from x402.extensions.bazaar import (
    ListDiscoveryResourcesParams,
    SearchDiscoveryResourcesParams,
    with_bazaar,
)
from x402.http import FacilitatorConfig, HTTPFacilitatorClientSync

from agent.errors import ToolError
from agent.interrupts import gather_within
from agent.jsonvalues import as_list
from agent.tools.base import FreeLimits, Observation, Tool, ToolContext
from agent.tools.money import UsdcAmount
from agent.tools.x402.offers import Offer, OfferBook, allowlisted_sellers, offer_from_discovery
from chain.mcp_client import mcp_tool_name
from chain.money import format_usdc
from chain.seller_url import seller_url
from judge.http_proxy import proxy_for
from judge.tls import tls_context

__all__ = ["DISCOVERY_SETTING", "DiscoverArgs", "DiscoverTool", "discovery_urls"]

#: Where discovery is configured (named in errors).
DISCOVERY_SETTING = "NIB_DISCOVERY_URL (comma-separated discovery/facilitator base URLs)"
#: At most this many offers are kept per call: results must stay small.
MAX_OFFERS = 20
_TIMEOUT_S = 10.0
#: Each discovery API is read a page of _PAGE listings at a time, at most _PAGES pages and
#: for at most _PAGING_S seconds: a seller whose listings fill the first page cannot hide
#: the sellers listed after it, and a service that pages forever cannot hold the run.
_PAGE = 200
_PAGES = 5
_PAGING_S = 8.0
#: At most this many listings refused for their URL or tool name are named in one answer.
_MAX_REFUSED = 8


@dataclass(frozen=True)
class _Listings:
    """What one discovery API listed: the offers, and each listing left out with why."""

    offers: list[Offer]
    refused: list[str]


def discovery_urls(ctx: ToolContext) -> tuple[str, ...]:
    """The discovery base URLs configured for this run (``extras["discovery_urls"]``)."""
    raw = ctx.extras.get("discovery_urls") or ()
    urls = raw.split(",") if isinstance(raw, str) else [u for u in as_list(raw) if isinstance(u, str)]
    return tuple(dict.fromkeys(u.strip().rstrip("/") for u in urls if u and u.strip()))


class DiscoverArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(
        default="",
        max_length=200,
        description="Words to search sellers' descriptions for, e.g. 'token issuer'; "
        "empty lists everything.",
    )
    network: str | None = Field(
        default=None, description="CAIP-2 network the offer must accept, e.g. eip155:31337."
    )
    asset: str | None = Field(default=None, description="Token address the offer must accept.")
    max_price: UsdcAmount | None = Field(
        default=None, description="Highest price: atomic USDC or e.g. '0.05 USDC'."
    )


class DiscoverTool(Tool[DiscoverArgs]):
    """List x402 offers from the configured discovery APIs (free, read-only)."""

    name = "discover"
    # Discovery asks every configured discovery API; twice a run is a search, not a loop.
    free_limits = FreeLimits(max_calls_per_run=2, max_result_bytes=32_768, timeout_s=20.0)
    args_model = DiscoverArgs
    kind = "free"
    description = (
        "Find x402 sellers (HTTP GET/POST resources and MCP tools) through the configured "
        "discovery APIs: each offer's URL, method, price, input example and the fact kinds "
        "its description matches. Free; buying is a separate paid call."
    )

    def __init__(self, offers: OfferBook) -> None:
        self.offers = offers

    async def run(self, args: DiscoverArgs, ctx: ToolContext) -> Observation:
        urls = discovery_urls(ctx)
        if not urls:
            raise ToolError(
                "discover: no discovery API is configured; expected at least one URL. Fix: "
                f"set {DISCOVERY_SETTING} (`nib devnet up` provides one on the devnet)."
            )
        results = await gather_within(*(asyncio.to_thread(_ask, url, args) for url in urls))
        offers: list[Offer] = []
        failed: list[str] = []
        refused: list[str] = []
        for url, result in zip(urls, results, strict=True):
            if isinstance(result, BaseException):
                failed.append(f"{url}: {type(result).__name__}: {str(result)[:160]}")
                continue
            offers += [o for o in result.offers if _fits(o, args)]
            refused += result.refused
        refused = list(dict.fromkeys(refused))[:_MAX_REFUSED]
        if failed and not offers and len(failed) == len(urls):
            raise ToolError(
                f"discover: no discovery API answered ({'; '.join(failed)}); expected the x402 "
                f"discovery API. Fix: check {DISCOVERY_SETTING} and that the service is up."
            )
        offers = _spread(offers, MAX_OFFERS)
        self.offers.add(offers)
        allowed = allowlisted_sellers(ctx.allowlist)
        rows = [{**o.as_dict(), "allowlisted": o.seller in allowed} for o in offers]
        sellers = sorted({o.seller for o in offers})
        listed = "; ".join(
            f"{o.method} {o.resource}{'#' + o.tool if o.tool else ''} "
            f"{format_usdc(o.price) if o.price is not None else '?'} "
            f"[{', '.join(o.kinds) or 'no known fact kind'}]"
            for o in offers[:8]
        )
        summary = f"discovered {len(offers)} offers from {len(sellers)} sellers: {listed}"
        if failed:
            summary += f" (unanswered: {len(failed)})"
        if refused:
            summary += (f"; left out {len(refused)} listing(s) nib will not call, "
                        f"e.g. {refused[0]}")
        return Observation(
            tool=self.name,
            ok=True,
            summary=summary,
            data={"offers": rows, "sources": list(urls), "failed": failed, "refused": refused},
        )


def _ask(url: str, args: DiscoverArgs) -> _Listings:
    """One discovery API through x402's bazaar client (sync: the client's helper is), page
    after page within :data:`_PAGES` and :data:`_PAGING_S`; a listing whose URL no request
    may be sent to (credentials in it, no host, ...), or an MCP tool pay_mcp would not call
    (a name outside the MCP specification's, which may be prose), is left out, with why
    (a bad name's length and characters, never its text)."""
    # x402's own client would take the environment's proxies, even to a loopback service.
    http = httpx.Client(timeout=_TIMEOUT_S, follow_redirects=True, trust_env=False,
                        proxy=proxy_for(url), verify=tls_context())
    client = HTTPFacilitatorClientSync(FacilitatorConfig(url=url, timeout=_TIMEOUT_S,
                                                         http_client=http))
    # x402 2.25 annotates the async client, but its bazaar helper works only with the sync one.
    bazaar = with_bazaar(client).extensions.bazaar  # type: ignore[arg-type]
    query = args.query.strip()
    items: list[object] = []
    deadline = time.monotonic() + _PAGING_S
    try:
        offset, cursor = 0, None
        for _ in range(_PAGES):
            if query:
                found = bazaar.search(SearchDiscoveryResourcesParams(
                    query=query, network=args.network, limit=_PAGE, cursor=cursor))
                page: list[object] = list(found.resources)
                cursor = found.pagination.cursor if found.pagination else None
                more = cursor is not None
            else:
                listed = bazaar.list_resources(ListDiscoveryResourcesParams(
                    network=args.network, limit=_PAGE, offset=offset))
                page = list(listed.items)
                offset += len(page)
                total = listed.pagination.total  # 0: the service does not say
                more = offset < total or (not total and len(page) >= _PAGE)
            items += page
            if not page or not more or time.monotonic() > deadline:
                break
    finally:
        http.close()
    offers: list[Offer] = []
    refused: list[str] = []
    for item in items:
        resource = str(getattr(item, "resource", "") or "")
        try:
            seller_url(resource, what="resource URL it lists", example="http://127.0.0.1:8402/tokens")
        except ValueError as exc:
            refused.append(f"{url} listed a resource nib will not request: {exc}")
            continue
        offer = offer_from_discovery(item, url)
        if offer is None:
            continue
        if offer.type == "mcp":
            try:
                mcp_tool_name(offer.tool or "")
            except ValueError as exc:
                refused.append(f"{url} listed an MCP tool at {resource} nib will not call: {exc}")
                continue
        offers.append(offer)
    return _Listings(offers, refused)


def _spread(offers: list[Offer], limit: int) -> list[Offer]:
    """At most ``limit`` of ``offers``, round-robin by seller (each seller's cheapest
    first, then each one's second, ...): every seller with a matching offer is in the
    answer before any seller has two, however many one seller lists."""
    by_seller: dict[str, dict[str, Offer]] = {}
    for offer in sorted(offers, key=_cheapest):
        by_seller.setdefault(offer.seller, {}).setdefault(
            OfferBook.key(offer.resource, offer.tool), offer)
    rounds = zip_longest(*(list(o.values()) for o in by_seller.values()))
    spread = [o for each in rounds for o in sorted((o for o in each if o), key=_cheapest)]
    return spread[:limit]


def _cheapest(offer: Offer) -> tuple[bool, int]:
    return (offer.price is None, offer.price or 0)


def _fits(offer: Offer, args: DiscoverArgs) -> bool:
    """Filters applied on our side too: a discovery service is not trusted to filter."""
    if args.network and (offer.network or "").lower() != args.network.lower():
        return False
    if args.asset and (offer.asset or "").lower() != args.asset.lower():
        return False
    return args.max_price is None or (offer.price is not None and offer.price <= args.max_price)

