"""The quotes the x402 paying tools hand to the judge: the exact EIP-3009 authorization to
approve (built from the chain's time with our own nonce), or a free answer. Signs nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel

from agent.errors import DeliveryFailed, NonDelivery, PermanentToolError, ToolError
from agent.jsonvalues import as_int, as_object
from agent.tools.base import Observation, Quote, ToolContext
from agent.tools.chain_reads import usdc_address
from agent.tools.x402.protocol import (
    AnyRequirement,
    UnpayableTerms,
    build_authorization,
    requirement_amount,
    requirement_chain_id,
)
from chain import aio_rpc
from chain.money import format_usdc
from chain.usdc import AuthorizationTypedData, token_domain
from judge.fingerprint import typed_data_fingerprint
from wallet.errors import SettlementUnproven

if TYPE_CHECKING:
    from agent.seams import AgentWallet
    from wallet.ledger import SpendRow
    from wallet.signed import SignedTypedData

__all__ = [
    "FREE_FINGERPRINT",
    "authorization_quote",
    "chain_clock",
    "check_token_domain",
    "free_quote",
    "quoted_authorization",
    "settle_or_refuse",
]

#: Placeholder fingerprint of a free quote: there is no payload to sign.
FREE_FINGERPRINT = "0x" + "0" * 64


async def authorization_quote(
    tool: str,
    args: BaseModel,
    requirement: AnyRequirement,
    ctx: ToolContext,
    *,
    what: str,
    meta: Mapping[str, object],
    chain_time: int | None = None,
) -> Quote:
    """The quote paying ``requirement`` for ``what``: the authorization's typed data, its
    fingerprint, and ``meta`` plus the window it was built in (``chain_time``,
    ``wall_time``), so ``execute`` can rebuild the same payload from fresh terms.

    ``chain_time``: the chain's latest block time when the caller read it alongside the
    seller's 402 (read here otherwise)."""
    if ctx.wallet is None:
        raise PermanentToolError(
            f"{tool}: no wallet is configured for this run; expected an unlocked wallet to "
            "pay from. Fix: `nib wallet new` (or `nib devnet up` on the devnet)."
        )
    await check_token_domain(tool, requirement, ctx)
    if chain_time is None:
        chain_time = await chain_clock(ctx)
    wall_time = int(time.time())
    typed_data, authorization = build_authorization(
        requirement, payer=ctx.wallet.address, chain_time=chain_time, wall_time=wall_time
    )
    amount = requirement_amount(requirement)
    return Quote(
        tool=tool,
        args=args.model_dump(mode="json"),
        kind="x402",
        payload=dict(typed_data),
        payload_fingerprint=typed_data_fingerprint(typed_data),
        amount=amount,
        asset=str(typed_data["domain"]["verifyingContract"]),
        recipient=str(typed_data["message"]["to"]),
        chain_id=requirement_chain_id(requirement),
        meta={
            **meta,
            "authorization": authorization,
            "chain_time": chain_time,
            "wall_time": wall_time,
            "display": f"{format_usdc(amount)} to {requirement.pay_to} for {what}",
        },
    )


_DOMAINS: dict[tuple[int, str, tuple[str, str] | None], tuple[str, str]] = {}


async def check_token_domain(tool: str, requirement: AnyRequirement, ctx: ToolContext) -> None:
    """Refuse (before anything is signed) a requirement whose EIP-712 domain is not the
    token's own (read from the chain, and equal to the network's pinned one when
    configuration pins it): the token would reject the signature, so every payment would
    fail while its authorization stayed live."""
    usdc = str(requirement.asset)
    key = (ctx.network.chain_id, usdc.lower(), ctx.network.domain)
    if key not in _DOMAINS:
        _DOMAINS[key] = await asyncio.to_thread(
            token_domain, ctx.chain.w3, usdc, expected=ctx.network.domain
        )
    name, version = _DOMAINS[key]
    extra = requirement.extra or {}
    if (extra.get("name"), extra.get("version")) != (name, version):
        raise UnpayableTerms(
            f"{tool}: the seller advertises the EIP-712 domain (name={extra.get('name')!r}, "
            f"version={extra.get('version')!r}) for {usdc}, but the token itself reports "
            f"(name={name!r}, version={version!r}); a signature for the advertised domain "
            "would be rejected by the token. Nothing was signed. Fix: the seller must "
            "advertise the token's own name() and version()."
        )


