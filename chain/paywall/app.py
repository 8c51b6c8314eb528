"""The local x402 paywall: a paid research-data service for the devnet.

Built with the official ``x402`` package: its FastAPI middleware gates the paid routes and its
EVM "exact" facilitator, run in-process with the devnet deployer's key (never the agent's),
settles every payment on the chain with ``transferWithAuthorization``. Analytics are computed
live from the chain; fact sheets come from the datasets shipped in ``chain/data/``.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from fastapi import FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse
from x402 import x402FacilitatorSync, x402ResourceServer
from x402.http import (
    HTTPRequestContext,
    PaymentOption,
    RouteConfig,
    RouteConfigurationError,
    x402HTTPResourceServer,
)
from x402.http.middleware.fastapi import payment_middleware
from x402.mechanisms.evm.exact import ExactEvmFacilitatorScheme, ExactEvmServerScheme
from x402.schemas import (
    AssetAmount,
)

from chain.client import ChainClient
from chain.devkeys import DEPLOYER, SELLER, dev_account, local_dev_account
from chain.errors import ChainError, DevnetError
from chain.facts import FactKind
from chain.money import USDC_DECIMALS
from chain.paywall.datasets import (
    congestion,
    dataset,
    decimal_str,
    gas_stats,
    protocols,
    tokens,
    transfer_stats,
)
from chain.paywall.facilitator import DevnetFacilitatorSigner, InProcessFacilitator
from chain.paywall.serve import AppServer, serve_forever
from chain.usdc import token_domain

__all__ = [
    "DEFAULT_PRICES",
    "ENDPOINTS",
    "Endpoint",
    "PaywallServer",
    "PaywallState",
    "create_app",
    "main",
    "run_paywall",
]

#: How long a buyer's authorization may stay valid, advertised as ``maxTimeoutSeconds``.
MAX_TIMEOUT_S = 300
#: Settlement receipts on Anvil arrive at once; a stuck one means a broken devnet.
_CONFIRMATION_TIMEOUT_S = 30.0



@dataclass(frozen=True)
class Endpoint:
    """One paid route: what it sells, at what default price, under which x402 route pattern."""

    name: str
    path: str
    route: str
    price: int
    kind: FactKind
    description: str
    provides: tuple[str, ...]


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "gas",
        "/analytics/gas",
        "GET /analytics/gas",
        50_000,
        "gas_stats",
        "Base fee and gas-used statistics over recent devnet blocks (?blocks=1..256, default 20).",
        (
            "latest_block",
            "blocks_sampled",
            "base_fee_gwei",
            "base_fee_gwei_mean",
            "base_fee_gwei_min",
            "base_fee_gwei_max",
            "gas_used_mean",
            "gas_used_ratio_mean",
            "tx_count",
            "block_time_s_mean",
        ),
    ),
    Endpoint(
        "transfers",
        "/analytics/transfers",
        "GET /analytics/transfers",
        100_000,
        "transfer_stats",
        "TestUSDC Transfer statistics over recent devnet blocks (?blocks=1..100000, default 1000).",
        (
            "token",
            "from_block",
            "to_block",
            "transfer_count",
            "volume_atomic",
            "volume_usdc",
            "unique_senders",
            "unique_recipients",
            "largest_transfer_atomic",
            "mint_count",
        ),
    ),
    Endpoint(
        "token",
        "/datasets/token/{symbol}",
        "GET /datasets/token/[symbol]",
        20_000,
        "token_factsheet",
        "Static fact sheet of a well-known token (see /catalog for the symbols).",
        (
            "name",
            "symbol",
            "kind",
            "issuer",
            "launched",
            "decimals",
            "standard",
            "eip3009",
            "mainnet_address",
        ),
    ),
    Endpoint(
        "protocol",
        "/datasets/protocol/{name}",
        "GET /datasets/protocol/[name]",
        250_000,
        "protocol_factsheet",
        "Static fact sheet of a DeFi protocol (see /catalog for the names).",
        ("name", "category", "launched", "mechanism", "governance_token", "chains"),
    ),
    Endpoint(
        "premium",
        "/premium/report",
        "GET /premium/report",
        2_500_000,
        "premium_report",
        "Combined devnet report: gas and transfer statistics, the USDC fact sheet and a "
        "congestion verdict. Priced above the default 1 USDC task budget.",
        ("congestion", "base_fee_gwei", "transfer_count", "volume_usdc", "issuer"),
    ),
)

#: Default prices in atomic USDC (6 decimals), by endpoint name.
DEFAULT_PRICES: dict[str, int] = {ep.name: ep.price for ep in ENDPOINTS}


class PaywallState:
    """The seller's live terms: price per endpoint and the payTo address.

    Mutable on purpose: tests and demos change a price or the recipient between a buyer's
    quote and its payment, which the x402 server then refuses to settle (the buyer's
    ``accepted`` requirement no longer matches).
    """

    def __init__(
        self,
        *,
        network: str,
        asset: str,
        pay_to: str,
        prices: Mapping[str, int],
        domain: tuple[str, str],
    ) -> None:
        unknown = sorted(set(prices) - set(DEFAULT_PRICES))
        if unknown:
            raise DevnetError(
                f"paywall prices name unknown endpoints {unknown}; expected names from "
                f"{sorted(DEFAULT_PRICES)}. Fix: key prices by endpoint name."
            )
        merged = {**DEFAULT_PRICES, **prices}
        for name, amount in merged.items():
            _require_price(name, amount)
        self.network = network
        self.asset = asset
        #: The token's EIP-712 (name, version), as its contract reports them.
        self.domain = domain
        self._pay_to = to_checksum_address(pay_to)
        self._prices = merged
        self._lock = threading.Lock()

    @property
    def pay_to(self) -> str:
        return self._pay_to

    def price(self, name: str) -> int:
        with self._lock:
            return self._prices[name]

    def prices(self) -> dict[str, int]:
        with self._lock:
            return dict(self._prices)

    def set_price(self, name: str, amount: int) -> None:
        """Change one endpoint's price (atomic USDC); takes effect on the next request."""
        if name not in self._prices:
            raise DevnetError(
                f"no paywall endpoint named {name!r}; expected one of {sorted(self._prices)}."
            )
        _require_price(name, amount)
        with self._lock:
            self._prices[name] = amount

    def set_pay_to(self, address: str) -> None:
        """Change the seller's payTo address; takes effect on the next request."""
        self._pay_to = to_checksum_address(address)

    def _price_option(self, name: str) -> AssetAmount:
        return AssetAmount(
            amount=str(self.price(name)),
            asset=self.asset,
            extra={"name": self.domain[0], "version": self.domain[1]},
        )


