"""The local x402 paywall on a real Anvil: payments settle on chain, refusals move nothing."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from agent.tools.x402.protocol import (
    RequirementRefused,
    build_authorization,
    choose_requirement,
    encode_payment_header,
    parse_payment_required,
    parse_payment_response,
)
from chain.devkeys import AGENT, DEPLOYER, OUTSIDER, SELLER, dev_account
from chain.errors import DevnetError, WrongChain
from chain.paywall.app import DEFAULT_PRICES, ENDPOINTS, PaywallServer, create_app
from chain.usdc import usdc_contract

NETWORK = "eip155:31337"
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def paywall_server(anvil: Any) -> Iterator[PaywallServer]:
    with PaywallServer(anvil.rpc_url, anvil.usdc) as server:
        yield server


@pytest.fixture
def paywall(paywall_server: PaywallServer) -> Iterator[PaywallServer]:
    """The module's paywall with its default terms restored after each test."""
    yield paywall_server
    for name, price in DEFAULT_PRICES.items():
        paywall_server.state.set_price(name, price)
    paywall_server.state.set_pay_to(dev_account(SELLER).address)


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


def balance(chain: Any, who: str) -> int:
    return int(usdc_contract(chain.w3, chain.usdc).functions.balanceOf(who).call())


def chain_time(chain: Any) -> int:
    return int(chain.w3.eth.get_block("latest")["timestamp"])


def quote(http: httpx.Client, url: str, chain: Any, payer: LocalAccount) -> dict[str, Any]:
    """Fetch the 402 and build the authorization: what pay_http does before the judge."""
    first = http.get(url)
    assert first.status_code == 402, first.text
    pr = parse_payment_required(first)
    req = choose_requirement(pr, network_caip2=NETWORK, asset=chain.usdc)
    typed, auth = build_authorization(
        req, payer=payer.address, chain_time=chain_time(chain), wall_time=int(time.time())
    )
    return {"pr": pr, "req": req, "typed": typed, "auth": auth}


def pay(http: httpx.Client, url: str, q: dict[str, Any], payer: LocalAccount) -> httpx.Response:
    # Tests sign directly; in the agent the wallet signs after the judge approves.
    signature = Account.sign_typed_data(payer.key, full_message=q["typed"]).signature
    name, value = encode_payment_header(q["req"], q["pr"], q["auth"], signature)
    return http.get(url, headers={name: value})


def buy(http: httpx.Client, url: str, chain: Any) -> tuple[httpx.Response, dict[str, Any]]:
    agent = dev_account(AGENT)
    q = quote(http, url, chain, agent)
    return pay(http, url, q, agent), q


# ---------------------------------------------------------------------------- free


def test_health_and_catalog_are_free(
    paywall: PaywallServer, http: httpx.Client, anvil: Any
) -> None:
    health = http.get(paywall.url + "/health")
    assert health.status_code == 200
    assert health.json()["status"] == "ok"
    assert health.json()["facilitator"] == dev_account(DEPLOYER).address
    assert health.json()["pay_to"] == dev_account(SELLER).address

    catalog = http.get(paywall.url + "/catalog").json()
    assert catalog["network"] == NETWORK and catalog["asset"] == anvil.usdc
    by_path = {e["path"]: e for e in catalog["endpoints"]}
    assert by_path["/analytics/gas"]["price_atomic"] == 50_000
    assert by_path["/analytics/gas"]["price_usdc"] == "0.05"
    assert by_path["/premium/report"]["price_atomic"] == 2_500_000
    assert by_path["/premium/report"]["price_atomic"] > 1_000_000  # above the default budget
    assert {e["kind"] for e in catalog["endpoints"]} >= {
        "gas_stats",
        "transfer_stats",
        "token_factsheet",
        "protocol_factsheet",
        "premium_report",
    }
    assert "USDC" in catalog["token_symbols"] and "uniswap" in catalog["protocol_names"]


