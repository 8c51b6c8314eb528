"""Eval tasks run on the eval's private devnet, graded against the chain (agent/eval)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent.config import NibSettings
from agent.eval.suite import EvalTask, TaskOutcome, run_suite


def graded(home: Path, tasks: list[EvalTask]) -> dict[str, TaskOutcome]:
    """Each task's outcome by its id: run by the offline planner in ``home``, its answer
    graded against truths read from the chain with web3."""
    report = run_suite(tasks=tasks, settings=NibSettings(home=home, network="anvil"))
    return {t.id: t for t in report.tasks}


def assert_answered_right(t: TaskOutcome) -> None:
    """``t`` finished at exit 0, every asked fact covered by evidence, each matching the
    chain's truth, and no part named as not answered."""
    assert t.finished and t.stop_reason == "evidence-covered", (t.stop_reason, t.answer)
    assert t.correct and not t.wrong_question, (t.miss, t.answer)
    assert "not answered" not in t.answer, t.answer


def graded_fixture(name: str, tasks: list[EvalTask]) -> Callable[..., dict[str, TaskOutcome]]:
    """A module-scoped ``outcomes`` fixture: ``tasks`` run once by :func:`graded` in a fresh
    home named ``name`` (``outcomes = graded_fixture("spans", ASKED)`` in a test module)."""

    @pytest.fixture(scope="module")
    def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TaskOutcome]:
        return graded(tmp_path_factory.mktemp(name), tasks)

    return outcomes
