"""Requests to buy that name a seller but no subject, resolved against that seller's own
catalog at run start: "the cheapest research dataset the local paywall sells" becomes the
item of the offer it picks (its fact kind, subject, URL and price), as "the previous
block" becomes a block number against the head at run start.

A catalog lists each paid route with its price (``price_atomic``), the fact kind it sells
and what it provides; a route with a ``{symbol}``/``{name}`` slot is one offer per token
symbol or protocol name the catalog lists. The request picks by price (``cheapest``,
``priciest``; ``any``: the cheapest that fits, said so; ``only``: the one that fits, or
the request is declined naming the fits), by what the offer is about (``about``: words of
its kind, description or fields, the description only as a hint), within its price bound
(``under``) and the run's per-call cap. When nothing fits, the item says why, naming the
cheapest offers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from agent.loop.checklist import Checklist, ChecklistItem
from chain.facts import CHAIN_FACT_KINDS, FACT_KINDS
from chain.money import format_usdc

__all__ = [
    "SellerOffer",
    "catalog_offers",
    "market_offers",
    "needs_offers",
    "pick_offer",
    "resolve_picks",
]

#: The parameter that names the subject of a kind sold per subject, and the catalog list.
_SLOTS = {"{symbol}": ("symbol", "token_symbols"), "{name}": ("name", "protocol_names")}
_WORD = re.compile(r"[a-z][a-z0-9]*")
_LABELS = {
    "gas_stats": "gas statistics",
    "transfer_stats": "USDC transfer statistics",
    "token_factsheet": "token fact sheet",
    "protocol_factsheet": "protocol fact sheet",
    "premium_report": "premium report",
}


@dataclass(frozen=True)
class SellerOffer:
    """One offer of a seller's catalog: what it sells, where, at what price."""

    kind: str
    url: str
    price: int
    key: str | None
    subject: str | None
    words: frozenset[str]
    """The words of its description and fields: a hint of what it is about."""

    @property
    def kind_words(self) -> frozenset[str]:
        """The words of what it sells (its kind's label and its subject)."""
        return _words(self.label, self.kind.replace("_", " "))

    @property
    def label(self) -> str:
        what = _LABELS.get(self.kind, self.kind.replace("_", " "))
        return f"{what} of {self.subject}" if self.subject else what


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _words(*texts: object) -> frozenset[str]:
    return frozenset(_stem(w) for t in texts for w in _WORD.findall(str(t).lower()))


def catalog_offers(origin: str, body: object) -> tuple[SellerOffer, ...]:
    """The paid offers a seller's ``/catalog`` answer lists, in its order; () when the
    body is no catalog. A kind the chain establishes is never bought, so never offered."""
    if not isinstance(body, Mapping) or not isinstance(body.get("endpoints"), list):
        return ()
    out: list[SellerOffer] = []
    for ep in body["endpoints"]:
        if not isinstance(ep, Mapping):
            continue
        price, path, kind = ep.get("price_atomic"), ep.get("path"), ep.get("kind")
        if isinstance(price, bool) or not isinstance(price, int) or price <= 0:
            continue
        if not isinstance(path, str) or kind not in FACT_KINDS or kind in CHAIN_FACT_KINDS:
            continue
        provides = ep.get("provides")
        fields = [str(f) for f in provides] if isinstance(provides, list) else []
        words = _words(ep.get("description", ""), *fields)
        slot = next((s for s in _SLOTS if s in path), None)
        if slot is None:
            out.append(SellerOffer(str(kind), origin + path, price, None, None, words))
            continue
        key, listing = _SLOTS[slot]
        names = body.get(listing)
        for name in names if isinstance(names, list) else ():
            if isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9._-]{1,40}", name):
                url = origin + path.replace(slot, name)
                out.append(SellerOffer(str(kind), url, price, key, name, words))
    return tuple(out)


#: Kinds sold per subject, and the input field naming it: a request naming no subject buys
#: such an offer as the seller lists it, about the subject of its declared input example.
_PER_SUBJECT = {"token_factsheet": "symbol", "protocol_factsheet": "name"}


