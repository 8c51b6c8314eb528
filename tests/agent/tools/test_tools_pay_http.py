"""pay_http on a real Anvil: buys from the local paywall and from a plain x402 server,
and never pays when the seller's terms change, the 402 is bad, or the seller cheats."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import httpx
import pytest
from _tools_support import Events, approve, serve, usdc_balance

from agent.errors import DeliveryFailed, ToolError
from agent.tools.base import Quote, ToolContext
from agent.tools.x402.fetch import fetch
from agent.tools.x402.offers import OfferBook
from agent.tools.x402.pay_http import (
    LOCAL_PAYWALL_FACTS,
    MAX_BODY_BYTES,
    PayHttpArgs,
    PayHttpTool,
    free_observation,
    origin_of,
)
from agent.tools.x402.pay_mcp import PayMcpTool
from agent.tools.x402.protocol import RequirementRefused, X402ProtocolError
from chain.client import ChainClient
from chain.devkeys import AGENT, OUTSIDER, SELLER, dev_account
from chain.errors import TokenDomainMismatch
from chain.paywall.app import DEFAULT_PRICES, ENDPOINTS, PaywallServer
from judge.verdict import VerdictSigner
from wallet.errors import VerdictReplayed, VerdictVoid
from wallet.keystore import KeyHandle
from wallet.ledger import Ledger
from wallet.reconcile import reconcile
from wallet.signer import Wallet

AGENT_ADDR = dev_account(AGENT).address
SELLER_ADDR = dev_account(SELLER).address
GAS_PRICE = DEFAULT_PRICES["gas"]

Handler = Callable[[httpx.Request], Coroutine[None, None, httpx.Response]]


def submit_x402(chain: Any, paid: httpx.Request) -> str:
    """What a seller can do with a paid request it kept: settle its authorization itself."""
    from x402.http import decode_payment_signature_header

    from tests.adversarial.sellers import submit_authorization

    payload = decode_payment_signature_header(paid.headers["payment-signature"])
    inner = payload.model_dump(mode="json", by_alias=True)["payload"]
    return submit_authorization(chain.w3, chain.usdc, inner)


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


def quote_of(tool: PayHttpTool, url: str, ctx: ToolContext, **extra: Any) -> Quote:
    args = PayHttpArgs.model_validate({"url": url, **extra})
    return run(tool.quote(args, ctx))


def mock_client(handler: Handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def forward(request: httpx.Request) -> httpx.Response:
    """Send ``request`` to the real server and hand back its response."""
    async with httpx.AsyncClient(timeout=30) as client:
        real = await client.send(
            httpx.Request(request.method, request.url, headers=request.headers)
        )
    headers = [
        (k, v)
        for k, v in real.headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length")
    ]
    return httpx.Response(real.status_code, headers=headers, content=real.content)


@pytest.fixture
def paid_ctx(
    make_ctx: Callable[..., ToolContext], wallet: Wallet, paywall: PaywallServer
) -> ToolContext:
    return make_ctx(wallet=wallet, allowlist=(paywall.url,))


# --------------------------------------------------------------------------- facts


def test_facts_for_uses_the_static_map_then_the_catalog(
    paywall: PaywallServer, make_ctx: Callable[..., ToolContext]
) -> None:
    tool = PayHttpTool(paywall.url)
    args = tool.parse_args({"url": paywall.url + "/datasets/token/usdc"})
    assert tool.facts_for(args) == ("token_factsheet",)
    assert tool.facts_for(tool.parse_args({"url": paywall.url + "/nope"})) == ()
    assert run(tool.load_catalog(paywall.url, make_ctx()))
    assert tool.facts_for(tool.parse_args({"url": paywall.url + "/premium/report"})) == (
        "premium_report",
    )
    listed = {e["url"]: e for e in tool.endpoints()}
    assert listed[paywall.url + "/analytics/gas"]["price_atomic"] == GAS_PRICE
    assert tool.describe()["endpoints"] == tool.endpoints()


def test_static_map_matches_the_paywall_endpoints() -> None:
    assert LOCAL_PAYWALL_FACTS == {ep.path: (ep.kind,) for ep in ENDPOINTS}


def test_args_refuse_non_http_urls_and_float_prices() -> None:
    tool = PayHttpTool()
    with pytest.raises(ToolError, match="expected an absolute http:// or https:// URL"):
        tool.parse_args({"url": "ftp://example.com/x"})
    with pytest.raises(ToolError, match="money is never a float"):
        tool.parse_args({"url": "http://a.example/x", "max_price": 0.1})
    priced = PayHttpArgs.model_validate({"url": "http://a.example/x", "max_price": "0.10 USDC"})
    assert priced.max_price == 100_000
    assert origin_of("HTTP://LocalHost/x?y=1") == "http://localhost:80"


@pytest.mark.parametrize(
    ("url", "found", "expected"),
    [
        ("http://127.0.0.1:186010/tokens?symbol=USDC", "found port 186010", "expected a port from 1 to 65535"),
        ("http://127.0.0.1:0/tokens", "found port 0", "expected a port from 1 to 65535"),
        ("http://127.0.0.1:84o2/tokens", "which is not a URL (Invalid port: '84o2')", "Fix: give"),
        ("ftp://127.0.0.1:8402/tokens", "found the scheme ftp://", "expected an absolute http:// or https:// URL"),
        ("127.0.0.1:8402/tokens", "found no scheme", "expected an absolute http:// or https:// URL"),
        ("http:///tokens", "found no host", "expected scheme://host[:port]/path"),
        ("http://me:secret@127.0.0.1:8402/x", "found credentials (user:pass@)", "expected a URL without them"),
        ("  ", "found an empty", "expected an absolute http(s) URL"),
    ],
)
def test_a_url_no_request_can_reach_is_refused_in_the_args_naming_the_fault_and_fix(
    url: str, found: str, expected: str
) -> None:
    """Before, a port past 65535 passed validation and the quote failed inside httpx's
    anyio connect with "unhandled errors in a TaskGroup (1 sub-exception)"."""
    for tool, args in ((PayHttpTool(), {"url": url}),
                       (PayMcpTool(OfferBook()), {"server": url, "tool": "token_factsheet"})):
        with pytest.raises(ToolError) as refused:
            tool.parse_args(args)
        message = str(refused.value)
        assert found in message and expected in message and "Fix: " in message, message
        assert "TaskGroup" not in message and "secret" not in message, message


def test_fetch_names_the_cause_of_a_connect_failure_wrapped_in_an_exception_group(
    make_ctx: Callable[..., ToolContext],
) -> None:
    def connect(request: httpx.Request) -> httpx.Response:
        raise ExceptionGroup("unhandled errors in a TaskGroup",
                             [OverflowError("connect(): port must be 0-65535.")])

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(connect)) as client:
            await fetch(make_ctx(http=client), "http://127.0.0.1:8402/tokens")

    with pytest.raises(ToolError) as failed:
        run(go())
    message = str(failed.value)
    assert "could not reach http://127.0.0.1:8402 (OverflowError: connect(): port must be 0-65535.)" in message
    assert "TaskGroup" not in message


# --------------------------------------------------------------------------- happy paths


def test_buys_from_the_local_paywall_and_settles_the_ledger(
    chain: Any,
    paid_ctx: ToolContext,
    paywall: PaywallServer,
    judge_signer: VerdictSigner,
    wallet: Wallet,
    events: Events,
) -> None:
    tool = PayHttpTool(paywall.url)
    url = paywall.url + "/analytics/gas?blocks=5"
    before_agent, before_seller = usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, SELLER_ADDR)
    head = chain.w3.eth.block_number

    quote = quote_of(tool, url, paid_ctx)
    assert (quote.kind, quote.amount, quote.recipient) == ("x402", GAS_PRICE, SELLER_ADDR)
    assert quote.asset == chain.usdc and quote.chain_id == 31337
    chain_now = chain.w3.eth.get_block("latest")["timestamp"]
    later = max(chain_now, quote.meta["wall_time"])  # the window is valid on both clocks
    assert chain_now < quote.payload["message"]["validBefore"] <= later + 300
    assert quote.meta["facts"] == ["gas_stats"]
    json.dumps(quote.meta)  # a paused run stores its pending quote

    obs = run(tool.execute(quote, approve(judge_signer, quote), paid_ctx))

    assert usdc_balance(chain, AGENT_ADDR) == before_agent - GAS_PRICE
    assert usdc_balance(chain, SELLER_ADDR) == before_seller + GAS_PRICE
    assert obs.ok and obs.cost_usdc == GAS_PRICE
    assert obs.facts["blocks_sampled"] == str(min(5, head + 1))
    # The chain can establish the base fee itself: a seller never covers it.
    assert "gas_stats" in obs.facts and "base_fee_gwei" not in obs.facts
    tx_hash = obs.data["settlement"]["transaction"]
    rows = Ledger(paid_ctx.wallet.meter.store).rows("run-test")  # type: ignore[union-attr]
    assert [(r.status, r.tx_hash, r.amount) for r in rows] == [
        ("settled", tx_hash.lower(), GAS_PRICE)
    ]
    report = reconcile(wallet.meter.store, wallet.chain, chain.usdc, AGENT_ADDR, head + 1)
    assert report.clean and [m.ledger_id for m in report.matched] == [rows[0].id]
    assert obs.summary.startswith("paid 0.05 USDC for gas_stats")


@pytest.mark.parametrize(
    ("pinned", "pays"),
    [((None, None), True), (("USDC", "2"), True), (("USD Coin", "2"), False)],
    ids=["read-from-the-token", "pinned-right", "pinned-wrong"],
)
def test_the_configured_networks_token_domain_is_the_one_signed_under(
    chain: Any,
    make_ctx: Callable[..., ToolContext],
    paywall: PaywallServer,
    judge_signer: VerdictSigner,
    wallet: Wallet,
    pinned: tuple[str | None, str | None],
    pays: bool,
) -> None:
    """The network's usdc_name/usdc_version (NIB_USDC_NAME/NIB_USDC_VERSION) pin the
    domain: the token reporting it pays and settles under it; a token reporting another
    is refused before anything is signed, naming both and the fix."""
    from chain.networks import get_network

    network = get_network("anvil", rpc_url=chain.rpc_url, usdc=chain.usdc,
                          usdc_name=pinned[0], usdc_version=pinned[1])
    ctx = make_ctx(wallet=wallet, allowlist=(paywall.url,), network=network)
    tool = PayHttpTool(paywall.url)
    url = paywall.url + "/analytics/gas?blocks=3"
    before = usdc_balance(chain, SELLER_ADDR)
    if not pays:
        with pytest.raises(TokenDomainMismatch) as refused:
            quote_of(tool, url, ctx)
        assert "pins the USDC EIP-712 domain (name='USD Coin', version='2')" in str(refused.value)
        assert "reports (name='USDC', version='2')" in str(refused.value)
        assert "Fix: correct NIB_USDC_NAME" in str(refused.value)
        assert Ledger(wallet.meter.store).rows() == [] and usdc_balance(chain, SELLER_ADDR) == before
        return
    quote = quote_of(tool, url, ctx)
    assert (quote.payload["domain"]["name"], quote.payload["domain"]["version"]) == ("USDC", "2")
    obs = run(tool.execute(quote, approve(judge_signer, quote), ctx))
    assert obs.ok and usdc_balance(chain, SELLER_ADDR) == before + GAS_PRICE
    assert [r.status for r in Ledger(wallet.meter.store).rows()] == ["settled"]


def test_interoperates_with_a_plain_x402_fastapi_seller(
    chain: Any, make_ctx: Callable[..., ToolContext], wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    from fastapi import FastAPI
    from x402 import x402Facilitator, x402ResourceServer
    from x402.http import PaymentOption, RouteConfig
    from x402.http.middleware.fastapi import payment_middleware
    from x402.mechanisms.evm.exact import ExactEvmFacilitatorScheme, ExactEvmServerScheme
    from x402.mechanisms.evm.signers import FacilitatorWeb3Signer
    from x402.schemas import AssetAmount

    network = "eip155:31337"
    outsider = dev_account(OUTSIDER).address
    signer = FacilitatorWeb3Signer(
        private_key=dev_account(5).key.hex(),
        rpc_url=chain.rpc_url,
        confirmation_timeout_seconds=30,
    )
    facilitator = x402Facilitator()
    facilitator.register([network], ExactEvmFacilitatorScheme(signer))
    server = x402ResourceServer(facilitator)
    server.register(network, ExactEvmServerScheme())  # type: ignore[arg-type]
    price = AssetAmount(amount="30000", asset=chain.usdc, extra={"name": "USDC", "version": "2"})
    routes = {
        "GET /weather": RouteConfig(
            accepts=PaymentOption(
                scheme="exact",
                pay_to=outsider,
                price=price,
                network=network,
                max_timeout_seconds=120,
            ),
            description="weather",
        )
    }
    app = FastAPI()
    middleware = payment_middleware(routes, server)

    @app.middleware("http")
    async def x402_gate(request: Any, call_next: Any) -> Any:
        return await middleware(request, call_next)

    @app.get("/weather")
    def weather() -> dict[str, Any]:
        return {"facts": {"temperature_c": "21", "sky": "clear"}}

    before = usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, outsider)
    with serve(app) as base:
        ctx = make_ctx(wallet=wallet, allowlist=(base,))
        tool = PayHttpTool()
        quote = quote_of(tool, base + "/weather", ctx)
        assert quote.amount == 30_000 and quote.recipient == outsider
        assert tool.facts_for(tool.parse_args({"url": base + "/weather"})) == ()
        obs = run(tool.execute(quote, approve(judge_signer, quote), ctx))
    # No nib catalog and no declared fact kind: the data is kept as a typed excerpt, and
    # nothing the seller says about itself becomes a fact.
    assert obs.facts == {}
    assert obs.data["excerpt"] == {
        "type": "json",
        "fields": {"facts.temperature_c": "21", "facts.sky": "clear"},
    }
    assert usdc_balance(chain, AGENT_ADDR) == before[0] - 30_000
    assert usdc_balance(chain, outsider) == before[1] + 30_000
    row = wallet.meter.ledger.rows("run-test")[0]
    assert row.status == "settled" and row.tx_hash == obs.data["settlement"]["transaction"].lower()


def test_free_resource_is_a_zero_quote_with_the_observation(
    paywall: PaywallServer, make_ctx: Callable[..., ToolContext], wallet: Wallet
) -> None:
    ctx = make_ctx(wallet=wallet, allowlist=(paywall.url,))
    tool = PayHttpTool(paywall.url)
    quote = quote_of(tool, paywall.url + "/health", ctx)
    assert quote.amount == 0 and quote.meta["free"] is True
    obs = free_observation(quote)
    assert obs is not None and obs.ok and obs.cost_usdc == 0
    assert obs.data["body"]["status"] == "ok"
    assert run(tool.execute(quote, None, ctx)) == obs
    assert wallet.meter.ledger.rows() == []


# --------------------------------------------------------------------------- refusals


def test_seller_outside_the_allowlist_is_refused_before_any_request(
    make_ctx: Callable[..., ToolContext], wallet: Wallet
) -> None:
    seen: list[httpx.Request] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200)

    ctx = make_ctx(wallet=wallet, allowlist=("http://127.0.0.1:8402",), http=mock_client(handler))
    with pytest.raises(ToolError) as err:
        quote_of(PayHttpTool(), "https://evil.example/data", ctx)
    assert "seller https://evil.example:443 is not on the allowlist" in str(err.value)
    assert "allowed: http://127.0.0.1:8402" in str(err.value)
    assert "NIB_SELLER_ALLOWLIST" in str(err.value)
    assert seen == []


def test_the_seller_is_named_from_the_arguments_without_a_request(
    make_ctx: Callable[..., ToolContext], wallet: Wallet
) -> None:
    """What the loop refuses a seller that failed to deliver by, before any request: the
    seller the quote would pay, checked as the quote checks it."""
    seen: list[httpx.Request] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200)

    ctx = make_ctx(wallet=wallet, allowlist=("http://seller.test",), http=mock_client(handler))
    tool = PayHttpTool()
    args = PayHttpArgs.model_validate({"url": "http://Seller.test/analytics/gas?try=1"})
    assert tool.seller_for(args, ctx) == origin_of("http://seller.test/") == "http://seller.test:80"
    with pytest.raises(ToolError, match="seller https://evil.example:443 is not on the allowlist"):
        tool.seller_for(PayHttpArgs.model_validate({"url": "https://evil.example/data"}), ctx)
    assert seen == []


@pytest.mark.parametrize("change", ["price", "recipient"])
def test_terms_changed_between_quote_and_payment_void_the_verdict(
    chain: Any,
    change: str,
    paid_ctx: ToolContext,
    paywall: PaywallServer,
    judge_signer: VerdictSigner,
    wallet: Wallet,
    events: Events,
) -> None:
    tool = PayHttpTool(paywall.url)
    url = paywall.url + "/analytics/gas"
    quote = quote_of(tool, url, paid_ctx)
    verdict = approve(judge_signer, quote)
    if change == "price":
        paywall.state.set_price("gas", GAS_PRICE * 10)
    else:
        paywall.state.set_pay_to(dev_account(OUTSIDER).address)
    before = [
        usdc_balance(chain, a) for a in (AGENT_ADDR, SELLER_ADDR, dev_account(OUTSIDER).address)
    ]

    with pytest.raises(VerdictVoid, match="the payload changed after approval"):
        run(tool.execute(quote, verdict, paid_ctx))

    after = [
        usdc_balance(chain, a) for a in (AGENT_ADDR, SELLER_ADDR, dev_account(OUTSIDER).address)
    ]
    assert after == before
    assert wallet.meter.ledger.rows() == [] and not wallet.meter.ledger.is_used(verdict.id)
    assert [e["code"] for e in events.named("wallet.refused")] == ["verdict-void"]
    assert events.named("wallet.signed") == []


def test_requirement_for_another_chain_or_asset_is_refused_before_quoting(
    chain: Any, make_ctx: Callable[..., ToolContext], wallet: Wallet
) -> None:
    from x402.http import encode_payment_required_header
    from x402.schemas import PaymentRequired, PaymentRequirements

    offers = [
        PaymentRequirements(
            scheme="exact",
            network="eip155:84532",
            asset=chain.usdc,
            amount="1000",
            pay_to=SELLER_ADDR,
            max_timeout_seconds=60,
            extra={"name": "USDC", "version": "2"},
        ),
        PaymentRequirements(
            scheme="exact",
            network="eip155:31337",
            asset=dev_account(OUTSIDER).address,
            amount="1000",
            pay_to=SELLER_ADDR,
            max_timeout_seconds=60,
            extra={"name": "USDC", "version": "2"},
        ),
    ]
    header = encode_payment_required_header(PaymentRequired(accepts=offers))

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(402, headers={"PAYMENT-REQUIRED": header})

    ctx = make_ctx(wallet=wallet, allowlist=("http://seller.test",), http=mock_client(handler))
    with pytest.raises(RequirementRefused) as err:
        quote_of(PayHttpTool(), "http://seller.test/data", ctx)
    assert err.value.code == "no-matching-requirement"
    assert "eip155:84532" in str(err.value) and "on eip155:31337 in" in str(err.value)
    assert wallet.meter.ledger.rows() == []


def test_price_above_max_price_is_refused_before_quoting(
    paid_ctx: ToolContext, paywall: PaywallServer
) -> None:
    with pytest.raises(RequirementRefused) as err:
        quote_of(PayHttpTool(), paywall.url + "/premium/report", paid_ctx, max_price="1 USDC")
    assert err.value.code == "price-above-limit"
    assert "2500000" in str(err.value)


@pytest.mark.parametrize(
    ("headers", "body", "needle"),
    [
        ({"PAYMENT-REQUIRED": "%%%not-base64"}, b"", "not base64-encoded"),
        (
            {"PAYMENT-REQUIRED": base64.b64encode(b'{"x402Version": 2, "accepts": []}').decode()},
            b"",
            "offers no payment requirements",
        ),
        ({}, b"<html>pay me</html>", "body is not JSON"),
        ({}, b'{"x402Version": 1, "accepts": [{"scheme": "exact"}]}', "does not match the x402 v1"),
    ],
)
def test_malformed_402_is_a_clear_protocol_error(
    make_ctx: Callable[..., ToolContext],
    wallet: Wallet,
    headers: dict[str, str],
    body: bytes,
    needle: str,
) -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(402, headers=headers, content=body)

    ctx = make_ctx(wallet=wallet, allowlist=("http://seller.test",), http=mock_client(handler))
    with pytest.raises(X402ProtocolError, match=needle):
        quote_of(PayHttpTool(), "http://seller.test/data", ctx)


def test_oversized_response_is_refused(
    make_ctx: Callable[..., ToolContext], wallet: Wallet
) -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"x" * (MAX_BODY_BYTES + 10))

    ctx = make_ctx(wallet=wallet, allowlist=("http://seller.test",), http=mock_client(handler))
    with pytest.raises(ToolError, match=f"exceeds {MAX_BODY_BYTES} bytes"):
        quote_of(PayHttpTool(), "http://seller.test/big", ctx)


def test_seller_answering_402_after_payment_gets_no_second_payment(
    chain: Any,
    make_ctx: Callable[..., ToolContext],
    paywall: PaywallServer,
    wallet: Wallet,
    judge_signer: VerdictSigner,
    events: Events,
) -> None:
    paid_requests: list[httpx.Request] = []

    async def cheat(request: httpx.Request) -> httpx.Response:
        # Takes the signed authorization, settles nothing, asks to be paid again.
        if "payment-signature" in request.headers:
            paid_requests.append(request)
            unpaid = httpx.Request("GET", request.url)
            return await forward(unpaid)
        return await forward(request)

    ctx = make_ctx(wallet=wallet, allowlist=(paywall.url,), http=mock_client(cheat))
    tool = PayHttpTool(paywall.url)
    quote = quote_of(tool, paywall.url + "/analytics/gas", ctx)
    verdict = approve(judge_signer, quote)
    before = usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, SELLER_ADDR)

    head = chain.w3.eth.block_number
    with pytest.raises(DeliveryFailed) as err:
        run(tool.execute(quote, verdict, ctx))
    assert "answered 402" in str(err.value)
    # Nothing moved, and the message says so from its first words (it said "was paid").
    assert str(err.value).startswith(
        f"pay_http: {paywall.url} did not deliver (nothing paid): it answered 402")
    assert "was paid and" not in str(err.value)
    assert "No second payment is made" in str(err.value)
    assert "the wallet cancelled the authorization on chain" in str(err.value)
    assert err.value.delivery.paid is False and err.value.delivery.status == "cancelled"
    assert len(paid_requests) == 1
    # The seller held a valid signature: the wallet cancelled it on chain (nothing moved,
    # the cap share is free; the cancel's gas is metered).
    [row] = wallet.meter.ledger.rows()
    assert row.status == "cancelled" and row.tx_hash and "answered 402" in row.note
    usage = wallet.meter.usage("run-test")
    assert (usage.settled, usage.reserved) == (0, 0) and usage.gas_wei > 0
    [cancelled] = events.named("wallet.cancelled")
    assert cancelled["tx_hash"] == row.tx_hash

    # No second attempt under the same verdict: it is used.
    with pytest.raises(VerdictReplayed):
        run(tool.execute(quote, verdict, ctx))
    assert len(paid_requests) == 1 and len(wallet.meter.ledger.rows()) == 1
    # The seller tries the signature it kept: the token refuses it.
    with pytest.raises(Exception, match="used or canceled"):
        submit_x402(chain, paid_requests[0])
    assert (usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, SELLER_ADDR)) == before
    report = reconcile(wallet.meter.store, wallet.chain, chain.usdc, AGENT_ADDR, head + 1)
    assert report.clean and report.matched == ()


def test_seller_refusing_after_payment_once_the_authorization_expired_fails_the_spend(
    chain: Any,
    make_ctx: Callable[..., ToolContext],
    paywall: PaywallServer,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
    events: Events,
) -> None:
    # The seller sits on the paid request until validBefore has passed on the chain's
    # clock and the wall clock, then refuses: the authorization can never land.
    skew = [0.0]
    wallet = Wallet(
        KeyHandle(dev_account(AGENT)),
        db_path=db_path,
        chain=client,
        usdc=chain.usdc,
        trusted_judge=judge_signer.address,
        emit=events,
        clock=lambda: time.time() + skew[0],
    )

    async def stall_then_refuse(request: httpx.Request) -> httpx.Response:
        if "payment-signature" in request.headers:
            chain.rpc("evm_increaseTime", [3_600])
            chain.rpc("evm_mine")
            skew[0] = 3_600.0
            return await forward(httpx.Request("GET", request.url))
        return await forward(request)

    ctx = make_ctx(wallet=wallet, allowlist=(paywall.url,), http=mock_client(stall_then_refuse))
    tool = PayHttpTool(paywall.url)
    quote = quote_of(tool, paywall.url + "/analytics/gas", ctx)
    before = usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, SELLER_ADDR)

    with pytest.raises(DeliveryFailed, match="No money moved: the authorization expired unused"):
        run(tool.execute(quote, approve(judge_signer, quote), ctx))
    [row] = wallet.meter.ledger.rows()
    assert row.status == "failed" and f"expired unused at {row.valid_before}" in row.note
    assert chain.w3.eth.get_block("latest")["timestamp"] >= row.valid_before
    assert wallet.meter.usage("run-test").committed == 0
    assert events.named("wallet.cancelled") == []  # nothing left to cancel
    assert (usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, SELLER_ADDR)) == before


def test_seller_that_settles_but_answers_402_leaves_the_row_for_reconciliation(
    chain: Any,
    make_ctx: Callable[..., ToolContext],
    paywall: PaywallServer,
    wallet: Wallet,
    judge_signer: VerdictSigner,
) -> None:
    async def settle_then_lie(request: httpx.Request) -> httpx.Response:
        real = await forward(request)
        if "payment-signature" in request.headers and real.status_code == 200:
            return httpx.Response(402, content=b'{"x402Version": 2, "accepts": []}')
        return real

    ctx = make_ctx(wallet=wallet, allowlist=(paywall.url,), http=mock_client(settle_then_lie))
    tool = PayHttpTool(paywall.url)
    head = chain.w3.eth.block_number
    quote = quote_of(tool, paywall.url + "/analytics/gas", ctx)
    with pytest.raises(DeliveryFailed, match="The seller took the money") as err:
        run(tool.execute(quote, approve(judge_signer, quote), ctx))
    assert err.value.delivery.paid is True
    # The token's AuthorizationUsed log names the settlement tx: settled at once, proven.
    [row] = wallet.meter.ledger.rows()
    assert row.status == "settled" and "without delivering" in row.note
    assert "paid for nothing" in row.note
    report = reconcile(wallet.meter.store, wallet.chain, chain.usdc, AGENT_ADDR, head + 1)
    assert report.clean and report.resolved == () and report.matched[0].ledger_id == row.id


def test_expired_quote_is_refused_before_signing(
    chain: Any,
    paid_ctx: ToolContext,
    paywall: PaywallServer,
    judge_signer: VerdictSigner,
    wallet: Wallet,
) -> None:
    tool = PayHttpTool(paywall.url)
    quote = quote_of(tool, paywall.url + "/analytics/gas", paid_ctx)
    verdict = approve(judge_signer, quote)
    # Move the chain past the authorization's window (which spans chain and wall clocks).
    chain.rpc("evm_mine", [int(quote.payload["message"]["validBefore"]) + 1])
    with pytest.raises(ToolError, match="the quote for .* is stale: its authorization is valid"):
        run(tool.execute(quote, verdict, paid_ctx))
    assert wallet.meter.ledger.rows() == [] and not wallet.meter.ledger.is_used(verdict.id)


def test_seller_turning_free_after_the_quote_costs_nothing(
    chain: Any,
    make_ctx: Callable[..., ToolContext],
    paywall: PaywallServer,
    wallet: Wallet,
    judge_signer: VerdictSigner,
) -> None:
    calls = 0

    async def then_free(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        if request.url.path == "/catalog":
            return await forward(request)
        calls += 1
        if calls == 1:
            return await forward(request)
        return httpx.Response(200, json={"kind": "gas_stats", "facts": {"tx_count": "0"}})

    ctx = make_ctx(wallet=wallet, allowlist=(paywall.url,), http=mock_client(then_free))
    tool = PayHttpTool(paywall.url)
    quote = quote_of(tool, paywall.url + "/analytics/gas", ctx)
    assert quote.amount == GAS_PRICE
    obs = run(tool.execute(quote, approve(judge_signer, quote), ctx))
    assert obs.cost_usdc == 0 and obs.facts["tx_count"] == "0"
    assert wallet.meter.ledger.rows() == []


def test_settlement_claim_without_a_chain_receipt_is_not_recorded_as_settled(
    chain: Any,
    make_ctx: Callable[..., ToolContext],
    paywall: PaywallServer,
    wallet: Wallet,
    judge_signer: VerdictSigner,
) -> None:
    from x402.http import encode_payment_response_header
    from x402.schemas import SettleResponse

    fake = "0x" + "12" * 32

    async def liar(request: httpx.Request) -> httpx.Response:
        if "payment-signature" not in request.headers:
            return await forward(request)
        receipt = SettleResponse(
            success=True, transaction=fake, network="eip155:31337", payer=AGENT_ADDR
        )
        return httpx.Response(
            200,
            headers={"PAYMENT-RESPONSE": encode_payment_response_header(receipt)},
            json={"facts": {"x": "1"}},
        )

    ctx = make_ctx(wallet=wallet, allowlist=(paywall.url,), http=mock_client(liar))
    tool = PayHttpTool(paywall.url)
    quote = quote_of(tool, paywall.url + "/analytics/gas", ctx)
    before = usdc_balance(chain, AGENT_ADDR)
    obs = run(tool.execute(quote, approve(judge_signer, quote), ctx))
    assert not obs.ok and "does not settle our authorization (not-mined)" in (obs.error or "")
    assert obs.facts == {} and obs.data["excerpt"]["fields"] == {"facts.x": "1"}
    assert obs.not_delivered is not None and obs.not_delivered.status == "cancelled"
    # Never settled on the seller's word: the authorization it kept is cancelled on chain.
    [row] = wallet.meter.ledger.rows()
    assert row.status == "cancelled" and row.tx_hash != fake and "unproven" in row.note
    assert usdc_balance(chain, AGENT_ADDR) == before


def test_pays_a_v1_seller_with_x_payment(
    chain: Any, make_ctx: Callable[..., ToolContext], wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    """A legacy x402 v1 seller: JSON-body 402, X-PAYMENT header, X-PAYMENT-RESPONSE receipt.

    The x402 package ships no v1 server, so this one settles the authorization itself.
    """
    from x402.http import decode_payment_signature_header, encode_payment_response_header
    from x402.schemas import PaymentPayloadV1, SettleResponse

    from chain.devkeys import DEPLOYER
    from chain.usdc import usdc_contract

    url = "http://legacy.test/report"
    offer = {
        "x402Version": 1,
        "error": "X-PAYMENT header is required",
        "accepts": [
            {
                "scheme": "exact",
                "network": "eip155:31337",
                "maxAmountRequired": "70000",
                "resource": url,
                "payTo": SELLER_ADDR,
                "maxTimeoutSeconds": 60,
                "asset": chain.usdc,
                "extra": {"name": "USDC", "version": "2"},
            }
        ],
    }
    token = usdc_contract(chain.w3, chain.usdc)
    settle_fn = token.get_function_by_signature(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
    )

    def settle(header: str) -> str:
        payment = decode_payment_signature_header(header)
        assert isinstance(payment, PaymentPayloadV1)
        auth, sig = payment.payload["authorization"], payment.payload["signature"]
        call = settle_fn(
            auth["from"],
            auth["to"],
            int(auth["value"]),
            int(auth["validAfter"]),
            int(auth["validBefore"]),
            bytes.fromhex(auth["nonce"][2:]),
            bytes.fromhex(sig[2:]),
        )
        tx = call.transact({"from": dev_account(DEPLOYER).address})
        assert chain.w3.eth.wait_for_transaction_receipt(tx)["status"] == 1
        return "0x" + bytes(tx).hex()

    async def legacy(request: httpx.Request) -> httpx.Response:
        header = request.headers.get("x-payment")
        if header is None:
            return httpx.Response(402, json=offer)
        tx_hash = await asyncio.to_thread(settle, header)
        receipt = SettleResponse(
            success=True, transaction=tx_hash, network="eip155:31337", payer=AGENT_ADDR
        )
        return httpx.Response(
            200,
            headers={"X-PAYMENT-RESPONSE": encode_payment_response_header(receipt)},
            json={"facts": {"report": "ok"}},
        )

    ctx = make_ctx(wallet=wallet, allowlist=("http://legacy.test",), http=mock_client(legacy))
    tool = PayHttpTool()
    quote = quote_of(tool, url, ctx)
    assert quote.meta["x402_version"] == 1 and quote.amount == 70_000
    before = usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, SELLER_ADDR)
    obs = run(tool.execute(quote, approve(judge_signer, quote), ctx))
    assert obs.facts == {} and obs.cost_usdc == 70_000
    assert obs.data["excerpt"]["fields"]["facts.report"] == "ok"
    assert usdc_balance(chain, AGENT_ADDR) == before[0] - 70_000
    assert usdc_balance(chain, SELLER_ADDR) == before[1] + 70_000
    assert wallet.meter.ledger.rows()[0].status == "settled"


def test_a_purchase_reads_no_whole_table_of_the_ledger(
    chain: Any, paid_ctx: ToolContext, paywall: PaywallServer, judge_signer: VerdictSigner,
    wallet: Wallet,
) -> None:
    """Every statement one real purchase sends to the wallet's database (quote, the signing
    path, settlement proof, ledger) is answered by an index or a running total: EXPLAINed
    after earlier purchases left rows to scan (tests/_plans.py)."""
    from tests._plans import recording

    tool = PayHttpTool(paywall.url)
    for blocks in (1, 2, 3):
        quote = quote_of(tool, paywall.url + f"/analytics/gas?blocks={blocks}", paid_ctx)
        assert run(tool.execute(quote, approve(judge_signer, quote), paid_ctx)).ok
    with recording(wallet.meter.store.db) as [log]:
        quote = quote_of(tool, paywall.url + "/analytics/gas?blocks=4", paid_ctx)
        assert run(tool.execute(quote, approve(judge_signer, quote), paid_ctx)).ok
    assert log.touching("wallet_spends") and log.touching("wallet_totals")
    assert log.full_scans() == []


def test_a_seller_without_a_catalog_is_not_asked_for_one_at_every_quote(
    make_ctx: Callable[..., ToolContext], paywall: PaywallServer, wallet: Wallet,
) -> None:
    """A seller whose /catalog cannot be read (none, as most outside sellers; or one that
    stalls it, which cost every quote CATALOG_TIMEOUT_S) is asked once, not per quote."""
    asked: list[str] = []

    async def no_catalog(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/catalog":
            asked.append(request.url.path)
            return httpx.Response(404)
        return await forward(request)

    ctx = make_ctx(wallet=wallet, allowlist=(paywall.url,), http=mock_client(no_catalog))
    tool = PayHttpTool(paywall.url)
    for _ in range(3):
        assert quote_of(tool, paywall.url + "/analytics/gas", ctx).amount == GAS_PRICE
    assert asked == ["/catalog"]
