"""The seller's terms, read from its 402: when quoting (:func:`read_offer`), and again
right before paying (:func:`check_terms`) unless the judge read them itself moments ago
(:func:`judged_terms`). The second read rebuilds the authorization from the seller's
*current* terms with the quoted nonce and window: if the seller changed price, recipient
or asset since the quote, that payload differs from the approved one and the wallet voids
the verdict before signing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import NamedTuple, TypeVar

import httpx
from x402.http import PAYMENT_REQUIRED_HEADER
from x402.schemas import PaymentRequirements, PaymentRequirementsV1
from x402.schemas import parse_payment_required as _x402_parse

from agent.errors import ToolError
from agent.interrupts import gather_pair
from agent.jsonvalues import as_int, as_object
from agent.tools.base import Quote, ToolContext
from agent.tools.chain_reads import usdc_address
from agent.tools.x402.delivery import Request
from agent.tools.x402.fetch import fetch, no_whole_response, unexpected_status, unpaid_refusal
from agent.tools.x402.protocol import (
    EXPIRY_MARGIN_S,
    AnyPaymentRequired,
    AnyRequirement,
    RequirementRefused,
    X402ProtocolError,
    choose_requirement,
    encode_payment_header,
    parse_payment_required,
)
from agent.tools.x402.quoting import chain_clock, quoted_authorization
from chain.seller_url import parsed_url
from chain.usdc import AuthorizationTypedData
from judge.mcp_terms import SELLER_READ_S
from judge.seller_terms import AheadRead, Stated402
from judge.verdict import Verdict
from wallet.errors import VerdictVoid

__all__ = [
    "EXPIRY_MARGIN_S",
    "JUDGED_TERMS_FRESH_S",
    "CurrentTerms",
    "Offered",
    "check_terms",
    "judged_fresh",
    "judge_reads_ahead",
    "judged_terms",
    "read_offer",
]

#: An authorization this close to its validBefore is not sent: settlement takes time.
#: Seconds a quote and its approving verdict stay fresh enough to pay on the quoted terms
#: without reading them again (see :func:`judged_terms`).
JUDGED_TERMS_FRESH_S = 2
_T = TypeVar("_T")
#: The least time the tool's own read of a seller gets after the judge's read found no 402.
_LEAST_READ_S = 1.0
#: Stands in for the signature when checking that a payment header can be encoded.
_PLACEHOLDER_SIGNATURE = "0x" + "00" * 65


class Offered(NamedTuple):
    """What a seller answered an unpaid request: its 402 and the requirement we can pay
    (``payment_required`` None: it answered 200, free data in ``response``), and the
    chain's time read alongside."""

    response: httpx.Response
    payment_required: AnyPaymentRequired | None
    requirement: AnyRequirement | None
    chain_time: int


class CurrentTerms(NamedTuple):
    """The seller's current terms as the exact payload to sign."""

    payment_required: AnyPaymentRequired
    requirement: AnyRequirement
    payload: AuthorizationTypedData
    authorization: dict[str, str]


async def read_offer(request: Request, max_price: int | None, ctx: ToolContext) -> Offered:
    """The seller's answer to an unpaid request (within the run's response deadline and
    never longer than the judge's own read, SELLER_READ_S) and, for a 402, the requirement
    on our network and USDC within ``max_price``. The chain's clock (the authorization's window)
    is read while the seller answers; its failure counts only for a 402. The answer is the
    402 the run's judge read for the coming decision when it found one
    (:func:`judge_reads_ahead`), else the tool's own read (:func:`_unpaid_answer`)."""
    url, method, body = request
    # Never waited for longer than the judge would: a 402 the judge cannot read within its
    # bound cannot be approved anyway (the paid request keeps the run's response deadline).
    limit = min(ctx.response_deadline_s, SELLER_READ_S)
    resp, clock = await gather_pair(_unpaid_answer(request, ctx, limit), chain_clock(ctx))
    if isinstance(resp, BaseException):
        raise resp
    if resp.status_code == 200:
        return Offered(resp, None, None, 0)
    if resp.status_code != 402:
        raise await unpaid_refusal(ctx, url, resp, method=method, body=body)
    pr = parse_payment_required(resp)
    requirement = choose_requirement(
        pr, network_caip2=ctx.network.caip2, asset=usdc_address(ctx), max_amount=max_price
    )
    if isinstance(clock, BaseException):
        raise clock
    return Offered(resp, pr, requirement, clock)