def test_unpaid_request_gets_v2_requirements(
    paywall: PaywallServer, http: httpx.Client, anvil: Any
) -> None:
    resp = http.get(paywall.url + "/analytics/gas")
    assert resp.status_code == 402
    raw = json.loads(base64.b64decode(resp.headers["PAYMENT-REQUIRED"]))
    assert raw["x402Version"] == 2
    [req] = raw["accepts"]
    assert req == {
        "scheme": "exact",
        "network": NETWORK,
        "asset": anvil.usdc,
        "amount": "50000",
        "payTo": dev_account(SELLER).address,
        "maxTimeoutSeconds": 300,
        "extra": {"name": "USDC", "version": "2"},
    }
    # The advertised domain is the token's own, read from its contract (not a constant).
    from chain.usdc import token_domain

    assert token_domain(anvil.w3, anvil.usdc) == ("USDC", "2")
    assert paywall.state.domain == token_domain(anvil.w3, anvil.usdc)


# ------------------------------------------------------------------------- settled


def test_paid_request_settles_on_chain(
    paywall: PaywallServer, http: httpx.Client, chain: Any
) -> None:
    agent, seller = dev_account(AGENT).address, dev_account(SELLER).address
    facilitator = dev_account(DEPLOYER).address
    before = balance(chain, agent), balance(chain, seller), balance(chain, facilitator)

    resp, _ = buy(http, paywall.url + "/analytics/gas", chain)

    assert resp.status_code == 200, resp.text
    assert balance(chain, agent) == before[0] - 50_000
    assert balance(chain, seller) == before[1] + 50_000
    assert balance(chain, facilitator) == before[2]
    body = resp.json()
    assert body["kind"] == "gas_stats"
    assert set(body["facts"]) == set(ENDPOINTS[0].provides)
    assert int(body["facts"]["latest_block"]) >= 1
    settlement = parse_payment_response(resp)
    assert settlement["success"] is True
    assert settlement["network"] == NETWORK
    assert settlement["payer"] == agent
    receipt = chain.w3.eth.get_transaction_receipt(settlement["transaction"])
    assert receipt["status"] == 1
    assert receipt["from"] == facilitator  # the facilitator pays gas, never the agent
    assert receipt["to"] == chain.usdc


@pytest.mark.parametrize(
    ("path", "kind", "price", "fact", "value"),
    [
        ("/datasets/token/usdc", "token_factsheet", 20_000, "issuer", "Circle"),
        ("/datasets/protocol/Uniswap", "protocol_factsheet", 250_000, "governance_token", "UNI"),
        ("/premium/report", "premium_report", 2_500_000, "issuer", "Circle"),
    ],
)
def test_each_paid_endpoint_charges_its_price(
    paywall: PaywallServer,
    http: httpx.Client,
    chain: Any,
    path: str,
    kind: str,
    price: int,
    fact: str,
    value: str,
) -> None:
    agent = dev_account(AGENT).address
    before = balance(chain, agent)
    resp, q = buy(http, paywall.url + path, chain)
    assert resp.status_code == 200, resp.text
    assert int(q["req"].amount) == price
    assert balance(chain, agent) == before - price
    assert resp.json()["kind"] == kind
    assert resp.json()["facts"][fact] == value


def test_transfer_stats_see_the_payment_for_them(
    paywall: PaywallServer, http: httpx.Client, chain: Any
) -> None:
    resp, _ = buy(http, paywall.url + "/analytics/transfers", chain)
    assert resp.status_code == 200, resp.text
    facts = resp.json()["facts"]
    # The funding mint happened before; this payment settles after the handler runs.
    assert int(facts["mint_count"]) >= 1
    assert int(facts["transfer_count"]) >= 1
    assert facts["token"] == chain.usdc
    assert int(facts["volume_atomic"]) >= 100_000_000


