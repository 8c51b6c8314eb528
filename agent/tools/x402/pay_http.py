"""pay_http: buy data from an x402 seller over HTTP, one purchase as a pipeline of
named steps, in the order they happen:

1. **quote** (:meth:`PayHttpTool.quote`, free): check the seller is one we may pay; ask
   the wallet for a live authorization for the same resource, which is re-sent instead of
   signing a second (:mod:`.live_authorization`); else read the seller's 402
   (:func:`.seller_terms.read_offer`, the judge told to read it too; a 200 is free data,
   see :func:`free_observation`) and build the exact EIP-3009 authorization to approve,
   with our own nonce and a window from the chain's clock
   (:func:`.quoting.authorization_quote`).
2. **judge**: the loop asks the judge for a verdict on that exact payload.
3. :meth:`PayHttpTool.execute`, MOVES MONEY:
   **check terms** (:func:`.seller_terms.check_terms`): the 402 is read again and the
   payload rebuilt from the seller's *current* terms with the quoted nonce and window (if
   price, recipient or asset changed, the wallet voids the verdict before signing); not
   when nib's judge read that 402 itself for a verdict and quote at most 2 s old
   (:func:`.seller_terms.judged_terms`);
   **sign** (:func:`.live_authorization.sign_when_free`): the wallet signs under the
   verdict, one live authorization per resource;
   **send** (:func:`.delivery.send_paid`): the paid request, once, never retried;
   **prove settlement** (:func:`.delivery.prove_settlement`): the chain must show the
   receipt's transaction carrying our authorization;
   **record** (:meth:`.catalog.SellerCatalog.observation`): what was bought, and which
   fact kinds its fields back.

A paid request that does not deliver (an error status, a redirect, an answer over the
size limit or past the response deadline, no valid receipt) is abandoned: the wallet ends
its authorization from the chain (settled if the seller used it: paid for nothing; else
cancelled on chain) and the call raises :class:`~agent.errors.DeliveryFailed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent.tools.base import Observation, Quote, Tool, ToolContext
from agent.tools.money import UsdcAmount, require_wallet, spend_cap
from agent.tools.x402.catalog import LOCAL_PAYWALL_FACTS, SellerCatalog
from agent.tools.x402.delivery import Request, prove_settlement, send_paid
from agent.tools.x402.fetch import MAX_BODY_BYTES
from agent.tools.x402.live_authorization import live_after_wait, resend, sign_when_free
from agent.tools.x402.offers import (
    OfferBook,
    check_market,
    check_seller,
    seller_of,
)
from agent.tools.x402.protocol import (
    X402ProtocolError,
    encode_payment_header,
    requirement_amount,
)
from agent.tools.x402.quoting import authorization_quote, free_quote, stored_observation
from agent.tools.x402.seller_terms import CurrentTerms, check_terms, judged_terms, read_offer
from chain.facts import FactKind
from chain.seller_url import parsed_url, seller_url
from judge.verdict import Verdict
from wallet.errors import FailureUnproven

if TYPE_CHECKING:
    from agent.seams import AgentWallet
    from wallet.signed import SignedTypedData

__all__ = [
    "LOCAL_PAYWALL_FACTS",
    "MAX_BODY_BYTES",
    "PAID_FACT_KINDS",
    "PayHttpArgs",
    "PayHttpTool",
    "free_observation",
    "origin_of",
    "resource_of",
]

#: Fact kinds the local paywall sells (agent vocabulary).
PAID_FACT_KINDS: tuple[FactKind, ...] = (
    "gas_stats",
    "transfer_stats",
    "token_factsheet",
    "protocol_factsheet",
    "premium_report",
)


# ------------------------------------------------------------------------------- args


#: ``scheme://host:port`` of a URL, lower case, default port explicit (the seller).
origin_of = seller_of

#: A POST body larger than this (as JSON) is refused: a purchase asks a small question.
MAX_REQUEST_BODY_BYTES = 8 * 1024


def resource_of(url: str, method: str = "GET", body: Mapping[str, object] | None = None) -> str:
    """What one purchase buys: the URL's origin, path and query (no fragment); for a POST
    also the method and a digest of the JSON body.

    The wallet keeps at most one live authorization per resource, across runs.
    """
    u = parsed_url(url)
    query = u.query.decode() if u.query else ""
    where = origin_of(url) + (u.path or "/") + (f"?{query}" if query else "")
    if method == "GET" and body is None:
        return where
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    return f"{method} {where} body:{digest}"


class PayHttpArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(description="http(s) URL of the x402 seller's resource.")
    method: Literal["GET", "POST"] = Field(
        default="GET", description="GET (query in the URL) or POST (a JSON body)."
    )
    body: dict[str, object] | None = Field(
        default=None,
        description="POST only: the JSON body the seller's input schema describes.",
    )
    covers: list[str] = Field(
        default=[],
        max_length=5,
        description="Checklist fact kinds this purchase is for, e.g. ['token_factsheet'].",
    )
    max_price: UsdcAmount | None = Field(
        default=None,
        description="Highest acceptable price: atomic USDC or e.g. '0.10 USDC'. Optional.",
    )

    @model_validator(mode="after")
    def _body_fits_method(self) -> PayHttpArgs:
        if self.method == "GET" and self.body is not None:
            raise ValueError("found a body on a GET; expected method POST for a JSON body")
        if self.body is not None:
            size = len(json.dumps(self.body, separators=(",", ":")))
            if size > MAX_REQUEST_BODY_BYTES:
                raise ValueError(
                    f"found a {size}-byte body; expected at most {MAX_REQUEST_BODY_BYTES}"
                )
        return self

    @field_validator("url", mode="before")
    @classmethod
    def _url(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        return _resource_url(value)


@functools.lru_cache(maxsize=1024)
def _resource_url(value: str) -> str:
    """A seller's resource URL as a purchase states it (checked, no fragment), once per
    distinct URL: the arguments are read at the quote, at the decision and at the payment."""
    u = seller_url(value, what="URL of the seller's resource",
                   example="http://127.0.0.1:8402/analytics/gas")
    return str(u.copy_with(fragment=None))


def free_observation(quote: Quote) -> Observation | None:
    """The observation of a quote whose seller answered 200 without payment, else None.

    Contract with the loop: such a quote has ``amount == 0`` and ``meta["free"] is True``;
    there is nothing to judge or sign, so the loop may record this observation directly.
    ``execute`` on it returns the same observation without touching the wallet.
    """
    if quote.amount != 0 or not quote.meta.get("free"):
        return None
    return stored_observation(quote.tool, quote.meta["observation"])


def _request(args: PayHttpArgs) -> Request:
    return args.url, args.method, args.body


def _resource(args: PayHttpArgs) -> str:
    return resource_of(args.url, args.method, args.body)


class PayHttpTool(Tool[PayHttpArgs]):
    """GET or POST a URL of an allowlisted x402 seller, paying in USDC when it answers 402.

    What a purchase may cover is decided on our side (:class:`.catalog.SellerCatalog`):
    the nib paywall's ``/catalog``, or for any other seller the fact kinds its declaration
    (discovery or its 402) matches, narrowed to the checklist kinds the call says it
    ``covers``; such a purchase covers a kind only when the response's fields back it.
    """

    name = "pay_http"
    args_model = PayHttpArgs
    kind = "paid"
    facts = PAID_FACT_KINDS

    def __init__(self, paywall_url: str | None = None, offers: OfferBook | None = None) -> None:
        self.paywall_url = paywall_url.rstrip("/") if paywall_url else None
        self.offers = offers if offers is not None else OfferBook()
        self.catalog = SellerCatalog(self.name, self.offers)
        where = f" The local paywall is {self.paywall_url}." if self.paywall_url else ""
        self.description = (
            "GET (or POST with a JSON body) a URL of an allowlisted x402 seller; pays the "
            f"quoted USDC price after the judge approves. Moves money.{where}"
        )

    # -- what a purchase may cover ------------------------------------------------

    def offer_book(self) -> OfferBook:
        return self.offers

    def facts_for(self, args: BaseModel) -> tuple[str, ...]:
        """Fact kinds the call may cover: the catalog's, else what the resource's
        declaration matches (narrowed to ``covers`` when given); () when unknown."""
        url = getattr(args, "url", None)
        if not isinstance(url, str):
            return ()
        return self.catalog.facts_for(url, tuple(getattr(args, "covers", None) or ()))

    def endpoints(self) -> list[dict[str, object]]:
        """Known paid endpoints of the local paywall (for prompts and the offline planner)."""
        return self.catalog.endpoints(self.paywall_url) if self.paywall_url else []

    def describe(self) -> dict[str, object]:
        described = super().describe()
        if self.paywall_url:
            described["endpoints"] = self.endpoints()
        return described

    async def load_catalog(self, origin_url: str, ctx: ToolContext) -> bool:
        """Read ``{origin}/catalog`` (free) into the fact map; False when unavailable."""
        return await self.catalog.load(origin_url, ctx)

    # -- 1. quote (free) -------------------------------------------------------------

    def seller_for(self, args: PayHttpArgs, ctx: ToolContext) -> str:
        """The seller ``args.url`` pays, as :meth:`quote` checks it (no request)."""
        return check_seller(self.name, args.url, ctx)

    async def quote(self, args: PayHttpArgs, ctx: ToolContext) -> Quote:
        """Fetch the URL; on 402 build the exact authorization to approve. Signs nothing."""
        request, resource = _request(args), _resource(args)
        seller = check_seller(self.name, args.url, ctx)
        check_market(self.name, args.url, ctx, self.offers)
        wallet = require_wallet(ctx, self.name)
        await self.catalog.load(seller, ctx)
        # The wallet is asked for a live authorization first: one found is re-sent (one
        # live authorization per purchase, never a second signed) and the seller is not
        # asked; else the seller's 402 is read, after any wait, so its chain time is fresh.
        # One after the other, not side by side: on 2 cores the two threads' turns at the
        # GIL cost more than the live check (the quote took 1.04 ms side by side, 0.77 ms
        # in turn, on the bench devnet).
        live = await live_after_wait(wallet, resource)
        if live is not None:
            return await resend((args, request, resource), live, self.catalog, ctx)
        offered = await read_offer(request, args.max_price, ctx)
        pr, requirement = offered.payment_required, offered.requirement
        if pr is None or requirement is None:
            obs = self.catalog.observation(
                request, tuple(args.covers), offered.response, cost=0, settlement=None
            )
            return free_quote(self.name, args, obs, ctx, {"url": args.url})
        declared = getattr(getattr(pr, "resource", None), "description", None)
        declared = declared or getattr(requirement, "description", "") or ""
        self.offers.note_declaration(args.url, None, declared, requirement_amount(requirement),
                                     getattr(pr, "extensions", None))
        return await authorization_quote(
            self.name,
            args,
            requirement,
            ctx,
            what=args.url,
            meta={
                "url": args.url,
                "seller": seller,
                "x402_version": pr.x402_version,
                "payment_required": _dump(pr),
                "requirement": _dump(requirement),
                "facts": list(self.catalog.facts_for(args.url, tuple(args.covers))),
            },
            chain_time=offered.chain_time,
        )

    # -- 2. judge: the loop's, between quote and execute ----------------------------

    # -- 3. check terms -> sign -> send -> prove settlement -> record (MOVES MONEY) ---

    async def execute(
        self, quote: Quote, verdict: Verdict | None, ctx: ToolContext
    ) -> Observation:
        """MOVES MONEY: re-read the seller's terms, sign under ``verdict``, pay once, settle.

        Changed terms produce a different payload and the wallet refuses it as
        ``verdict-void`` (nothing signed). After the paid request, any answer but a
        settled 2xx fails the call; it is never retried under the same verdict.
        """
        free = free_observation(quote)
        if free is not None:
            return free
        args = PayHttpArgs.model_validate(quote.args)
        url = str(quote.meta["url"])
        request: Request = (url, args.method, args.body)
        check_seller(self.name, url, ctx)
        check_market(self.name, url, ctx, self.offers)
        wallet = require_wallet(ctx, self.name)
        spend_cap_atomic = spend_cap(ctx, self.name)
        terms = judged_terms(quote, verdict, ctx) or await check_terms(quote, request, ctx)
        covers = tuple(args.covers)
        if isinstance(terms, httpx.Response):
            # The seller stopped charging: nothing to sign, the verdict stays unused.
            return self.catalog.observation(request, covers, terms, cost=0, settlement=None)
        # The wallet recomputes the fingerprint of exactly this payload: if the seller's
        # terms changed since the quote, it raises VerdictVoid and signs nothing.
        signed = await sign_when_free(wallet, terms.payload, verdict, ctx, spend_cap_atomic, _resource(args))
        header = await _payment_header(terms, signed, wallet, url)
        ctx.emit("tool.x402.paying", {"url": url, "amount": quote.amount,
                                      "ledger_id": signed.ledger_id})
        resp = await send_paid(request, header, signed, wallet, ctx)
        settlement = await prove_settlement(self.name, url, resp, signed, wallet)
        if isinstance(settlement, Observation):
            return settlement  # not delivered: the wallet ended the authorization
        return self.catalog.observation(
            request, covers, resp, cost=quote.amount, settlement=settlement
        )


async def _payment_header(
    terms: CurrentTerms, signed: SignedTypedData, wallet: AgentWallet, url: str
) -> tuple[str, str]:
    """The payment header carrying ``signed``. One that cannot be encoded never left this
    process, but only the chain proves that to the wallet: the row stays counted until
    the authorization expires unused."""
    try:
        return encode_payment_header(
            terms.requirement, terms.payment_required, terms.authorization, signed.signature
        )
    except ValueError as exc:
        with contextlib.suppress(FailureUnproven):
            await asyncio.to_thread(wallet.fail, signed, f"payment header failed: {exc}")
        raise X402ProtocolError(f"pay_http: cannot encode the payment for {url}: {exc}") from exc


def _dump(model: BaseModel) -> dict[str, object]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
