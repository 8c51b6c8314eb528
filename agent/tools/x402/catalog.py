"""What a purchase over HTTP covers, and the observation it is recorded as.

The fact kinds a URL may cover are decided on our side: the nib paywall's ``/catalog``
(its static map until it is read), or for any other seller the kinds its declaration
(discovery or its 402) matches in the offer book, narrowed to what the call ``covers``.
A purchase from a seller without a catalog covers a kind only when the response's own
fields back it (:func:`~agent.tools.x402.offers.purchase_facts`)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from agent.errors import ToolError
from agent.tools.base import Observation, ToolContext
from agent.tools.x402.fetch import fetch
from agent.tools.x402.offers import OfferBook, covered_words, excerpt, purchase_facts, seller_of
from chain.facts import CHAIN_FACT_KINDS
from chain.money import format_usdc
from chain.seller_url import parsed_url

__all__ = ["CATALOG_RETRY_S", "CATALOG_TIMEOUT_S", "LOCAL_PAYWALL_FACTS", "SellerCatalog"]

#: Path -> fact kinds of the local paywall (chain/paywall.py), used until /catalog is read.
LOCAL_PAYWALL_FACTS: dict[str, tuple[str, ...]] = {
    "/analytics/gas": ("gas_stats",),
    "/analytics/transfers": ("transfer_stats",),
    "/datasets/token/{symbol}": ("token_factsheet",),
    "/datasets/protocol/{name}": ("protocol_factsheet",),
    "/premium/report": ("premium_report",),
}
CATALOG_TIMEOUT_S = 5.0
#: A seller whose /catalog could not be read is not asked again for this long: a seller
#: without one (most outside sellers) or one that stalls it would cost every quote of its
#: resources a request, or CATALOG_TIMEOUT_S of waiting.
CATALOG_RETRY_S = 60.0
_MAX_FACTS = 64
_MAX_FACT_CHARS = 500
_MAX_DATA_CHARS = 16_000


@dataclass(frozen=True)
class _Route:
    path: str
    pattern: re.Pattern[str]
    facts: tuple[str, ...]
    price: int | None


def _route(path: str, facts: tuple[str, ...], price: int | None = None) -> _Route:
    parts = re.split(r"(\{[^}/]+\})", path)
    regex = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts if p)
    return _Route(path, re.compile(f"^{regex}/?\\Z"), facts, price)


_STATIC_ROUTES = tuple(_route(p, f) for p, f in LOCAL_PAYWALL_FACTS.items())


def _parse_catalog(data: object) -> tuple[_Route, ...]:
    if not isinstance(data, dict) or not isinstance(data.get("endpoints"), list):
        return ()
    routes = []
    for ep in data["endpoints"]:
        if not isinstance(ep, dict) or not isinstance(ep.get("path"), str):
            continue
        facts = ep.get("facts") or ([ep["kind"]] if isinstance(ep.get("kind"), str) else [])
        kinds = tuple(str(f) for f in facts if isinstance(f, str) and f != "free")
        price = ep.get("price_atomic")
        routes.append(_route(ep["path"], kinds, price if isinstance(price, int) else None))
    return tuple(routes)


class SellerCatalog:
    """The fact kinds each seller's URLs may cover (catalogs read, the offer book's
    declarations), and the observation a bought (or free) answer is recorded as."""

    def __init__(self, tool: str, offers: OfferBook) -> None:
        self.tool = tool
        self.offers = offers
        self._catalogs: dict[str, tuple[_Route, ...]] = {}
        #: Origins whose /catalog could not be read, and when (time.monotonic()).
        self._unread: dict[str, float] = {}

    def _routes(self, url: str) -> tuple[_Route, ...]:
        return self._catalogs.get(seller_of(url)) or _STATIC_ROUTES

    def listed(self, url: str) -> tuple[str, ...] | None:
        """Fact kinds of ``url`` from the seller's /catalog once read, else the static map
        of the local paywall's paths; None when no route matches."""
        path = parsed_url(url).path
        for route in self._routes(url):
            if route.pattern.match(path):
                return route.facts
        return None

    def facts_for(self, url: str, covers: tuple[str, ...] = ()) -> tuple[str, ...]:
        """Fact kinds a purchase of ``url`` may cover: the catalog's, else what its
        declaration matches (narrowed to ``covers`` when given); () when unknown."""
        listed = self.listed(url)
        if listed is None:
            listed = tuple(k for k in self.offers.declared(url) if not covers or k in covers)
        # What the chain can establish is read for free, never taken on a seller's word.
        return tuple(k for k in listed if k not in CHAIN_FACT_KINDS)

    def endpoints(self, paywall_url: str) -> list[dict[str, object]]:
        """Known paid endpoints of the local paywall (for prompts and the offline planner)."""
        routes = self._catalogs.get(seller_of(paywall_url)) or _STATIC_ROUTES
        return [
            {"url": paywall_url + r.path, "facts": list(r.facts), "price_atomic": r.price}
            for r in routes
            if r.facts
        ]

    async def load(self, origin_url: str, ctx: ToolContext) -> bool:
        """Read ``{origin}/catalog`` (free) into the fact map; False when unavailable."""
        origin = seller_of(origin_url)
        if origin in self._catalogs:
            return True
        failed = self._unread.get(origin)
        if failed is not None and time.monotonic() - failed < CATALOG_RETRY_S:
            return False
        routes = await _read_catalog(origin, ctx)
        if routes:
            self._catalogs[origin] = routes
            self._unread.pop(origin, None)
        else:
            self._unread[origin] = time.monotonic()
        return bool(routes)

    def observation(
        self,
        request: tuple[str, str, Mapping[str, object] | None],
        covers: tuple[str, ...],
        resp: httpx.Response,
        *,
        cost: int,
        settlement: Mapping[str, object] | None,
    ) -> Observation:
        """The answer to ``request`` (url, method, body) as an observation: its facts
        (what the catalog lists, or what its fields back), a bounded body, what was paid."""
        url, method, body_sent = request
        body: object
        try:
            body = resp.json()
        except ValueError:
            body = None
        data: dict[str, object] = {"url": url, "status": resp.status_code}
        if method == "POST":
            data["method"], data["request_body"] = "POST", body_sent
        kind, facts = self._facts_in(url, covers, body, resp.text, data)
        _keep_body(data, body, resp.text)
        label = kind or parsed_url(url).path
        if settlement is not None:
            data["settlement"] = settlement
            data["paid_atomic"] = cost
            data["paid"] = format_usdc(cost)
        if cost:
            tx = str((settlement or {}).get("transaction", ""))
            summary = (
                f"paid {format_usdc(cost)} for {label} from {seller_of(url)}: "
                f"{len(facts)} facts, settled in {tx[:10]}…"
            )
        else:
            covered = covered_words(self.facts_for(url, covers), facts)
            summary = f"free {label} from {seller_of(url)}: {covered}"
        return Observation(
            tool=self.tool, ok=True, summary=summary, data=data, facts=facts, cost_usdc=cost
        )

    def _facts_in(
        self, url: str, covers: tuple[str, ...], body: object, text: str,
        data: dict[str, object],
    ) -> tuple[str | None, dict[str, str]]:
        """(kind, facts) of an answer, its excerpt put in ``data``."""
        if self.listed(url) is None:
            # Not a nib catalog: a kind counts only when the response's fields back it.
            data["excerpt"], facts = purchase_facts(self.facts_for(url, covers), body, text)
            return None, facts
        data["excerpt"] = excerpt(body, text)
        return _catalog_answer(body, self.facts_for(url, covers))


