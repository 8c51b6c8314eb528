"""The generated paraphrase suite: its shape, and a sample of it run on a real devnet
(the full suite runs with `nib eval --suite paraphrase`, not in the test suite)."""

from __future__ import annotations

from agent.eval.paraphrase import CATEGORIES, paraphrase_tasks
from agent.eval.suite import EvalTask, load_tasks, run_suite


def test_the_suite_has_several_hundred_tasks_in_every_category() -> None:
    rows = paraphrase_tasks()
    assert len(rows) >= 300
    assert len({r["id"] for r in rows}) == len(rows)
    assert {r["category"] for r in rows} == set(CATEGORIES)
    assert all(r["truth"] for r in rows if r["expect"] == "answer")
    assert {r["expect"] for r in rows if r["category"].startswith("scope")} == {"cannot"}


def test_a_sample_of_the_paraphrase_suite_is_right_and_never_wrong_with_exit_0() -> None:
    tasks = load_tasks("paraphrase")
    sample: list[EvalTask] = []
    for cat in CATEGORIES:  # the first and the last task of every category
        mine = [t for t in tasks if t.category == cat]
        sample += [mine[0], mine[-1]] if len(mine) > 1 else mine
    report = run_suite(tasks=sample)
    s = report.summary()
    assert s["wrong_question_answers"] == 0, s["misses"]
    assert all(row["wrong_exit0"] == 0 for row in s["categories"].values())
    assert s["suites"]["paraphrase"]["accuracy"] >= 0.9, s["misses"]
