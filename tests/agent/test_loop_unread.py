"""The unread-task gate (agent/loop/gates.py): whatever the planner, no money moves while a
part of the task is not read, nor on a task whose words forbid, take back or branch a
payment. On the real Anvil with the real wallet, judge and usdc_transfer tool: the model
proposes the payment anyway; nothing is judged or signed, and balances are unchanged."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from _loop_support import DIME, call, paid_deps, usdc_balance

from agent.loop.run import run_task
from agent.models.scripted import ScriptedModel
from chain.devkeys import AGENT, SELLER, dev_account

AGENT_ADDR = dev_account(AGENT).address
SELLER_ADDR = dev_account(SELLER).address
PAY = call("usdc_transfer", to=SELLER_ADDR, amount=DIME)
RECEIPT = {"text": "transfer receipt", "kind": "transfer_receipt"}
DONE = {"action": "done", "answer": "nothing paid"}


@pytest.mark.parametrize(
    ("task", "items", "said"),
    [
        # A planner that named a part it could not read: the payment waits for nothing.
        (f"Send 0.10 USDC to {SELLER_ADDR}, then frobnicate the ledger.",
         [RECEIPT, {"text": "frobnicate the ledger", "kind": None, "unanswerable": "not read"}],
         "part of the task is not read: 'frobnicate the ledger'"),
        # A planner that read the order and missed the negation: the task's words withhold it.
        (f"Do not send 0.10 USDC to {SELLER_ADDR}.", [RECEIPT], "the task says 'do not'"),
        (f"Send 0.10 USDC to {SELLER_ADDR}. Never mind.", [RECEIPT], "the task says 'never mind'"),
        (f"If the base fee is under 1 gwei, keep the money; otherwise send 0.10 USDC to {SELLER_ADDR}.",
         [RECEIPT], "the task says 'otherwise'"),
    ],
)  # fmt: skip
def test_a_payment_proposed_on_a_task_not_fully_read_or_withheld_is_not_made(
    tmp_path: Path, chain: Any, task: str, items: list[dict[str, Any]], said: str
) -> None:
    before = usdc_balance(chain, SELLER_ADDR), usdc_balance(chain, AGENT_ADDR)
    model = ScriptedModel({"checklist": [{"items": items}], "propose": [PAY, PAY, DONE]})
    deps = paid_deps(tmp_path, chain, model)
    r = asyncio.run(run_task(task, deps))
    assert not r.finished and r.attempted == [], r.stop_reason
    skips = [e["data"] for e in deps.store.events(r.run_id, "gate.skip")]
    assert skips and all(s["why"] == "task-not-read" for s in skips), skips
    assert said in skips[0]["feedback"], skips[0]["feedback"]
    assert deps.store.events(r.run_id, "verdict") == []  # never judged, never signed
    assert deps.wallet.meter.usage(r.run_id).settled == 0
    assert (usdc_balance(chain, SELLER_ADDR), usdc_balance(chain, AGENT_ADDR)) == before


def test_a_spend_bound_in_the_tasks_words_holds_any_planner_to_it(tmp_path: Path, chain: Any) -> None:
    """Outside test 15, Q29: "don't spend more than ..." is a bound, not words that withhold
    every payment; whatever the planner proposes, the run spends no more than it (the spend
    cap is lowered to it at run start, never raised): 0.10 USDC over a 0.05 bound is stopped
    before it is judged or signed."""
    before = usdc_balance(chain, SELLER_ADDR), usdc_balance(chain, AGENT_ADDR)
    model = ScriptedModel({"checklist": [{"items": [RECEIPT]}], "propose": [PAY, PAY, DONE]})
    deps = paid_deps(tmp_path, chain, model)
    task = f"Pay {SELLER_ADDR} for its research; don't spend more than 0.05 USDC."
    r = asyncio.run(run_task(task, deps))
    assert r.stop_reason == "cost-budget", r.stop_reason
    start = deps.store.events(r.run_id, "run.start")[0]["data"]
    assert start["limits"]["spend_cap_atomic"] == 50_000
    assert deps.store.events(r.run_id, "verdict") == []  # never judged, never signed
    assert (usdc_balance(chain, SELLER_ADDR), usdc_balance(chain, AGENT_ADDR)) == before


def test_a_spend_bound_never_raises_the_runs_cap() -> None:
    from agent.loop.limits import Limits, within_task_bound

    cap = Limits(spend_cap_atomic=100_000)
    assert within_task_bound(cap, "Buy the premium report; don't spend more than 5 USDC.") == cap
    assert within_task_bound(cap, "Buy the premium report; spend at most 0.02 USDC.").spend_cap_atomic == 20_000
    assert within_task_bound(cap, "Buy the premium report.") == cap
