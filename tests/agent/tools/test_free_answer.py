"""A seller's free answer (200, nothing charged) is summed up by the fact kinds it
covered, not by a count of its fields: "5 facts" was one token fact sheet (its four
fields and the sheet), and "0 facts" did not say why nothing was covered."""

from __future__ import annotations

import httpx

from agent.tools.x402.catalog import SellerCatalog
from agent.tools.x402.offers import OfferBook

SELLER = "http://127.0.0.1:9"
SHEET = {"issuer": "Circle", "name": "USD Coin", "symbol": "USDC", "decimals": 6}


def _summary(url: str, body: object) -> tuple[str, dict[str, str]]:
    resp = httpx.Response(200, json=body, request=httpx.Request("GET", url))
    obs = SellerCatalog("pay_http", OfferBook()).observation(
        (url, "GET", None), ("token_factsheet",), resp, cost=0, settlement=None)
    return obs.summary, obs.facts


def test_a_free_sheet_says_the_kind_it_covered() -> None:
    summary, facts = _summary(f"{SELLER}/datasets/token/USDC",
                              {"kind": "token_factsheet", "facts": SHEET})
    assert "token_factsheet" in facts
    assert summary == f"free token_factsheet from {SELLER}: covers token_factsheet"


def test_a_free_answer_that_backs_no_listed_kind_says_which_it_did_not_cover() -> None:
    summary, _ = _summary(f"{SELLER}/datasets/token/USDC", {"kind": "gas_stats", "facts": {"a": 1}})
    assert summary == (f"free gas_stats from {SELLER}: covers none of token_factsheet "
                       "(its answer does not back it)")


def test_a_free_answer_no_catalog_or_declaration_describes_says_why_it_covers_nothing() -> None:
    summary, facts = _summary(f"{SELLER}/tokens?symbol=USDC", SHEET)
    assert facts == {}
    assert summary == (f"free /tokens from {SELLER}: covers no fact (no catalog or declaration "
                       "names a fact kind for it)")
