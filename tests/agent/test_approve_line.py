"""`nib approve`'s last line says what came of the approval (outside tester 13, F6: a
run refused after the grant exited 1 with "granted at the judge: 0.02 USDC to 0x…" as
the only word on the approval, which reads as success)."""

from __future__ import annotations

from agent.cli.commands.runs import _approval_outcome

REASON = "the payload pays 0xa0Ee, but the seller's own 402 asks to be paid at 0x2361"


def _events(*after: tuple[str, dict[str, object]]) -> list[dict[str, object]]:
    held = {"step": 1, "tool": "pay_http", "decision": "escalate", "reason": "price", "amount": 20_000}
    return [{"type": "verdict", "data": held}, {"type": "pause", "data": {"step": 1}},
            {"type": "run.resume", "data": {"decision": "approve"}},
            *({"type": kind, "data": data} for kind, data in after)]


def test_a_grant_the_judge_then_refused_is_said_on_the_last_line() -> None:
    refused = {"step": 1, "tool": "pay_http", "decision": "refuse", "reason": REASON,
               "amount": 20_000, "human_approved": True}
    line = _approval_outcome(_events(("verdict", refused)), granted=True)
    assert line == (
        "approval not carried out: the grant was recorded at the judge, but the judge then "
        f"refused the held pay_http for 0.02 USDC: {REASON}. Nothing was paid for it.")


def test_an_approval_the_judge_carried_out_needs_no_line() -> None:
    approved = {"step": 1, "tool": "pay_http", "decision": "approve", "reason": "ok",
                "amount": 20_000, "human_approved": True}
    assert _approval_outcome(_events(("verdict", approved)), granted=True) is None


def test_a_run_that_stopped_before_the_judge_ruled_again_says_so() -> None:
    line = _approval_outcome(_events(("stop", {"reason": "deadline"})), granted=False)
    assert line == (
        "approval not carried out: the run stopped before the judge ruled on the held call "
        "again (its stop reason says why). Nothing was paid for it.")