async def chain_clock(ctx: ToolContext) -> int:
    """The chain's latest block time (the clock an authorization's window is built on),
    read on the event loop's thread: it is read beside the seller's 402 (chain.aio_rpc)."""
    return await aio_rpc.block_timestamp(ctx.chain, "latest")


def quoted_authorization(
    quote: Quote, requirement: AnyRequirement
) -> tuple[AuthorizationTypedData, dict[str, str]]:
    """The authorization ``quote`` was built with (its payer, nonce and validity window)
    for ``requirement`` as the seller offers it now: the very payload the verdict approved
    when the terms did not change, and one the wallet refuses as void when they did."""
    message = as_object(quote.payload["message"])
    return build_authorization(
        requirement,
        payer=str(message["from"]),
        chain_time=as_int(quote.meta["chain_time"]),
        wall_time=as_int(quote.meta["wall_time"]) if "wall_time" in quote.meta else None,
        nonce=bytes.fromhex(str(message["nonce"])[2:]),
    )


async def settle_or_refuse(
    wallet: AgentWallet,
    signed: SignedTypedData | SpendRow,
    tx_hash: str,
    refusal: Callable[[SettlementUnproven], str],
) -> None:
    """Settle ``signed`` under the transaction a seller's receipt names: the wallet first
    proves on chain that it carried our authorization. When it did not, the row stays
    'signed' for reconcile and the call fails with ``refusal(finding)``."""
    try:
        await asyncio.to_thread(wallet.settle, signed, tx_hash)
    except SettlementUnproven as exc:
        raise ToolError(refusal(exc)) from exc


def free_quote(
    tool: str, args: BaseModel, obs: Observation, ctx: ToolContext, meta: Mapping[str, object]
) -> Quote:
    """The quote of a seller that answered without asking for payment: amount 0,
    ``meta["free"]`` and the observation, so the loop records it without judge or wallet."""
    return Quote(
        tool=tool,
        args=args.model_dump(mode="json"),
        kind="x402",
        payload={},
        payload_fingerprint=FREE_FINGERPRINT,
        amount=0,
        asset=usdc_address(ctx),
        recipient="0x" + "0" * 40,
        chain_id=ctx.network.chain_id,
        meta={
            **meta,
            "free": True,
            "observation": {"summary": obs.summary, "data": obs.data, "facts": obs.facts},
        },
    )


def stored_observation(tool: str, stored: object) -> Observation:
    """The observation :func:`free_quote` noted in a quote's meta (kept with a paused run)."""
    obs = as_object(stored)
    facts = {str(k): str(v) for k, v in as_object(obs["facts"]).items()}
    return Observation(tool, True, str(obs["summary"]), as_object(obs["data"]), facts)


async def abandon_undelivered(
    wallet: AgentWallet,
    *,
    tool: str,
    seller: str,
    what: str,
    spend_id: str,
    why: str,
    http_status: int | None = None,
) -> DeliveryFailed:
    """The purchase of ``what`` from ``seller``, paid under ledger row ``spend_id``, did not
    deliver (``why``): the wallet ends its authorization from the chain (settled if the
    seller used it: paid for nothing; else cancelled on chain, or failed once expired).
    The error names what the chain shows and the seller the run pays nothing more.
    Shielded: a run that stops meanwhile still leaves the authorization ended."""
    row = await asyncio.shield(asyncio.to_thread(wallet.abandon_authorization, spend_id, why))
    if row.status == "settled":
        how = (
            f"The seller took the money: {format_usdc(row.amount)} settled in {row.tx_hash} "
            f"(ledger row {row.id}): paid for nothing."
        )
    elif row.status == "cancelled":
        how = (
            f"No money moved: the wallet cancelled the authorization on chain in "
            f"{row.tx_hash}, so the seller can never settle it (ledger row {row.id})."
        )
    elif row.status == "failed":
        how = f"No money moved: the authorization expired unused (ledger row {row.id})."
    else:
        how = (
            f"The authorization could not be cancelled yet: ledger row {row.id} stays "
            f"'{row.status}' until `nib audit reconcile` settles or fails it."
        )
    delivery = NonDelivery(seller, why, row.status == "settled", row.id, row.status)
    return DeliveryFailed(
        f"{tool}: {seller} {delivery.said()}: {why.rstrip('.')}. {how} No second payment "
        f"is made: nib pays {seller} nothing more in this run. Fix: continue without this "
        f"data, or use another seller (the purchase was {what}).",
        delivery,
        http_status=http_status,
    )
