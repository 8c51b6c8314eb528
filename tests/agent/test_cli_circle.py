"""The nib command on a devnet running Circle's USDC (``nib devnet up --token circle``):
the paywall demo with reconcile and an escalated payment
granted at the judge, collected from test_cli.py and run against Circle's FiatTokenV2_2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import (  # noqa: F401 - collected here on Circle's token
    nib,
    test_a_human_grants_an_escalated_payment_at_the_judge_and_only_then_it_is_paid,
    test_run_demo_pays_once_and_reconciles,
)

from chain.client import ChainClient
from chain.fiattoken import fiat_token_abi


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    h = tmp_path_factory.mktemp("cli-circle-home")
    up = nib(h, "devnet", "up", "--token", "circle", "--json")
    assert up.returncode == 0, up.stderr
    yield h
    nib(h, "devnet", "down")


def test_devnet_up_token_circle_runs_circles_token_and_keeps_it(home: Path) -> None:
    info = json.loads(nib(home, "devnet", "up", "--json").stdout)  # no --token: keeps circle
    assert (info["token"], info["chain_id"]) == ("circle", 31337)
    w3 = ChainClient(info["rpc_url"], 31337).w3
    token = w3.eth.contract(address=info["usdc"], abi=fiat_token_abi())
    deployer = token.functions.masterMinter().call()
    assert token.functions.isMinter(deployer).call()
    assert token.functions.balanceOf(info["wallet"]).call() >= 50_000_000
    other = nib(home, "devnet", "up", "--token", "test")
    assert other.returncode != 0
    assert "runs token circle, asked for test" in other.stderr and "NIB_HOME" in other.stderr


def test_an_outside_fastapi_seller_admitted_by_origin_alone_is_bought_from(home: Path) -> None:
    """A seller built only with x402's FastAPI middleware, paid to an address nib was never
    told: listing its origin in NIB_SELLER_ALLOWLIST is the one step; the judge service
    admits the payTo its own 402 advertises. Balances read from the chain."""
    from typing import Any

    from eth_account import Account
    from fastapi import FastAPI
    from x402 import x402Facilitator, x402ResourceServer
    from x402.http import PaymentOption, RouteConfig
    from x402.http.middleware.fastapi import payment_middleware
    from x402.mechanisms.evm.exact import ExactEvmFacilitatorScheme, ExactEvmServerScheme
    from x402.mechanisms.evm.signers import FacilitatorWeb3Signer
    from x402.schemas import AssetAmount

    from chain.devkeys import dev_account
    from chain.usdc import token_domain
    from tests._support import serve

    info = json.loads(nib(home, "devnet", "up", "--json").stdout)
    chain = ChainClient(info["rpc_url"], 31337)
    network, pay_to = "eip155:31337", Account.create().address
    name, version = token_domain(chain.w3, info["usdc"])
    facilitator = x402Facilitator()
    facilitator.register([network], ExactEvmFacilitatorScheme(FacilitatorWeb3Signer(
        private_key=dev_account(5).key.hex(), rpc_url=info["rpc_url"], confirmation_timeout_seconds=30)))
    server = x402ResourceServer(facilitator)
    server.register(network, ExactEvmServerScheme())  # type: ignore[arg-type]
    price = AssetAmount(amount="30000", asset=info["usdc"], extra={"name": name, "version": version})
    routes = {"GET /tokens": RouteConfig(accepts=PaymentOption(
        scheme="exact", pay_to=pay_to, price=price, network=network, max_timeout_seconds=120),
        description="Token fact sheet: issuer, decimals")}
    app = FastAPI()
    gate = payment_middleware(routes, server)

    @app.middleware("http")
    async def x402_gate(request: Any, call_next: Any) -> Any:
        return await gate(request, call_next)

    @app.get("/tokens")
    def tokens(symbol: str = "USDC") -> dict[str, Any]:
        return {"symbol": symbol, "name": "USD Coin", "issuer": "Circle", "decimals": 6}

    with serve(app) as base:
        task = f"Who issues USDC? Buy the token fact sheet at {base}/tokens?symbol=USDC"
        r = nib(home, "run", task, "--json", env={"NIB_SELLER_ALLOWLIST": base})
        assert r.returncode == 0, r.stderr + r.stdout
    result = json.loads(r.stdout)
    audit = json.loads(nib(home, "audit", "--run", result["run_id"], "--json").stdout)
    assert [(row["amount"], row["status"], row["recipient"].lower()) for row in audit] == [
        (30_000, "settled", pay_to.lower())]
    assert chain.token_balance(info["usdc"], pay_to) == 30_000