def market_offers(rows: object) -> tuple[SellerOffer, ...]:
    """The offers the market's discovery listed (``discover``'s ``offers`` rows) that a
    request naming no subject can buy: HTTP GET resources of an allowlisted seller, priced,
    of exactly one sold fact kind; one sold per subject is taken as listed, about the
    subject of its declared input example (``?symbol=USDC``), or left out without one."""
    out: list[SellerOffer] = []
    for row in rows if isinstance(rows, list) else ():
        if not isinstance(row, Mapping) or row.get("type", "http") != "http":
            continue
        price, kinds, url = row.get("price"), row.get("kinds"), row.get("resource")
        if isinstance(price, bool) or not isinstance(price, int) or price <= 0:
            continue
        sold = [k for k in kinds if k in FACT_KINDS and k not in CHAIN_FACT_KINDS] \
            if isinstance(kinds, list) else []  # fmt: skip
        if (row.get("method") != "GET" or not row.get("allowlisted") or len(sold) != 1
                or not isinstance(url, str)):  # fmt: skip
            continue
        words = _words(row.get("description", ""))
        key = _PER_SUBJECT.get(sold[0])
        if key is None:
            out.append(SellerOffer(sold[0], url, price, None, None, words))
            continue
        example = row.get("example")
        subject = example.get(key) if isinstance(example, Mapping) else None
        if isinstance(subject, str) and re.fullmatch(r"[A-Za-z0-9._-]{1,40}", subject):
            sep = "&" if "?" in url else "?"
            out.append(SellerOffer(sold[0], f"{url}{sep}{key}={subject}", price, key, subject, words))
    return tuple(out)


def _about(offers: list[SellerOffer], about: str) -> list[SellerOffer]:
    """The offers about ``about``: its subject named, else the most of its words matched."""
    wanted = _words(about)
    named = [o for o in offers if o.subject and o.subject.lower() in about.lower().split()]
    if named:
        return named
    # What it sells first; its description and fields only break a tie (a hint).
    scores = [((len(wanted & o.kind_words), len(wanted & o.words)), o) for o in offers]
    best = max((s for s, _ in scores), default=(0, 0))
    return [o for s, o in scores if s == best and best != (0, 0)]


def _cheapest_named(offers: list[SellerOffer]) -> str:
    """The cheapest few by name. Prices are left out: the catalog is no evidence, and an
    answer states no value its evidence does not hold."""
    shown = sorted(offers, key=lambda o: o.price)[:3]
    return ", ".join(o.label for o in shown)


def pick_offer(
    params: Mapping[str, str], offers: tuple[SellerOffer, ...], cap: int, seller: str
) -> tuple[SellerOffer, dict[str, str]] | str:
    """The offer a request's ``params`` pick among ``offers`` (what it records beside it),
    or why none fits."""
    if not offers:
        return f"{seller} lists no paid offer in its catalog"
    fits = list(offers)
    about = params.get("about")
    if about:
        fits = _about(fits, about)
        if not fits:
            return f"none of the {len(offers)} offers {seller} lists is about {about!r}"
    under = int(params["under"]) if str(params.get("under", "")).isdigit() else None
    limit, why = cap, "the run's per-call cap (fix: `nib run --per-call-cap`)"
    if under is not None and under <= cap:
        limit, why = under, f"the request's bound {format_usdc(under)}"
    within = [o for o in fits if o.price <= limit]
    if not within:
        return (f"no offer {seller} lists{f' about {about!r}' if about else ''} costs at most "
                f"{why} (the cheapest: {_cheapest_named(fits)})")  # fmt: skip
    pick = params.get("pick", "cheapest")
    if pick == "only" and len(within) > 1:
        return (f"{len(within)} offers of {seller} fit ({_cheapest_named(within)}...); the "
                "request says 'the' one: name which, or ask for the cheapest")  # fmt: skip
    price = max(o.price for o in within) if pick == "priciest" else min(o.price for o in within)
    tied = [o for o in within if o.price == price]
    chosen = tied[0]  # the first the seller lists at that price
    note = {"price": str(price), "offers": str(len(offers)), "fit": str(len(within)),
            "tied": str(len(tied))}  # fmt: skip
    return chosen, note


def needs_offers(item: ChecklistItem) -> bool:
    """True for a request to buy that waits for its seller's offers (no kind yet)."""
    return item.kind is None and not item.unanswerable and bool(item.params.get("seller"))


def resolve_picks(
    checklist: Checklist,
    offers_of: Mapping[str, tuple[SellerOffer, ...] | str],
    cap: int,
) -> Checklist:
    """Each request to buy that waits for offers made the item of the offer it picks (kind,
    subject, URL, price), or marked unanswerable saying why. ``offers_of``: by the item's
    ``seller`` param, the seller's offers or why they could not be read."""
    out = []
    for item in checklist.items:
        if not needs_offers(item):
            out.append(item)
            continue
        seller = item.params["seller"]
        where = {"paywall": "the local paywall", "market": "the market"}.get(seller, seller)
        offers = offers_of.get(seller, f"the offers of {where} were not read")
        picked = offers if isinstance(offers, str) else pick_offer(item.params, offers, cap, where)
        if isinstance(picked, str):
            out.append(replace(item, unanswerable=picked))
            continue
        offer, note = picked
        params = {**item.params, **note, "url": offer.url}
        if offer.key and offer.subject:
            params[offer.key] = offer.subject
        if params.get("under"):
            params["max_price"] = params["under"]
        text = f"{item.text}: the {offer.label}"
        out.append(replace(item, kind=offer.kind, params=params, text=text))
    return Checklist(tuple(out))
