"""pay_http: buy data from an x402 seller: quote (free) -> judge -> sign -> pay -> settle.

``quote`` fetches the URL: a 200 is free data (see :func:`free_observation`); a 402 is
parsed (v2 ``PAYMENT-REQUIRED`` or a v1 body), the requirement on our network and USDC
is chosen, and the exact EIP-3009 authorization is built with our own nonce and a
validity window taken from the chain's block time. ``execute`` fetches the 402 again
and rebuilds the authorization from the seller's *current* terms with the quoted nonce
and window: if the seller changed price, recipient or asset since the quote, that
payload differs from the approved one and the wallet voids the verdict before signing.
It never pays twice: one signature per call, and no retry after a paid request. A paid
request that does not deliver (an error status, a redirect, an answer over the size limit
or past the response deadline, no valid receipt) is abandoned: the wallet ends its
authorization from the chain (settled if the seller used it: paid for nothing; else
cancelled on chain) and the call raises :class:`~agent.errors.DeliveryFailed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from x402.schemas import PaymentRequirements, PaymentRequirementsV1
from x402.schemas import parse_payment_required as _x402_parse

from agent.errors import DeliveryFailed, ToolError
from agent.interrupts import gather_pair
from agent.tools.base import Observation, Quote, Tool, ToolContext
from agent.tools.chain_reads import usdc_address
from agent.tools.transfer import UsdcAmount, spend_cap
from agent.tools.x402.offers import (
    ALLOWLIST_SETTING,
    OfferBook,
    check_seller,
    excerpt,
    purchase_facts,
    seller_of,
)
from agent.tools.x402.protocol import (
    AnyPaymentRequired,
    AnyRequirement,
    RequirementRefused,
    X402ProtocolError,
    choose_requirement,
    encode_payment_header,
    parse_payment_required,
    parse_payment_response,
    requirement_amount,
)
from agent.tools.x402.quoting import (
    abandon_undelivered,
    authorization_quote,
    chain_clock,
    free_quote,
    quoted_authorization,
    settle_or_refuse,
)
from chain.facts import CHAIN_FACT_KINDS, FactKind
from chain.money import format_usdc
from chain.usdc import AuthorizationTypedData
from judge.verdict import Verdict
from wallet.errors import AuthorizationOutstanding, FailureUnproven, SettlementUnproven

if TYPE_CHECKING:
    from agent.seams import AgentWallet
    from wallet.ledger import SpendRow
    from wallet.signed import SignedTypedData

__all__ = [
    "ALLOWLIST_SETTING",
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
#: Path -> fact kinds of the local paywall (chain/paywall.py), used until /catalog is read.
LOCAL_PAYWALL_FACTS: dict[str, tuple[str, ...]] = {
    "/analytics/gas": ("gas_stats",),
    "/analytics/transfers": ("transfer_stats",),
    "/datasets/token/{symbol}": ("token_factsheet",),
    "/datasets/protocol/{name}": ("protocol_factsheet",),
    "/premium/report": ("premium_report",),
}
#: A seller's response larger than this is refused: results must stay small.
MAX_BODY_BYTES = 256 * 1024
CATALOG_TIMEOUT_S = 5.0
#: How long a receipt naming a transaction our node does not show yet is re-checked
#: before the purchase counts as undelivered (an RPC behind the seller's by a block).
RECEIPT_WAIT_S = 5.0
_MAX_FACTS = 64
_MAX_FACT_CHARS = 500
_MAX_DATA_CHARS = 16_000
_DEFAULT_PORTS = {"http": 80, "https": 443}


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
    u = httpx.URL(url)
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
        text = value.strip()
        try:
            u = httpx.URL(text)
        except httpx.InvalidURL as exc:
            raise ValueError(f"found {text!r}, which is not a URL ({exc})") from exc
        if u.scheme not in ("http", "https") or not u.host:
            raise ValueError(
                f"found {text!r}; expected an absolute http:// or https:// URL with a host, "
                "e.g. http://127.0.0.1:8402/analytics/gas"
            )
        if u.userinfo:
            raise ValueError(f"found credentials in {text!r}; expected a URL without user:pass@")
        return str(u.copy_with(fragment=None))


# ------------------------------------------------------------------------------ catalog


@dataclass(frozen=True)
class _Route:
    path: str
    pattern: re.Pattern[str]
    facts: tuple[str, ...]
    price: int | None


def _route(path: str, facts: tuple[str, ...], price: int | None = None) -> _Route:
    parts = re.split(r"(\{[^}/]+\})", path)
    regex = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts if p)
    return _Route(path, re.compile(f"^{regex}/?$"), facts, price)


_STATIC_ROUTES = tuple(_route(p, f) for p, f in LOCAL_PAYWALL_FACTS.items())


def _parse_catalog(data: object) -> tuple[_Route, ...]:
    if not isinstance(data, dict) or not isinstance(data.get("endpoints"), list):
        return ()
    routes = []
    for ep in data["endpoints"]:
        if not isinstance(ep, dict) or not isinstance(ep.get("path"), str):
            continue
        facts = ep.get("facts") or ([ep["kind"]] if isinstance(ep.get("kind"), str) else [])
        kinds = tuple(str(f) for f in facts if isinstance(f, str) and f != "free")
        price = ep.get("price_atomic")
        routes.append(_route(ep["path"], kinds, price if isinstance(price, int) else None))
    return tuple(routes)


# ------------------------------------------------------------------------------ tool


def free_observation(quote: Quote) -> Observation | None:
    """The observation of a quote whose seller answered 200 without payment, else None.

    Contract with the loop: such a quote has ``amount == 0`` and ``meta["free"] is True``;
    there is nothing to judge or sign, so the loop may record this observation directly.
    ``execute`` on it returns the same observation without touching the wallet.
    """
    if quote.amount != 0 or not quote.meta.get("free"):
        return None
    obs = quote.meta["observation"]
    return Observation(
        tool=quote.tool,
        ok=True,
        summary=obs["summary"],
        data=obs["data"],
        facts=obs["facts"],
    )


class PayHttpTool(Tool):
    """GET or POST a URL of an allowlisted x402 seller, paying in USDC when it answers 402.

    What a purchase may cover is decided on our side: the nib paywall's ``/catalog``, or
    for any other seller the fact kinds its declaration (discovery or its 402) matches,
    narrowed to the checklist kinds the call says it ``covers``; such a purchase covers
    a kind only when the response's fields back it.
    """

    name = "pay_http"
    args_model = PayHttpArgs
    kind = "paid"
    facts = PAID_FACT_KINDS

    def __init__(self, paywall_url: str | None = None, offers: OfferBook | None = None) -> None:
        self.paywall_url = paywall_url.rstrip("/") if paywall_url else None
        self.offers = offers if offers is not None else OfferBook()
        self._catalogs: dict[str, tuple[_Route, ...]] = {}
        where = f" The local paywall is {self.paywall_url}." if self.paywall_url else ""
        self.description = (
            "GET (or POST with a JSON body) a URL of an allowlisted x402 seller; pays the "
            f"quoted USDC price after the judge approves. Moves money.{where}"
        )

    # -- facts -------------------------------------------------------------------


    def offer_book(self) -> OfferBook:
        return self.offers

    def _routes(self, url: str) -> tuple[_Route, ...]:
        return self._catalogs.get(origin_of(url)) or _STATIC_ROUTES

    def _catalog_facts(self, url: str) -> tuple[str, ...] | None:
        """Fact kinds of ``url`` from the seller's /catalog once read, else the static map
        of the local paywall's paths; None when no route matches."""
        path = httpx.URL(url).path
        for route in self._routes(url):
            if route.pattern.match(path):
                return route.facts
        return None

    def facts_for(self, args: BaseModel) -> tuple[str, ...]:
        """Fact kinds the call may cover: the catalog's, else what the resource's
        declaration matches (narrowed to ``covers`` when given); () when unknown."""
        url = getattr(args, "url", None)
        if not isinstance(url, str):
            return ()
        listed = self._catalog_facts(url)
        if listed is None:
            covers = getattr(args, "covers", None) or ()
            listed = tuple(k for k in self.offers.declared(url) if not covers or k in covers)
        # What the chain can establish is read for free, never taken on a seller's word.
        return tuple(k for k in listed if k not in CHAIN_FACT_KINDS)

    def endpoints(self) -> list[dict[str, object]]:
        """Known paid endpoints of the local paywall (for prompts and the offline planner)."""
        if self.paywall_url is None:
            return []
        routes = self._catalogs.get(origin_of(self.paywall_url)) or _STATIC_ROUTES
        return [
            {"url": self.paywall_url + r.path, "facts": list(r.facts), "price_atomic": r.price}
            for r in routes
            if r.facts
        ]

    def describe(self) -> dict[str, object]:
        described = super().describe()
        if self.paywall_url:
            described["endpoints"] = self.endpoints()
        return described

    async def load_catalog(self, origin_url: str, ctx: ToolContext) -> bool:
        """Read ``{origin}/catalog`` (free) into the fact map; False when unavailable."""
        origin = origin_of(origin_url)
        if origin in self._catalogs:
            return True
        try:
            resp = await _get(ctx, origin + "/catalog", timeout=CATALOG_TIMEOUT_S)
        except ToolError:
            return False
        if resp.status_code != 200:
            return False
        try:
            routes = _parse_catalog(resp.json())
        except ValueError:
            return False
        if routes:
            self._catalogs[origin] = routes
        return bool(routes)

    # -- quote -------------------------------------------------------------------

    async def quote(self, args: PayHttpArgs, ctx: ToolContext) -> Quote:
        """Fetch the URL; on 402 build the exact authorization to approve. Signs nothing."""
        origin = _check_allowlist(args.url, ctx)
        if ctx.wallet is None:
            raise ToolError(
                "pay_http: no wallet is configured for this run; expected an unlocked wallet "
                "to pay from. Fix: `nib wallet new` (or `nib devnet up` on the devnet)."
            )
        usdc = usdc_address(ctx)
        live = await _live_after_wait(ctx.wallet, _resource(args))
        if live is not None:
            # One live authorization per purchase: re-send it, never sign a second.
            return await self._resend(args, live, ctx)
        await self.load_catalog(origin, ctx)
        # The chain's clock (the authorization's window) is read while the seller answers;
        # it is needed (and its failure raised) only for a 402.
        resp, clock = await gather_pair(
            _get(ctx, args.url, method=args.method, body=args.body), chain_clock(ctx)
        )
        if isinstance(resp, BaseException):
            raise resp
        if resp.status_code == 200:
            obs = self._observation(args, resp, cost=0, settlement=None)
            return free_quote(self.name, args, obs, ctx, {"url": args.url})
        if resp.status_code != 402:
            raise ToolError(_unexpected_status(args.url, resp, paid=False))
        pr = parse_payment_required(resp)
        requirement = choose_requirement(
            pr, network_caip2=ctx.network.caip2, asset=usdc, max_amount=args.max_price
        )
        if isinstance(clock, BaseException):
            raise clock
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
                "seller": origin,
                "x402_version": pr.x402_version,
                "payment_required": _dump(pr),
                "requirement": _dump(requirement),
                "facts": list(self.facts_for(args)),
            },
            chain_time=clock,
        )

    # -- execute -----------------------------------------------------------------

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
        url = str(quote.meta["url"])
        args = PayHttpArgs.model_validate(quote.args)
        _check_allowlist(url, ctx)
        wallet = ctx.wallet
        if wallet is None:
            raise ToolError("pay_http: no wallet is configured for this run; nothing was paid.")
        cap = spend_cap(ctx, self.name)
        # The terms are re-read while the chain's clock is read (both before signing, both
        # read-only): the re-check costs no time of its own on the paid path.
        resp, checked = await gather_pair(
            _get(ctx, url, method=args.method, body=args.body), _check_not_expired(quote, ctx)
        )
        if isinstance(checked, BaseException):
            raise checked
        if isinstance(resp, BaseException):
            raise resp
        if resp.status_code == 200:
            # The seller stopped charging: nothing to sign, the verdict stays unused.
            return self._observation(args, resp, cost=0, settlement=None)
        pr, requirement, payload, authorization = self._current_terms(quote, resp, ctx)
        try:  # a header we could not encode must fail before anything is signed
            encode_payment_header(requirement, pr, authorization, _PLACEHOLDER_SIGNATURE)
        except ValueError as exc:
            raise X402ProtocolError(
                f"pay_http: cannot encode the payment for {url}: {exc}"
            ) from exc
        # The wallet recomputes the fingerprint of exactly this payload: if the seller's
        # terms changed since the quote, it raises VerdictVoid and signs nothing.
        signed = await _sign_when_free(wallet, payload, verdict, ctx, cap, _resource(args))
        try:
            header = encode_payment_header(requirement, pr, authorization, signed.signature)
        except ValueError as exc:
            # The signature never left this process, but only the chain proves that to
            # the wallet: the row stays counted until the authorization expires unused.
            with contextlib.suppress(FailureUnproven):
                await asyncio.to_thread(wallet.fail, signed, f"payment header failed: {exc}")
            raise X402ProtocolError(
                f"pay_http: cannot encode the payment for {url}: {exc}"
            ) from exc
        ctx.emit(
            "tool.x402.paying",
            {"url": url, "amount": quote.amount, "ledger_id": signed.ledger_id},
        )
        resp = await _paid_request(args, url, header, signed, wallet, ctx)
        if not 200 <= resp.status_code < 300:
            raise await _not_delivered(wallet, url, signed.ledger_id, _refusal(resp))
        return await self._settled(args, url, resp, quote, signed, wallet, ctx)

    async def _settled(
        self,
        args: PayHttpArgs,
        url: str,
        resp: httpx.Response,
        quote: Quote,
        signed: SignedTypedData,
        wallet: AgentWallet,
        ctx: ToolContext,
    ) -> Observation:
        """The paid answer, once the chain proves the seller's receipt settles our
        authorization; else an undelivered purchase (the wallet ends the authorization)
        whose failed call keeps a bounded excerpt of what arrived."""
        try:
            settlement = parse_payment_response(resp)
        except X402ProtocolError as exc:
            why = f"it answered {resp.status_code} without a valid settlement receipt ({exc})"
            return await self._unproven(args, resp, signed, wallet, why)
        tx_hash = settlement.get("transaction")
        if not settlement.get("success") or not isinstance(tx_hash, str) or not tx_hash:
            why = (
                f"it answered {resp.status_code} with a receipt saying success="
                f"{settlement.get('success')} ({settlement.get('error_reason')})"
            )
            return await self._unproven(args, resp, signed, wallet, why)
        try:
            # The receipt is the seller's claim: the wallet settles the row only when the
            # named transaction carries our AuthorizationUsed and the matching Transfer.
            await _settle_proven(wallet, signed, tx_hash)
        except SettlementUnproven as exc:
            why = (
                f"its receipt names {exc.tx_hash}, which does not settle our authorization "
                f"({exc.finding})"
            )
            return await self._unproven(args, resp, signed, wallet, why)
        return self._observation(args, resp, cost=quote.amount, settlement=settlement)

    async def _unproven(
        self,
        args: PayHttpArgs,
        resp: httpx.Response,
        signed: SignedTypedData,
        wallet: AgentWallet,
        why: str,
    ) -> Observation:
        """A paid answer whose settlement is not proven: not delivered (the wallet ends the
        authorization); a failed call that keeps a bounded excerpt of the data that
        arrived (it may have been paid for), covering nothing."""
        failed = await _not_delivered(wallet, args.url, signed.ledger_id, why)
        try:
            body = resp.json()
        except ValueError:
            body = None
        data = {
            "url": args.url,
            "status": resp.status_code,
            "settlement": "unproven",
            "excerpt": excerpt(body, resp.text),
        }
        error = str(failed)
        return Observation(
            tool=self.name, ok=False, summary=f"error: {error}", data=data, error=error,
            not_delivered=failed.delivery,
        )

    def _current_terms(
        self, quote: Quote, resp: httpx.Response, ctx: ToolContext
    ) -> tuple[AnyPaymentRequired, AnyRequirement, AuthorizationTypedData, dict[str, str]]:
        """The seller's terms in ``resp`` (a fresh unpaid answer), as the payload to sign
        with the quoted nonce and validity window."""
        url = str(quote.meta["url"])
        if resp.status_code != 402:
            raise ToolError(_unexpected_status(url, resp, paid=False))
        pr = parse_payment_required(resp)
        quoted = _x402_parse(quote.meta["payment_required"])
        quoted_req = _requirement_in(quoted, quote.meta["requirement"])
        # Prefer the very requirement we quoted; otherwise whatever fits now (the wallet
        # then compares its payload with the approved one).
        requirement = next((r for r in pr.accepts if r == quoted_req), None)
        if requirement is None:
            try:
                requirement = choose_requirement(
                    pr, network_caip2=ctx.network.caip2, asset=usdc_address(ctx)
                )
            except RequirementRefused as exc:
                detail = f"{url} no longer offers a payable requirement: {exc}"
                raise _terms_changed(quote, detail) from exc
        payload, authorization = quoted_authorization(quote, requirement)
        return pr, requirement, payload, authorization

    # -- one live authorization per purchase --------------------------------------

    async def _resend(self, args: PayHttpArgs, live: SpendRow, ctx: ToolContext) -> Quote:
        """Re-send the live authorization for this resource; sign nothing new.

        Money cannot move twice: it is the same signature (one nonce). Data that comes
        back with a receipt the chain proves is returned as a free quote (nothing left to
        judge or sign); anything else raises a ToolError that says the purchase is
        pending and when it can change, without inviting a second authorization.
        """
        wallet = ctx.wallet
        assert wallet is not None
        resource = _resource(args)
        pending = (
            f"an authorization for {resource} was still live (ledger row {live.id}, "
            f"{format_usdc(live.amount)}, {live.status}, valid until {live.valid_before}); "
            "nib signs no second one while it is live, so at most one can ever settle"
        )
        header = json.loads(live.x402_payment) if live.x402_payment else None
        if not header:
            raise ToolError(
                f"pay_http: {pending}. Nothing was sent. Fix: wait until it settles or expires "
                "(`nib audit reconcile`); do not propose this call again before then."
            )
        try:
            resp = await _get(
                ctx,
                args.url,
                method=args.method,
                body=args.body,
                headers={str(header[0]): str(header[1])},
            )
        except ToolError as exc:
            why = f"{pending}; re-sending it failed ({_bare(exc)})"
            raise await _not_delivered(wallet, args.url, live.id, why) from exc
        ctx.emit(
            "tool.x402.resent",
            {"url": args.url, "ledger_id": live.id, "status": resp.status_code},
        )
        tx = None
        if 200 <= resp.status_code < 300:
            with contextlib.suppress(X402ProtocolError):
                receipt = parse_payment_response(resp)
                tx = receipt.get("transaction") if receipt.get("success") else None
        if not isinstance(tx, str) or not tx:
            why = f"{pending}; it was re-sent and {_refusal(resp)} without a valid receipt"
            raise await _not_delivered(wallet, args.url, live.id, why)
        await settle_or_refuse(
            wallet,
            live,
            tx,
            lambda exc: f"pay_http: {pending}. It was re-sent; the receipt names {exc.tx_hash}, which "
            f"does not settle it ({exc.finding}). Fix: continue without this data.",
        )
        cost = live.amount if live.run_id == ctx.run_id else 0
        obs = self._observation(args, resp, cost=cost, settlement={"transaction": tx})
        return free_quote(self.name, args, obs, ctx, {"url": args.url, "resent": live.id})

    # -- observation -------------------------------------------------------------

    def _observation(
        self,
        args: PayHttpArgs,
        resp: httpx.Response,
        *,
        cost: int,
        settlement: Mapping[str, object] | None,
    ) -> Observation:
        path = httpx.URL(args.url).path
        body: object
        try:
            body = resp.json()
        except ValueError:
            body = None
        data: dict[str, object] = {"url": args.url, "status": resp.status_code}
        if args.method == "POST":
            data["method"], data["request_body"] = "POST", args.body
        facts: dict[str, str] = {}
        kind = None
        listed = self._catalog_facts(args.url)
        if listed is None:
            # Not a nib catalog: a kind counts only when the response's fields back it.
            data["excerpt"], facts = purchase_facts(self.facts_for(args), body, resp.text)
        else:
            data["excerpt"] = excerpt(body, resp.text)
            kind, facts = _catalog_answer(body, self.facts_for(args))
        if isinstance(body, dict | list):
            text = json.dumps(body, separators=(",", ":"), default=str)
            if len(text) <= _MAX_DATA_CHARS:
                data["body"] = body
            else:
                data["body_excerpt"] = text[:_MAX_DATA_CHARS]
        else:
            data["body_excerpt"] = resp.text[:_MAX_DATA_CHARS]
        if settlement is not None:
            data["settlement"] = settlement
            data["paid_atomic"] = cost
            data["paid"] = format_usdc(cost)
        label = kind or path
        if cost:
            tx = str((settlement or {}).get("transaction", ""))
            summary = (
                f"paid {format_usdc(cost)} for {label} from {origin_of(args.url)}: "
                f"{len(facts)} facts, settled in {tx[:10]}…"
            )
        else:
            summary = f"free {label} from {origin_of(args.url)}: {len(facts)} facts"
        return Observation(
            tool=self.name, ok=True, summary=summary, data=data, facts=facts, cost_usdc=cost
        )