def test_settles_again_after_evm_revert(
    paywall: PaywallServer, http: httpx.Client, chain: Any
) -> None:
    # The stock x402 signer caches facilitator nonces; a revert would leave it ahead of the chain.
    snap = chain.rpc("evm_snapshot")
    first, _ = buy(http, paywall.url + "/datasets/token/WETH", chain)
    assert first.status_code == 200, first.text
    chain.rpc("evm_revert", [snap])
    again, _ = buy(http, paywall.url + "/datasets/token/WETH", chain)
    assert again.status_code == 200, again.text
    assert parse_payment_response(again)["success"] is True


# ------------------------------------------------------------------------- refused


def test_price_raised_after_quote_is_not_settled(
    paywall: PaywallServer, http: httpx.Client, chain: Any
) -> None:
    agent = dev_account(AGENT)
    before = balance(chain, agent.address)
    url = paywall.url + "/analytics/gas"
    q = quote(http, url, chain, agent)
    paywall.state.set_price("gas", 60_000)
    resp = pay(http, url, q, agent)
    assert resp.status_code == 402
    assert parse_payment_required(resp).error == "No matching payment requirements"
    assert balance(chain, agent.address) == before


def test_recipient_changed_after_quote_is_not_settled(
    paywall: PaywallServer, http: httpx.Client, chain: Any
) -> None:
    agent = dev_account(AGENT)
    before = balance(chain, agent.address)
    url = paywall.url + "/analytics/gas"
    q = quote(http, url, chain, agent)
    paywall.state.set_pay_to(dev_account(OUTSIDER).address)
    assert pay(http, url, q, agent).status_code == 402
    assert balance(chain, agent.address) == before
    assert balance(chain, dev_account(OUTSIDER).address) == 0


def test_replayed_payment_settles_once(
    paywall: PaywallServer, http: httpx.Client, chain: Any
) -> None:
    agent = dev_account(AGENT)
    before = balance(chain, agent.address)
    url = paywall.url + "/datasets/token/DAI"
    q = quote(http, url, chain, agent)
    assert pay(http, url, q, agent).status_code == 200
    replay = pay(http, url, q, agent)  # same nonce, same signature
    assert replay.status_code == 402
    assert balance(chain, agent.address) == before - 20_000


def test_concurrent_settlements_pipeline_one_facilitator_key(
    paywall: PaywallServer, chain: Any
) -> None:
    """Six buyers' payments settle at once from the one facilitator key (nonces pipelined,
    none reused), and one authorization sent twice at once still moves money once."""
    agent = dev_account(AGENT)
    facilitator = dev_account(DEPLOYER).address
    url = paywall.url + "/datasets/token/DAI"
    before = balance(chain, agent.address)
    nonce_before = chain.w3.eth.get_transaction_count(facilitator)
    with httpx.Client(timeout=60) as client:
        quotes = [quote(client, url, chain, agent) for _ in range(6)]
    twice = quotes[0]

    async def pay_async(q: dict[str, Any]) -> httpx.Response:
        signature = Account.sign_typed_data(agent.key, full_message=q["typed"]).signature
        name, value = encode_payment_header(q["req"], q["pr"], q["auth"], signature)
        async with httpx.AsyncClient(timeout=60) as client:
            return await client.get(url, headers={name: value})

    async def all_at_once() -> list[httpx.Response]:
        return list(await asyncio.gather(*(pay_async(q) for q in [*quotes, twice])))

    responses = asyncio.run(all_at_once())
    paid = [r for r in responses if r.status_code == 200]
    assert len(paid) == 6, [r.status_code for r in responses]  # the duplicate is refused
    assert balance(chain, agent.address) == before - 6 * 20_000
    txs = {parse_payment_response(r)["transaction"] for r in paid}
    assert len(txs) == 6
    for tx in txs:
        receipt = chain.w3.eth.get_transaction_receipt(tx)
        assert receipt["status"] == 1 and receipt["from"] == facilitator
    assert chain.w3.eth.get_transaction_count(facilitator) >= nonce_before + 6