async def _read_catalog(origin: str, ctx: ToolContext) -> tuple[_Route, ...]:
    """The routes ``{origin}/catalog`` lists; () when it cannot be read."""
    try:
        resp = await fetch(ctx, origin + "/catalog", timeout=CATALOG_TIMEOUT_S)
    except ToolError:
        return ()
    if resp.status_code != 200:
        return ()
    try:
        return _parse_catalog(resp.json())
    except ValueError:
        return ()


def _keep_body(data: dict[str, object], body: object, text: str) -> None:
    """The answer's body in ``data``: whole when small, else a bounded excerpt."""
    if isinstance(body, dict | list):
        dumped = json.dumps(body, separators=(",", ":"), default=str)
        if len(dumped) <= _MAX_DATA_CHARS:
            data["body"] = body
        else:
            data["body_excerpt"] = dumped[:_MAX_DATA_CHARS]
    else:
        data["body_excerpt"] = text[:_MAX_DATA_CHARS]


def _catalog_answer(body: object, listed: tuple[str, ...]) -> tuple[str | None, dict[str, str]]:
    """(kind, facts) of a nib catalog seller's answer ``{"kind", "facts": {...}}``: typed
    values only, bounded. A purchase covers the kind its body names only when that kind is
    one we ``listed`` for the URL and the body carries values for it; a seller's own fact
    keys never stand for a kind the chain can establish."""
    kind: str | None = None
    facts: dict[str, str] = {}
    if isinstance(body, dict):
        kind = body.get("kind") if isinstance(body.get("kind"), str) else None
        raw = body.get("facts")
        if isinstance(raw, dict):
            for key, val in list(raw.items())[:_MAX_FACTS]:
                if isinstance(val, str | int | float) and not isinstance(val, bool):
                    facts[str(key)] = str(val)[:_MAX_FACT_CHARS]
    facts = {k: v for k, v in facts.items() if k not in CHAIN_FACT_KINDS}
    if kind in listed and facts:
        digest = "; ".join(f"{k}={v}" for k, v in facts.items())[: _MAX_FACT_CHARS * 2]
        facts.setdefault(kind, digest)
    return kind, facts
