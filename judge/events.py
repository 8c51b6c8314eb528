"""The audit events the judge emits (through the ``emit`` callable it is given), each
type with what its ``data`` says. ``agent.store.EVENT_TYPES`` lists them with the
agent's own; ``tests/agent/test_event_types.py`` fails on an emitted type not listed."""

from __future__ import annotations

__all__ = ["EVENT_TYPES"]

EVENT_TYPES: dict[str, str] = {
    "judge.task": "a task was registered with its limits (cap, per-call cap, thresholds)",
    "judge.verdict": "the judge ruled on a paid call: verdict id, decision, amount, reason",
    "judge.consumed": "the wallet's re-check consumed a verdict (once) before signing",
    "judge.revoked": "a verdict was revoked; it no longer stands",
    "judge.granted": "a human granted an escalated payment (verdict, by whom)",
    "judge.rotated": "the judge's key was rotated (old and new address)",
    "judge.outcome": "a paid call's outcome was recorded for calibration (covered or not)",
    "judge.outcome.held": "a non-delivery whose payment was undecided is held until it "
                          "settles (verdict, fact kind, ledger row); reconcile counts it",
}
