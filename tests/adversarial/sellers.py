"""Adversarial x402 sellers on loopback, settling on Anvil through the x402 package.

``AdversarialSeller`` is a FastAPI app gated by x402's own payment middleware and EVM
"exact" facilitator (in-process, a spare dev key pays the gas). An outer middleware lets
a test cheat at every phase: mutate the terms before the nth unpaid request (price raised
between quote and pay, recipient switched), rewrite the ``PAYMENT-REQUIRED`` header
(asset or chain swapped, odd ``maxTimeoutSeconds``), and misbehave after payment (402
again, 402 but settle anyway, a huge body, a slow answer, the chain's clock pushed past
the authorization's ``validBefore`` before settling). Every request and every payment
header it received is logged, so tests can prove what the buyer sent.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from eth_utils import to_checksum_address
from fastapi import FastAPI
from fastapi.responses import Response, StreamingResponse
from web3 import Web3
from x402 import x402FacilitatorSync, x402ResourceServer
from x402.http import (
    PAYMENT_REQUIRED_HEADER,
    PAYMENT_RESPONSE_HEADER,
    HTTPRequestContext,
    PaymentOption,
    RouteConfig,
    decode_payment_signature_header,
    encode_payment_required_header,
    encode_payment_response_header,
)
from x402.http.middleware.fastapi import payment_middleware
from x402.mechanisms.evm.exact import ExactEvmFacilitatorScheme, ExactEvmServerScheme
from x402.schemas import AssetAmount, SettleResponse, parse_payment_required

from chain.devkeys import DEPLOYER, dev_account

# The paywall's facilitator adapters (fresh nonces after evm_revert, blocking settlement
# in a worker thread), reused so both sellers settle exactly the same way.
from chain.paywall.facilitator import DevnetFacilitatorSigner, InProcessFacilitator
from chain.usdc import mint, token_domain, usdc_contract
from tests._support import serve  # noqa: F401 - re-exported for the adversarial tests

PaidMode = Literal[
    "honest",
    "402-again",
    "500-again",
    "402-but-settle",
    "500-but-settle",
    "fake-receipt",
    "huge-body",
    "slow",
    "expire-first",
    "redirect-but-settle",
    "drip-but-settle",
]
"""What the seller does with a paid request.

- ``honest``: verify, serve, settle (x402 middleware).
- ``402-again`` / ``500-again``: keep the signed authorization, settle nothing, answer
  402 (or 500).
- ``402-but-settle`` / ``500-but-settle``: submit the authorization on chain itself,
  then answer 402 (or 500).
- ``fake-receipt``: keep the authorization, serve the data with a PAYMENT-RESPONSE
  naming someone else's successful transaction (a mint to the deployer).
- ``huge-body``: settle, then answer with a body far above the buyer's size limit.
- ``slow``: settle, then hold the answer for ``slow_s`` seconds.
- ``expire-first``: push the chain's clock past any 300 s authorization, then verify.
- ``redirect-but-settle``: submit the authorization on chain itself, then answer 307 to
  ``redirect_to`` (another origin).
- ``drip-but-settle``: submit the authorization on chain itself, then answer 200 with a
  true receipt and the data one byte every ``drip_s`` seconds.
"""

NETWORK = "eip155:31337"
GAS_PATH = "/analytics/gas"
#: Facilitator key for adversarial sellers: a dev account no other test uses to send txs.
FACILITATOR_INDEX = 5
HUGE_BODY_BYTES = 400 * 1024


def default_body() -> dict[str, Any]:
    return {
        "kind": "gas_stats",
        "network": NETWORK,
        "facts": {"base_fee_gwei": "1.0", "blocks_sampled": "5"},
        "source": "adversarial seller",
    }


@dataclass
class SellerLog:
    """What the seller saw: every request, every payment header it was handed."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    payments: list[dict[str, Any]] = field(default_factory=list)
    unpaid: int = 0  # unpaid requests to gated paths (each answered 402): 0 = the quote

    @property
    def paid_requests(self) -> int:
        return sum(1 for r in self.requests if r["paid"])


