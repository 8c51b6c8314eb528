"""A seller that floods discovery: one origin answering 402 with a real market seller's
terms (its bazaar declaration included) on as many routes as asked, each route its own
resource and cheaper than anyone, so a buyer that sorts by price alone sees only it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from fastapi import FastAPI, Request, Response
from x402.http import decode_payment_required_header, encode_payment_required_header

#: The flooder's price per resource: 1 atomic unit, below every market seller's.
FLOOD_PRICE = 1


def flooding_seller(model_url: str) -> Any:
    """An app whose ``/r/{n}`` routes answer 402 with the terms ``model_url`` serves, the
    resource URL made the route's own and the price :data:`FLOOD_PRICE`. (FastAPI reads
    the route's annotations from this module's globals: its imports are at the top.)"""
    real = decode_payment_required_header(
        httpx.get(model_url, timeout=30).headers["payment-required"])
    terms = real.model_dump(by_alias=True, exclude_none=True)
    app = FastAPI()

    @app.get("/r/{n}")
    def resource(n: int, request: Request) -> Response:
        own = {**terms, "resource": {**terms["resource"], "url": str(request.url)},
               "accepts": [{**terms["accepts"][0], "amount": str(FLOOD_PRICE)}]}
        header = encode_payment_required_header(type(real).model_validate(own))
        return Response(status_code=402, headers={"payment-required": header})

    return app


@contextmanager
def own_facilitator(rpc_url: str) -> Iterator[str]:
    """A facilitator service of the test's own (an empty catalogue), its base URL."""
    from chain.paywall.facilitator_service import create_facilitator_app
    from chain.paywall.serve import AppServer

    with AppServer(create_facilitator_app(rpc_url), name="own-facilitator") as srv:
        yield srv.url


def unbounded_discovery(listings: list[dict[str, Any]]) -> Any:
    """A discovery service nib does not run, bounding nothing: it serves ``listings`` (x402
    ``DiscoveryResource`` dicts) in order, paged as x402's discovery API pages them, and
    never pages more than 100 at a time; its search matches every listing."""
    app = FastAPI()

    @app.get("/discovery/resources")
    def resources(limit: int = 100, offset: int = 0) -> dict[str, Any]:
        limit = min(limit, 100)
        return {"x402Version": 2, "items": listings[offset : offset + limit],
                "pagination": {"limit": limit, "offset": offset, "total": len(listings)}}

    @app.get("/discovery/search")
    def search(query: str, limit: int = 20, cursor: str | None = None) -> dict[str, Any]:
        limit, start = min(limit, 100), int(cursor or 0)
        more = start + limit < len(listings)
        return {"x402Version": 2, "resources": listings[start : start + limit],
                "partialResults": False,
                "pagination": {"limit": limit, "cursor": str(start + limit) if more else None}}

    return app
