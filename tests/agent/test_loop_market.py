"""The x402 market through the whole run: real wallet, real judge, real Anvil, sellers
built only with the official x402 package; balances and reconcile read back from the chain."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from _loop_support import checklist, paid_deps, usdc_balance

from agent.loop.limits import Limits
from agent.loop.run import run_task
from agent.models.scripted import ScriptedModel
from agent.tools.x402.offers import OfferBook
from agent.tools.x402.pay_mcp import PayMcpTool
from chain.devkeys import AGENT, dev_account
from chain.paywall.mcp_seller import MCP_PAY_TO_INDEX, MCP_TOOL, MCP_TOOL_PRICE
from wallet.ledger import Ledger
from wallet.reconcile import reconcile

AGENT_ADDR = dev_account(AGENT).address
ISSUER = checklist(("USDC issuer", "token_factsheet"))


@pytest.mark.parametrize("items", [
    ISSUER,
    # Two parts of the task answered by one purchase of one fact kind: one outcome for
    # the kind, and no refused second report (an outside tester saw OutcomeRefused).
    checklist(("USDC issuer", "token_factsheet"), ("USDC decimals", "token_factsheet")),
], ids=["one-item", "two-items-one-kind"])
def test_pays_an_x402_mcp_tool_through_the_judge_and_the_wallet(
    tmp_path: Path, chain: Any, market: dict[str, str], items: dict[str, Any]
) -> None:
    mcp_seller = dev_account(MCP_PAY_TO_INDEX).address
    before = usdc_balance(chain, mcp_seller), usdc_balance(chain, AGENT_ADDR)
    head = chain.w3.eth.block_number
    buy = {
        "action": "call",
        "tool": "pay_mcp",
        "args": {
            "server": market["mcp"],
            "tool": MCP_TOOL,
            "arguments": {"symbol": "USDC"},
            "covers": ["token_factsheet"],
        },
    }
    model = ScriptedModel({"checklist": [items], "propose": [buy]})
    deps = paid_deps(tmp_path, chain, model, extra_tools=(PayMcpTool(OfferBook()),))
    deps = dataclasses.replace(deps, allowlist=(market["mcp"],))
    r = asyncio.run(run_task("Who issues USDC? Use the paid MCP fact tool.", deps))

    assert (r.stop_reason, r.finished) == ("evidence-covered", True)
    assert usdc_balance(chain, mcp_seller) == before[0] + MCP_TOOL_PRICE
    assert usdc_balance(chain, AGENT_ADDR) == before[1] - MCP_TOOL_PRICE
    verdict = deps.store.events(r.run_id, "verdict")[-1]["data"]
    assert verdict["decision"] == "approve" and verdict["p"] == "0.4"  # a new seller
    rows = Ledger(deps.wallet.meter.store).rows(r.run_id)
    assert [(row.status, row.amount) for row in rows] == [("settled", MCP_TOOL_PRICE)]
    report = reconcile(deps.wallet.meter.store, deps.wallet.chain, chain.usdc, AGENT_ADDR, head + 1)
    assert report.clean and [m.ledger_id for m in report.matched] == [rows[0].id]
    obs = deps.store.events(r.run_id, "tool.call")[-1]["data"]
    assert obs["ok"] and obs["cost_usdc"] == MCP_TOOL_PRICE
    outcomes = list(deps.store.db.query("SELECT tool, covered FROM judge_outcomes"))
    assert outcomes == [{"tool": f"pay_mcp@{market['mcp']}", "covered": 1}]
    assert deps.store.events(r.run_id, "judge.outcome.error") == []


def test_over_twenty_runs_the_over_claiming_seller_loses_approval(
    tmp_path: Path, chain: Any, market: dict[str, str]
) -> None:
    """The figure in the closing note: 20 runs that each need the same fact, the offline
    planner discovering the market and proposing the cheapest offer each time."""
    from agent.models.offline import OfflinePlanner
    from agent.tools.discover import DiscoverTool
    from agent.tools.x402.pay_http import PayHttpTool
    from chain.paywall.market import seller_named

    book = OfferBook()
    tools = (DiscoverTool(book), PayHttpTool(offers=book))
    deps = paid_deps(tmp_path, chain, OfflinePlanner(), extra_tools=tools)
    sellers = ("atlas", "meridian", "bargain")
    deps = dataclasses.replace(
        deps,
        allowlist=tuple(market[s] for s in sellers),
        extras={"discovery_urls": market["facilitator"]},
    )
    task = "Who issues USDC? Buy its token fact sheet from a seller in the market."
    finished = 0
    for _ in range(20):
        r = asyncio.run(run_task(task, deps))
        finished += r.finished
    pay_to = {seller_named(s).pay_to.lower(): s for s in sellers}
    bought = {s: 0 for s in sellers}
    for row in Ledger(deps.wallet.meter.store).rows():
        bought[pay_to[row.recipient.lower()]] += row.status == "settled"
    assert finished == 20
    assert bought["bargain"] <= 3 and bought["atlas"] >= 17, bought
    print(f"purchases over 20 runs: {bought}")


def test_a_market_task_never_falls_back_to_the_paywall(
    tmp_path: Path, chain: Any, market: dict[str, str]
) -> None:
    """The market's sellers cannot be bought from (none is allowlisted) while nib's own
    paywall can: the run pays nobody (balances and ledger read back) and says why,
    instead of buying the fact from the paywall the task did not ask for. The planner does
    not even propose the paywall once the market's offers are spent (before, it did, and
    pay_http refused it as one more failure): the run ends ``cannot-plan``."""
    from agent.models.offline import OfflinePlanner
    from agent.tools.discover import DiscoverTool
    from agent.tools.x402.pay_http import PayHttpTool
    from chain.devkeys import SELLER
    from chain.paywall.app import PaywallServer

    with PaywallServer(chain.rpc_url, chain.usdc) as paywall:
        book = OfferBook()
        tools = (DiscoverTool(book), PayHttpTool(paywall.url, offers=book))
        # A failure budget wide enough for every market offer to be tried and refused.
        limits = Limits(max_consecutive_failures=10, max_steps=30)
        deps = paid_deps(tmp_path, chain, OfflinePlanner(), extra_tools=tools, limits=limits)
        deps = dataclasses.replace(
            deps,
            allowlist=(paywall.url,),
            extras={"discovery_urls": market["facilitator"], "paywall_url": paywall.url},
        )
        seller = dev_account(SELLER).address
        before = usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, seller)
        task = "Who issues USDC? Buy its token fact sheet from a seller in the market."
        r = asyncio.run(run_task(task, deps))
    assert (usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, seller)) == before
    assert Ledger(deps.wallet.meter.store).rows() == []
    said = " ".join(str(e["data"]) for e in deps.store.events(r.run_id, "proposal"))
    assert paywall.url not in said, said
    assert (r.stop_reason, r.finished) == ("cannot-plan", False)
    assert ("the task asks for a seller found by discovery, and the offline planner buys from "
            "no other (the local paywall included) in its place") in r.answer, r.answer


def test_a_post_only_route_named_in_a_task_is_bought_over_post(
    tmp_path: Path, chain: Any, market: dict[str, str]
) -> None:
    """meridian sells the sheet at ``POST /lookup`` only (x402's middleware, a FastAPI POST
    route): the GET the task's URL suggests is refused (405) before anything is paid, its
    402 for POST is read unpaid, and the purchase is made over POST with a JSON body;
    exactly the route's price moves, read from the chain."""
    from agent.models.offline import OfflinePlanner
    from agent.tools.x402.pay_http import PayHttpTool
    from chain.paywall.market import seller_named

    meridian = seller_named("meridian")
    book = OfferBook()
    deps = paid_deps(tmp_path, chain, OfflinePlanner(), extra_tools=(PayHttpTool(offers=book),))
    deps = dataclasses.replace(deps, allowlist=(market["meridian"],))
    before = usdc_balance(chain, meridian.pay_to), usdc_balance(chain, AGENT_ADDR)
    task = f"Who issues USDC? Buy the token fact sheet at {market['meridian']}/lookup"
    r = asyncio.run(run_task(task, deps))
    assert r.finished, r.answer
    assert "Circle" in r.answer
    rows = Ledger(deps.wallet.meter.store).rows()
    assert [(row.amount, row.status) for row in rows] == [(40_000, "settled")]
    assert rows[0].resource.startswith(f"POST {market['meridian']}/lookup")
    assert usdc_balance(chain, meridian.pay_to) == before[0] + 40_000
    assert usdc_balance(chain, AGENT_ADDR) == before[1] - 40_000
