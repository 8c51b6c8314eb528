"""A dependency fails mid-run: the model provider (429, 500, timeout, malformed output)
or the judge service. Each stops the run with its named reason and the human fix, and
nothing is signed after the failure (ledger and chain agree).

The model is the real OpenAI-compatible provider over httpx.MockTransport; the judge is
the real judge service (judge.service.JudgeServer / JudgeClient) on loopback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fault_support import (
    AGENT_ADDR,
    GAS,
    GAS_PRICE,
    JUDGE_ADDR,
    SELLER_ADDR,
    TRANSFERS,
    Agent,
    Provider,
    build_agent,
    checklist,
    make_judge,
    pay,
)

from agent.loop.run import run_task
from agent.models.openai_compat import OpenAICompatModel
from agent.tools.registry_default import default_registry
from agent.tools.x402.pay_http import PayHttpTool
from chain.paywall.app import PaywallServer
from tests._services import Composition

JUDGE_TOKEN = "fault-suite-judge-token"

def _model(provider: Provider) -> OpenAICompatModel:
    return OpenAICompatModel(
        model="gpt-test", base_url="http://llm.test/v1", api_key="sk-test-key-123456",
        transport=provider.transport,
    )


def _assert_one_purchase_only(agent: Agent, run_id: str, before: int) -> None:
    """The purchase before the failure settled; nothing was signed after it."""
    [row] = agent.ledger()
    assert (row.status, row.amount, row.recipient) == ("settled", GAS_PRICE, SELLER_ADDR.lower())
    assert len(agent.store.events(run_id, "wallet.signed")) == 1
    logs = agent.transfers_from_agent()
    assert [(t.recipient, t.value) for t in logs] == [(SELLER_ADDR, GAS_PRICE)]
    assert agent.balance(AGENT_ADDR) == before - GAS_PRICE


FAILURES = {
    "429": (httpx.Response(429, headers={"retry-after": "20"},
                           json={"error": {"message": "Rate limit reached"}}),
            "llm-unreachable", "rate limited: wait or lower concurrency"),
    "500": (httpx.Response(500, json={"error": {"message": "internal error"}}),
            "llm-unreachable", "provider down: retry later"),
    "timeout": (httpx.ReadTimeout, "llm-unreachable", "provider down or too slow"),
    "connect": (httpx.ConnectError, "llm-unreachable", "check NIB_MODEL_BASE_URL"),
    "non-json-body": (httpx.Response(200, text="<html>502 Bad Gateway</html>"),
                      "llm-unreachable", "not speaking the expected API"),
}


@pytest.mark.parametrize("kind", list(FAILURES))
def test_model_provider_failure_stops_the_run_and_signs_nothing_after(
    kind: str, tmp_path: Any, chain: Any, paywall: PaywallServer, composition: Composition
) -> None:
    failure, reason, fix = FAILURES[kind]
    provider = Provider([checklist(GAS, TRANSFERS), pay(paywall.url + "/analytics/gas"), failure])
    agent = build_agent(tmp_path / "nib.db", chain.rpc_url, chain.usdc, _model(provider),
                        allowlist=(paywall.url,), paywall_url=paywall.url, composition=composition)
    before = agent.balance(AGENT_ADDR)
    result = asyncio.run(agent.run("Gas and transfer stats of the devnet?"))
    assert (result.stop_reason, result.finished, result.partial) == (reason, False, True)
    assert fix in result.message, result.message
    assert "sk-test-key-123456" not in result.message
    assert result.answer and "gas_stats" in result.answer  # the evidence, extracted
    assert len(provider.requests) == 3  # no model call after the failure (no synthesis)
    _assert_one_purchase_only(agent, result.run_id, before)


def test_malformed_model_output_twice_stops_with_proposal_lost(
    tmp_path: Any, chain: Any, paywall: PaywallServer, composition: Composition
) -> None:
    garbage = 'Sure! {"action": "call", "tool": pay_http, args: {url}'
    provider = Provider(
        [checklist(GAS, TRANSFERS), pay(paywall.url + "/analytics/gas"), *[garbage] * 4]
    )
    agent = build_agent(tmp_path / "nib.db", chain.rpc_url, chain.usdc, _model(provider),
                        allowlist=(paywall.url,), paywall_url=paywall.url, composition=composition)
    before = agent.balance(AGENT_ADDR)
    result = asyncio.run(agent.run("Gas and transfer stats of the devnet?"))
    assert (result.stop_reason, result.partial) == ("proposal-lost", True), result.message
    assert "2 invalid proposals in a row (max_failed_proposals=2)" in result.message
    invalid = agent.store.events(result.run_id, "proposal.invalid")
    assert len(invalid) == 4 and all("not valid JSON" in e["data"]["error"] for e in invalid)
    assert result.answer
    _assert_one_purchase_only(agent, result.run_id, before)


@contextmanager
def judge_that_dies(
    composition: Composition, db: Path, chain: Any, build: Callable[..., Agent]
) -> Iterator[tuple[Agent, Callable[[], None]]]:
    """An agent whose judge is a service the test can stop, and how to stop it:
    in-process, a judge service thread beside the in-process wallet (stopped); with
    services, the forked judge service beside the wallet service (SIGKILL), whose
    pre-signing re-check then finds no judge either."""
    if composition.services:
        yield build(db, composition=composition), composition.kill_judge
        return
    from judge.service import JudgeClient, JudgeServer

    server = JudgeServer(make_judge(db, chain.usdc), token=JUDGE_TOKEN).start()
    try:
        client = JudgeClient(server.url, timeout_s=1.0, trusted_judge=JUDGE_ADDR,
                             token=JUDGE_TOKEN)
        yield build(db, judge=client), server.stop
    finally:
        server.stop()


def test_judge_service_down_stops_with_judge_unreachable(
    tmp_path: Any, chain: Any, paywall: PaywallServer, composition: Composition
) -> None:
    provider = Provider([checklist(GAS), pay(paywall.url + "/analytics/gas")])

    def build(db: Path, **kw: Any) -> Agent:
        return build_agent(db, chain.rpc_url, chain.usdc, _model(provider),
                           allowlist=(paywall.url,), paywall_url=paywall.url, **kw)

    task, run_id = "Gas stats of the devnet?", "judge-down"
    with judge_that_dies(composition, tmp_path / "nib.db", chain, build) as (agent, stop):
        if agent.services is not None:  # registered by the user while the judge ran
            agent.services.register(run_id, task, agent.deps)
        stop()
        before = agent.balance(AGENT_ADDR)
        result = asyncio.run(run_task(task, agent.deps, run_id=run_id))
    assert (result.stop_reason, result.partial) == ("judge-unreachable", True), result.message
    assert "unreachable" in result.message and "nib judge serve" in result.message
    assert agent.ledger() == [] and agent.transfers_from_agent() == []
    assert agent.balance(AGENT_ADDR) == before and result.answer


def test_judge_service_dying_mid_run_signs_nothing_after(
    tmp_path: Any, chain: Any, paywall: PaywallServer, composition: Composition
) -> None:
    stops: list[Callable[[], None]] = []

    def kill_then_propose() -> dict[str, Any]:
        stops[0]()  # the judge service dies after the first purchase
        return pay(paywall.url + "/analytics/transfers")

    provider = Provider(
        [checklist(GAS, TRANSFERS), pay(paywall.url + "/analytics/gas"), kill_then_propose]
    )

    def build(db: Path, **kw: Any) -> Agent:
        return build_agent(db, chain.rpc_url, chain.usdc, _model(provider),
                           allowlist=(paywall.url,), paywall_url=paywall.url, **kw)

    with judge_that_dies(composition, tmp_path / "nib.db", chain, build) as (agent, stop):
        stops.append(stop)
        before = agent.balance(AGENT_ADDR)
        result = asyncio.run(agent.run("Gas and transfer stats?"))
    assert (result.stop_reason, result.partial) == ("judge-unreachable", True), result.message
    assert "unreachable" in result.message and "nib judge serve" in result.message
    _assert_one_purchase_only(agent, result.run_id, before)


class KillJudgeBeforeSigning(PayHttpTool):
    """pay_http whose judge service dies between the verdict and the wallet's re-check."""

    def __init__(self, paywall_url: str, stops: list[Callable[[], None]]) -> None:
        super().__init__(paywall_url)
        self.stops = stops

    async def execute(self, quote: Any, verdict: Any, ctx: Any) -> Any:
        await asyncio.to_thread(self.stops[0])
        return await super().execute(quote, verdict, ctx)