async def _unpaid_answer(request: Request, ctx: ToolContext, limit: float) -> httpx.Response:
    """The seller's answer to the unpaid request, within ``limit`` seconds in all: the 402
    the run's judge read for the coming decision, when it found one stating offers it
    can rule on. Otherwise the tool reads the seller itself only where the answer's words
    are the result (free data, 200) or say what to change (a 4xx refusal: the route, the
    method; no connection: start the seller); any other finding of the judge's read (a
    5xx, a redirect, a 402 offering nothing payable, a stall) fails the quote as the
    judge found it: the
    decision would rule on that read, so a second unpaid request could only show the
    tool terms the judge never saw."""
    url, method, body = request
    started = time.monotonic()
    try:
        async with asyncio.timeout(limit):
            read = await judge_reads_ahead(request, ctx)
    except TimeoutError as exc:
        raise no_whole_response(url, limit, "TimeoutError") from exc
    if read is not None and read.stated is not None:
        return _stated_response(url, method, read.stated)
    if read is not None and read.stalled:
        # A read that stalled moments before (this task's earlier try) is joined, not made
        # again: this call waited for nothing, and says so.
        again = time.monotonic() - started < _LEAST_READ_S
        raise no_whole_response(
            url, SELLER_READ_S, "the judge's read of it stalled" + (
                " moments before; it was not read again" if again else ""),
            f"retry later, or buy from another seller (the judge reads a seller for at most "
            f"{SELLER_READ_S:g} s, whatever the run's deadline)")
    if read is not None and read.why is not None and not _tells_the_tool(read.status):
        raise ToolError(
            f"pay_http: the judge's read of {url} found that {read.why}; expected a 402 "
            "stating an offer nib can pay, or free data. Fix: check the URL and the seller, "
            "or buy from another seller.",
            http_status=read.status,
        )
    if read is not None and read.started:  # the judge's read took part of the bound
        limit = round(max(limit - (time.monotonic() - started), _LEAST_READ_S), 1)
    return await fetch(ctx, url, method=method, body=body, timeout=limit)


def _tells_the_tool(status: int | None) -> bool:
    """Whether the tool's own read is worth making after the judge's read found ``status``
    (None: no answer, the connection failed): free data, a refusal whose words the tool
    reports (agent.tools.x402.fetch.unpaid_refusal), or a failure the tool's own read
    names (an unreachable seller and the fix)."""
    return status is None or status == 200 or (400 <= status < 500 and status != 402)


def _stated_response(url: str, method: str, stated: Stated402) -> httpx.Response:
    """The seller's 402 as the judge's read found it, as the tool reads a 402."""
    headers = [(PAYMENT_REQUIRED_HEADER, stated.header)] if stated.header is not None else []
    return httpx.Response(402, headers=headers, content=stated.body,
                          request=httpx.Request(method, parsed_url(url)))


async def judge_reads_ahead(request: Request, ctx: ToolContext) -> AheadRead | None:
    """Tell the run's judge (``ctx.read_terms_ahead``) which seller's resource is about to
    be quoted: the judge reads that 402 itself for the coming decision (every approval of
    a purchase stands on its own read; judge.seller_terms.TermsAhead) and answers what it
    found. None when the run's judge cannot be told, or the telling failed: the tool then
    reads the seller itself, and the decision meets whatever is wrong with the judge."""
    ahead = ctx.read_terms_ahead
    if ahead is None:
        return None
    url, method, body = request
    try:
        return await _on_own_thread(lambda: ahead(url, method, body))
    except Exception:  # noqa: BLE001 - only the quote's source: the tool reads itself
        return None


