"""A run with HTTP_PROXY, HTTPS_PROXY and ALL_PROXY set and no NO_PROXY, as an outside tester
ran nib: every HTTP client nib builds sends a loopback destination directly (nib's one
proxy rule, judge/http_proxy.py), so a purchase from a local seller on Anvil goes through
end to end and the proxy (a stand-in that answers 502, as a real one does for this
machine's loopback) is never contacted; a destination elsewhere still goes through it.
Before, the agent's reads of sellers and its chain RPC went to the proxy (502s) while the
judge's read of the same seller ignored it. Real parts: Anvil, sellers built with the x402
package, a facilitator listing them, the real wallet and judge; balances read from the chain.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from _loop_support import paid_deps, usdc_balance
from fastapi import FastAPI

from agent.loop.run import run_task
from agent.models.offline import OfflinePlanner
from agent.tools.discover import DiscoverTool
from agent.tools.x402.fetch import seller_client
from agent.tools.x402.offers import OfferBook
from agent.tools.x402.pay_http import PayHttpTool
from chain.devkeys import AGENT, JUDGE, dev_account
from chain.mcp_client import call_tool
from chain.paywall.facilitator_service import create_facilitator_app
from chain.paywall.market import create_seller_app, register_with, seller_named
from chain.paywall.mcp_seller import MCP_TOOL
from chain.paywall.serve import AppServer
from judge.calibration import BetaCalibrator
from judge.jev import Judge
from judge.payto import advertised_terms
from judge.verdict import VerdictSigner
from tests._support import proxy_in_environment, serve
from wallet.ledger import Ledger

TASK = "Who issues USDC? Buy its token fact sheet from a seller in the market."


def test_a_paid_purchase_from_a_local_seller_never_goes_through_the_environments_proxy(
    tmp_path: Path, chain: Any, market: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    atlas = seller_named("atlas")
    with proxy_in_environment(monkeypatch) as proxy:
        # All made with the proxy set: a discovery facilitator (it reads the seller's 402 to
        # list it), the seller (it reads the settling facilitator's /supported as it starts,
        # and settles through it), the agent's and the wallet's chain clients.
        seller = create_seller_app(atlas, market["facilitator"], chain.usdc, rpc_url=chain.rpc_url)
        with AppServer(create_facilitator_app(chain.rpc_url), name="discovery") as fac, \
                AppServer(seller, name="atlas-behind-a-proxy") as srv:
            register_with(fac.url, atlas, srv.url)
            book = OfferBook()
            judge = Judge(VerdictSigner(dev_account(JUDGE)),
                          BetaCalibrator(str(tmp_path / "nib.db")),
                          allowed_assets={chain.chain_id: [chain.usdc]}, terms_of=advertised_terms)
            deps = paid_deps(tmp_path, chain, OfflinePlanner(), judge=judge,
                             extra_tools=(DiscoverTool(book), PayHttpTool(offers=book)))
            deps = dataclasses.replace(deps, allowlist=(srv.url,),
                                       extras={"discovery_urls": fac.url})
            before = usdc_balance(chain, atlas.pay_to)
            agent_before = usdc_balance(chain, dev_account(AGENT).address)
            r = asyncio.run(run_task(TASK, deps))
        assert proxy.seen == []

    assert (r.stop_reason, r.finished) == ("evidence-covered", True), r.answer
    verdict = deps.store.events(r.run_id, "verdict")[-1]["data"]
    assert verdict["decision"] == "approve", verdict
    rows = Ledger(deps.wallet.meter.store).rows(r.run_id)
    assert [(row.status, row.amount, row.recipient.lower()) for row in rows] == [
        ("settled", 10_000, atlas.pay_to.lower())]
    assert usdc_balance(chain, atlas.pay_to) == before + 10_000
    assert usdc_balance(chain, dev_account(AGENT).address) == agent_before - 10_000


def test_the_agents_clients_send_loopback_directly_and_anything_else_through_the_proxy(
    market: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's one seller client sends each request by the rule, whichever seller it
    asks; the MCP client reaches a local MCP seller (its unpaid call is answered)."""
    app = FastAPI()

    @app.get("/data")
    def data() -> dict[str, bool]:
        return {"ok": True}

    async def ask(url: str) -> tuple[int, int]:
        async with seller_client() as client:
            here = await client.get(url + "/data")
            there = await client.get("http://seller.invalid/data")
            return here.status_code, there.status_code

    with serve(app) as url, proxy_in_environment(monkeypatch) as proxy:
        assert asyncio.run(ask(url)) == (200, 502)
        assert proxy.seen == ["GET http://seller.invalid/data"]
        result, transport = asyncio.run(call_tool(market["mcp"], MCP_TOOL, {"symbol": "USDC"}))
        assert transport in ("streamable-http", "sse") and result.content, result
        assert proxy.seen == ["GET http://seller.invalid/data"]
