"""A request to buy that names a seller but no subject, resolved against that seller's
catalog (agent/loop/offerpick.py): the catalog's offers (a route per symbol or name one
offer each), the pick by price, by what it is about and within its bound, and a decline
naming why when nothing fits."""

from __future__ import annotations

from typing import Any

import pytest

from agent.loop.checklist import Checklist, ChecklistItem
from agent.loop.offerpick import catalog_offers, pick_offer, resolve_picks
from agent.models._factpatterns import extract_checklist

ORIGIN = "http://127.0.0.1:8402"


def _catalog(**prices: int) -> dict[str, Any]:
    """The local paywall's /catalog shape (chain/paywall/app.py), with its default prices."""
    price = {"gas": 50_000, "transfers": 100_000, "token": 20_000, "protocol": 250_000,
             "premium": 2_500_000, **prices}  # fmt: skip
    rows = [
        ("gas", "/analytics/gas", "gas_stats", "Base fee and gas-used statistics.", ["base_fee_gwei"]),
        ("transfers", "/analytics/transfers", "transfer_stats", "TestUSDC Transfer statistics.",
         ["token", "transfer_count"]),
        ("token", "/datasets/token/{symbol}", "token_factsheet", "Static fact sheet of a token.",
         ["name", "issuer"]),
        ("protocol", "/datasets/protocol/{name}", "protocol_factsheet", "Fact sheet of a protocol.",
         ["name", "governance_token"]),
        ("premium", "/premium/report", "premium_report", "Combined report.", ["congestion"]),
    ]  # fmt: skip
    endpoints = [{"name": n, "method": "GET", "path": p, "price_atomic": price[n], "kind": k,
                  "facts": [k], "provides": f, "description": d} for n, p, k, d, f in rows]
    endpoints.append({"name": "catalog", "path": "/catalog", "price_atomic": 0, "kind": "free"})
    return {"endpoints": endpoints, "token_symbols": ["DAI", "USDC"], "protocol_names": ["aave"]}


OFFERS = catalog_offers(ORIGIN, _catalog())


def test_a_catalog_lists_one_offer_per_route_and_subject_and_never_a_free_route() -> None:
    assert [(o.kind, o.url, o.price) for o in OFFERS] == [
        ("gas_stats", ORIGIN + "/analytics/gas", 50_000),
        ("transfer_stats", ORIGIN + "/analytics/transfers", 100_000),
        ("token_factsheet", ORIGIN + "/datasets/token/DAI", 20_000),
        ("token_factsheet", ORIGIN + "/datasets/token/USDC", 20_000),
        ("protocol_factsheet", ORIGIN + "/datasets/protocol/aave", 250_000),
        ("premium_report", ORIGIN + "/premium/report", 2_500_000),
    ]
    assert catalog_offers(ORIGIN, {"not": "a catalog"}) == ()


@pytest.mark.parametrize(
    ("params", "url", "tied"),
    [
        ({"pick": "cheapest"}, "/datasets/token/DAI", "2"),  # a tie: the first listed
        ({"pick": "priciest"}, "/datasets/protocol/aave", "1"),  # within the 0.25 cap
        ({"pick": "priciest", "under": "150000"}, "/analytics/transfers", "1"),
        ({"pick": "only", "about": "gas"}, "/analytics/gas", "1"),
        ({"pick": "only", "about": "transfers"}, "/analytics/transfers", "1"),
        ({"pick": "only", "about": "aave"}, "/datasets/protocol/aave", "1"),
        ({"pick": "any", "about": "tokens"}, "/datasets/token/DAI", "2"),
        ({"pick": "any", "under": "60000", "about": "gas"}, "/analytics/gas", "1"),
    ],
)
def test_the_request_picks_by_price_topic_and_bound(params: dict[str, str], url: str, tied: str) -> None:
    picked = pick_offer(params, OFFERS, 250_000, "the local paywall")
    assert not isinstance(picked, str), picked
    offer, note = picked
    assert offer.url == ORIGIN + url and note["tied"] == tied


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"pick": "any", "under": "10000"}, "costs at most the request's bound 0.01 USDC "
         "(the cheapest: token fact sheet of DAI, "),
        ({"pick": "only", "about": "weather"}, "none of the 6 offers the local paywall lists is about 'weather'"),
        ({"pick": "only", "about": "tokens"}, "2 offers of the local paywall fit"),
        ({"pick": "only", "about": "report"}, "costs at most the run's per-call cap"),
    ],
)  # fmt: skip
def test_a_request_nothing_fits_is_declined_naming_why(params: dict[str, str], why: str) -> None:
    picked = pick_offer(params, OFFERS, 250_000, "the local paywall")
    assert isinstance(picked, str) and why in picked, picked


def test_the_pick_becomes_the_item_of_the_offer_it_picked_or_says_why_not() -> None:
    task = "Buy the cheapest research dataset the local paywall sells and tell me what it contains."
    checklist = Checklist.from_dicts(
        [{"id": f"c{n}", **i} for n, i in enumerate(extract_checklist(task), 1)]
    )
    (item,) = resolve_picks(checklist, {"paywall": OFFERS}, 250_000).items
    assert (item.kind, item.params["symbol"], item.params["url"]) == (
        "token_factsheet", "DAI", ORIGIN + "/datasets/token/DAI")
    assert item.text.endswith(": the token fact sheet of DAI") and not item.unanswerable
    (unread,) = resolve_picks(checklist, {"paywall": "the paywall is down"}, 250_000).items
    assert unread.kind is None and unread.unanswerable == "the paywall is down"
    plain = ChecklistItem(id="c1", text="base fee", kind="base_fee_gwei")
    assert resolve_picks(Checklist((plain,)), {}, 250_000).items == (plain,)


def test_the_markets_offers_a_request_without_a_subject_can_buy() -> None:
    """Discovery rows become offers only when an allowlisted seller sells one sold kind
    over GET at a price; a per-subject sheet is taken as listed, about the subject of its
    declared input example; a claim to sell a chain fact, a free or unpriced offer, a POST,
    an MCP tool and a sheet with no example are left out."""
    from agent.loop.offerpick import market_offers

    def row(**kw: object) -> dict[str, object]:
        return {"type": "http", "method": "GET", "resource": "http://s/x", "price": 5000,
                "kinds": ["gas_stats"], "allowlisted": True, **kw}  # fmt: skip

    rows = [
        row(),
        row(resource="http://s/tokens", kinds=["token_factsheet"], example={"symbol": "USDC"}),
        row(allowlisted=False), row(method="POST"), row(type="mcp"), row(price=0),
        row(price=None), row(kinds=["usdc_balance"]), row(kinds=["gas_stats", "premium_report"]),
        row(kinds=["token_factsheet"]), row(kinds=["token_factsheet"], example={"symbol": "a b"}),
    ]
    offers = market_offers(rows)
    assert [(o.kind, o.url, o.subject) for o in offers] == [
        ("gas_stats", "http://s/x", None),
        ("token_factsheet", "http://s/tokens?symbol=USDC", "USDC"),
    ]
    assert market_offers("not rows") == ()