class _Daemons:
    """Daemon threads that each run one call at a time, kept for the next (one is started
    when none is idle): starting a thread per call cost ~100 us more per quote. Keyed by
    process, like judge.connections.thread_pool: a forked child has none of its parent's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []
        self._pid = 0

    def run(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._pid != os.getpid():
                self._pid, self._idle = os.getpid(), []
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name="nib-terms-ahead",
                             daemon=True).start()  # fmt: skip
        inbox.put(job)

    def _serve(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            inbox.get()()  # the job carries its own outcome to its loop, never raises
            with self._lock:
                self._idle.append(inbox)


_DAEMONS = _Daemons()


async def _on_own_thread(fn: Callable[[], _T]) -> _T:
    """``fn()`` on a daemon thread of its own, awaited. The judge's answer waits on a
    seller, which may stall it for the judge's whole read: unlike ``asyncio.to_thread``, a
    call still waiting when the quote gives up holds no worker of the event loop's
    executor, which ``asyncio.run`` waits for before it returns the run's result (the
    thread is kept for a later call once this one returns)."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[_T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not answer.done():
            outcome()

    def run() -> None:
        try:
            result = fn()
        except BaseException as exc:  # noqa: BLE001 - carried to the awaiting task
            failed = exc
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                loop.call_soon_threadsafe(settle, lambda: answer.set_exception(failed))
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, lambda: answer.set_result(result))

    _DAEMONS.run(run)
    return await answer


async def check_terms(
    quote: Quote, request: Request, ctx: ToolContext
) -> CurrentTerms | httpx.Response:
    """The seller's terms re-read (while the chain's clock is read: the re-check costs no
    time of its own on the paid path) as the payload to sign with the quoted nonce and
    window (or the seller's 200 when it stopped charging); a quote whose window has
    passed, and a header that could not be encoded, are refused before anything is
    signed."""
    url, method, body = request
    resp, checked = await gather_pair(
        fetch(ctx, url, method=method, body=body), _check_not_expired(quote, ctx)
    )
    if isinstance(checked, BaseException):
        raise checked
    if isinstance(resp, BaseException):
        raise resp
    if resp.status_code == 200:
        # The seller stopped charging: nothing to sign, the verdict stays unused.
        return resp
    pr, requirement = _current_requirement(quote, url, resp, ctx)
    return _terms_to_sign(quote, url, pr, requirement)


def judged_terms(quote: Quote, verdict: Verdict | None, ctx: ToolContext) -> CurrentTerms | None:
    """The quoted terms as the payload to sign, without reading the seller's 402 again,
    when :func:`judged_fresh` says the re-read cannot change the outcome; else None
    (:func:`check_terms` reads them)."""
    if not judged_fresh(quote, verdict, ctx) or "requirement" not in quote.meta:
        return None
    pr = _x402_parse(as_object(quote.meta["payment_required"]))
    return _terms_to_sign(quote, str(quote.meta["url"]), pr, _quoted_requirement(quote, pr))


def judged_fresh(quote: Quote, verdict: Verdict | None, ctx: ToolContext) -> bool:
    """Whether a paid tool may pay ``quote``'s terms as quoted, without asking the seller
    again: the re-read cannot change the outcome.

    That is when the run's judge read the seller's own terms itself before approving
    (``ctx.judge_reads_terms``: nib's judge, in-process or as a service, approves an x402
    purchase only when the payload pays exactly an offer the seller's 402 states, see
    judge.tasks) and both the quote and the approving verdict are at most
    JUDGED_TERMS_FRESH_S old: the terms were then read after the quote, moments ago, by
    the party whose reading counts. A verdict given after a pause for a human (the judge
    read the terms again, but the quote is old), a judge that does not read terms, and a
    window that could close meanwhile all read them again. The re-read never guarded
    money: the wallet signs only the approved payload, and a seller that changed its
    terms in the moment since refuses the payment as it would after any re-read
    (tests/agent/tools/test_judged_terms.py)."""
    if not ctx.judge_reads_terms or verdict is None or verdict.decision != "approve":
        return False
    if not {"wall_time", "chain_time", "payment_required"} <= set(quote.meta):
        return False
    oldest = time.time() - JUDGED_TERMS_FRESH_S - 1  # both clocks count whole seconds
    if as_int(quote.meta["wall_time"]) < oldest or verdict.issued_at < oldest:
        return False
    valid_before = as_int(as_object(quote.payload["message"])["validBefore"])
    # The window must outlast the moments since the quote and the margin for settling, by
    # the later clock (a devnet's idle chain lags the wall clock facilitators check).
    quoted_at = max(as_int(quote.meta["chain_time"]), as_int(quote.meta["wall_time"]))
    return quoted_at + JUDGED_TERMS_FRESH_S + EXPIRY_MARGIN_S < valid_before


