"""Episodic lessons: a failed run distils one sentence; similar later tasks are shown it.

Advisory only. Any failure to read or write lessons is swallowed and logged as a
``lesson.error`` event: a run never dies because its scaffolding did.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.loop.checklist import words
from agent.loop.history import one_line
from agent.store import RunStore
from judge.storage import cell_int

__all__ = ["lesson_prompt", "record_lesson", "similar_lessons", "task_similarity"]

_STOPWORDS = frozenset(
    "a an and are as at be by for from how in is it of on or the this to was what which".split()
)


def _content_words(text: str) -> set[str]:
    return words(text) - _STOPWORDS


def task_similarity(a: str, b: str) -> float:
    """Token-overlap (Jaccard) similarity of two tasks' content words."""
    wa, wb = _content_words(a), _content_words(b)
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def similar_lessons(
    store: RunStore,
    task: str,
    *,
    k: int = 3,
    threshold: float = 0.2,
    on_error: Callable[[str, dict[str, object]], None] | None = None,
) -> list[str]:
    """Up to ``k`` lessons from earlier tasks similar to ``task`` (most similar first)."""
    try:
        rows = store.lessons()
    except Exception as exc:  # advisory: never break a run
        if on_error:
            on_error("lesson.error", {"op": "read", "error": f"{type(exc).__name__}: {exc}"})
        return []
    scored = sorted(
        ((task_similarity(task, str(r["task"])), cell_int(r["id"]), str(r["lesson"])) for r in rows),
        key=lambda t: (-t[0], -t[1]),
    )
    seen: list[str] = []
    for score, _id, lesson in scored:
        if score < threshold or len(seen) >= k:
            break
        if lesson not in seen:
            seen.append(lesson)
    return seen


def lesson_prompt(task: str, stop_reason: str, history: str) -> list[dict[str, str]]:
    """Messages asking for one short, reusable lesson from a failed trajectory."""
    return [
        {
            "role": "system",
            "content": (
                "You distil lessons from failed research runs. Reply with ONE sentence "
                "(at most 30 words) a future run on a similar task should follow."
            ),
        },
        {
            "role": "user",
            "content": f"Task: {task}\nStopped: {stop_reason}\nTrajectory:\n{history}",
        },
    ]


def record_lesson(
    store: RunStore,
    run_id: str,
    task: str,
    stop_reason: str,
    text: str,
    *,
    on_error: Callable[[str, dict[str, object]], None] | None = None,
) -> str | None:
    """Store one lesson (first line, trimmed); returns it, or None if nothing was stored."""
    lesson = one_line(text.strip().splitlines()[0] if text.strip() else "", 300)
    if not lesson:
        return None
    try:
        store.add_lesson(run_id, task, stop_reason, lesson)
    except Exception as exc:  # advisory: never break a run
        if on_error:
            on_error("lesson.error", {"op": "write", "error": f"{type(exc).__name__}: {exc}"})
        return None
    return lesson
