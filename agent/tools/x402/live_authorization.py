"""One live authorization per purchase. Before a purchase is quoted, a live
authorization for the same resource (another run's, or this one's from before a crash)
is waited for while some run is paying with it, and otherwise re-sent (:func:`resend`):
the same signature, so money cannot move twice. The signature itself is taken only
while no authorization for the resource is live (:func:`sign_when_free`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agent.errors import ToolError
from agent.tools.base import Quote, ToolContext
from agent.tools.money import require_wallet
from agent.tools.x402.catalog import SellerCatalog
from agent.tools.x402.delivery import Request, not_delivered
from agent.tools.x402.fetch import bare, fetch, refusal
from agent.tools.x402.protocol import X402ProtocolError, parse_payment_response
from agent.tools.x402.quoting import free_quote, settle_or_refuse
from chain.money import format_usdc
from judge.verdict import Verdict
from wallet.errors import AuthorizationOutstanding

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agent.seams import AgentWallet
    from wallet.ledger import SpendRow
    from wallet.signed import SignedTypedData

__all__ = ["LIVE_WAIT_S", "live_after_wait", "resend", "sign_when_free"]

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


def _in_flight(row: SpendRow) -> bool:
    """Reserved, or signed with no answer recorded yet: some run is paying right now."""
    return bool(row.status == "reserved" or (row.status == "signed" and not row.note))


async def live_after_wait(wallet: AgentWallet, resource: str) -> SpendRow | None:
    """The live authorization for ``resource`` once no run is mid-payment on it (bounded
    by LIVE_WAIT_S), else None: concurrent honest purchases queue instead of failing."""
    deadline = time.monotonic() + LIVE_WAIT_S
    while True:
        live = await asyncio.to_thread(wallet.live_authorization, resource)
        if live is None or not _in_flight(live) or time.monotonic() >= deadline:
            return live
        await asyncio.sleep(_LIVE_POLL_S)


async def resend(
    purchase: tuple[BaseModel, Request, str],
    live: SpendRow,
    catalog: SellerCatalog,
    ctx: ToolContext,
) -> Quote:
    """Re-send the live authorization for this purchase (args, request, resource); sign
    nothing new.

    Money cannot move twice: it is the same signature (one nonce). Data that comes
    back with a receipt the chain proves is returned as a free quote (nothing left to
    judge or sign); anything else raises a ToolError that says the purchase is
    pending and when it can change, without inviting a second authorization.
    """
    args, (url, method, body), resource = purchase
    wallet = require_wallet(ctx, catalog.tool)
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
        resp = await fetch(
            ctx, url, method=method, body=body, headers={str(header[0]): str(header[1])}
        )
    except ToolError as exc:
        why = f"{pending}; re-sending it failed ({bare(exc)})"
        raise await not_delivered(wallet, url, live.id, why) from exc
    ctx.emit("tool.x402.resent", {"url": url, "ledger_id": live.id, "status": resp.status_code})
    tx = None
    if 200 <= resp.status_code < 300:
        with contextlib.suppress(X402ProtocolError):
            receipt = parse_payment_response(resp)
            tx = receipt.get("transaction") if receipt.get("success") else None
    if not isinstance(tx, str) or not tx:
        why = f"{pending}; it was re-sent and {refusal(resp)} without a valid receipt"
        status = None if 200 <= resp.status_code < 300 else resp.status_code  # what failed
        raise await not_delivered(wallet, url, live.id, why, http_status=status)
    await settle_or_refuse(
        wallet,
        live,
        tx,
        lambda exc: f"pay_http: {pending}. It was re-sent; the receipt names {exc.tx_hash}, which "
        f"does not settle it ({exc.finding}). Fix: continue without this data.",
    )
    cost = live.amount if live.run_id == ctx.run_id else 0
    covers = tuple(getattr(args, "covers", ()) or ())
    obs = catalog.observation(
        (url, method, body), covers, resp, cost=cost, settlement={"transaction": tx}
    )
    return free_quote(catalog.tool, args, obs, ctx, {"url": url, "resent": live.id})


async def sign_when_free(
    wallet: AgentWallet,
    payload: Mapping[str, object],
    verdict: Verdict | None,
    ctx: ToolContext,
    spend_cap_atomic: int,
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
        # The signature first, in one worker-thread hop and one call to the wallet: the
        # wallet refuses it, consuming nothing, while another authorization for the
        # resource is live (checked in the transaction that would consume the verdict);
        # only then is the live one read (None: it ended meanwhile, so try again).
        try:
            return None, wallet.sign_typed_data(
                payload, verdict, run_id=ctx.run_id, spend_cap_atomic=spend_cap_atomic, resource=resource
            )
        except AuthorizationOutstanding:
            return wallet.live_authorization(resource), None

    async with _signing_lock(resource):
        while True:
            live, signed = await asyncio.to_thread(sign_if_free)
            if signed is not None:
                return signed
            if live is not None and (
                not _in_flight(live) or await live_after_wait(wallet, resource) is not None
            ):
                break  # held by a seller (answered, not in flight): never sign a second
    live = await asyncio.to_thread(wallet.live_authorization, resource)
    raise ToolError(
        f"pay_http: an authorization for {resource} is still live (ledger row "
        f"{getattr(live, 'id', '?')}, valid until {getattr(live, 'valid_before', '?')}); nib "
        "signs no second one while it is live, so nothing was signed. Fix: continue without "
        "this data; do not propose this call again in this run."
    )
