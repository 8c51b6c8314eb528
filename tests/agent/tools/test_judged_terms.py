"""A paid tool reads the seller's terms again before signing only when that can change
the outcome: not when nib's judge read the seller's own 402 itself for a verdict and a
quote at most JUDGED_TERMS_FRESH_S old (agent.tools.x402.seller_terms.judged_terms).

Each case runs the real paywall, a real in-process judge reading terms as ``nib run``
builds it (judge.payto.advertised_terms) and the verdict-gated wallet on Anvil; balances
are read back from the chain."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from _tools_support import Events, usdc_balance

from agent.errors import DeliveryFailed
from agent.tools.base import ToolContext, judge_reads_terms, terms_ahead_of
from agent.tools.x402.pay_http import PayHttpTool
from chain.devkeys import AGENT, SELLER, dev_account
from chain.paywall.app import DEFAULT_PRICES, PaywallServer
from judge.fingerprint import call_fingerprint
from judge.jev import Judge, PaidCallRequest
from judge.payto import advertised_terms
from judge.verdict import VerdictSigner
from wallet.errors import VerdictVoid
from wallet.signer import Wallet

AGENT_ADDR = dev_account(AGENT).address
SELLER_ADDR = dev_account(SELLER).address
GAS_PRICE = DEFAULT_PRICES["gas"]


def _judge(chain: Any, signer: VerdictSigner, behind_s: float = 0.0) -> Judge:
    return Judge(signer, allowed_assets={chain.chain_id: [chain.usdc]},
                 terms_of=advertised_terms, clock=lambda: time.time() - behind_s)


def _buy(ctx: ToolContext, judge: Judge, url: str, paywall: PaywallServer,
         change: int | None = None, asked: list[float] | None = None) -> tuple[list[str], Any]:
    """Quote ``url``, ask ``judge`` as the loop does, optionally reprice the seller to
    ``change`` after the verdict, execute; the requests the tool itself sent for ``url``,
    and the observation (or the exception it raised). With ``asked``, the tool tells the
    judge what it quotes (as the loop's context does) and the moment the decision is
    asked for is noted there."""
    sent: list[str] = []

    async def note(request: httpx.Request) -> None:
        if request.url.path == "/catalog":
            return  # the seller's catalog, read once per tool
        sent.append(f"{request.method} {request.url.path} paid={'PAYMENT-SIGNATURE' in request.headers or 'X-PAYMENT' in request.headers}")

    async def flow() -> Any:
        async with httpx.AsyncClient(event_hooks={"request": [note]}) as http:
            ahead = terms_ahead_of(judge, ctx.run_id) if asked is not None else None
            tool_ctx = ToolContext(**{**ctx.__dict__, "http": http,
                                      "judge_reads_terms": judge_reads_terms(judge),
                                      "read_terms_ahead": ahead})
            tool = PayHttpTool(paywall.url)
            quote = await tool.quote(tool.parse_args({"url": url}), tool_ctx)
            facts = tuple(tool.facts_for(tool.parse_args({"url": url})))
            cap = tool_ctx.spend_cap_atomic
            if asked is not None:
                asked.append(time.monotonic())
            verdict = await asyncio.to_thread(judge.decide, PaidCallRequest(
                tool=tool.name, args=quote.args, call_fingerprint=call_fingerprint(tool.name, quote.args),
                payload_fingerprint=quote.payload_fingerprint, price=quote.amount, asset=quote.asset,
                recipient=quote.recipient, chain_id=quote.chain_id, remaining_budget=cap,
                balance=10**12, per_call_cap_atomic=cap, spend_cap_atomic=cap, missing=facts,
                tool_facts=facts, task_id=tool_ctx.run_id, payload=quote.payload))
            assert verdict.decision == "approve", verdict.reason
            if change is not None:
                paywall.state.set_price("gas", change)
            try:
                return await tool.execute(quote, verdict, tool_ctx)
            except Exception as exc:  # noqa: BLE001 - the case reads what was raised
                return exc

    return sent, asyncio.run(flow())


@pytest.fixture
def ctx(make_ctx: Any, wallet: Wallet, paywall: PaywallServer) -> ToolContext:
    ctx: ToolContext = make_ctx(wallet=wallet, allowlist=(paywall.url,))
    return ctx


def test_a_fresh_verdict_of_a_judge_that_read_the_402_pays_without_reading_it_again(
    chain: Any, ctx: ToolContext, judge_signer: VerdictSigner, paywall: PaywallServer
) -> None:
    judge = _judge(chain, judge_signer)
    assert judge.reads_seller_terms and judge_reads_terms(judge)
    seller_before = usdc_balance(chain, SELLER_ADDR)
    sent, obs = _buy(ctx, judge, paywall.url + "/analytics/gas", paywall)
    assert not isinstance(obs, Exception), obs
    assert sent == ["GET /analytics/gas paid=False", "GET /analytics/gas paid=True"]
    assert usdc_balance(chain, SELLER_ADDR) == seller_before + GAS_PRICE


def test_the_quote_is_built_from_the_judges_own_read_which_serves_that_decision(
    chain: Any, ctx: ToolContext, judge_signer: VerdictSigner, paywall: PaywallServer
) -> None:
    """The tool tells the judge what it quotes; the judge's one read of the 402 is what
    the quote is built from and what the decision rules on: the seller answers one
    unpaid request a purchase, and the tool's only request is the paid one."""
    reads: list[float] = []

    def counted(url: str, method: str, body: object) -> Any:
        reads.append(time.monotonic())
        return advertised_terms(url, method, body)

    judge = Judge(judge_signer, allowed_assets={chain.chain_id: [chain.usdc]}, terms_of=counted)
    seller_before = usdc_balance(chain, SELLER_ADDR)
    asked: list[float] = []
    sent, obs = _buy(ctx, judge, paywall.url + "/analytics/gas", paywall, asked=asked)
    assert not isinstance(obs, Exception), obs
    # One read of the 402 by the judge, started before the decision was asked for: the
    # quote was built from it and the decision ruled on it; the tool read nothing unpaid.
    assert len(reads) == 1 and reads[0] < asked[0]
    assert sent == ["GET /analytics/gas paid=True"]
    assert usdc_balance(chain, SELLER_ADDR) == seller_before + GAS_PRICE
    # The next purchase's decision, asked without a read ahead, reads the 402 itself.
    sent, obs = _buy(ctx, judge, paywall.url + "/analytics/gas", paywall)
    assert not isinstance(obs, Exception), obs
    assert len(reads) == 2


def test_a_verdict_older_than_the_window_reads_the_terms_again(
    chain: Any, ctx: ToolContext, judge_signer: VerdictSigner, paywall: PaywallServer
) -> None:
    judge = _judge(chain, judge_signer, behind_s=10)  # its verdict says it decided 10 s ago
    seller_before = usdc_balance(chain, SELLER_ADDR)
    sent, obs = _buy(ctx, judge, paywall.url + "/analytics/gas", paywall)
    assert not isinstance(obs, Exception), obs
    assert sent == ["GET /analytics/gas paid=False"] * 2 + ["GET /analytics/gas paid=True"]
    assert usdc_balance(chain, SELLER_ADDR) == seller_before + GAS_PRICE


def test_terms_changed_after_an_old_verdict_void_it_and_nothing_is_signed(
    chain: Any, ctx: ToolContext, judge_signer: VerdictSigner, paywall: PaywallServer,
    wallet: Wallet, events: Events,
) -> None:
    judge = _judge(chain, judge_signer, behind_s=10)
    before = [usdc_balance(chain, a) for a in (AGENT_ADDR, SELLER_ADDR)]
    sent, obs = _buy(ctx, judge, paywall.url + "/analytics/gas", paywall, change=GAS_PRICE * 10)
    assert isinstance(obs, VerdictVoid), obs
    assert [usdc_balance(chain, a) for a in (AGENT_ADDR, SELLER_ADDR)] == before
    assert events.named("wallet.signed") == [] and wallet.meter.ledger.rows() == []
    assert all("paid=True" not in s for s in sent)


def test_terms_changed_in_the_moment_after_a_fresh_verdict_move_no_money(
    chain: Any, ctx: ToolContext, judge_signer: VerdictSigner, paywall: PaywallServer,
) -> None:
    # The case the skipped re-read would have caught: the seller reprices between the
    # judge's read and the payment. The approved payload goes out (what the judge
    # approved, to the payTo it read), the seller refuses it at its new price, and no USDC
    # moves: the wallet ends the authorization from the chain.
    judge = _judge(chain, judge_signer)
    before = [usdc_balance(chain, a) for a in (AGENT_ADDR, SELLER_ADDR)]
    sent, obs = _buy(ctx, judge, paywall.url + "/analytics/gas", paywall, change=GAS_PRICE * 10)
    assert isinstance(obs, DeliveryFailed), obs
    assert sent[-1] == "GET /analytics/gas paid=True"
    assert [usdc_balance(chain, a) for a in (AGENT_ADDR, SELLER_ADDR)] == before
