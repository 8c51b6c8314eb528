"""Shaped history: each step is one line (tool, literal input, outcome summary).

Raw tool results are never replayed to the model; a step costs a bounded number
of tokens, so the context grows about linearly with steps instead of carrying
every earlier payload. ``full_transcript_tokens`` and ``shaped_tokens`` measure
the difference for the benchmark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Literal, cast, get_args

from agent.loop.tokens import count_text

__all__ = [
    "SUMMARY_CHARS",
    "HistoryEntry",
    "Outcome",
    "full_transcript_tokens",
    "one_line",
    "render",
    "shaped_tokens",
]

#: Longest summary kept per step (characters); longer ones are cut with an ellipsis.
SUMMARY_CHARS = 200

Outcome = Literal["ok", "failed", "failed-for-good", "skipped", "refused", "note"]
"""``ok``: executed and succeeded. ``failed``: executed (or proposed) and failed; retryable.
``failed-for-good``: executed (or quoted) and failed for a reason the same call can never
overcome (e.g. a seller's terms no buyer can pay); it is not run again. ``skipped``: not
executed (duplicate, invalid, policy). ``refused``: the judge refused a paid call. ``note``:
loop feedback without a call (nudge, re-plan)."""


def one_line(text: str, limit: int = SUMMARY_CHARS) -> str:
    """Collapse whitespace and cut to at most ``limit`` characters, ending in "…" on a
    whole word. A word that alone would take more than half the room is cut inside it
    instead, so that a long address or URL shows its start rather than nothing."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    room = flat[: limit - 1]
    space = room.rfind(" ")
    if flat[limit - 1] != " " and space >= (limit - 1) // 2:
        room = room[:space]  # the last word does not fit whole: end before it
    return room.rstrip(" ,;:") + "…"


@dataclass(frozen=True)
class HistoryEntry:
    """One step as the model sees it again: what was called with what, and what came of it.

    ``summary`` may quote what a seller or a tool answered: it is shown to this run only.
    ``error_class`` and ``http_status`` (a failed call's error class, and the HTTP status a
    seller answered when that is what failed) are the structured part a lesson for other
    tasks may name (agent.loop.lessons)."""

    step: int
    tool: str
    args: dict[str, object]
    outcome: Outcome
    summary: str
    evidence_id: str | None = None
    error_class: str | None = None
    http_status: int | None = None

    @classmethod
    def from_dict(cls, row: Mapping[str, object]) -> HistoryEntry:
        """An entry as ``as_dict`` stored it in the run's state (a saved run's JSON)."""
        step, args, outcome = row.get("step"), row.get("args"), row.get("outcome")
        evidence_id, error_class = row.get("evidence_id"), row.get("error_class")
        status = row.get("http_status")
        return cls(
            step=step if isinstance(step, int) else 0,
            tool=str(row.get("tool") or ""),
            args=dict(args) if isinstance(args, dict) else {},
            outcome=cast(Outcome, outcome) if outcome in get_args(Outcome) else "note",
            summary=str(row.get("summary") or ""),
            evidence_id=None if evidence_id is None else str(evidence_id),
            error_class=error_class if isinstance(error_class, str) else None,
            http_status=status if isinstance(status, int) and not isinstance(status, bool) else None,
        )

    def line(self) -> str:
        args = json.dumps(self.args, sort_keys=True, separators=(",", ":"), default=str)
        ref = f" [{self.evidence_id}]" if self.evidence_id else ""
        call = f"{self.tool} {args}" if self.tool else "(no call)"
        return f"step {self.step}: {call} -> {self.outcome}{ref}: {one_line(self.summary)}"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def render(entries: Iterable[HistoryEntry]) -> str:
    """The history block of a prompt, one line per entry."""
    lines = [e.line() for e in entries]
    return "\n".join(lines) if lines else "(no steps yet)"


def _raw_step(tool: str, args: dict[str, object], data: object) -> str:
    return json.dumps({"tool": tool, "args": args, "result": data}, default=str)


def full_transcript_tokens(steps: Sequence[tuple[str, dict[str, object], object]]) -> int:
    """Input tokens a naive loop sends over a run that re-reads every raw result each step.

    ``steps`` are ``(tool, args, raw_result)``; step k's request carries steps 1..k-1.
    """
    sizes = [count_text(_raw_step(t, a, d)) for t, a, d in steps]
    return sum(sum(sizes[:k]) for k in range(len(sizes) + 1))


def shaped_tokens(steps: Sequence[tuple[str, dict[str, object], object]]) -> int:
    """Input tokens the same run costs with shaped history (one bounded line per step)."""
    sizes = []
    for n, (tool, args, data) in enumerate(steps, start=1):
        summary = data.get("summary", "") if isinstance(data, dict) else str(data)
        sizes.append(count_text(HistoryEntry(n, tool, args, "ok", str(summary)).line()))
    return sum(sum(sizes[:k]) for k in range(len(sizes) + 1))
