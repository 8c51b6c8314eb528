"""The built-in eval suite: every task ends with a named stop reason, and the summary is stable."""

from __future__ import annotations

from agent.eval.suite import BUILTIN, Truth, answer_has, numbers_in, run_suite
from agent.loop.result import STOP_REASONS


def test_suite_shape():
    cats = {t.category for t in BUILTIN}
    assert len(BUILTIN) >= 20
    assert cats == {"free", "paid", "over-budget", "unanswerable", "loop"}
    assert len({t.id for t in BUILTIN}) == len(BUILTIN)


def test_grader_matches_numbers_exactly():
    assert numbers_in("base fee 0.889250634 gwei, block 1,234") >= {__import__("decimal").Decimal("0.889250634")}
    from decimal import Decimal

    assert answer_has("supply: 100.00 USDC", Truth(numbers=(Decimal("100"),)))
    assert not answer_has("supply: 100.01 USDC", Truth(numbers=(Decimal("100"),)))
    assert answer_has("issuer=Circle", Truth(words=("circle",)))


def test_builtin_suite_runs_and_is_stable():
    first = run_suite()
    second = run_suite()
    for t in first.tasks:
        assert t.stop_reason in STOP_REASONS, t
        assert t.answer.strip(), t
    assert first.summary() == second.summary()
    s = first.summary()
    assert s["tasks"] == len(BUILTIN)
    assert s["spent_without_cover"] == 0
    over = [t for t in first.tasks if t.category == "over-budget"]
    assert over and all(t.spend_usdc == 0 for t in over)
    paid = [t for t in first.tasks if t.category == "paid"]
    assert all(0 < t.spend_usdc <= 1_000_000 for t in paid)
    assert s["accuracy"] >= 0.9, first.to_json()