# ------------------------------------------------------------------------------ helpers

def _catalog_answer(body: object, listed: tuple[str, ...]) -> tuple[str | None, dict[str, str]]:
    """(kind, facts) of a nib catalog seller's answer ``{"kind", "facts": {...}}``: typed
    values only, bounded. A purchase covers the kind its body names only when that kind is
    one we ``listed`` for the URL and the body carries values for it; a seller's own fact
    keys never stand for a kind the chain can establish."""
    kind: str | None = None
    facts: dict[str, str] = {}
    if isinstance(body, dict):
        kind = body.get("kind") if isinstance(body.get("kind"), str) else None
        raw = body.get("facts")
        if isinstance(raw, dict):
            for key, val in list(raw.items())[:_MAX_FACTS]:
                if isinstance(val, str | int | float) and not isinstance(val, bool):
                    facts[str(key)] = str(val)[:_MAX_FACT_CHARS]
    facts = {k: v for k, v in facts.items() if k not in CHAIN_FACT_KINDS}
    if kind in listed and facts:
        digest = "; ".join(f"{k}={v}" for k, v in facts.items())[: _MAX_FACT_CHARS * 2]
        facts.setdefault(kind, digest)
    return kind, facts



#: Stands in for the signature when checking that a payment header can be encoded.
_PLACEHOLDER_SIGNATURE = "0x" + "00" * 65


