"""A spend bound the task's own words set ("don't spend more than 0.05 USDC") is held by
the judge too: the task is registered with its caps lowered to the bound, so an agent
process that ignored the words could still spend no more (judge/spend_bound.py)."""

from __future__ import annotations

from dataclasses import replace

from agent.cli.services import registered_limits
from agent.loop.limits import Limits
from judge.tasks import text_digest

SELLER = "http://127.0.0.1:8402"
TASK = "Get the premium report on this chain's USDC; don't spend more than 0.05 USDC."


def test_the_judge_is_registered_with_the_caps_the_tasks_words_bound() -> None:
    limits = replace(Limits(), spend_cap_atomic=1_000_000, per_call_cap_atomic=500_000)
    task = registered_limits("run-1", TASK, limits, allowlist=(SELLER,))
    assert (task.spend_cap_atomic, task.per_call_cap_atomic) == (50_000, 50_000)
    # The digest a worker checks the queued task by keeps the cap it was submitted with.
    assert task.text_digest == text_digest(TASK, 1_000_000)


def test_a_bound_above_the_cap_or_no_bound_leaves_the_caps() -> None:
    limits = replace(Limits(), spend_cap_atomic=40_000, per_call_cap_atomic=20_000)
    for words in (TASK, "Get the premium report on this chain's USDC."):
        task = registered_limits("run-1", words, limits, allowlist=(SELLER,))
        assert (task.spend_cap_atomic, task.per_call_cap_atomic) == (40_000, 20_000)
