"""The devnet's x402 facilitator as its own HTTP service, with the discovery API.

x402 ships the facilitator engine and its HTTP clients but no server, so this wraps
``x402FacilitatorSync`` in FastAPI: ``GET /supported``, ``POST /verify``, ``POST /settle``
(always HTTP 200: x402's client raises on anything else), plus ``GET /discovery/resources``
and ``GET /discovery/search`` over a :class:`~chain.paywall.discovery.Catalogue` filled
from sellers' ``bazaar`` declarations. ``POST /discovery/register`` asks the facilitator
to fetch a seller's unpaid 402s and list what they declare. Settlement is idempotent on
the x402 ``payment-identifier`` extension: a retried payment gets the first receipt.
"""

from __future__ import annotations

import asyncio
import sys
import threading

from eth_account.signers.local import LocalAccount
from fastapi import FastAPI, Query
from pydantic import BaseModel, Field
from x402 import x402FacilitatorSync
from x402.extensions.bazaar import BAZAAR
from x402.extensions.payment_identifier import extract_payment_identifier
from x402.interfaces import FacilitatorExtension, VerifyResultContext
from x402.mechanisms.evm.exact import ExactEvmFacilitatorScheme
from x402.schemas import (
    PaymentPayload,
    PaymentPayloadV1,
    PaymentRequirements,
    PaymentRequirementsV1,
    parse_payment_payload,
    parse_payment_requirements,
)

from chain.client import ChainClient
from chain.devkeys import DEPLOYER, local_dev_account
from chain.errors import ChainError
from chain.mcp_client import McpTransport
from chain.paywall.discovery import (
    MAX_RESOURCES_PER_REGISTRATION,
    Catalogue,
    Refused,
    Unlisted,
    probe_declaration,
    probe_mcp_declaration,
    unrequestable,
)
from chain.paywall.facilitator import DevnetFacilitatorSigner
from chain.paywall.serve import AppServer, serve_forever, service_parser

__all__ = ["create_facilitator_app", "main"]

_CONFIRMATION_TIMEOUT_S = 30.0


class _PaymentBody(BaseModel):
    x402Version: int | None = None
    paymentPayload: dict[str, object]
    paymentRequirements: dict[str, object]


class _Listed(BaseModel):
    url: str
    method: str = Field(default="GET", pattern="^(GET|POST|MCP|get|post|mcp)$")
    #: MCP only: the tool, and arguments its unpaid call may be probed with.
    tool: str | None = None
    arguments: dict[str, object] = Field(default={})
    #: MCP only: "streamable-http" or "sse" (none: the URL's endpoint, else both in turn).
    transport: McpTransport | None = None


class _Register(BaseModel):
    resources: list[_Listed] = Field(max_length=MAX_RESOURCES_PER_REGISTRATION)


