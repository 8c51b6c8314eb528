"""A request to buy (issue 23) through the real nib command on its own devnet and market:
the cheapest offer discovery finds is bought once, balances read back from the chain, the
ledger reconciles, and the answer says what was bought and what it contains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from chain.client import ChainClient
from chain.devkeys import dev_account
from chain.money import format_usdc
from chain.paywall.market import seller_named
from chain.paywall.mcp_seller import MCP_PAY_TO_INDEX
from tests.agent._nib_devnet import nib, own_devnet, run_json, settled_rows

TASK = "Buy the cheapest fact sheet about USDC and tell me what it contains."


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    yield from own_devnet(tmp_path_factory, "shop-home")


def _bought(home: Path, info: dict[str, Any], chain: ChainClient) -> tuple[dict[str, Any], list[Any]]:
    """One run of TASK: its JSON result and the USDC transfers out of the wallet it made."""
    return _paid_by(home, info, chain, TASK)


def _paid_by(home: Path, info: dict[str, Any], chain: ChainClient, task: str) -> tuple[dict[str, Any], list[Any]]:
    """One run of ``task``: its JSON result and the USDC transfers out of the wallet it made."""
    first = chain.block_number() + 1
    result = run_json(home, task)
    if chain.block_number() < first:
        return result, []  # no block mined: nothing sent
    logs = chain.transfer_logs(info["usdc"], first, "latest", info["wallet"])
    return result, [log for log in logs if log.sender.lower() == info["wallet"].lower()]


def test_the_cheapest_offer_is_bought_once_and_the_answer_says_what_it_contains(devnet) -> None:  # type: ignore[no-untyped-def]
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    market = {s["name"]: s["url"] for s in info["market"]}
    bargain, atlas = seller_named("bargain"), seller_named("atlas")

    # Fresh market: the cheapest offer is bargain's 0.005 USDC sheet, which declares a full
    # sheet and delivers none of it. It is bought once and named; no second seller is paid.
    first, paid = _bought(home, info, chain)
    assert first["returncode"] == 1 and not first["finished"], first["answer"]
    assert [(log.recipient.lower(), log.value) for log in paid] == [(bargain.pay_to.lower(), 5_000)]
    assert f"paid 0.005 USDC for /tokens from {market['bargain']}" in first["answer"]
    assert "a request to buy buys once" in first["answer"]

    # Now the judge will not pay bargain for this task (it took payment without delivering):
    # the cheapest offer it approves is bought once and its contents reported. Two sellers tie
    # at 0.01 USDC (atlas over HTTP and the market's MCP tool, in discovery's order).
    at_price = {atlas.pay_to.lower(): "atlas", dev_account(MCP_PAY_TO_INDEX).address.lower(): "mcp"}
    before = {a: chain.token_balance(info["usdc"], a) for a in at_price}
    second, paid = _bought(home, info, chain)
    assert second["returncode"] == 0 and second["finished"], second["answer"]
    [(winner, value)] = [(log.recipient.lower(), log.value) for log in paid]
    assert winner in at_price and value == 10_000, (winner, value)
    assert chain.token_balance(info["usdc"], winner) - before[winner] == 10_000
    answer = second["answer"]
    assert (f"the cheapest token fact sheet of USDC on offer: bought from {market[at_price[winner]]}"
            in answer), answer
    assert " for 0.01 USDC, the cheapest the judge approved of " in answer
    assert "(the cheapest listed, 0.005 USDC, was not approved)" in answer
    assert "it contains name USD Coin; issuer Circle; launched 2018; decimals 6" in answer
    assert second["provenance"] == "observed"

    for run, amount in ((first, 5_000), (second, 10_000)):
        assert settled_rows(home, run["run_id"]) == [(amount, "settled")]
    _reconciles(home)


def _reconciles(home: Path) -> None:
    rec = nib(home, "audit", "reconcile", "--json")
    assert rec.returncode == 0, rec.stderr
    data = json.loads(rec.stdout)
    assert data["unmatched_onchain"] == [] and data["unmatched_ledger"] == [], data


def test_the_issues_request_buys_the_cheapest_offer_the_local_paywall_lists(devnet) -> None:  # type: ignore[no-untyped-def]
    """The issue's literal request, no subject named: the paywall's catalog is read at run
    start, its cheapest offer (a tie among token sheets: the first listed) bought once."""
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    paywall = info["paywall_url"].rstrip("/")
    catalog = httpx.get(paywall + "/catalog").json()  # read here, apart from nib
    paid_routes = [e for e in catalog["endpoints"] if e["price_atomic"] > 0]
    cheapest = min(e["price_atomic"] for e in paid_routes)
    route = next(e for e in paid_routes if e["price_atomic"] == cheapest)
    first_symbol = catalog["token_symbols"][0]
    url = paywall + route["path"].replace("{symbol}", first_symbol)
    pay_to = catalog["pay_to"].lower()

    before = chain.token_balance(info["usdc"], pay_to)
    task = "Buy the cheapest research dataset the local paywall sells and tell me what it contains."
    result, paid = _paid_by(home, info, chain, task)
    assert result["returncode"] == 0 and result["finished"], result["answer"]
    assert [(log.recipient.lower(), log.value) for log in paid] == [(pay_to, cheapest)]
    assert chain.token_balance(info["usdc"], pay_to) - before == cheapest
    assert settled_rows(home, result["run_id"]) == [(cheapest, "settled")]
    answer = result["answer"]
    assert f"bought from {url} for {format_usdc(cheapest)}, the cheapest offer the local paywall lists" in answer
    assert "(others tie at its price; the first listed was bought)" in answer
    assert "it contains name " in answer and f"symbol {first_symbol}" in answer, answer

    # Another phrasing, another criterion: the one about gas.
    gas = next(e for e in paid_routes if e["kind"] == "gas_stats")
    about, paid = _paid_by(home, info, chain, "Buy the one about gas from the local paywall.")
    assert about["returncode"] == 0 and about["finished"], about["answer"]
    assert [(log.recipient.lower(), log.value) for log in paid] == [(pay_to, gas["price_atomic"])]
    assert f"bought from {paywall}/analytics/gas for" in about["answer"]
    assert "base_fee_gwei_mean" in about["answer"]

    # Nothing fits the bound: declined naming why, nothing paid.
    none, paid = _paid_by(home, info, chain, "Buy a dataset under 0.01 USDC from the local paywall.")
    assert none["returncode"] == 1 and not none["finished"] and paid == []
    assert "costs at most the request's bound 0.01 USDC (the cheapest: " in none["answer"]
    assert settled_rows(home, none["run_id"]) == []
    _reconciles(home)


def test_a_request_naming_the_market_and_no_subject_buys_the_cheapest_offer_it_lists(devnet) -> None:  # type: ignore[no-untyped-def]
    """ "Buy the cheapest dataset on the market ..." was declined ("name the seller"). The
    market's offers are read through its discovery API at run start and the cheapest is
    bought once, as listed (about its declared example subject). The cheapest is computed
    here from the facilitator's discovery listing, apart from nib; a pick by a measure nib
    has not ("the best-value dataset") and a request naming neither seller nor subject are
    declined, naming why, with nothing spent."""
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    listed = httpx.get(info["facilitator_url"] + "/discovery/resources", timeout=10).json()["items"]
    priced = {(int(a["amount"]), a["payTo"].lower()) for i in listed for a in i["accepts"]}
    cheapest = min(p for p, _ in priced)

    result, paid = _paid_by(home, info, chain, "Buy the cheapest dataset on the market and tell me what it contains.")
    [(to, value)] = [(log.recipient.lower(), log.value) for log in paid]  # bought once
    assert (value, to) in priced, (value, to, priced)  # an offer the market lists, its price
    assert settled_rows(home, result["run_id"]) == [(value, "settled")]
    answer = result["answer"]
    if value == cheapest:
        # A fresh market's cheapest, bargain, delivers nothing: paid once, named, exit 1.
        assert f"paid {format_usdc(value)} for /tokens from " in answer, answer
        assert "a request to buy buys once" in answer and result["returncode"] == 1, answer
    else:
        assert "the cheapest offer of the market: the token fact sheet of USDC: bought from" in answer
        # The module's first test paid bargain (the cheapest) for nothing: comparing the
        # market's offers, the judge approves another, and the answer says so.
        assert "not the cheapest offer the market lists: the judge compared" in answer, answer
    _reconciles(home)

    for task, why in (("Buy the best-value dataset on the market and tell me what it contains.",
                       "no measure of an offer's value"),
                      ("Buy the cheapest dataset and tell me what it contains.",
                       "name the seller (the local paywall, its URL, or the market)")):
        declined, paid = _paid_by(home, info, chain, task)
        assert declined["returncode"] == 1 and paid == [], declined["answer"]
        assert why in declined["answer"] and settled_rows(home, declined["run_id"]) == []
