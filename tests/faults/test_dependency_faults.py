"""A dependency fails mid-run: the model provider (429, 500, timeout, malformed output)
or the judge service. Each stops the run with its named reason and the human fix, and
nothing is signed after the failure (ledger and chain agree).

The model is the real OpenAI-compatible provider over httpx.MockTransport; the judge is
the real judge service (judge.service.JudgeServer / JudgeClient) on loopback.
"""

from __future__ import annotations

import asyncio
import socket
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
    kind: str, tmp_path: Any, chain: Any, paywall: PaywallServer
) -> None:
    failure, reason, fix = FAILURES[kind]
    provider = Provider([checklist(GAS, TRANSFERS), pay(paywall.url + "/analytics/gas"), failure])
    agent = build_agent(tmp_path / "nib.db", chain.rpc_url, chain.usdc, _model(provider),
                        allowlist=(paywall.url,), paywall_url=paywall.url)
    before = agent.balance(AGENT_ADDR)
    result = asyncio.run(run_task("Gas and transfer stats of the devnet?", agent.deps))
    assert (result.stop_reason, result.finished, result.partial) == (reason, False, True)
    assert fix in result.message, result.message
    assert "sk-test-key-123456" not in result.message
    assert result.answer and "gas_stats" in result.answer  # the evidence, extracted
    assert len(provider.requests) == 3  # no model call after the failure (no synthesis)
    _assert_one_purchase_only(agent, result.run_id, before)


def test_malformed_model_output_twice_stops_with_proposal_lost(
    tmp_path: Any, chain: Any, paywall: PaywallServer
) -> None:
    garbage = 'Sure! {"action": "call", "tool": pay_http, args: {url}'
    provider = Provider(
        [checklist(GAS, TRANSFERS), pay(paywall.url + "/analytics/gas"), *[garbage] * 4]
    )
    agent = build_agent(tmp_path / "nib.db", chain.rpc_url, chain.usdc, _model(provider),
                        allowlist=(paywall.url,), paywall_url=paywall.url)
    before = agent.balance(AGENT_ADDR)
    result = asyncio.run(run_task("Gas and transfer stats of the devnet?", agent.deps))
    assert (result.stop_reason, result.partial) == ("proposal-lost", True), result.message
    assert "2 invalid proposals in a row (max_failed_proposals=2)" in result.message
    invalid = agent.store.events(result.run_id, "proposal.invalid")
    assert len(invalid) == 4 and all("not valid JSON" in e["data"]["error"] for e in invalid)
    assert result.answer
    _assert_one_purchase_only(agent, result.run_id, before)


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there once the socket closes


def test_judge_service_down_stops_with_judge_unreachable(
    tmp_path: Any, chain: Any, paywall: PaywallServer
) -> None:
    from judge.service import JudgeClient

    provider = Provider([checklist(GAS), pay(paywall.url + "/analytics/gas")])
    judge = JudgeClient(_dead_url(), timeout_s=1.0, trusted_judge=JUDGE_ADDR)
    agent = build_agent(tmp_path / "nib.db", chain.rpc_url, chain.usdc, _model(provider),
                        judge=judge, allowlist=(paywall.url,), paywall_url=paywall.url)
    before = agent.balance(AGENT_ADDR)
    result = asyncio.run(run_task("Gas stats of the devnet?", agent.deps))
    assert (result.stop_reason, result.partial) == ("judge-unreachable", True), result.message
    assert "unreachable" in result.message and "nib judge serve" in result.message
    assert agent.ledger() == [] and agent.transfers_from_agent() == []
    assert agent.balance(AGENT_ADDR) == before and result.answer


def test_judge_service_dying_mid_run_signs_nothing_after(
    tmp_path: Any, chain: Any, paywall: PaywallServer
) -> None:
    from judge.service import JudgeClient, JudgeServer

    db = tmp_path / "nib.db"
    server = JudgeServer(make_judge(db, chain.usdc), token=JUDGE_TOKEN).start()
    try:
        client = JudgeClient(server.url, timeout_s=1.0, trusted_judge=JUDGE_ADDR,
                             token=JUDGE_TOKEN)

        def kill_then_propose() -> dict[str, Any]:
            server.stop()  # the judge service dies after the first purchase
            return pay(paywall.url + "/analytics/transfers")

        provider = Provider(
            [checklist(GAS, TRANSFERS), pay(paywall.url + "/analytics/gas"), kill_then_propose]
        )
        agent = build_agent(db, chain.rpc_url, chain.usdc, _model(provider), judge=client,
                            allowlist=(paywall.url,), paywall_url=paywall.url)
        before = agent.balance(AGENT_ADDR)
        result = asyncio.run(run_task("Gas and transfer stats?", agent.deps))
    finally:
        server.stop()
    assert (result.stop_reason, result.partial) == ("judge-unreachable", True), result.message
    assert "unreachable" in result.message and "nib judge serve" in result.message
    _assert_one_purchase_only(agent, result.run_id, before)


class KillJudgeBeforeSigning(PayHttpTool):
    """pay_http whose judge service dies between the verdict and the wallet's re-check."""

    def __init__(self, paywall_url: str, server: Any) -> None:
        super().__init__(paywall_url)
        self.server = server

    async def execute(self, quote: Any, verdict: Any, ctx: Any) -> Any:
        await asyncio.to_thread(self.server.stop)
        return await super().execute(quote, verdict, ctx)


def test_judge_dying_between_verdict_and_recheck_signs_nothing(
    tmp_path: Any, chain: Any, paywall: PaywallServer
) -> None:
    from judge.service import JudgeClient, JudgeServer

    db = tmp_path / "nib.db"
    server = JudgeServer(make_judge(db, chain.usdc), token=JUDGE_TOKEN).start()
    try:
        client = JudgeClient(server.url, timeout_s=1.0, trusted_judge=JUDGE_ADDR,
                             token=JUDGE_TOKEN)
        registry = default_registry(paid=False)
        from agent.tools.transfer import UsdcTransferTool

        tools = [registry.get(n) for n in registry.names()]
        tools += [KillJudgeBeforeSigning(paywall.url, server), UsdcTransferTool()]
        provider = Provider([checklist(GAS), pay(paywall.url + "/analytics/gas"),
                             pay(paywall.url + "/analytics/gas")])
        agent = build_agent(db, chain.rpc_url, chain.usdc, _model(provider), judge=client,
                            tools=tools, allowlist=(paywall.url,), paywall_url=paywall.url)
        before = agent.balance(AGENT_ADDR)
        result = asyncio.run(run_task("Gas stats?", agent.deps))
    finally:
        server.stop()
    assert result.stop_reason == "judge-unreachable", f"{result.stop_reason}: {result.message}"
    assert agent.ledger() == [] and agent.transfers_from_agent() == []
    assert agent.balance(AGENT_ADDR) == before
    refused = agent.store.events(result.run_id, "wallet.refused")
    assert refused and refused[0]["data"]["code"] == "recheck-failed"
