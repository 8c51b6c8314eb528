"""After a refusal or a failure the offline planner buys nothing the task did not name.

Two outside testers ran ``nib run`` with no model against their own x402 sellers: once the
judge refused the purchase (or the seller failed), the planner's next proposal drifted from
the task: the route the task named without its query (``/tokens`` for
``/tokens?symbol=USDC``, 0.01 USDC for data then discarded), or the devnet's own paywall, a
seller the task never named. Here the seller is built only with the official ``x402``
package (its FastAPI middleware and facilitator, settling on the session's Anvil), the
tools and the paywall are the ones ``nib run`` wires on the devnet, and what was proposed,
recorded and moved on chain is read back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _loop_support import usdc_balance
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agent.loop.limits import Limits
from agent.loop.result import AgentResult
from agent.loop.run import Deps, run_task
from chain.devkeys import AGENT, DEPLOYER, OUTSIDER, SELLER, dev_account
from chain.paywall.app import PaywallServer
from tests._support import offline_deps, serve
from wallet.ledger import Ledger

AGENT_ADDR = dev_account(AGENT).address
#: Who the tester's seller pays; the paywall pays SELLER.
SELLER_PAY_TO = dev_account(OUTSIDER).address
PRICE = 10_000
SHEETS = {
    "USDC": {"symbol": "USDC", "name": "USD Coin", "issuer": "Circle", "launched": "2018",
             "decimals": "6", "standard": "ERC-20"},
    "DAI": {"symbol": "DAI", "name": "Dai Stablecoin", "issuer": "MakerDAO", "launched": "2017",
            "decimals": "18", "standard": "ERC-20"},
}  # fmt: skip
#: A wide failure budget: the planner's own choice after two failures must show, not the
#: loop's guard.
WIDE = Limits(max_steps=10, max_consecutive_failures=5)


@dataclass
class Seller:
    """A tester's seller: its base URL, and the requests its paid routes were sent (an
    unpaid quote and a paid request each count)."""

    url: str
    requests: list[str]


@contextmanager
def outside_seller(chain: Any, *, down_for: int = 0) -> Iterator[Seller]:
    """A seller built only with the x402 package: ``GET /tokens`` (one sheet with
    ``?symbol=``, the list of symbols without) and ``GET /gas``, 0.01 USDC each, paying
    OUTSIDER. The first ``down_for`` requests to them are answered 503 before x402 sees
    them (the seller is down: nothing is quoted, nothing paid)."""
    from x402 import x402Facilitator, x402ResourceServer
    from x402.http import PaymentOption, RouteConfig
    from x402.http.middleware.fastapi import payment_middleware
    from x402.mechanisms.evm.exact import ExactEvmFacilitatorScheme, ExactEvmServerScheme
    from x402.mechanisms.evm.signers import FacilitatorWeb3Signer
    from x402.schemas import AssetAmount

    from chain.usdc import token_domain

    network = f"eip155:{chain.chain_id}"
    signer = FacilitatorWeb3Signer(
        private_key=dev_account(DEPLOYER).key.hex(),
        rpc_url=chain.rpc_url,
        confirmation_timeout_seconds=30,
    )
    facilitator = x402Facilitator()
    facilitator.register([network], ExactEvmFacilitatorScheme(signer))
    server = x402ResourceServer(facilitator)
    server.register(network, ExactEvmServerScheme())  # type: ignore[arg-type]
    name, version = token_domain(chain.w3, chain.usdc)
    price = AssetAmount(amount=str(PRICE), asset=chain.usdc, extra={"name": name, "version": version})
    accepts = PaymentOption(
        scheme="exact", pay_to=SELLER_PAY_TO, price=price, network=network, max_timeout_seconds=120
    )
    routes = {
        "GET /tokens": RouteConfig(accepts=accepts, description="Token fact sheets (?symbol=USDC)"),
        "GET /gas": RouteConfig(accepts=accepts, description="Gas statistics of recent blocks"),
    }
    app = FastAPI()
    middleware = payment_middleware(routes, server)
    seller = Seller("", [])

    @app.middleware("http")
    async def x402_gate(request: Any, call_next: Any) -> Any:
        return await middleware(request, call_next)

    @app.middleware("http")
    async def down(request: Any, call_next: Any) -> Any:  # outermost: before x402
        if request.url.path not in ("/tokens", "/gas"):
            return await call_next(request)  # e.g. the /catalog read at run start: no route
        seller.requests.append(str(request.url))
        if len(seller.requests) <= down_for:
            return JSONResponse({"error": "upstream unavailable"}, status_code=503)
        return await call_next(request)

    @app.get("/tokens")
    def tokens(request: Request) -> Any:
        symbol = request.query_params.get("symbol")
        return SHEETS[symbol] if symbol in SHEETS else {"symbols": sorted(SHEETS)}

    @app.get("/gas")
    def gas() -> Any:
        return {"blocks": 20, "base_fee_gwei_mean": "0.9", "base_fee_gwei_max": "1.2"}

    with serve(app) as base:
        seller.url = base
        yield seller


@pytest.fixture(scope="module")
def paywall(anvil: Any) -> Iterator[PaywallServer]:
    with PaywallServer(anvil.rpc_url, anvil.usdc) as server:
        yield server


def devnet_deps(chain: Any, paywall: PaywallServer, seller: str, tmp_path: Path, limits: Limits) -> Deps:
    """What ``nib run`` wires on the devnet with no model, both sellers allowlisted."""
    deps: Deps = offline_deps(chain, paywall, tmp_path, sellers=(seller,), limits=limits)
    return deps


def balances(chain: Any) -> dict[str, int]:
    return {who: usdc_balance(chain, who) for who in (AGENT_ADDR, SELLER_PAY_TO, dev_account(SELLER).address)}


def proposed_purchases(deps: Deps, result: AgentResult) -> list[str]:
    """Every paid resource the planner proposed, in order (a POST names its method)."""
    out = []
    for event in deps.store.events(result.run_id, "proposal"):
        for call in event["data"].get("calls") or ():
            if call["tool"] == "pay_http":
                args = call["args"]
                out.append(f"{args.get('method', 'GET')} {args['url']}")
    return out


def test_the_named_resource_is_bought_exactly_with_its_query(
    chain: Any, paywall: PaywallServer, tmp_path: Path
) -> None:
    """The control: a seller that answers is paid once, for the resource as named."""
    with outside_seller(chain) as seller:
        named = f"{seller.url}/tokens?symbol=USDC"
        deps = devnet_deps(chain, paywall, seller.url, tmp_path, WIDE)
        before = balances(chain)
        r = asyncio.run(run_task(f"Buy the USDC fact sheet from {named} and tell me who the issuer is.", deps))
    assert r.finished, r.answer
    assert "issuer Circle" in r.answer, r.answer
    assert proposed_purchases(deps, r) == [f"GET {named}"]
    assert [(row.resource, row.amount, row.status) for row in Ledger(deps.wallet.meter.store).rows()] == [
        (named, PRICE, "settled")
    ]
    after = balances(chain)
    assert after[SELLER_PAY_TO] - before[SELLER_PAY_TO] == PRICE
    assert before[AGENT_ADDR] - after[AGENT_ADDR] == PRICE


def test_a_seller_that_fails_is_not_replaced_by_the_same_route_without_the_tasks_query(
    chain: Any, paywall: PaywallServer, tmp_path: Path
) -> None:
    """The seller is down for two requests. Before, the planner then bought ``/tokens``
    (the query dropped: 0.01 USDC for a list of symbols). Now it retries the resource as
    named once, then stops ``cannot-plan`` naming the failure and what it buys only."""
    with outside_seller(chain, down_for=2) as seller:
        named = f"{seller.url}/tokens?symbol=USDC"
        deps = devnet_deps(chain, paywall, seller.url, tmp_path, WIDE)
        before = balances(chain)
        r = asyncio.run(run_task(f"Buy the USDC fact sheet from {named} and tell me who the issuer is.", deps))
    paid = [(row.resource, row.amount) for row in Ledger(deps.wallet.meter.store).rows()]
    assert paid == [], paid
    assert balances(chain) == before  # nobody was paid: not the seller, not the paywall
    assert proposed_purchases(deps, r) == [f"GET {named}"] * 2
    assert seller.requests == [named] * 2  # nothing else was asked of the seller
    assert (r.stop_reason, r.finished) == ("cannot-plan", False)
    assert "pay_http failed in steps 1 and 2 (last error: quote failed: " in r.answer, r.answer
    assert f"the offline planner buys only what the task names ({named})" in r.answer, r.answer


@pytest.mark.parametrize(
    ("task", "route"),
    [
        # The query case: before, the next proposal was /tokens without ?symbol=USDC.
        ("Buy the USDC fact sheet from {url} and tell me who the issuer is.", "/tokens?symbol=USDC"),
        # The seller case: before, the next proposal was the paywall's /analytics/gas.
        ("What are the gas statistics at {url}?", "/gas"),
    ],
)
def test_after_the_judge_refuses_the_named_resource_nothing_else_is_proposed(
    chain: Any, paywall: PaywallServer, tmp_path: Path, task: str, route: str
) -> None:
    with outside_seller(chain) as seller:
        named = seller.url + route
        limits = Limits(max_steps=10, max_consecutive_failures=5, per_call_cap_atomic=PRICE // 2)
        deps = devnet_deps(chain, paywall, seller.url, tmp_path, limits)
        before = balances(chain)
        r = asyncio.run(run_task(task.format(url=named), deps))
    assert proposed_purchases(deps, r) == [f"GET {named}"]
    verdicts = [v["data"] for v in deps.store.events(r.run_id, "verdict") if v["data"]["kind"] == "paid"]
    assert [v["decision"] for v in verdicts] == ["refuse"]
    assert (r.stop_reason, r.finished) == ("cannot-plan", False)
    assert "exceeds the per-call cap" in r.answer, r.answer
    assert f"the offline planner buys only what the task names ({named})" in r.answer, r.answer
    assert paywall.url not in r.answer
    assert Ledger(deps.wallet.meter.store).rows() == []
    assert balances(chain) == before


def test_a_task_naming_a_port_past_65535_stops_naming_the_port_and_buys_nothing(
    chain: Any, paywall: PaywallServer, tmp_path: Path
) -> None:
    """An outside tester's task named port 186010 (its seller allowlisted): the quote
    failed inside httpx with "unhandled errors in a TaskGroup (1 sub-exception)" twice and
    the run stopped ``failure-budget``. Now the planner proposes nothing and stops
    ``cannot-plan`` saying the task's URL cannot be requested, naming the port and the fix."""
    named = "http://127.0.0.1:186010/tokens?symbol=USDC"
    deps = devnet_deps(chain, paywall, "http://127.0.0.1:186010", tmp_path, WIDE)
    before = balances(chain)
    r = asyncio.run(run_task(f"Buy the USDC token fact sheet from {named} and tell me who the issuer is", deps))
    assert (r.stop_reason, r.finished) == ("cannot-plan", False), r.message
    assert proposed_purchases(deps, r) == []
    said = r.message + "\n" + r.answer
    assert f"the task names {named}, which nib cannot request: found port 186010" in r.answer, said
    assert "expected a port from 1 to 65535" in r.answer and "Fix: correct the port" in r.answer, said
    assert "TaskGroup" not in said and paywall.url not in r.answer, said
    assert Ledger(deps.wallet.meter.store).rows() == []
    assert balances(chain) == before
