"""The eval suites: task files, the grader by value and provenance, and one full run."""

from __future__ import annotations

from decimal import Decimal

from agent.eval.suite import SUITES, EvalTask, answer_has, grade, load_tasks, numbers_in, run_suite
from agent.eval.truth import Truth
from agent.loop.result import STOP_REASONS, AgentResult, AnswerLine, EvidenceItem


def test_task_files_hold_a_builtin_and_a_held_out_set() -> None:
    builtin, heldout = load_tasks("builtin"), load_tasks("heldout")
    assert len(builtin) >= 25 and len(heldout) >= 30
    ids = [t.id for t in builtin + heldout]
    assert len(set(ids)) == len(ids)
    base = {"free", "paid", "over-budget", "unanswerable", "loop"}
    assert base <= {t.category for t in builtin} and base <= {t.category for t in heldout}
    new = {"parameters", "comparison", "aggregate", "condition", "partial"}
    assert new <= {t.category for t in heldout}
    assert SUITES == ("builtin", "heldout")


def test_numbers_are_matched_exactly() -> None:
    assert Decimal("0.889250634") in numbers_in("base fee 0.889250634 gwei, block 1,234")
    assert answer_has("supply: 100.00 USDC", Truth(numbers=(Decimal("100"),)))
    assert not answer_has("supply: 100.01 USDC", Truth(numbers=(Decimal("100"),)))
    assert answer_has("issuer=Circle", Truth(words=("circle",)))
    winner = Truth(winner=("0xaa", "0xbb"))
    assert answer_has("more: 0xAA (5 USDC)", winner)
    assert not answer_has("0xaa 5 USDC and 0xbb 3 USDC", winner)


def result(lines: list[tuple[str, str]], **kw: object) -> AgentResult:
    fields = {"run_id": "r", "task": "t", "stop_reason": "evidence-covered", "finished": True,
              "partial": False, "answer": "x", "steps": 1, **kw}  # fmt: skip
    return AgentResult(**fields, lines=[AnswerLine(text=t, grade=g) for t, g in lines])  # type: ignore[arg-type]


def task(expect: str, paid: bool = False) -> EvalTask:
    return EvalTask("t", "builtin", "c", "text", expect, paid=paid)  # type: ignore[arg-type]


TEN = Truth(numbers=(Decimal("10"),))


def test_values_count_only_on_backed_lines() -> None:
    assert grade(task("answer"), TEN, True, result([("fee: 10 gwei", "observed")])) == (True, "")
    ok, why = grade(task("answer"), TEN, True, result([("fee: 10 gwei", "asserted")]))
    assert not ok and "asserted" in why


def test_cannot_tasks_fail_on_any_value() -> None:
    stopped = {"stop_reason": "cannot-plan", "finished": False, "partial": True}
    assert grade(task("cannot"), Truth(), True, result([("x: not answered", "not-answered")], **stopped))[0]
    # Another question's value (observed) is as wrong as an invented one.
    assert not grade(task("cannot"), Truth(), True, result([("gas 1 gwei", "observed")], **stopped))[0]


def test_loop_tasks_pass_by_a_guard_or_the_true_answer() -> None:
    guard = {"stop_reason": "no-novelty", "finished": False, "partial": True}
    assert grade(task("loop"), TEN, True, result([], **guard))[0]
    assert grade(task("loop"), TEN, True, result([("10", "observed")]))[0]
    done = {"stop_reason": "done-signal"}
    assert not grade(task("loop"), TEN, True, result([("9", "observed")], **done))[0]


def test_paid_tasks_pass_only_when_a_purchase_covered_the_item() -> None:
    circle = Truth(words=("Circle",))
    free = EvidenceItem(id="e1", step=1, tool="x", args={}, summary="s",
                        facts={"token_factsheet": "issuer=Circle"})  # fmt: skip
    bought = free.model_copy(update={"cost_usdc": 20_000})
    line = [("issuer=Circle", "observed")]
    assert not grade(task("answer", paid=True), circle, True, result(line, evidence=[free]))[0]
    assert grade(task("answer", paid=True), circle, True, result(line, evidence=[bought]))[0]


def test_both_suites_run_with_the_offline_planner(tmp_path: object) -> None:
    report = run_suite("all")
    s = report.summary()
    for t in report.tasks:
        assert t.stop_reason in STOP_REASONS, t
        assert t.answer.strip(), t
    assert s["model"] == "offline" and s["profile"] == "local-guarded"
    assert s["suites"]["builtin"]["tasks"] == len(load_tasks("builtin"))
    assert s["heldout_accuracy"] >= 0.8, s["misses"]
    assert s["wrong_question_answers"] == 0, s["misses"]
    assert all(m["why"] for m in s["misses"])
    assert [t.id for t in report.tasks if t.spent_without_cover] == []
    # Every run's spend (settled + outstanding) is what the chain moved out of the wallet.
    assert s["spend_not_on_chain"] == [] and s["chain_moved_usdc"] == s["total_spend_usdc"] > 0
    assert set(s["provenance"]["lines"]) <= {"observed", "derived", "asserted", "not-answered", "note"}
    assert s["provenance"]["lines"].get("asserted", 0) == 0
    assert s["churn_guard"]["threshold"] == 3 and s["churn_guard"]["false_stop_rate"] == 0.0
    over = [t for t in report.tasks if t.category == "over-budget"]
    assert over and all(t.spend_usdc == 0 for t in over)