def create_facilitator_app(
    rpc_url: str,
    *,
    chain_id: int | None = None,
    account: LocalAccount | None = None,
) -> FastAPI:
    """The facilitator service for the chain at ``rpc_url``; ``account`` sends settlements
    (defaults to the devnet deployer, only on the devnet). ``app.state.catalogue`` is the
    discovery catalogue."""
    client = ChainClient(rpc_url, expected_chain_id=chain_id)
    network = f"eip155:{client.chain_id()}"  # fail fast, typed; the chain's own id
    if account is None:
        account = local_dev_account(client, DEPLOYER, "facilitator")
    catalogue = Catalogue()
    facilitator = x402FacilitatorSync()
    signer = DevnetFacilitatorSigner(
        private_key=account.key.hex(),
        rpc_url=rpc_url,
        confirmation_timeout_seconds=_CONFIRMATION_TIMEOUT_S,
    )
    facilitator.register([network], ExactEvmFacilitatorScheme(signer))
    facilitator.register_extension(FacilitatorExtension(key=BAZAAR.key))

    def catalogue_payment(ctx: VerifyResultContext) -> None:
        catalogue.add_from_payment(ctx.payment_payload, ctx.requirements)

    facilitator.on_after_verify(catalogue_payment)
    app = FastAPI(title="nib devnet facilitator", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.catalogue = catalogue
    _add_payment_routes(app, _Settlements(facilitator, network), account.address)
    _add_discovery_routes(app, catalogue)
    return app


def _parse(
    body: _PaymentBody,
) -> tuple[PaymentPayload | PaymentPayloadV1, PaymentRequirements | PaymentRequirementsV1]:
    payload = parse_payment_payload(body.paymentPayload)
    return payload, parse_payment_requirements(payload.x402_version, body.paymentRequirements)


class _Settlements:
    """Settles through the facilitator one payment at a time (its nonces never race),
    idempotent on the ``payment-identifier`` extension: a retried payment gets the first
    receipt, another payment under the same id a conflict."""

    def __init__(self, facilitator: x402FacilitatorSync, network: str) -> None:
        self.facilitator, self.network = facilitator, network
        self._lock = threading.Lock()
        self._settled: dict[str, tuple[str, dict[str, object]]] = {}  # id -> (payload, receipt)

    def settle_once(self, body: _PaymentBody) -> dict[str, object]:
        payload, requirements = _parse(body)
        pid = extract_payment_identifier(payload) if isinstance(payload, PaymentPayload) else None
        signed = repr(sorted(payload.payload.items()))
        with self._lock:
            if pid is not None and pid in self._settled:
                first_payload, first = self._settled[pid]
                if first_payload == signed:
                    return first
                return {
                    "success": False,
                    "errorReason": "payment_identifier_conflict",
                    "errorMessage": f"payment id {pid} was already settled for another payment",
                    "transaction": "",
                    "network": self.network,
                }
            receipt: dict[str, object] = self.facilitator.settle(payload, requirements).model_dump(
                by_alias=True, exclude_none=True
            )
            if pid is not None and receipt.get("success"):
                self._settled[pid] = (signed, receipt)
            return receipt


def _add_payment_routes(app: FastAPI, settlements: _Settlements, sender: str) -> None:
    facilitator, network = settlements.facilitator, settlements.network

    @app.get("/health")
    def health() -> dict[str, object]:
        return {"status": "ok", "network": network, "facilitator": sender}

    @app.get("/supported")
    def supported() -> dict[str, object]:
        out: dict[str, object] = facilitator.get_supported().model_dump(
            by_alias=True, exclude_none=True
        )
        return out

    @app.post("/verify")
    async def verify(body: _PaymentBody) -> dict[str, object]:
        payload, requirements = _parse(body)
        result = await asyncio.to_thread(facilitator.verify, payload, requirements)
        out: dict[str, object] = result.model_dump(by_alias=True, exclude_none=True)
        return out

    @app.post("/settle")
    async def settle(body: _PaymentBody) -> dict[str, object]:
        return await asyncio.to_thread(settlements.settle_once, body)


def _add_discovery_routes(app: FastAPI, catalogue: Catalogue) -> None:
    @app.post("/discovery/register")
    async def register(body: _Register) -> dict[str, object]:
        """``{"listed": [url, ...], "refused": [{"resource": url, "why": ...}, ...]}``:
        each resource is listed or refused with the reason (what its 402 held, what
        listing needs, the fix). The MCP tools listed for a server URL replace the ones
        listed for it before (:meth:`Catalogue.register`)."""
        listed: list[str] = []
        refused: list[Refused] = []
        probed = [(entry.url, await _probed(entry)) for entry in body.resources]
        for entry, item in zip(body.resources, catalogue.register(probed), strict=True):
            if isinstance(item, Unlisted):
                refused.append({"resource": entry.url, "why": item.why})
            else:
                listed.append(entry.url)
        return {"listed": listed, "refused": refused}

    @app.get("/discovery/resources")
    def resources(
        type: str | None = None,
        payTo: str | None = None,
        scheme: str | None = None,
        network_: str | None = Query(None, alias="network"),
        extensions: str | None = None,
        limit: int = Query(100, ge=1, le=1000),
        offset: int = Query(0, ge=0),
    ) -> dict[str, object]:
        items = catalogue.items(
            type=type, pay_to=payTo, scheme=scheme, network=network_, extensions=extensions
        )
        return {
            "x402Version": 2,
            "items": [i.to_dict() for i in items[offset : offset + limit]],
            "pagination": {"limit": limit, "offset": offset, "total": len(items)},
        }

    @app.get("/discovery/search")
    def search(
        query: str,
        type: str | None = None,
        payTo: str | None = None,
        scheme: str | None = None,
        network_: str | None = Query(None, alias="network"),
        extensions: str | None = None,
        limit: int = Query(20, ge=1, le=1000),
        cursor: str | None = None,
    ) -> dict[str, object]:
        start = int(cursor) if cursor and cursor.isdigit() else 0
        items = catalogue.items(
            type=type, pay_to=payTo, scheme=scheme, network=network_, extensions=extensions,
            query=query,
        )
        page = items[start : start + limit]
        more = start + limit < len(items)
        return {
            "x402Version": 2,
            "resources": [i.to_dict() for i in page],
            "partialResults": False,
            "pagination": {"limit": limit, "cursor": str(start + limit) if more else None},
        }


async def _probed(
    entry: _Listed,
) -> tuple[dict[str, object], dict[str, object]] | Unlisted:
    """What ``entry``'s unpaid 402 declares (the facilitator reads it itself), or why not:
    a URL no buyer could request, or a tool name no buyer could call, is refused before any
    request is sent to it."""
    refused = unrequestable(entry.url, entry.tool if entry.method.upper() == "MCP" else None)
    if refused is not None:
        return refused
    if entry.method.upper() != "MCP":
        return await asyncio.to_thread(probe_declaration, entry.url, entry.method)
    if not entry.tool:
        return Unlisted(
            f'found an MCP entry for {entry.url} naming no tool; expected "tool", the paid '
            'tool to probe. Fix: add "tool" (and the "arguments" its unpaid call takes)'
        )
    return await probe_mcp_declaration(entry.url, entry.tool, entry.arguments, entry.transport)


def main(argv: list[str] | None = None) -> int:
    """``python -m chain.paywall.facilitator_service --rpc-url URL [--port N] [--url-file F]``."""
    parser = service_parser("chain.paywall.facilitator_service", market=False)
    parser.add_argument("--rpc-url", required=True)
    args = parser.parse_args(argv)
    try:
        app = create_facilitator_app(args.rpc_url, chain_id=args.chain_id)
        server = AppServer(app, args.host, args.port, name="facilitator")
        serve_forever(server, url_file=args.url_file)
    except ChainError as exc:
        print(f"facilitator: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
