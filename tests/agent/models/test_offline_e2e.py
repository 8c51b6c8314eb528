"""End to end: the offline planner drives the real loop on Anvil and buys from the paywall.

Real parts: Anvil (session fixture), the x402 paywall (chain/paywall.py), the free chain
reads and pay_http, the in-process JEV judge and the verdict-gated wallet. The planner is
the only thinking part, and it needs no model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.loop.run import run_task
from chain.devkeys import AGENT, SELLER, dev_account
from chain.paywall.app import DEFAULT_PRICES, PaywallServer
from chain.usdc import usdc_contract
from tests._support import offline_deps

GAS_STATS_PRICE = DEFAULT_PRICES["gas"]


@pytest.fixture(scope="module")
def paywall(anvil: Any) -> Iterator[PaywallServer]:
    with PaywallServer(anvil.rpc_url, anvil.usdc) as server:
        yield server


def usdc_of(chain: Any, who: str) -> int:
    return int(usdc_contract(chain.w3, chain.usdc).functions.balanceOf(who).call())


def test_offline_planner_answers_two_free_facts_and_one_paid_fact_paying_once(
    chain: Any, paywall: PaywallServer, tmp_path: Path
) -> None:
    agent, seller = dev_account(AGENT).address, dev_account(SELLER).address
    before_agent, before_seller = usdc_of(chain, agent), usdc_of(chain, seller)
    deps = offline_deps(chain, paywall, tmp_path)

    result = asyncio.run(
        run_task("What are the base fee, the gas price and the gas statistics?", deps)
    )

    assert result.finished, (result.stop_reason, result.message)
    assert result.stop_reason == "evidence-covered"
    assert result.profile == "local-guarded"
    paid = [e for e in result.evidence if e.tool == "pay_http"]
    assert len(paid) == 1 and paid[0].cost_usdc == GAS_STATS_PRICE
    assert [e.tool for e in result.evidence] == ["base_fee", "gas_price", "pay_http"]
    assert result.spend.usdc_atomic == GAS_STATS_PRICE
    assert usdc_of(chain, agent) == before_agent - GAS_STATS_PRICE
    assert usdc_of(chain, seller) == before_seller + GAS_STATS_PRICE
    assert result.tokens.input == 0 and result.tokens.output == 0
    lines = result.answer.splitlines()
    assert lines[0].startswith("base fee: ") and lines[0].endswith("(observed, evidence e1)")
    assert lines[1].startswith("gas price: ") and lines[1].endswith("(observed, evidence e2)")
    assert lines[2].startswith("gas statistics: ") and lines[2].endswith("(observed, evidence e3)")
    assert result.provenance == "observed"
    assert [(line.grade, line.evidence) for line in result.lines] == [
        ("observed", ["e1"]),
        ("observed", ["e2"]),
        ("observed", ["e3"]),
    ]
    calls = deps.store.events(result.run_id, "tool.call")
    assert [c["data"]["tool"] for c in calls].count("pay_http") == 1
    verdicts = [v["data"] for v in deps.store.events(result.run_id, "verdict")]
    assert [v["decision"] for v in verdicts if v["kind"] == "paid"] == ["approve"]


def test_offline_planner_cannot_plan_a_poem_and_says_how_to_configure_a_model(
    chain: Any, paywall: PaywallServer, tmp_path: Path
) -> None:
    deps = offline_deps(chain, paywall, tmp_path)
    result = asyncio.run(run_task("Write a poem about the sea", deps))
    assert result.stop_reason == "cannot-plan" and result.exit_code == 1
    assert result.spend.usdc_atomic == 0
    assert result.answer.startswith("Write a poem about the sea: not answered")
    assert result.provenance == "none"
    assert "NIB_MODEL_PROVIDER=openai" in result.answer


def test_a_paid_fact_over_the_task_budget_moves_no_money(
    chain: Any, paywall: PaywallServer, tmp_path: Path
) -> None:
    agent = dev_account(AGENT).address
    before = usdc_of(chain, agent)
    deps = offline_deps(chain, paywall, tmp_path)
    result = asyncio.run(run_task("What is the base fee, and the premium report?", deps))
    # The premium report costs 2.5 USDC, over the $1 task cap: the loop stops before signing.
    assert result.stop_reason == "cost-budget" and result.partial
    assert result.spend.usdc_atomic == 0 and usdc_of(chain, agent) == before
    assert [e.tool for e in result.evidence] == ["base_fee"]
    assert result.answer.splitlines()[0].startswith("base fee: ")


def test_the_demo_task_runs_offline_and_names_the_issuer(
    chain: Any, paywall: PaywallServer, tmp_path: Path
) -> None:
    from agent.cli.commands.runs import DEMO_TASK

    deps = offline_deps(chain, paywall, tmp_path)
    result = asyncio.run(run_task(DEMO_TASK, deps))
    assert result.stop_reason == "evidence-covered", result.message
    assert [e.tool for e in result.evidence] == ["base_fee", "block_info", "pay_http"]
    assert result.spend.usdc_atomic == DEFAULT_PRICES["token"]
    assert "Circle" in result.answer.splitlines()[2]
