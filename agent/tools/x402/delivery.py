"""The paid request and the proof of its settlement: the two steps of a purchase that
move money. The request carrying the signed payment is sent once (never retried); the
answer counts as delivered only when it is a 2xx whose receipt names a transaction the
chain shows carrying our authorization. Anything else is not delivered: the wallet ends
the authorization (settled if the seller used it: paid for nothing; else cancelled on
chain) and the call fails with :class:`~agent.errors.DeliveryFailed`."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import httpx

from agent.errors import DeliveryFailed, ToolError
from agent.tools.base import Observation, ToolContext
from agent.tools.x402.fetch import bare, fetch, refusal
from agent.tools.x402.offers import excerpt, seller_of
from agent.tools.x402.protocol import SettlementReceipt, X402ProtocolError, parse_payment_response
from agent.tools.x402.quoting import abandon_undelivered
from wallet.errors import SettlementUnproven

if TYPE_CHECKING:
    from agent.seams import AgentWallet
    from wallet.signed import SignedTypedData

__all__ = ["RECEIPT_WAIT_S", "not_delivered", "prove_settlement", "send_paid"]

#: How long a receipt naming a transaction our node does not show yet is re-checked
#: before the purchase counts as undelivered (an RPC behind the seller's by a block).
RECEIPT_WAIT_S = 5.0
_RECEIPT_POLL_S = 0.25

#: (url, method, JSON body) of one purchase.
Request = tuple[str, str, Mapping[str, object] | None]


async def send_paid(
    request: Request,
    header: tuple[str, str],
    signed: SignedTypedData,
    wallet: AgentWallet,
    ctx: ToolContext,
) -> httpx.Response:
    """MOVES MONEY: the request carrying the payment header, sent once. An answer that
    is not a 2xx, or no full answer in time, is not delivered: the wallet ends the
    authorization (DeliveryFailed)."""
    url, method, body = request
    name, value = header
    # The header is kept (for a re-send) while the paid request is in flight; the row is
    # already 'signed' with its nonce, and nothing reads the header before it is kept.
    kept = asyncio.ensure_future(asyncio.to_thread(wallet.keep_payment, signed, (name, value)))
    try:
        resp = await fetch(ctx, url, method=method, body=body, headers={name: value})
    except ToolError as exc:
        await kept
        # The seller received the authorization and may still settle it: the wallet ends
        # it (cancelled on chain unless the seller already used it).
        raise await not_delivered(wallet, url, signed.ledger_id, bare(exc)) from exc
    except BaseException:
        await asyncio.shield(kept)
        # The run stopped (deadline, interrupt) with the paid request in flight: the
        # authorization is ended on the way out (a wallet that cannot be reached leaves it
        # to reconcile; the stop is what the run reports).
        with contextlib.suppress(Exception):
            await not_delivered(wallet, url, signed.ledger_id, "the run stopped mid-request")
        raise
    await kept
    if not 200 <= resp.status_code < 300:
        raise await not_delivered(
            wallet, url, signed.ledger_id, refusal(resp), http_status=resp.status_code
        )
    return resp


async def prove_settlement(
    tool: str,
    url: str,
    resp: httpx.Response,
    signed: SignedTypedData,
    wallet: AgentWallet,
) -> SettlementReceipt | Observation:
    """The seller's receipt once the chain proves it settles our authorization; else the
    failed call of an undelivered purchase (the wallet ends the authorization), which
    keeps a bounded excerpt of what arrived."""
    try:
        settlement = parse_payment_response(resp)
    except X402ProtocolError as exc:
        why = f"it answered {resp.status_code} without a valid settlement receipt ({exc})"
        return await _unproven(tool, url, resp, signed, wallet, why)
    tx_hash = settlement.get("transaction")
    if not settlement.get("success") or not isinstance(tx_hash, str) or not tx_hash:
        why = (
            f"it answered {resp.status_code} with a receipt saying success="
            f"{settlement.get('success')} ({settlement.get('error_reason')})"
        )
        return await _unproven(tool, url, resp, signed, wallet, why)
    try:
        # The receipt is the seller's claim: the wallet settles the row only when the
        # named transaction carries our AuthorizationUsed and the matching Transfer.
        await _settle_proven(wallet, signed, tx_hash)
    except SettlementUnproven as exc:
        why = (
            f"its receipt names {exc.tx_hash}, which does not settle our authorization "
            f"({exc.finding})"
        )
        return await _unproven(tool, url, resp, signed, wallet, why)
    return settlement


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
        await asyncio.sleep(_RECEIPT_POLL_S)


async def _unproven(
    tool: str,
    url: str,
    resp: httpx.Response,
    signed: SignedTypedData,
    wallet: AgentWallet,
    why: str,
) -> Observation:
    """A paid answer whose settlement is not proven: not delivered (the wallet ends the
    authorization); a failed call that keeps a bounded excerpt of the data that
    arrived (it may have been paid for), covering nothing."""
    failed = await not_delivered(wallet, url, signed.ledger_id, why)
    try:
        body = resp.json()
    except ValueError:
        body = None
    data = {
        "url": url,
        "status": resp.status_code,
        "settlement": "unproven",
        "excerpt": excerpt(body, resp.text),
    }
    error = str(failed)
    return Observation(
        tool=tool, ok=False, summary=f"error: {error}", data=data, error=error,
        not_delivered=failed.delivery, error_class=type(failed).__name__,
    )


async def not_delivered(
    wallet: AgentWallet, url: str, spend_id: str, why: str, *, http_status: int | None = None
) -> DeliveryFailed:
    """The purchase of ``url`` paid under ledger row ``spend_id`` did not deliver
    (``http_status``: what the seller answered, when it answered)."""
    return await abandon_undelivered(
        wallet, tool="pay_http", seller=seller_of(url), what=url, spend_id=spend_id, why=why,
        http_status=http_status,
    )