def _terms_to_sign(
    quote: Quote, url: str, pr: AnyPaymentRequired, requirement: AnyRequirement
) -> CurrentTerms:
    payload, authorization = quoted_authorization(quote, requirement)
    try:  # a header we could not encode must fail before anything is signed
        encode_payment_header(requirement, pr, authorization, _PLACEHOLDER_SIGNATURE)
    except ValueError as exc:
        raise X402ProtocolError(f"pay_http: cannot encode the payment for {url}: {exc}") from exc
    return CurrentTerms(pr, requirement, payload, authorization)


def _quoted_requirement(quote: Quote, pr: AnyPaymentRequired) -> AnyRequirement:
    """The requirement ``quote`` was built for, read back from its meta."""
    cls = PaymentRequirements if pr.x402_version == 2 else PaymentRequirementsV1
    return cls.model_validate(quote.meta["requirement"])


def _current_requirement(
    quote: Quote, url: str, resp: httpx.Response, ctx: ToolContext
) -> tuple[AnyPaymentRequired, AnyRequirement]:
    """The requirement of ``resp`` (a fresh unpaid answer) to pay: the very one quoted
    when offered, else whatever fits now (the wallet then compares payloads)."""
    if resp.status_code != 402:
        raise ToolError(unexpected_status(url, resp, paid=False), http_status=resp.status_code)
    pr = parse_payment_required(resp)
    quoted_req = _quoted_requirement(quote, _x402_parse(as_object(quote.meta["payment_required"])))
    requirement = next((r for r in pr.accepts if r == quoted_req), None)
    if requirement is None:
        try:
            requirement = choose_requirement(
                pr, network_caip2=ctx.network.caip2, asset=usdc_address(ctx)
            )
        except RequirementRefused as exc:
            detail = f"{url} no longer offers a payable requirement: {exc}"
            raise _terms_changed(quote, detail) from exc
    return pr, requirement


def _terms_changed(quote: Quote, detail: str) -> VerdictVoid:
    """The seller's terms changed so that no payload can match the verdict: verdict-void."""
    return VerdictVoid(
        f"pay_http: the seller's terms changed after the quote ({detail}); the approved "
        f"payload {quote.payload_fingerprint[:12]}… can no longer be paid, so the verdict is "
        "void and nothing was signed. Fix: re-quote and ask the judge again."
    )


async def _check_not_expired(quote: Quote, ctx: ToolContext) -> None:
    """Refuse (before signing) a quote whose authorization window has passed, or would
    before the seller could settle it, by the later of the chain's and the wall clock
    (facilitators check their wall clock; a devnet's idle chain lags it)."""
    valid_before = as_int(as_object(quote.payload["message"])["validBefore"])
    now = max(await chain_clock(ctx), int(time.time()))
    if now + EXPIRY_MARGIN_S >= valid_before:
        raise ToolError(
            f"pay_http: the quote for {quote.meta.get('url')} is stale: its authorization is "
            f"valid until {valid_before} and the time (the later of the chain's and the wall "
            f"clock) is {now} (margin "
            f"{EXPIRY_MARGIN_S} s). Nothing was signed and the verdict is unused. Fix: propose "
            "the call again for a fresh quote."
        )
