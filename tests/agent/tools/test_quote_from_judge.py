"""A paid tool quotes from the 402 the run's judge read for the coming decision
(agent.tools.x402.seller_terms.read_offer): the seller answers one unpaid request a
purchase, and the agent and the judge see the same answer. Where the judge's read found
no 402 it can rule on, the tool reads the seller itself and meets what it answers; a
seller that stalled the judge's read is not read a second time.

The seller is the real paywall on Anvil; the judge is a real in-process judge reading
terms as ``nib run`` builds it (judge.payto.advertised_terms), except where a case needs a
judge answering something a real seller cannot make it answer."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import httpx
import pytest

from agent.errors import ToolError
from agent.tools.base import Quote, ToolContext, terms_ahead_of
from agent.tools.x402.pay_http import PayHttpTool
from chain.paywall.app import DEFAULT_PRICES, PaywallServer
from judge.jev import Judge
from judge.payto import advertised_terms
from judge.seller_terms import AheadRead, Stated402
from judge.verdict import VerdictSigner
from wallet.signer import Wallet

GAS_PRICE = DEFAULT_PRICES["gas"]
Ahead = Any  # (url, method, body) -> AheadRead, or raises


@pytest.fixture
def ctx(make_ctx: Any, wallet: Wallet, paywall: PaywallServer) -> ToolContext:
    ctx: ToolContext = make_ctx(wallet=wallet, allowlist=(paywall.url,))
    return ctx


def _quote(ctx: ToolContext, url: str, ahead: Ahead | None) -> tuple[list[str], Quote | Exception]:
    """Quote ``url`` with ``ahead`` as the run's judge's read ahead: the unpaid requests the
    tool itself sent for it, and the quote (or what was raised)."""
    sent: list[str] = []

    async def note(request: httpx.Request) -> None:
        if request.url.path != "/catalog":  # the seller's catalog, read once per tool
            sent.append(f"{request.method} {request.url.path}")

    async def flow() -> Quote | Exception:
        async with httpx.AsyncClient(event_hooks={"request": [note]}) as http:
            tool_ctx = ToolContext(**{**ctx.__dict__, "http": http, "judge_reads_terms": True,
                                      "read_terms_ahead": ahead})
            tool = PayHttpTool(url.rsplit("/", 2)[0])
            try:
                return await tool.quote(tool.parse_args({"url": url}), tool_ctx)
            except Exception as exc:  # noqa: BLE001 - the case reads what was raised
                return exc

    return sent, asyncio.run(flow())


def _judge(chain: Any, signer: VerdictSigner) -> Judge:
    return Judge(signer, allowed_assets={chain.chain_id: [chain.usdc]}, terms_of=advertised_terms)


def test_the_quote_states_what_the_judges_read_found_and_the_tool_reads_nothing_itself(
    chain: Any, ctx: ToolContext, judge_signer: VerdictSigner, paywall: PaywallServer
) -> None:
    """A seller answering the judge and the agent differently would need two reads: there
    is one, the judge's. What the judge found is what the quote asks to pay, even where the
    seller's next answer differs (here: a 402 the judge's answer carries, at another price)."""
    sent, quote = _quote(ctx, paywall.url + "/analytics/gas",
                         terms_ahead_of(_judge(chain, judge_signer), ctx.run_id))
    assert isinstance(quote, Quote), quote
    assert (sent, quote.amount) == ([], GAS_PRICE)

    # The judge's answer is the quote's only source: a price only that answer states.
    read = advertised_terms(paywall.url + "/analytics/gas")
    stated = getattr(read, "stated")  # noqa: B009 - the 402 as the judge's reader kept it
    required = json.loads(base64.b64decode(stated.header))
    required["accepts"][0]["amount"] = str(GAS_PRICE + 7)
    relabelled = Stated402(base64.b64encode(json.dumps(required).encode()).decode(), b"")
    sent, quote = _quote(ctx, paywall.url + "/analytics/gas",
                         lambda url, method, body: AheadRead(True, relabelled))
    assert isinstance(quote, Quote), quote
    assert (sent, quote.amount) == ([], GAS_PRICE + 7)


def test_where_the_judge_found_no_402_the_tool_reads_the_seller_itself(
    chain: Any, ctx: ToolContext, judge_signer: VerdictSigner, paywall: PaywallServer
) -> None:
    """A resource that answers 200 is free: the judge's read finds no 402, so the tool
    reads it itself and quotes it free; a judge whose telling failed leaves the tool to
    read as well."""
    sent, quote = _quote(ctx, paywall.url + "/health",
                         terms_ahead_of(_judge(chain, judge_signer), ctx.run_id))
    assert isinstance(quote, Quote), quote
    assert (sent, quote.amount) == (["GET /health"], 0)

    def unreachable(url: str, method: str, body: object) -> AheadRead:
        raise ConnectionError("the judge service is down")

    sent, quote = _quote(ctx, paywall.url + "/analytics/gas", unreachable)
    assert isinstance(quote, Quote), quote
    assert (sent, quote.amount) == (["GET /analytics/gas"], GAS_PRICE)


def test_a_seller_that_stalled_the_judges_read_is_not_read_a_second_time(
    ctx: ToolContext, paywall: PaywallServer
) -> None:
    """The judge's read gave up on the seller: the quote fails at once, naming the stall,
    without a second wait of its own."""
    started = time.monotonic()
    sent, quote = _quote(ctx, paywall.url + "/analytics/gas",
                         lambda url, method, body: AheadRead(True, None, stalled=True))
    assert isinstance(quote, ToolError), quote
    assert "no whole response" in str(quote) and "stalled" in str(quote), quote
    assert sent == [] and time.monotonic() - started < 5.0
    # The judge's read is bounded whatever the run's deadline: raising it cannot help.
    assert "response_deadline_s" not in str(quote) and "retry later" in str(quote), quote
    # Its answer came at once (a read that stalled moments before, joined): no wait is told.
    assert "moments before; it was not read again" in str(quote), quote


def test_a_judge_that_never_answers_holds_the_quote_no_longer_than_its_bound(
    ctx: ToolContext, paywall: PaywallServer
) -> None:
    """The run's response deadline bounds the wait for the judge's answer as it bounds
    the tool's own read; the judge's answer still on its way holds nothing after it."""
    def hung(url: str, method: str, body: object) -> AheadRead:
        time.sleep(30)
        return AheadRead(False)

    short = ToolContext(**{**ctx.__dict__, "response_deadline_s": 1.0})
    started = time.monotonic()
    sent, quote = _quote(short, paywall.url + "/analytics/gas", hung)
    took = time.monotonic() - started
    assert isinstance(quote, ToolError), quote
    assert "within 1 s" in str(quote), quote
    assert sent == [] and took < 5.0, took


def test_a_seller_that_answers_the_judge_with_no_offer_is_not_read_again_by_the_tool(
    ctx: ToolContext, paywall: PaywallServer
) -> None:
    """Outside tester 13: a seller answered the judge's read 500 and the tool's own read a
    cheap 402, and nib sent it five unpaid requests. The decision rules on the judge's
    read, so a second read could only show the tool terms the judge never saw: the quote
    fails as the judge found it. Likewise a 402 offering nothing payable, or a redirect."""
    for status, why in ((500, "it answered the judge's unpaid read with HTTP 500, not a 402"),
                        (302, "it answered the judge's unpaid read with HTTP 302, not a 402"),
                        (402, "its 402 states no exact offer on an EVM chain the judge can read")):
        sent, quote = _quote(ctx, paywall.url + "/analytics/gas",
                             lambda url, method, body, s=status, w=why: AheadRead(
                                 True, None, status=s, why=w))
        assert isinstance(quote, ToolError), quote
        assert f"the judge's read of {paywall.url}/analytics/gas found that {why}" in str(quote)
        assert sent == [], (status, sent)
        # What the seller answered, for the run's lessons (a 5xx: a fault on its side).
        assert quote.http_status == status


def test_where_the_judges_read_found_a_refusal_the_tool_reads_its_words_itself(
    chain: Any, ctx: ToolContext, judge_signer: VerdictSigner, paywall: PaywallServer
) -> None:
    """A 4xx refusal says what to change (the route, the method): the tool reads it itself
    and reports it, as without the judge's read."""
    sent, quote = _quote(ctx, paywall.url + "/analytics/no-such-route",
                         terms_ahead_of(_judge(chain, judge_signer), ctx.run_id))
    assert isinstance(quote, ToolError), quote
    assert "answered HTTP 404 to an unpaid request" in str(quote), quote
    assert sent[0] == "GET /analytics/no-such-route"  # then its probe of a POST route