class AdversarialSeller:
    """An x402 seller of ``GET /analytics/gas`` (and ``/data/{name}``) that can cheat."""

    def __init__(
        self,
        rpc_url: str,
        usdc: str,
        *,
        pay_to: str,
        price: int = 50_000,
        body: dict[str, Any] | Callable[[], dict[str, Any]] = default_body,
        max_timeout_s: int = 300,
        paid_mode: PaidMode = "honest",
        slow_s: float = 0.0,
        rewrite_402: Callable[[dict[str, Any], int], dict[str, Any]] | None = None,
        on_unpaid: Callable[[AdversarialSeller, int], None] | None = None,
        on_paid: Callable[[AdversarialSeller], None] | None = None,
        catalog: dict[str, Any] | None = None,
        redirect_to: str = "http://127.0.0.1:9/elsewhere",
        drip_s: float = 1.0,
    ) -> None:
        self.rpc_url = rpc_url
        self.usdc = to_checksum_address(usdc)
        self.pay_to = to_checksum_address(pay_to)
        self.price = price
        self.body = body
        self.max_timeout_s = max_timeout_s
        self.paid_mode: PaidMode = paid_mode
        self.slow_s = slow_s
        self.rewrite_402 = rewrite_402
        self.on_unpaid = on_unpaid
        self.on_paid = on_paid
        self.catalog = catalog
        self.redirect_to = redirect_to
        self.drip_s = drip_s
        #: Transactions this seller sent to settle authorizations it was handed itself.
        self.settled_txs: list[str] = []
        self.log = SellerLog()
        self.w3 = Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": 30}))
        self._last_402: str | None = None
        self._lock = threading.Lock()
        #: What the seller advertises: the token's own EIP-712 domain, read from the chain.
        self.domain = token_domain(self.w3, self.usdc)
        self.app = self._build()

    # ------------------------------------------------------------------ app

    def _price(self, _ctx: HTTPRequestContext) -> AssetAmount:
        name, version = self.domain
        return AssetAmount(amount=str(self.price), asset=self.usdc, extra={"name": name, "version": version})

    def _pay_to(self, _ctx: HTTPRequestContext) -> str:
        return self.pay_to

    def _build(self) -> FastAPI:
        account = dev_account(FACILITATOR_INDEX)
        signer = DevnetFacilitatorSigner(
            private_key=account.key.hex(), rpc_url=self.rpc_url, confirmation_timeout_seconds=30
        )
        facilitator = x402FacilitatorSync()
        facilitator.register([NETWORK], ExactEvmFacilitatorScheme(signer))
        server = x402ResourceServer(InProcessFacilitator(facilitator))
        server.register(NETWORK, ExactEvmServerScheme())  # type: ignore[arg-type]
        option = PaymentOption(
            scheme="exact",
            pay_to=self._pay_to,
            price=self._price,
            network=NETWORK,
            max_timeout_seconds=self.max_timeout_s,
        )
        routes = {
            f"GET {GAS_PATH}": RouteConfig(accepts=option, description="gas", mime_type="application/json"),
            "GET /data/[name]": RouteConfig(accepts=option, description="data", mime_type="application/json"),
        }
        gate = payment_middleware(routes, server)
        app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

        @app.middleware("http")
        async def x402_gate(request: Any, call_next: Any) -> Any:
            return await gate(request, call_next)

        @app.middleware("http")
        async def cheat(request: Any, call_next: Any) -> Any:  # outermost
            return await self._cheat(request, call_next)

        @app.get("/catalog")
        def catalog() -> Response:
            # Free, and whatever the seller likes to claim (an over-claiming catalogue).
            return Response(json.dumps(self.catalog or {}), media_type="application/json")

        @app.get(GAS_PATH)
        def gas() -> Response:
            return self._content()

        @app.get("/data/{name}")
        def data(name: str) -> Response:
            return self._content()

        return app

    def _content(self) -> Response:
        if self.paid_mode == "huge-body":
            blob = {"kind": "gas_stats", "facts": {"pad": "x" * HUGE_BODY_BYTES}}
            return Response(json.dumps(blob), media_type="application/json")
        body = self.body() if callable(self.body) else self.body
        return Response(json.dumps(body), media_type="application/json")

    async def _cheat(self, request: Any, call_next: Any) -> Any:
        header = request.headers.get("payment-signature") or request.headers.get("x-payment")
        paid = header is not None
        path = request.url.path
        gated = path == GAS_PATH or path.startswith("/data/")
        entry: dict[str, Any] = {"path": path, "paid": paid}
        with self._lock:
            self.log.requests.append(entry)
            n = self.log.unpaid
            if not paid and gated:
                self.log.unpaid += 1
        if not gated:
            return await call_next(request)
        if not paid and self.on_unpaid is not None:
            self.on_unpaid(self, n)
        if paid:
            payload = decode_payment_signature_header(header)
            self.log.payments.append(payload.model_dump(mode="json", by_alias=True))
            if self.on_paid is not None:
                self.on_paid(self)
            if self.paid_mode in ("redirect-but-settle", "drip-but-settle"):
                return await self._settle_then_cheat(entry)
            if self.paid_mode in ("402-again", "402-but-settle", "500-again", "500-but-settle"):
                if self.paid_mode.endswith("-but-settle"):
                    inner = self.log.payments[-1]["payload"]
                    await asyncio.to_thread(self.submit_authorization, inner)
                if self.paid_mode.startswith("500"):
                    entry["status"] = 500
                    return Response(b'{"error":"internal"}', status_code=500)
                entry["status"] = 402
                headers = {PAYMENT_REQUIRED_HEADER: self._last_402 or ""}
                return Response(b"{}", status_code=402, headers=headers, media_type="application/json")
            if self.paid_mode == "fake-receipt":
                decoy = await asyncio.to_thread(self.decoy_transaction)
                receipt = SettleResponse(
                    success=True, transaction=decoy, network=NETWORK, payer=None
                )
                entry["status"] = 200
                return Response(
                    self._content().body,
                    media_type="application/json",
                    headers={PAYMENT_RESPONSE_HEADER: encode_payment_response_header(receipt)},
                )
            if self.paid_mode == "expire-first":
                await asyncio.to_thread(self.advance_chain_time, 3_600)
        response = await call_next(request)
        if not paid and response.status_code == 402:
            response = await self._tamper_402(response, n)
        if paid and self.paid_mode == "slow":
            await asyncio.sleep(self.slow_s)
        entry["status"] = response.status_code
        return response

    async def _settle_then_cheat(self, entry: dict[str, Any]) -> Any:
        """Take the money (the authorization settled on chain), then redirect or drip."""
        inner = self.log.payments[-1]["payload"]
        tx = await asyncio.to_thread(self.submit_authorization, inner)
        if self.paid_mode == "redirect-but-settle":
            entry["status"] = 307
            return Response(b"", status_code=307, headers={"location": self.redirect_to})
        receipt = SettleResponse(success=True, transaction=tx, network=NETWORK, payer=None)
        data = json.dumps(self.body() if callable(self.body) else self.body).encode()
        drip_s = self.drip_s

        async def drip() -> Any:
            for i in range(len(data)):
                yield data[i : i + 1]
                await asyncio.sleep(drip_s)

        entry["status"] = 200
        return StreamingResponse(
            drip(),
            media_type="application/json",
            headers={PAYMENT_RESPONSE_HEADER: encode_payment_response_header(receipt)},
        )

    async def _tamper_402(self, response: Any, n: int) -> Any:
        body = b"".join([chunk async for chunk in response.body_iterator])
        raw = response.headers.get(PAYMENT_REQUIRED_HEADER)
        headers = {
            k: v
            for k, v in response.headers.items()
            if k.lower() not in ("content-length", PAYMENT_REQUIRED_HEADER.lower())
        }
        if raw is not None:
            headers[PAYMENT_REQUIRED_HEADER] = raw
        if raw is not None and self.rewrite_402 is not None:
            from x402.http import decode_payment_required_header

            decoded = decode_payment_required_header(raw).model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
            changed = self.rewrite_402(decoded, n)
            raw = encode_payment_required_header(parse_payment_required(changed))
            headers[PAYMENT_REQUIRED_HEADER] = raw
        self._last_402 = raw
        return Response(body, status_code=402, headers=headers)

    # ------------------------------------------------------------------ chain helpers

    def submit_authorization(self, inner: dict[str, Any]) -> str:
        """Settle an x402 "exact" payload on chain the way a facilitator would (DEPLOYER)."""
        tx = submit_authorization(self.w3, self.usdc, inner)
        self.settled_txs.append(tx)
        return tx

    def decoy_transaction(self) -> str:
        """A real, successful USDC transaction that is not ours: a mint to the deployer."""
        deployer = dev_account(DEPLOYER)
        return mint(self.w3, self.usdc, deployer, deployer.address, 1)

    def advance_chain_time(self, seconds: int) -> None:
        self.w3.provider.make_request("evm_increaseTime", [seconds])  # type: ignore[arg-type]
        self.w3.provider.make_request("evm_mine", [])  # type: ignore[arg-type]


def submit_authorization(w3: Web3, usdc: str, inner: dict[str, Any]) -> str:
    """Relay an EIP-3009 ``transferWithAuthorization`` (x402 inner payload) from DEPLOYER."""
    auth, signature = inner["authorization"], inner["signature"]
    relayer = dev_account(DEPLOYER)
    fn = usdc_contract(w3, usdc).get_function_by_signature(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
    )(
        to_checksum_address(auth["from"]),
        to_checksum_address(auth["to"]),
        int(auth["value"]),
        int(auth["validAfter"]),
        int(auth["validBefore"]),
        bytes.fromhex(str(auth["nonce"])[2:]),
        bytes.fromhex(str(signature)[2:]),
    )
    tx = fn.build_transaction(
        {
            "from": relayer.address,
            "nonce": w3.eth.get_transaction_count(relayer.address, "pending"),
            "chainId": w3.eth.chain_id,
        }
    )
    tx_hash = w3.eth.send_raw_transaction(relayer.sign_transaction(tx).raw_transaction)
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)
    if receipt["status"] != 1:
        raise RuntimeError(f"transferWithAuthorization reverted in {tx_hash.hex()}")
    return "0x" + bytes(receipt["transactionHash"]).hex()
