"""bench.planner_accuracy: its fixed sample and its side-by-side table (the runs themselves
are `python -m bench.planner_accuracy`, not part of the test suite)."""

from __future__ import annotations

from agent.eval.paraphrase import CATEGORIES
from bench.planner_accuracy import markdown, sample


def test_the_sample_is_the_first_tasks_of_every_category() -> None:
    tasks = sample(2)
    assert [t.category for t in tasks] == [c for c in CATEGORIES for _ in range(2)]
    assert len(sample(0)) >= 300


def test_the_table_puts_both_models_side_by_side_per_category() -> None:
    row = {"tasks": 2, "right": 1, "wrong_exit0": 1, "stops": {"evidence-covered": 2}}
    offline = {"model": "offline", "tasks": 2, "right": 2, "accuracy": 1.0, "wrong_exit0": 0,
               "seconds": 1.0, "categories": {"base_fee": {**row, "right": 2, "wrong_exit0": 0}}}
    local = {**offline, "model": "openai:smollm2", "right": 1, "accuracy": 0.5,
             "categories": {"base_fee": row}}
    table = markdown(offline, local, 2)
    assert ("| base_fee | 2 | 2/2 | 0 | evidence-covered 2 | 1/2 | 1 | evidence-covered 2 |"
            in table)
    assert "local (openai:smollm2): 1/2 right (0.5)" in table