def _require_price(name: str, amount: object) -> None:
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise DevnetError(
            f"price of {name!r} must be a positive int of atomic USDC (1 USDC = 1_000_000); "
            f"got {amount!r}."
        )


# -------------------------------------------------------------------------------- app


def create_app(
    rpc_url: str,
    usdc: str,
    *,
    chain_id: int | None = None,
    seller: str | None = None,
    facilitator_account: LocalAccount | None = None,
    prices: Mapping[str, int] | None = None,
) -> FastAPI:
    """Build the paywall ASGI app for the chain at ``rpc_url`` selling for ``usdc``.

    ``seller`` (payTo) defaults to dev account SELLER; ``facilitator_account`` (who sends
    ``transferWithAuthorization`` and pays its gas) defaults to dev account DEPLOYER and is
    only defaulted on the devnet. ``prices`` overrides :data:`DEFAULT_PRICES` by name. The
    live terms are ``app.state.paywall`` (a :class:`PaywallState`).

    Raises ``WrongChain``/``RpcUnreachable`` when the RPC is not the expected chain, and
    ``DevnetError`` when ``usdc`` has no code or the configuration is invalid.
    """
    client = ChainClient(rpc_url, expected_chain_id=chain_id)
    token = _token(client, usdc, rpc_url)
    if facilitator_account is None:
        facilitator_account = local_dev_account(client, DEPLOYER, "paywall's facilitator")
    state = PaywallState(
        network=f"eip155:{client.chain_id()}",  # the chain's own: no seller hard-codes one
        asset=token,
        pay_to=seller or dev_account(SELLER).address,
        prices=prices or {},
        # Advertise the token's own domain: a FiatTokenV2_2 named "USD Coin" rejects an
        # authorization signed for "USDC".
        domain=token_domain(client.w3, token),
    )
    gate = _x402_gate(state, facilitator_account, rpc_url)

    app = FastAPI(title="nib paywall", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.paywall = state
    app.state.facilitator = facilitator_account.address

    @app.middleware("http")
    async def _x402(request: Request, call_next: _Next) -> Response:
        return await gate(request, call_next)

    _add_free_routes(app, client, state, facilitator_account.address)
    _add_paid_routes(app, client, state)
    return app


#: What the next handler of an ASGI middleware chain is.
_Next = Callable[[Request], Awaitable[Response]]


def _token(client: ChainClient, usdc: str, rpc_url: str) -> str:
    """``usdc`` checksummed, once the chain shows a contract there."""
    token = to_checksum_address(usdc)
    if not client.call("eth_getCode", lambda: client.w3.eth.get_code(token)):
        raise DevnetError(
            f"no contract at USDC address {token} on {rpc_url} (chain {client.chain_id()}); "
            "expected the devnet's USDC token. Fix: deploy it (`nib devnet up`) and pass its "
            "address."
        )
    return token


def _x402_gate(
    state: PaywallState, facilitator_account: LocalAccount, rpc_url: str
) -> Callable[[Request, _Next], Awaitable[Response]]:
    """The official x402 middleware over :data:`ENDPOINTS`, settling through an in-process
    facilitator that sends with ``facilitator_account``."""
    signer = DevnetFacilitatorSigner(
        private_key=facilitator_account.key.hex(),
        rpc_url=rpc_url,
        confirmation_timeout_seconds=_CONFIRMATION_TIMEOUT_S,
    )
    facilitator = x402FacilitatorSync()
    facilitator.register([state.network], ExactEvmFacilitatorScheme(signer))
    server = x402ResourceServer(InProcessFacilitator(facilitator))
    # x402 2.25's own annotations disagree on payment_flows' type; the scheme is its own.
    server.register(state.network, ExactEvmServerScheme())  # type: ignore[arg-type]
    routes = {ep.route: _route_config(ep, state) for ep in ENDPOINTS}
    # Validate here: the middleware's own startup check calls os._exit on a bad route.
    try:
        x402HTTPResourceServer(server, routes).initialize()
    except RouteConfigurationError as exc:
        raise DevnetError(f"x402 rejected the paywall routes: {exc}") from exc
    gate: Callable[[Request, _Next], Awaitable[Response]] = payment_middleware(routes, server)
    return gate


#: The free routes, as the catalog lists them beside the paid ones.
_FREE: tuple[tuple[str, str, str], ...] = (
    ("health", "/health", "Liveness and chain reachability."),
    ("catalog", "/catalog", "This listing."),
)


def _catalog(state: PaywallState) -> dict[str, object]:
    """The seller's listing: every route with its price now, the datasets' keys."""
    prices_now = state.prices()
    paid = [
        {"name": ep.name, "method": "GET", "path": ep.path, "price_atomic": prices_now[ep.name],
         "price_usdc": decimal_str(Decimal(prices_now[ep.name]) / 10**USDC_DECIMALS, 6),
         "kind": ep.kind, "facts": [ep.kind], "provides": list(ep.provides),
         "description": ep.description}
        for ep in ENDPOINTS
    ]
    free = [
        {"name": name, "method": "GET", "path": path, "price_atomic": 0, "price_usdc": "0",
         "kind": "free", "facts": [], "provides": [], "description": description}
        for name, path, description in _FREE
    ]
    return {
        "network": state.network,
        "asset": state.asset,
        "asset_decimals": USDC_DECIMALS,
        "pay_to": state.pay_to,
        "x402_version": 2,
        "scheme": "exact",
        "endpoints": paid + free,
        "token_symbols": sorted(tokens()),
        "protocol_names": sorted(protocols()),
    }


def _add_free_routes(app: FastAPI, client: ChainClient, state: PaywallState,
                     facilitator: str) -> None:
    @app.get("/health")
    def health() -> JSONResponse:
        try:
            block = client.block_number()
        except ChainError as exc:
            return JSONResponse({"status": "degraded", "error": str(exc)}, status_code=503)
        return JSONResponse({
            "status": "ok", "network": state.network, "chain_id": client.chain_id(),
            "usdc": state.asset, "pay_to": state.pay_to, "facilitator": facilitator,
            "x402_version": 2, "block": block,
        })

    @app.get("/catalog", response_model=None)
    def catalog() -> dict[str, object]:
        return _catalog(state)


def _add_paid_routes(app: FastAPI, client: ChainClient, state: PaywallState) -> None:
    network, token = state.network, state.asset

    @app.get("/analytics/gas", response_model=None)
    def analytics_gas(blocks: int = Query(20, ge=1, le=256)) -> dict[str, object]:
        facts = gas_stats(client, blocks)
        return _payload("gas_stats", network, facts, "live devnet blocks")

    @app.get("/analytics/transfers", response_model=None)
    def analytics_transfers(blocks: int = Query(1000, ge=1, le=100_000)) -> dict[str, object]:
        facts = transfer_stats(client, token, blocks)
        return _payload("transfer_stats", network, facts, "live devnet Transfer logs")

    @app.get("/datasets/token/{symbol}", response_model=None)
    def token_sheet(symbol: str) -> dict[str, object]:
        return _sheet("token_factsheet", "token", symbol, symbol.upper(), network, "tokens")

    @app.get("/datasets/protocol/{name}", response_model=None)
    def protocol_sheet(name: str) -> dict[str, object]:
        return _sheet("protocol_factsheet", "protocol", name, name.lower(), network, "protocols")

    @app.get("/premium/report", response_model=None)
    def premium_report() -> dict[str, object]:
        gas = gas_stats(client, 20)
        transfers = transfer_stats(client, token, 1000)
        usdc_sheet = tokens()["USDC"]
        facts = {
            **gas,
            **transfers,
            "issuer": usdc_sheet["issuer"],
            "eip3009": usdc_sheet["eip3009"],
            "congestion": congestion(gas["gas_used_ratio_mean"]),
        }
        return _payload("premium_report", network, facts, "live devnet + shipped datasets")


def _route_config(ep: Endpoint, state: PaywallState) -> RouteConfig:
    # Price and payTo are resolved per request, so changed terms apply to the next 402.
    def price(_ctx: HTTPRequestContext) -> AssetAmount:
        return state._price_option(ep.name)

    def pay_to(_ctx: HTTPRequestContext) -> str:
        return state.pay_to

    return RouteConfig(
        accepts=PaymentOption(
            scheme="exact",
            pay_to=pay_to,
            price=price,
            network=state.network,
            max_timeout_seconds=MAX_TIMEOUT_S,
        ),
        description=ep.description,
        mime_type="application/json",
    )


def _payload(
    kind: FactKind, network: str, facts: dict[str, str], source: str
) -> dict[str, object]:
    return {"kind": kind, "network": network, "facts": facts, "source": source}


def _sheet(
    kind: FactKind, what: str, asked: str, key: str, network: str, dataset: str
) -> dict[str, object]:
    """The fact sheet ``key`` of ``dataset`` (tokens or protocols) as a paid answer; 404
    naming what is available when there is none."""
    sheets = tokens() if dataset == "tokens" else protocols()
    sheet = sheets.get(key)
    if sheet is None:
        raise HTTPException(
            404, f"no fact sheet for {what} {asked!r}; available: {sorted(sheets)}"
        )
    return _payload(kind, network, dict(sheet), _dataset_source(dataset))


def _dataset_source(name: str) -> str:
    return f"shipped dataset chain/data/{name}.json (as of {dataset(name)['as_of']})"


# ----------------------------------------------------------------------------- server


class PaywallServer(AppServer):
    """The paywall served by uvicorn in a background thread (tests, ``nib devnet``).

    Use as a context manager; ``url`` is ``http://host:port`` once started. ``state`` holds
    the live prices and payTo.
    """

    def __init__(
        self,
        rpc_url: str,
        usdc: str,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        chain_id: int | None = None,
        seller: str | None = None,
        facilitator_account: LocalAccount | None = None,
        prices: Mapping[str, int] | None = None,
    ) -> None:
        app = create_app(rpc_url, usdc, chain_id=chain_id, seller=seller,
                         facilitator_account=facilitator_account, prices=prices)
        super().__init__(app, host, port, name="paywall")
        self.state: PaywallState = app.state.paywall

    def __repr__(self) -> str:
        return f"PaywallServer(url={self.url!r})"


def run_paywall(
    rpc_url: str,
    usdc: str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    url_file: str | Path | None = None,
    chain_id: int | None = None,
) -> None:
    """Serve the paywall in the foreground until SIGTERM/SIGINT (``nib devnet up``).

    Prints the bound URL as one line on stdout and, when ``url_file`` is given, writes it
    there atomically; readiness is then pollable with ``GET /health``.
    """
    serve_forever(
        PaywallServer(rpc_url, usdc, host=host, port=port, chain_id=chain_id), url_file=url_file
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m chain.paywall.app --rpc-url URL --usdc ADDR [--port N] [--url-file F]``."""
    parser = argparse.ArgumentParser(prog="python -m chain.paywall.app", description=__doc__)
    parser.add_argument("--rpc-url", required=True)
    parser.add_argument("--usdc", required=True, help="TestUSDC address on that chain")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--url-file", help="write the bound URL here once serving")
    parser.add_argument("--chain-id", type=int, default=None, help="expected chain id (default: the RPC's)")
    args = parser.parse_args(argv)
    try:
        run_paywall(
            args.rpc_url,
            args.usdc,
            host=args.host,
            port=args.port,
            url_file=args.url_file,
            chain_id=args.chain_id,
        )
    except ChainError as exc:
        print(f"paywall: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
