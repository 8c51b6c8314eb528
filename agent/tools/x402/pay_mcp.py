"""pay_mcp: call an MCP tool protected by x402: quote (free) -> judge -> sign -> call -> settle.

``quote`` calls the tool unpaid over the transport its discovery entry names (streamable
HTTP, then SSE, when none is named; ``chain.mcp_client``): an ordinary result is free data; an error result
carrying an x402 PaymentRequired (``x402.mcp``'s 402) is parsed, the requirement on our
network and USDC chosen, and the exact EIP-3009 authorization built with our nonce and
window, as ``pay_http`` does. ``execute`` reads the terms again, has the wallet sign the
very payload the verdict approved, calls the tool once with the payment in
``_meta["x402/payment"]``, and settles the ledger row only when the chain proves the
receipt in ``_meta["x402/payment-response"]``, over the transport the quote used and no
other. No automatic payment: x402's MCP client
would pay on its own, so nib attaches the payment itself under the judge's verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, field_validator
from x402.mcp import MCP_PAYMENT_META_KEY, MCP_PAYMENT_RESPONSE_META_KEY
from x402.schemas import parse_payment_required as _x402_parse

if TYPE_CHECKING:
    from mcp.types import CallToolResult  # only for annotations: mcp costs ~0.2 s to import

from agent.errors import DeliveryFailed, PermanentToolError, ToolError
from agent.jsonvalues import as_object
from agent.tools.base import Observation, Quote, Tool, ToolContext
from agent.tools.chain_reads import usdc_address
from agent.tools.money import UsdcAmount, spend_cap
from agent.tools.x402.mcp_tools import McpServerArgs
from agent.tools.x402.offers import (
    OfferBook,
    check_market,
    check_seller,
    covered_words,
    purchase_facts,
    seller_of,
)
from agent.tools.x402.protocol import (
    AnyPaymentRequired,
    AnyRequirement,
    X402ProtocolError,
    choose_requirement,
    payment_payload,
    requirement_amount,
)
from agent.tools.x402.quoting import (
    abandon_undelivered,
    authorization_quote,
    free_quote,
    quoted_authorization,
    stored_observation,
)
from agent.tools.x402.seller_terms import judged_fresh
from chain.mcp_client import (
    ENDPOINTS,
    McpErrorAnswer,
    McpTransport,
    McpUnreachable,
    call_tool,
    mcp_tool_name,
)
from chain.money import format_usdc
from chain.usdc import AuthorizationTypedData
from judge.mcp_terms import SELLER_READ_S
from judge.verdict import Verdict
from wallet.errors import SettlementUnproven

__all__ = ["PayMcpArgs", "PayMcpTool"]

_TIMEOUT_S = 30.0
_PLACEHOLDER_SIGNATURE = "0x" + "00" * 65


class PayMcpArgs(McpServerArgs):
    server: str = Field(description="Base http(s) URL of the MCP server (endpoints /mcp, /sse).")
    tool: str = Field(
        description="Name of the paid MCP tool as its discovery entry gives it (1 to 128 "
        "characters: letters, digits, _ - .)."
    )
    arguments: dict[str, object] = Field(default={}, description="The tool's arguments.")
    covers: list[str] = Field(
        default=[],
        max_length=5,
        description="Checklist fact kinds this purchase is for, e.g. ['token_factsheet'].",
    )
    max_price: UsdcAmount | None = Field(
        default=None, description="Highest acceptable price: atomic USDC or e.g. '0.05 USDC'."
    )
    transport: McpTransport | None = Field(
        default=None,
        description="MCP transport from the discovery entry: 'streamable-http' or 'sse' "
        "(none: streamable HTTP, then SSE).",
    )

    @field_validator("tool")
    @classmethod
    def _tool(cls, value: str) -> str:
        return mcp_tool_name(value)


class PayMcpTool(Tool[PayMcpArgs]):
    """Call a paid MCP tool of an allowlisted seller, paying in USDC over x402."""

    name = "pay_mcp"
    args_model = PayMcpArgs
    kind = "paid"
    description = (
        "Call an x402-protected MCP tool (server URL, tool name, arguments) of an "
        "allowlisted seller; pays the quoted USDC price after the judge approves. Moves money."
    )

    def __init__(self, offers: OfferBook) -> None:
        self.offers = offers


    def offer_book(self) -> OfferBook:
        return self.offers

    def facts_for(self, args: BaseModel) -> tuple[str, ...]:
        """What this purchase may cover, decided on our side: the fact kinds the tool's
        declaration (discovery or its 402) matches, narrowed to ``covers`` when given."""
        if not isinstance(args, PayMcpArgs):
            return ()
        declared = self.offers.declared(_resource(args), args.tool)
        return tuple(k for k in declared if not args.covers or k in args.covers)

    # -- quote -------------------------------------------------------------------

    def seller_for(self, args: PayMcpArgs, ctx: ToolContext) -> str:
        """The seller ``args.server`` pays, as :meth:`quote` checks it (no request)."""
        return check_seller(self.name, args.server, ctx)

    async def quote(self, args: PayMcpArgs, ctx: ToolContext) -> Quote:
        """Call the tool unpaid; on x402's 402 build the authorization to approve."""
        check_seller(self.name, args.server, ctx)
        check_market(self.name, _resource(args), ctx, self.offers, args.tool)
        if ctx.wallet is None:
            raise PermanentToolError(
                "pay_mcp: no wallet is configured for this run; expected an unlocked wallet "
                "to pay from. Fix: `nib wallet new` (or `nib devnet up` on the devnet)."
            )
        result, used = await _call(args)
        required = _payment_required(result)
        seller = {"seller": seller_of(args.server)}
        if required is None:
            obs = self._observation(args, result, cost=0, settlement=None)
            return free_quote(self.name, args, obs, ctx, seller)
        pr = _x402_parse(required)
        description = getattr(getattr(pr, "resource", None), "description", "") or ""
        requirement = choose_requirement(
            pr, network_caip2=ctx.network.caip2, asset=usdc_address(ctx), max_amount=args.max_price
        )
        amount = requirement_amount(requirement)
        self.offers.note_declaration(_resource(args), args.tool, description, amount)
        return await authorization_quote(
            self.name,
            args,
            requirement,
            ctx,
            what=f"MCP {args.tool}",
            meta={**seller, "payment_required": required, "facts": list(self.facts_for(args)),
                  "transport": used},
        )

    # -- execute -----------------------------------------------------------------

    async def execute(
        self, quote: Quote, verdict: Verdict | None, ctx: ToolContext
    ) -> Observation:
        """MOVES MONEY: re-read the terms, sign under ``verdict``, call once, settle.

        Terms changed since the quote give a different payload, which the wallet refuses
        as ``verdict-void`` before signing. The paid call is never retried.
        """
        if quote.meta.get("free"):
            return stored_observation(self.name, quote.meta["observation"])
        args = PayMcpArgs.model_validate(quote.args)
        check_seller(self.name, args.server, ctx)
        wallet = ctx.wallet
        if wallet is None:
            raise PermanentToolError(
                "pay_mcp: no wallet is configured for this run; nothing was paid."
            )
        spend_cap_atomic = spend_cap(ctx, self.name)
        # The paid call goes over the transport the quote reached, once, never another.
        args = args.model_copy(update={"transport": args.transport or quote.meta.get("transport")})
        pr, requirement, payload, authorization = await self._current_terms(
            args, quote, ctx, asked_again=not judged_fresh(quote, verdict, ctx)
        )
        # The wallet recomputes the fingerprint of exactly this payload (verdict-void if
        # the seller's terms changed since the quote).
        signed = await asyncio.to_thread(
            wallet.sign_typed_data, payload, verdict, run_id=ctx.run_id, spend_cap_atomic=spend_cap_atomic
        )
        paid = payment_payload(requirement, pr, authorization, signed.signature)
        meta: dict[str, object] = {
            MCP_PAYMENT_META_KEY: paid.model_dump(by_alias=True, exclude_none=True)
        }
        ctx.emit(
            "tool.x402.paying",
            {"url": _resource(args), "amount": quote.amount, "ledger_id": signed.ledger_id},
        )
        seller, what = seller_of(args.server), f"MCP tool {args.tool} at {args.server}"

        async def undelivered(why: str) -> DeliveryFailed:
            return await abandon_undelivered(
                wallet, tool=self.name, seller=seller, what=what, spend_id=signed.ledger_id,
                why=why,
            )

        try:
            result, _ = await _call(args, meta=meta)
        except ToolError as exc:
            raise await undelivered(str(exc).removeprefix("pay_mcp: ")) from exc
        except BaseException:
            # The run stopped with the paid call in flight: end the authorization.
            with contextlib.suppress(Exception):
                await undelivered("the run stopped mid-call")
            raise
        receipt = (result.meta or {}).get(MCP_PAYMENT_RESPONSE_META_KEY) or {}
        tx_hash = receipt.get("transaction") if isinstance(receipt, dict) else None
        if result.isError or not isinstance(tx_hash, str) or not tx_hash:
            raise await undelivered(
                f"it answered {'an error' if result.isError else 'without a receipt'} to the "
                "paid call"
            )
        try:
            await asyncio.to_thread(wallet.settle, signed, tx_hash)
        except SettlementUnproven as exc:
            raise await undelivered(
                f"its receipt names {exc.tx_hash}, which does not settle our authorization "
                f"({exc.finding})"
            ) from exc
        return self._observation(args, result, cost=quote.amount, settlement=receipt)

    async def _current_terms(
        self, args: PayMcpArgs, quote: Quote, ctx: ToolContext, *, asked_again: bool
    ) -> tuple[AnyPaymentRequired, AnyRequirement, AuthorizationTypedData, dict[str, str]]:
        """The tool's terms asked again (or, not ``asked_again``, as quoted: the judge read
        them itself moments ago, see seller_terms.judged_fresh), as the payload to sign
        with the quoted nonce and window; a payment that cannot be built fails here,
        before anything is signed."""
        if asked_again:
            required = _payment_required((await _call(args))[0])
        else:
            required = as_object(quote.meta["payment_required"])
        if required is None:
            raise ToolError(
                f"pay_mcp: {args.tool} at {args.server} no longer asks for payment; nothing "
                "was signed. Fix: propose the call again for a fresh quote."
            )
        pr = _x402_parse(required)
        requirement = choose_requirement(pr, network_caip2=ctx.network.caip2, asset=usdc_address(ctx))
        payload, authorization = quoted_authorization(quote, requirement)
        try:
            payment_payload(requirement, pr, authorization, _PLACEHOLDER_SIGNATURE)
        except ValueError as exc:
            raise X402ProtocolError(f"pay_mcp: cannot build the payment: {exc}") from exc
        return pr, requirement, payload, authorization

    # -- observation -------------------------------------------------------------

    def _observation(
        self,
        args: PayMcpArgs,
        result: CallToolResult,
        *,
        cost: int,
        settlement: Mapping[str, object] | None,
    ) -> Observation:
        text = "".join(getattr(c, "text", "") for c in result.content or ())
        body: object = result.structuredContent
        if body is None:
            try:
                body = json.loads(text)
            except ValueError:
                body = None
        kinds = self.facts_for(args)
        cut, facts = purchase_facts(kinds, body, text)
        data: dict[str, object] = {
            "server": args.server,
            "tool": args.tool,
            "seller": seller_of(args.server),
            "excerpt": cut,
        }
        if settlement is not None:
            data["settlement"] = settlement
            data["paid_atomic"] = cost
        what = f"MCP {args.tool} from {seller_of(args.server)}"
        summary = (
            f"paid {format_usdc(cost)} for {what}: {len(facts)} facts, settled in "
            f"{str((settlement or {}).get('transaction', ''))[:10]}…"
            if cost
            else f"free {what}: {covered_words(kinds, facts)}"
        )
        return Observation(
            tool=self.name, ok=True, summary=summary, data=data, facts=facts, cost_usdc=cost
        )