def test_judge_dying_between_verdict_and_recheck_signs_nothing(
    tmp_path: Any, chain: Any, paywall: PaywallServer, composition: Composition
) -> None:
    from agent.tools.transfer import UsdcTransferTool

    stops: list[Callable[[], None]] = []
    registry = default_registry(paid=False)
    tools = [registry.get(n) for n in registry.names()]
    tools += [KillJudgeBeforeSigning(paywall.url, stops), UsdcTransferTool()]
    provider = Provider([checklist(GAS), pay(paywall.url + "/analytics/gas"),
                         pay(paywall.url + "/analytics/gas")])

    def build(db: Path, **kw: Any) -> Agent:
        return build_agent(db, chain.rpc_url, chain.usdc, _model(provider), tools=tools,
                           allowlist=(paywall.url,), paywall_url=paywall.url, **kw)

    with judge_that_dies(composition, tmp_path / "nib.db", chain, build) as (agent, stop):
        stops.append(stop)
        before = agent.balance(AGENT_ADDR)
        result = asyncio.run(agent.run("Gas stats?"))
    assert result.stop_reason == "judge-unreachable", f"{result.stop_reason}: {result.message}"
    assert agent.ledger() == [] and agent.transfers_from_agent() == []
    assert agent.balance(AGENT_ADDR) == before
    refused = agent.store.events(result.run_id, "wallet.refused")
    assert refused and refused[0]["data"]["code"] == "recheck-failed"