def _check_allowlist(url: str, ctx: ToolContext) -> str:
    """The URL's seller when pay_http may pay it; else a ToolError before any request."""
    return check_seller("pay_http", url, ctx)


async def _get(
    ctx: ToolContext,
    url: str,
    *,
    method: str = "GET",
    body: Mapping[str, object] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float | None = None,
) -> httpx.Response:
    """GET (or POST ``body`` as JSON) without redirects, reading at most MAX_BODY_BYTES,
    the whole response (headers and body) within one deadline (:func:`_deadline`);
    transport errors, an oversized body and a missed deadline -> ToolError."""
    limit = _deadline(ctx, timeout)
    client = ctx.http
    own = client is None
    if client is None:
        client = httpx.AsyncClient(timeout=limit)
    try:
        # One deadline for the whole response: a seller dripping a byte at a time would
        # pass any per-read timeout.
        async with asyncio.timeout(limit):
            return await _read_response(client, method, url, body, headers, limit)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise ToolError(
            f"pay_http: no whole response (headers and body) within {limit:g} s from {url} "
            f"({type(exc).__name__}); expected a complete answer within the response "
            "deadline. Fix: check the seller, or raise response_deadline_s."
        ) from exc
    except httpx.TransportError as exc:
        raise ToolError(
            f"pay_http: could not reach {origin_of(url)} ({type(exc).__name__}: {exc}); "
            "expected a running seller. Fix: start it (`nib devnet up` for the local paywall)."
        ) from exc
    finally:
        if own:
            await client.aclose()


