"""Progress detectors: pure checks that stop a run that is alive but going nowhere.

Each takes the relevant slice of run state and the limits, and returns the stop
reason it stands for, or None. The loop calls them at fixed points of a turn; the
first to fire wins.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.loop.checklist import words
from agent.loop.limits import Limits
from agent.loop.result import StopReason

__all__ = [
    "churn",
    "describe",
    "failure_budget",
    "find_cycle",
    "no_novelty",
    "observation_similarity",
    "oscillation",
    "proposal_lost",
    "skip_loop",
    "streak_exhausted",
]


def churn(signal: int, limits: Limits) -> StopReason | None:
    """The wrong-path signal reached ``churn_steps``: since the last newly covered
    checklist item, the steps that called tools or spent (real calls, so the inactivity
    guards miss them) plus the times the checklist, asked again, changed (drift)."""
    return "churn" if limits.churn_steps and signal >= limits.churn_steps else None


def observation_similarity(a: str, b: str) -> float:
    """Token-set Jaccard similarity of two observation signatures (1.0 = same words)."""
    wa, wb = words(a), words(b)
    if not wa and not wb:
        return 1.0
    return len(wa & wb) / len(wa | wb)


def no_novelty(signatures: Sequence[str], limits: Limits) -> StopReason | None:
    """The last ``novelty_window`` successful observations are all near-identical."""
    n = limits.novelty_window
    if n < 2 or len(signatures) < n:
        return None
    recent = signatures[-n:]
    first = recent[0]
    if all(observation_similarity(first, s) >= limits.novelty_similarity for s in recent[1:]):
        return "no-novelty"
    return None


def streak_exhausted(successful_tools: Sequence[str], limits: Limits) -> StopReason | None:
    """The same tool succeeded ``streak_length`` times in a row since a checklist item
    was last newly covered (the loop clears ``successful_tools`` on progress)."""
    n = limits.streak_length
    if len(successful_tools) >= n and len(set(successful_tools[-n:])) == 1:
        return "streak-exhausted"
    return None


def find_cycle(window: Sequence[str]) -> tuple[str, ...] | None:
    """The repeating cycle (period >= 2, seen twice) the window ends with, if any.

    ``A,B,A,B`` -> ``(A, B)``; ``A,B,C,A,B,C`` -> ``(A, B, C)``; ``A,A,A`` is a repeat,
    not a cycle (the duplicate gate handles it).
    """
    for period in range(2, len(window) // 2 + 1):
        tail = list(window[-2 * period :])
        cycle = tail[:period]
        if tail[period:] == cycle and len(set(cycle)) > 1:
            return tuple(cycle)
    return None


def oscillation(proposed: Sequence[str], limits: Limits) -> StopReason | None:
    """The recent proposed fingerprints end in a cycle (A,B,A,B within the window)."""
    if find_cycle(proposed[-limits.oscillation_window :]) is not None:
        return "oscillation"
    return None


def skip_loop(consecutive_skips: int, limits: Limits) -> StopReason | None:
    """Proposals were skipped (refused, invalid, duplicate) this many times in a row."""
    return "skip-loop" if consecutive_skips >= limits.max_consecutive_skips else None


def failure_budget(consecutive_failures: int, limits: Limits) -> StopReason | None:
    """Consecutive failed tool calls reached the failure budget."""
    return "failure-budget" if consecutive_failures >= limits.max_consecutive_failures else None


def proposal_lost(consecutive_failed_proposals: int, limits: Limits) -> StopReason | None:
    """No valid proposal this many times in a row (each already had its retry)."""
    return "proposal-lost" if consecutive_failed_proposals >= limits.max_failed_proposals else None


def describe(
    reason: str,
    limits: Limits,
    *,
    failures: int = 0,
    failed_proposals: int = 0,
    skips: int = 0,
    last_tool: str = "?",
    churn_steps: int = 0,
    drifts: int = 0,
) -> str:
    """The human line for a detector stop: the limit and the observed value."""
    lim = limits
    return {
        "failure-budget": f"{failures} consecutive tool failures "
        f"(max_consecutive_failures={lim.max_consecutive_failures})",
        "proposal-lost": f"{failed_proposals} invalid proposals in a row "
        f"(max_failed_proposals={lim.max_failed_proposals})",
        "skip-loop": f"{skips} skipped proposals in a row "
        f"(max_consecutive_skips={lim.max_consecutive_skips})",
        "no-novelty": f"the last {lim.novelty_window} observations were near-identical "
        f"(novelty_similarity>={lim.novelty_similarity})",
        "streak-exhausted": f"{last_tool} succeeded {lim.streak_length} times in a row "
        f"without covering a new item (streak_length={lim.streak_length})",
        "churn": f"{lim.churn_steps} steps in a row called tools without covering a "
        f"checklist item (churn_steps={lim.churn_steps})"
        if not drifts
        else f"no checklist item covered while {churn_steps} step(s) called tools and the "
        f"checklist, asked again, changed {drifts} time(s) (churn_steps={lim.churn_steps})",
    }.get(reason, reason)
