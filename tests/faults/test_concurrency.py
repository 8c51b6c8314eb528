"""Ten runs at once on one wallet: no nonce errors, every run inside its own cap, and the
totals exact against the chain (Transfer logs == settled ledger rows == balance deltas)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fault_support import (
    AGENT_ADDR,
    CAP_PER_TASK,
    GAS,
    GAS_PRICE,
    RECEIPT,
    SELLER_ADDR,
    TIP,
    TRANSFERS,
    Agent,
    build_agent,
    buyer_model,
)

from agent.loop.limits import Limits
from agent.loop.result import AgentResult
from chain.paywall.app import DEFAULT_PRICES, PaywallServer
from tests._services import Composition
from wallet.reconcile import reconcile

RUNS = 10
CAP = CAP_PER_TASK


def run_concurrently(
    tmp_path: Any,
    chain: Any,
    paywall: PaywallServer,
    items: tuple[dict[str, Any], ...],
    composition: Composition | None = None,
) -> tuple[Agent, list[AgentResult], tuple[int, int]]:
    model = buyer_model(paywall.url, items)
    agent = build_agent(
        tmp_path / "nib.db", chain.rpc_url, chain.usdc, model,
        allowlist=(paywall.url,), paywall_url=paywall.url,
        limits=Limits(spend_cap_atomic=CAP, max_steps=8, max_consecutive_failures=8),
        composition=composition,
    )
    before = agent.balance(AGENT_ADDR), agent.balance(SELLER_ADDR)

    async def all_runs() -> list[AgentResult]:
        # Each task orders the tip its direct transfer pays (the judge pays by transfer only
        # what a task's text orders); a task that only buys names the seller.
        said = "send 0.01 USDC to" if RECEIPT in items else "tip"
        return await asyncio.gather(
            *(agent.run(f"Research task {i}; {said} {SELLER_ADDR}.") for i in range(RUNS))
        )

    return agent, asyncio.run(all_runs()), before


def failures(agent: Agent, run_id: str) -> list[str]:
    return [e["data"]["summary"] for e in agent.store.events(run_id, "tool.call")
            if not e["data"]["ok"]]


def assert_totals_exact(
    agent: Agent, chain: Any, before: tuple[int, int], *, strict_reconcile: bool = True
) -> int:
    logs = agent.transfers_from_agent()
    rows = agent.ledger()
    settled = [r for r in rows if r.status == "settled"]
    assert len(logs) == len(settled)
    assert {r.status for r in rows} <= {"settled", "released", "failed"}
    mined = {t.tx_hash.lower() for t in logs}
    for r in rows:
        if r.status == "failed":  # a signed transfer the node refused
            assert "broadcast failed" in r.note
            if r.tx_hash in mined:
                # Two runs quoted and signed byte-identical transactions (same nonce, fees,
                # recipient, amount): one hash, mined once, settled by exactly one row.
                twins = [x for x in settled if x.tx_hash == r.tx_hash]
                assert len(twins) == 1, (r, twins)
    onchain = sum(t.value for t in logs)
    assert onchain == sum(r.amount for r in settled)
    assert agent.balance(AGENT_ADDR) == before[0] - onchain
    assert agent.balance(SELLER_ADDR) == before[1] + onchain
    assert all(t.recipient == SELLER_ADDR for t in logs)
    report = reconcile(agent.db, agent.client, chain.usdc, AGENT_ADDR, agent.start_block + 1)
    assert report.unmatched_onchain == ()  # no money left the wallet unaudited
    if strict_reconcile:
        assert report.clean and len(report.matched) == len(logs) and report.resolved == ()
    if strict_reconcile:
        after = [r for r in agent.ledger() if r.status == "settled"]
        assert sum(r.amount for r in after) == onchain, report.to_dict()
    return onchain


def assert_within_caps(agent: Agent, results: list[AgentResult]) -> None:
    for r in results:
        usage = agent.wallet.meter.usage(r.run_id)
        assert usage.committed <= CAP and usage.reserved == 0, (r.run_id, usage)
        assert r.spend.usdc_atomic == usage.settled


@pytest.mark.slow
def test_ten_concurrent_runs_paying_the_paywall(
    tmp_path: Any, chain: Any, paywall: PaywallServer, composition: Composition
) -> None:
    agent, results, before = run_concurrently(
        tmp_path, chain, paywall, (GAS, TRANSFERS), composition
    )
    each = GAS_PRICE + DEFAULT_PRICES["transfers"]
    for r in results:
        assert not [f for f in failures(agent, r.run_id) if "nonce" in f.lower()]
        assert r.stop_reason == "evidence-covered", (r.stop_reason, r.message)
        assert r.spend.usdc_atomic == each
    assert_within_caps(agent, results)
    assert assert_totals_exact(agent, chain, before) == RUNS * each
    assert len(agent.ledger()) == 2 * RUNS


@pytest.mark.slow
def test_ten_concurrent_runs_with_direct_transfers_stay_exact(
    tmp_path: Any, chain: Any, paywall: PaywallServer, composition: Composition
) -> None:
    """Money stays exact even when transfers race for the wallet's nonce: a stale quote
    is refused before signing, a signed transfer whose nonce was taken is refused by the
    node and failed in the ledger, and whatever did settle is accounted to the unit."""
    agent, results, before = run_concurrently(tmp_path, chain, paywall, (GAS, RECEIPT), composition)
    for r in results:
        for f in failures(agent, r.run_id):
            races = ("the quote is stale", "nonce too low", "already imported",
                     "replacement transaction underpriced")
            assert any(x in f for x in races), f
    assert_within_caps(agent, results)
    tips = sum(1 for r in agent.ledger() if r.status == "settled" and r.amount == TIP)
    done = [r for r in results if r.stop_reason == "evidence-covered"]
    assert tips == len(done)
    # strict_reconcile=False: see test_reconcile_twins.py (identical signed txs).
    onchain = assert_totals_exact(agent, chain, before, strict_reconcile=False)
    assert onchain == RUNS * GAS_PRICE + tips * TIP


@pytest.mark.slow
def test_ten_concurrent_transfers_have_no_nonce_errors(
    tmp_path: Any, chain: Any, paywall: PaywallServer, composition: Composition
) -> None:
    """Every quote takes its own nonce from the wallet's NonceManager: ten runs racing on
    one wallet all pay, with no stale quote, no collision and no gap."""
    agent, results, before = run_concurrently(tmp_path, chain, paywall, (GAS, RECEIPT), composition)
    assert [f for r in results for f in failures(agent, r.run_id)] == []
    assert all(r.stop_reason == "evidence-covered" for r in results), [
        (r.stop_reason, r.message) for r in results
    ]
    assert_within_caps(agent, results)
    onchain = assert_totals_exact(agent, chain, before)
    assert onchain == RUNS * (GAS_PRICE + TIP)
    tips = [t for t in agent.transfers_from_agent() if t.value == TIP]
    assert len(tips) == RUNS and len({t.tx_hash for t in tips}) == RUNS
    assert agent.nonces()["in_flight"] == [] and agent.nonces()["free"] == []
