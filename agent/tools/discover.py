"""discover: find x402 sellers through discovery APIs (the x402 Bazaar), free.

Asks every configured discovery URL (``NIB_DISCOVERY_URL``, comma-separated; on the devnet
its facilitator service) through the ``x402`` package's bazaar client, filters the answers
on our side too (network, asset, price), and records the offers in the run's
:class:`~agent.tools.x402.offers.OfferBook`, where paying tools and the judge's best-offer
comparison find them. Listing an offer never allowlists its seller.
"""

from __future__ import annotations

import asyncio

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
from chain.money import format_usdc
from judge.http_proxy import proxy_for
from judge.tls import tls_context

__all__ = ["DISCOVERY_SETTING", "DiscoverArgs", "DiscoverTool", "discovery_urls"]

#: Where discovery is configured (named in errors).
DISCOVERY_SETTING = "NIB_DISCOVERY_URL (comma-separated discovery/facilitator base URLs)"
#: At most this many offers are kept per call: results must stay small.
MAX_OFFERS = 20
_TIMEOUT_S = 10.0


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
        for url, result in zip(urls, results, strict=True):
            if isinstance(result, BaseException):
                failed.append(f"{url}: {type(result).__name__}: {str(result)[:160]}")
                continue
            offers += [o for o in result if _fits(o, args)]
        if failed and not offers and len(failed) == len(urls):
            raise ToolError(
                f"discover: no discovery API answered ({'; '.join(failed)}); expected the x402 "
                f"discovery API. Fix: check {DISCOVERY_SETTING} and that the service is up."
            )
        offers = sorted(offers, key=lambda o: (o.price is None, o.price or 0))[:MAX_OFFERS]
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
        return Observation(
            tool=self.name,
            ok=True,
            summary=summary,
            data={"offers": rows, "sources": list(urls), "failed": failed},
        )


def _ask(url: str, args: DiscoverArgs) -> list[Offer]:
    """One discovery API through x402's bazaar client (sync: the client's helper is)."""
    # x402's own client would take the environment's proxies, even to a loopback service.
    http = httpx.Client(timeout=_TIMEOUT_S, follow_redirects=True, trust_env=False,
                        proxy=proxy_for(url), verify=tls_context())
    client = HTTPFacilitatorClientSync(FacilitatorConfig(url=url, timeout=_TIMEOUT_S,
                                                         http_client=http))
    # x402 2.25 annotates the async client, but its bazaar helper works only with the sync one.
    bazaar = with_bazaar(client).extensions.bazaar  # type: ignore[arg-type]
    try:
        if args.query.strip():
            found = bazaar.search(
                SearchDiscoveryResourcesParams(
                    query=args.query.strip(), network=args.network, limit=MAX_OFFERS * 2
                )
            )
            items = found.resources
        else:
            listed = bazaar.list_resources(
                ListDiscoveryResourcesParams(network=args.network, limit=MAX_OFFERS * 2)
            )
            items = listed.items
    finally:
        http.close()
    offers = (offer_from_discovery(item, url) for item in items)
    return [o for o in offers if o is not None]


def _fits(offer: Offer, args: DiscoverArgs) -> bool:
    """Filters applied on our side too: a discovery service is not trusted to filter."""
    if args.network and (offer.network or "").lower() != args.network.lower():
        return False
    if args.asset and (offer.asset or "").lower() != args.asset.lower():
        return False
    return args.max_price is None or (offer.price is not None and offer.price <= args.max_price)