async def _read_response(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    body: Mapping[str, object] | None,
    headers: dict[str, str] | None,
    limit: float,
) -> httpx.Response:
    """One request's response, its body read in full but never past MAX_BODY_BYTES."""
    async with client.stream(
        method,
        url,
        json=body if method == "POST" else None,
        headers=headers,
        timeout=limit,
        follow_redirects=False,
    ) as resp:
        read = bytearray()
        async for chunk in resp.aiter_bytes():
            read += chunk
            if len(read) > MAX_BODY_BYTES:
                raise ToolError(
                    f"pay_http: the response from {url} exceeds {MAX_BODY_BYTES} bytes "
                    f"(read {len(read)} so far); expected a small result. Fix: ask for "
                    "a narrower resource."
                )
        kept = [
            (k, v)
            for k, v in resp.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return httpx.Response(
            resp.status_code, headers=kept, content=bytes(read), request=resp.request
        )


def _deadline(ctx: ToolContext, timeout: float | None) -> float:
    """Seconds a response may take: ``timeout`` or the run's response deadline
    (``Limits.response_deadline_s``), never past the time the run has left."""
    limit = float(timeout or ctx.response_deadline_s)
    if ctx.time_left is not None:
        limit = min(limit, max(ctx.time_left(), 0.001))
    return limit


def _unexpected_status(url: str, resp: httpx.Response, *, paid: bool) -> str:
    when = "the paid request" if paid else "an unpaid request"
    snippet = resp.text[:200].replace("\n", " ")
    return (
        f"pay_http: {url} answered HTTP {resp.status_code} to {when}; expected 200 (data) or "
        f"402 (payment required). Body: {snippet!r}. Fix: check the URL against the seller's "
        "/catalog."
    )


def _dump(model: BaseModel) -> dict[str, object]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _requirement_in(pr: AnyPaymentRequired, raw: object) -> AnyRequirement:
    cls = PaymentRequirements if pr.x402_version == 2 else PaymentRequirementsV1
    return cls.model_validate(raw)


def _terms_changed(quote: Quote, detail: str) -> Exception:
    """The seller's terms changed so that no payload can match the verdict: verdict-void."""
    from wallet.errors import VerdictVoid

    return VerdictVoid(
        f"pay_http: the seller's terms changed after the quote ({detail}); the approved "
        f"payload {quote.payload_fingerprint[:12]}… can no longer be paid, so the verdict is "
        "void and nothing was signed. Fix: re-quote and ask the judge again."
    )


#: An authorization this close to its validBefore is not sent: settlement takes time.
EXPIRY_MARGIN_S = 15


async def _check_not_expired(quote: Quote, ctx: ToolContext) -> None:
    """Refuse (before signing) a quote whose authorization window has passed on chain."""
    valid_before = int(quote.payload["message"]["validBefore"])
    now = await chain_clock(ctx)
    if now + EXPIRY_MARGIN_S >= valid_before:
        raise ToolError(
            f"pay_http: the quote for {quote.meta.get('url')} is stale: its authorization is "
            f"valid until {valid_before} and the chain's time is {now} (margin "
            f"{EXPIRY_MARGIN_S} s). Nothing was signed and the verdict is unused. Fix: propose "
            "the call again for a fresh quote."
        )


async def _settle_proven(wallet: AgentWallet, signed: SignedTypedData, tx_hash: str) -> None:
    """``wallet.settle`` under the seller's receipt; a receipt naming a transaction our
    node does not show yet is re-checked for up to RECEIPT_WAIT_S (an RPC a block behind
    the seller's must not turn a delivered purchase into an undelivered one)."""
    deadline = time.monotonic() + RECEIPT_WAIT_S
    while True:
        try:
            await asyncio.to_thread(wallet.settle, signed, tx_hash)
            return
        except SettlementUnproven as exc:
            if exc.finding != "not-mined" or time.monotonic() >= deadline:
                raise
        await asyncio.sleep(_LIVE_POLL_S)


def _refusal(resp: httpx.Response) -> str:
    """What a paid request's non-2xx answer was, in words."""
    status = resp.status_code
    if 300 <= status < 400:
        where = resp.headers.get("location", "")
        return (
            f"it answered {status} redirecting to {where[:200]!r}; a redirect after payment "
            "is never followed"
        )
    detail = ""
    if status == 402:
        with contextlib.suppress(X402ProtocolError):
            again = parse_payment_required(resp)
            detail = f" ({again.error})" if getattr(again, "error", None) else ""
    return f"it answered {status}{detail} to the paid request"


def _bare(exc: BaseException) -> str:
    """An error's message without this tool's ``pay_http:`` prefix."""
    return str(exc).removeprefix("pay_http: ")


async def _not_delivered(wallet: AgentWallet, url: str, spend_id: str, why: str) -> DeliveryFailed:
    """The purchase of ``url`` paid under ledger row ``spend_id`` did not deliver."""
    return await abandon_undelivered(
        wallet, tool="pay_http", seller=origin_of(url), what=url, spend_id=spend_id, why=why
    )


#: How long a purchase waits for another run's in-flight authorization for the same
#: resource to settle or die before treating it as this purchase's (and re-sending it).
LIVE_WAIT_S = 60.0
_LIVE_POLL_S = 0.25


_SIGNING_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def _signing_lock(resource: str) -> asyncio.Lock:
    """This event loop's lock for signing an authorization for ``resource``."""
    locks = _SIGNING_LOCKS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(resource, asyncio.Lock())


def _resource(args: PayHttpArgs) -> str:
    return resource_of(args.url, args.method, args.body)


def _in_flight(row: SpendRow) -> bool:
    """Reserved, or signed with no answer recorded yet: some run is paying right now."""
    return bool(row.status == "reserved" or (row.status == "signed" and not row.note))


async def _live_after_wait(wallet: AgentWallet, resource: str) -> SpendRow | None:
    """The live authorization for ``resource`` once no run is mid-payment on it (bounded
    by LIVE_WAIT_S), else None: concurrent honest purchases queue instead of failing."""
    deadline = time.monotonic() + LIVE_WAIT_S
    while True:
        live = await asyncio.to_thread(wallet.live_authorization, resource)
        if live is None or not _in_flight(live) or time.monotonic() >= deadline:
            return live
        await asyncio.sleep(_LIVE_POLL_S)


async def _paid_request(
    args: PayHttpArgs,
    url: str,
    header: tuple[str, str],
    signed: SignedTypedData,
    wallet: AgentWallet,
    ctx: ToolContext,
) -> httpx.Response:
    """MOVES MONEY: the request carrying the payment header. A request that gets no full
    answer in time is not delivered: the wallet ends the authorization (DeliveryFailed)."""
    name, value = header
    # The header is kept (for a re-send) while the paid request is in flight; the row is
    # already 'signed' with its nonce, and nothing reads the header before it is kept.
    kept = asyncio.ensure_future(asyncio.to_thread(wallet.keep_payment, signed, (name, value)))
    try:
        resp = await _get(ctx, url, method=args.method, body=args.body, headers={name: value})
    except ToolError as exc:
        await kept
        # The seller received the authorization and may still settle it: the wallet ends
        # it (cancelled on chain unless the seller already used it).
        raise await _not_delivered(wallet, url, signed.ledger_id, _bare(exc)) from exc
    except BaseException:
        await asyncio.shield(kept)
        # The run stopped (deadline, interrupt) with the paid request in flight: the
        # authorization is ended on the way out (a wallet that cannot be reached leaves it
        # to reconcile; the stop is what the run reports).
        with contextlib.suppress(Exception):
            await _not_delivered(wallet, url, signed.ledger_id, "the run stopped mid-request")
        raise
    await kept
    return resp


async def _sign_when_free(
    wallet: AgentWallet,
    payload: Mapping[str, object],
    verdict: Verdict | None,
    ctx: ToolContext,
    cap: int,
    resource: str,
) -> SignedTypedData:
    """MOVES MONEY: sign under ``verdict`` once no other authorization for ``resource`` is
    live. A refusal for that reason consumes nothing (the verdict stays unused), so the
    same verdict is tried again after another run's payment settles or dies; a live one
    that stays (a seller holding it) is reported, never doubled."""
    # Runs of one process take turns per resource: two that both saw it free would both
    # have their verdicts consumed at the judge, and one would then be refused. (Across
    # processes the wallet gives each payment of a resource its turn, so a loser is refused
    # before its verdict is used and signs with it here once the other payment is over.)
    def sign_if_free() -> tuple[SpendRow | None, SignedTypedData | None]:
        # The check and the signature in one worker-thread hop: the usual case (nothing
        # live) pays one hop, not two.
        live = wallet.live_authorization(resource)
        if live is not None:
            return live, None
        try:
            return None, wallet.sign_typed_data(
                payload, verdict, run_id=ctx.run_id, cap=cap, resource=resource
            )
        except AuthorizationOutstanding:
            return None, None  # another process started paying between check and signature

    async with _signing_lock(resource):
        while True:
            live, signed = await asyncio.to_thread(sign_if_free)
            if signed is not None:
                return signed
            if live is not None and (
                not _in_flight(live) or await _live_after_wait(wallet, resource) is not None
            ):
                break  # held by a seller (answered, not in flight): never sign a second
    live = await asyncio.to_thread(wallet.live_authorization, resource)
    raise ToolError(
        f"pay_http: an authorization for {resource} is still live (ledger row "
        f"{getattr(live, 'id', '?')}, valid until {getattr(live, 'valid_before', '?')}); nib "
        "signs no second one while it is live, so nothing was signed. Fix: continue without "
        "this data; do not propose this call again in this run."
    )