def _resource(args: PayMcpArgs) -> str:
    return args.server + ENDPOINTS[args.transport or "sse"]


async def _call(
    args: PayMcpArgs, meta: dict[str, object] | None = None
) -> tuple[CallToolResult, McpTransport]:
    """One MCP tools/call over the args' transport (or each in turn); a ToolError names
    every transport tried and what answered. An unpaid call (the terms, no ``meta``) is
    answered within the judge's own read of them (SELLER_READ_S) or not at all: waiting
    longer for terms the judge would not wait for only holds the run."""
    limit = _TIMEOUT_S if meta is not None else SELLER_READ_S
    try:
        async with asyncio.timeout(limit):
            result, used = await call_tool(
                args.server, args.tool, dict(args.arguments), transport=args.transport,
                meta=meta, timeout_s=limit,
            )
    except TimeoutError as exc:
        raise ToolError(
            f"pay_mcp: {args.tool} at {args.server} gave no whole answer within {limit:g} s; "
            "expected an answer (its x402 terms, unpaid) within the judge's own read of them. "
            "Fix: check the MCP server, or use another seller."
        ) from exc
    except McpErrorAnswer as exc:
        raise ToolError(
            f"pay_mcp: the MCP server at {args.server} is up and answered the call of "
            f"{args.tool} over {exc.transport} with JSON-RPC error {exc.code} ({exc.text!r}); "
            "expected a tool result (its data, or x402's payment-required error result). Fix: "
            "check the tool's name and arguments against its discovery entry, or use another "
            "seller."
        ) from exc
    except McpUnreachable as exc:
        raise ToolError(
            f"pay_mcp: could not call {args.tool} at {args.server}: {exc}; expected a running "
            "MCP server (streamable HTTP at /mcp or SSE at /sse). Fix: start it (`nib devnet "
            "up` on the devnet), check the URL, or name the transport its discovery entry gives."
        ) from exc
    return result, used


def _payment_required(result: CallToolResult) -> dict[str, object] | None:
    """x402's PaymentRequired in an MCP error result (structured or as JSON text)."""
    if not result.isError:
        return None
    candidates: list[object] = [result.structuredContent]
    for item in result.content or ():
        try:
            candidates.append(json.loads(getattr(item, "text", "") or "null"))
        except ValueError:
            continue
    for found in candidates:
        if isinstance(found, dict) and "x402Version" in found and "accepts" in found:
            return found
    text = "".join(getattr(c, "text", "") for c in result.content or ())[:200]
    raise ToolError(f"pay_mcp: the tool answered an error, not a payment requirement: {text!r}")