def test_unknown_dataset_is_404_and_free(
    paywall: PaywallServer, http: httpx.Client, chain: Any
) -> None:
    before = balance(chain, dev_account(AGENT).address)
    resp, _ = buy(http, paywall.url + "/datasets/token/NOPE", chain)
    assert resp.status_code == 404
    assert "available" in resp.json()["detail"]
    assert "PAYMENT-RESPONSE" not in resp.headers
    assert balance(chain, dev_account(AGENT).address) == before


def test_premium_report_is_refused_under_a_one_dollar_cap(
    paywall: PaywallServer, http: httpx.Client, anvil: Any
) -> None:
    pr = parse_payment_required(http.get(paywall.url + "/premium/report"))
    with pytest.raises(RequirementRefused) as err:
        choose_requirement(pr, network_caip2=NETWORK, asset=anvil.usdc, max_amount=1_000_000)
    assert err.value.code == "price-above-limit"
    assert "costs 2500000 atomic units, above the limit of 1000000" in str(err.value)


# -------------------------------------------------------------------- interop/setup


def test_official_x402_httpx_client_pays_the_paywall(paywall: PaywallServer, chain: Any) -> None:
    from x402 import x402Client
    from x402.http.clients import x402HttpxClient
    from x402.mechanisms.evm.exact import register_exact_evm_client
    from x402.mechanisms.evm.signers import EthAccountSigner

    agent = dev_account(AGENT)
    before = balance(chain, agent.address)
    client = register_exact_evm_client(x402Client(), EthAccountSigner(agent), networks=NETWORK)
    # x402's own cap, in atomic units: our TestUSDC is not one of its default assets.
    client.set_spend_controls(
        {
            "allowed_assets": [
                {"network": NETWORK, "asset": chain.usdc, "max_amount_per_payment": "250000"}
            ]
        }
    )

    async def fetch() -> httpx.Response:
        async with x402HttpxClient(client, timeout=30) as http:
            return await http.get(paywall.url + "/datasets/protocol/lido")

    resp = asyncio.run(fetch())
    assert resp.status_code == 200, resp.text
    assert resp.json()["facts"]["governance_token"] == "LDO"
    assert balance(chain, agent.address) == before - 250_000


def test_create_app_refuses_wrong_chain_and_missing_token(anvil: Any) -> None:
    with pytest.raises(WrongChain, match="expected 1"):
        create_app(anvil.rpc_url, anvil.usdc, chain_id=1)
    with pytest.raises(DevnetError, match="no contract at USDC address"):
        create_app(anvil.rpc_url, dev_account(OUTSIDER).address)
    with pytest.raises(DevnetError, match="unknown endpoints"):
        create_app(anvil.rpc_url, anvil.usdc, prices={"gass": 1})


def test_run_paywall_as_a_detached_process(anvil: Any, tmp_path: Path) -> None:
    url_file = tmp_path / "paywall.url"
    proc = subprocess.Popen(
        [sys.executable, "-m", "chain.paywall", "--rpc-url", anvil.rpc_url,
         "--usdc", anvil.usdc, "--port", "0", "--url-file", str(url_file)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (url_file.exists() and url_file.read_text().strip()):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "paywall never wrote its URL"
            time.sleep(0.05)
        url = url_file.read_text().strip()
        assert httpx.get(url + "/health", timeout=5).json()["status"] == "ok"
        assert httpx.get(url + "/analytics/gas", timeout=5).status_code == 402
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert out.strip() == url


def test_payer_without_funds_is_refused_and_nothing_moves(
    paywall: PaywallServer, http: httpx.Client, chain: Any
) -> None:
    outsider = dev_account(OUTSIDER)  # holds no USDC
    seller_before = balance(chain, dev_account(SELLER).address)
    url = paywall.url + "/analytics/gas"
    resp = pay(http, url, quote(http, url, chain, outsider), outsider)
    assert resp.status_code == 402
    assert parse_payment_required(resp).error == "invalid_exact_evm_insufficient_balance"
    assert "PAYMENT-RESPONSE" not in resp.headers
    assert balance(chain, dev_account(SELLER).address) == seller_before
