"""Episodic lessons: a failed run leaves one sentence; similar later tasks are shown it.

A lesson crosses from one task into other tasks' planner context, so it is made of nib's
own words only: one of :data:`TEMPLATES`, every slot filled from a structured field and
checked against its pattern (a stop reason, a tool name, a seller origin as nib normalises
it, a path nib requested, an HTTP status, an error class, fact kinds). Nothing a seller, an
MCP tool or a model wrote reaches it: the model sees the run's steps in those same words
and only picks one candidate by number. A stored lesson is shown only when it reads as one
of the templates, so the free text older versions stored is dropped on read.

Advisory only. Any failure to read or write lessons is swallowed and logged as a
``lesson.error`` event: a run never dies because its scaffolding did.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, get_args
from urllib.parse import urlsplit

from agent.loop.checklist import Checklist, words
from agent.loop.history import HistoryEntry
from agent.loop.result import StopReason
from agent.store import RunStore
from agent.tools.x402.offers import seller_of
from chain.facts import DERIVED_KINDS, FACT_KINDS
from chain.mcp_client import split_endpoint
from judge.storage import cell_int

__all__ = [
    "TEMPLATES",
    "LessonKind",
    "chosen_lesson",
    "distrusted_sellers",
    "is_nib_lesson",
    "lesson_candidates",
    "lesson_prompt",
    "read_lesson",
    "record_lesson",
    "similar_lessons",
    "task_similarity",
]

_STOPWORDS = frozenset(
    "a an and are as at be by for from how in is it of on or the this to was what which".split()
)

#: Candidates offered to the model at most (the stop's own lesson is always the last).
MAX_CANDIDATES = 5

LessonKind = Literal[
    "not-delivered", "answered", "seller-fault", "mcp-endpoint", "refused", "failed-for-good",
    "failed", "stopped"
]
"""``not-delivered``: a seller was handed a payment and did not deliver. ``answered``: a
seller answered an HTTP error status (a 4xx: the request was wrong) to a URL nib
requested. ``seller-fault``: it answered a 5xx, a fault on its side that no change to the
URL fixes. ``mcp-endpoint``: the URL that
answered was an MCP server's endpoint (``/mcp`` or ``/sse``), which speaks MCP, not plain
HTTP: its catalog is no help, its tools are. ``refused``: a call refused
before anything was paid (the judge, a policy, a human). ``failed-for-good``: a call that
can never pass as proposed. ``failed``: a retryable failure. ``stopped``: how the run
ended (always offered)."""

TEMPLATES: dict[LessonKind, str] = {
    "not-delivered": "Seller {origin} failed to deliver a paid request; do not buy from it.",
    "answered": (
        "{tool} at {origin} answered HTTP {status} for {path}; check the URL against the "
        "seller's /catalog before buying there again."
    ),
    "seller-fault": (
        "{tool} at {origin} answered HTTP {status} for {path}, a fault on the seller's side; "
        "buy that fact from another seller, or from this one later."
    ),
    "mcp-endpoint": (
        "{tool} at {origin} answered HTTP {status} for {path}, an MCP server's endpoint; list "
        "its tools with mcp_tools and buy with pay_mcp, not over plain HTTP."
    ),
    "refused": (
        "{tool}{where} was refused before anything was paid; plan that fact within the "
        "budget, from another seller, or leave it out."
    ),
    "failed-for-good": (
        "{tool}{where} failed for good{error}; the same call cannot pass: change the seller "
        "or the arguments."
    ),
    "failed": "{tool}{where} failed{error}; check its arguments and the seller before retrying.",
    "stopped": (
        "A similar run stopped with {stop} at step {steps}, {covered} of {total} "
        "checklist items covered{missing}."
    ),
}
"""Every sentence a lesson can be, slots in braces (their patterns: ``_SLOTS``)."""

_ORIGIN = r"https?://[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63}){0,8}:[0-9]{1,5}"
_PATH = r"/[A-Za-z0-9._~/-]{0,80}"
_ERROR_CLASS = "[A-Z][A-Za-z0-9]{1,59}"
_KINDS = FACT_KINDS | DERIVED_KINDS
_KIND = "(?:" + "|".join(sorted(_KINDS)) + ")"
_COUNT = "[0-9]{1,4}"
#: What each slot may hold: nib's vocabulary, never free text (no spaces, no quotes).
_SLOTS: dict[str, str] = {
    "origin": _ORIGIN,
    "path": _PATH,
    "where": f"(?: at {_ORIGIN}(?:{_PATH})?)?",
    "tool": "[a-z][a-z0-9_]{0,39}",
    "status": "[1-5][0-9]{2}",
    "error": rf"(?: \({_ERROR_CLASS}\))?",
    "stop": "(?:" + "|".join(re.escape(s) for s in get_args(StopReason)) + ")",
    "steps": _COUNT,
    "covered": _COUNT,
    "total": _COUNT,
    "missing": f"(?:; missing {_KIND}(?:, {_KIND}){{0,9}})?",
}


def _pattern(template: str) -> re.Pattern[str]:
    """``template`` as a pattern; each slot is a named group holding its slot's pattern."""
    parts = re.split(r"\{(\w+)\}", template)  # literal, slot, literal, slot, ...
    return re.compile(
        "".join(
            re.escape(p) if i % 2 == 0 else f"(?P<{p}>{_SLOTS[p]})" for i, p in enumerate(parts)
        )
    )


_PATTERNS: dict[LessonKind, re.Pattern[str]] = {k: _pattern(t) for k, t in TEMPLATES.items()}


def read_lesson(text: str) -> tuple[LessonKind, dict[str, str]] | None:
    """What a lesson says, read back through :data:`TEMPLATES`: its kind and slot values
    (``("not-delivered", {"origin": "http://127.0.0.1:8402"})``), or None for a text that
    is not one of nib's lessons. A planner reads a lesson this way, never by its own regex."""
    for kind, pattern in _PATTERNS.items():
        found = pattern.fullmatch(text)
        if found is not None:
            return kind, {k: v for k, v in found.groupdict().items() if v is not None}
    return None


def is_nib_lesson(text: str) -> bool:
    """Whether ``text`` is one of :data:`TEMPLATES` with every slot in nib's vocabulary:
    the one check a lesson passes before it is stored and again before it is shown."""
    return read_lesson(text) is not None


def distrusted_sellers(failed_sellers: Iterable[str], lessons: Iterable[object]) -> frozenset[str]:
    """The seller origins a task distrusts: those paid in this run that did not deliver
    (``failed_sellers``), and those a ``not-delivered`` lesson shown to it names (read
    through :data:`TEMPLATES`, as every lesson is read).

    The one rule for both sides of a purchase: the offline planner proposes such a seller
    only after every other seller of the fact (a failed one not at all: the loop refuses
    it), and the loop never brings one in as an alternative to the call the model chose.
    A model may still choose one a lesson names; the judge rules on it. Kept apart from
    the judge's p, which small payments for nothing barely move (a payment
    of 0.001 USDC weighs a tenth of an outcome)."""
    named = (read_lesson(str(lesson)) for lesson in lessons)
    return frozenset(failed_sellers) | {
        said[1]["origin"] for said in named if said is not None and said[0] == "not-delivered"
    }


def _fits(slot: str, value: str) -> bool:
    return re.fullmatch(_SLOTS[slot], value) is not None


def _target(args: Mapping[str, object]) -> tuple[str, str]:
    """The seller origin (as nib normalises it) and the path of the URL a call requested,
    each empty when it is not in nib's vocabulary."""
    url = args.get("url") or args.get("server")
    if not isinstance(url, str) or "://" not in url:
        return "", ""
    try:
        origin, path = seller_of(url), urlsplit(url).path or "/"
    except Exception:  # a URL nib could not request names no seller
        return "", ""
    if not _fits("origin", origin):
        return "", ""
    return origin, path if _fits("path", path) else ""


def _step(entry: HistoryEntry) -> tuple[LessonKind, dict[str, str]] | None:
    """The lesson one failed or refused step teaches, as a template and its slots."""
    if entry.outcome not in ("failed", "failed-for-good", "refused"):
        return None
    if not _fits("tool", entry.tool):
        return None
    origin, path = _target(entry.args)
    where = f" at {origin}{path}" if origin else ""
    if entry.outcome == "refused":
        return "refused", {"tool": entry.tool, "where": where}
    status = "" if entry.http_status is None else str(entry.http_status)
    if origin and path and _fits("status", status):
        # An MCP endpoint answers a plain HTTP request with an error: the fix is its tools.
        kind: LessonKind = ("mcp-endpoint" if split_endpoint(path)[1] else
                            "seller-fault" if status.startswith("5") else "answered")
        return kind, {"tool": entry.tool, "origin": origin, "path": path, "status": status}
    error = f" ({entry.error_class})" if _error_class(entry) else ""
    return entry.outcome, {"tool": entry.tool, "where": where, "error": error}


def _error_class(entry: HistoryEntry) -> str:
    cls = entry.error_class or ""
    return cls if re.fullmatch(_ERROR_CLASS, cls) else ""


def _step_line(entry: HistoryEntry) -> str | None:
    """One step as the lesson request shows it: the same vocabulary, nothing quoted."""
    if not _fits("tool", entry.tool):
        return None
    origin, path = _target(entry.args)
    status = f" HTTP {entry.http_status}" if entry.http_status is not None else ""
    error = f" {_error_class(entry)}" if _error_class(entry) else ""
    where = f" at {origin}{path}" if origin else ""
    return f"step {entry.step}: {entry.tool}{where} -> {entry.outcome}{status}{error}"


def lesson_candidates(
    stop_reason: str,
    steps: int,
    history: Sequence[HistoryEntry],
    failed_sellers: Iterable[str],
    checklist: Checklist,
) -> list[str]:
    """The lessons a failed run may leave, most useful first: sellers that did not deliver,
    then its failed or refused steps (latest first), then how it stopped (always last)."""
    out: list[str] = []

    def add(kind: LessonKind, slots: Mapping[str, str]) -> None:
        text = TEMPLATES[kind].format(**slots)
        if _PATTERNS[kind].fullmatch(text) and text not in out and len(out) < MAX_CANDIDATES - 1:
            out.append(text)

    for seller in failed_sellers:
        add("not-delivered", {"origin": seller})
    for entry in reversed(history):
        taught = _step(entry)
        if taught is not None:
            add(*taught)
    kinds = [k for k in dict.fromkeys(i.kind or "" for i in checklist.missing) if k in _KINDS]
    stopped = TEMPLATES["stopped"].format(
        stop=stop_reason,
        steps=steps,
        covered=len(checklist.covered),
        total=len(checklist.items),
        missing=f"; missing {', '.join(kinds[:10])}" if kinds else "",
    )
    if _PATTERNS["stopped"].fullmatch(stopped):
        out.append(stopped)
    return out


def lesson_prompt(
    task: str, stop_reason: str, history: Sequence[HistoryEntry], candidates: Sequence[str]
) -> list[dict[str, str]]:
    """Messages asking the model which candidate lesson a similar run should be shown; the
    steps are in nib's words only (no summaries: they may quote a seller)."""
    steps = [line for line in map(_step_line, history) if line] or ["(no calls)"]
    numbered = [f"{n}. {c}" for n, c in enumerate(candidates, start=1)]
    return [
        {
            "role": "system",
            "content": (
                "You choose the lesson a future run on a similar task is shown, from numbered "
                "candidates. Reply with the number of the ONE most useful candidate, nothing else."
            ),
        },
        {
            "role": "user",
            "content": (
                f"Task: {task}\nStopped: {stop_reason}\nSteps:\n" + "\n".join(steps)
                + "\nCandidates:\n" + "\n".join(numbered)
            ),
        },
    ]


def chosen_lesson(reply: str, count: int) -> int:
    """The candidate number (1-based) the model's ``reply`` names; 1 when it names none of
    ``1..count``. Nothing else of the reply is kept."""
    found = re.search(r"[0-9]+", reply)
    number = int(found.group(0)) if found else 0
    return number if 1 <= number <= count else 1


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
    """Up to ``k`` lessons from earlier tasks similar to ``task`` (most similar first);
    a stored lesson that is not one of nib's templates (an older version's free text) is
    never shown."""
    try:
        rows = store.lessons()
    except Exception as exc:  # advisory: never break a run
        if on_error:
            on_error("lesson.error", {"op": "read", "error": f"{type(exc).__name__}: {exc}"})
        return []
    scored = sorted(
        ((task_similarity(task, str(r["task"])), cell_int(r["id"]), str(r["lesson"]))
         for r in rows),
        key=lambda t: (-t[0], -t[1]),
    )
    seen: list[str] = []
    for score, _id, lesson in scored:
        if score < threshold or len(seen) >= k:
            break
        if lesson not in seen and is_nib_lesson(lesson):
            seen.append(lesson)
    return seen


def record_lesson(
    store: RunStore,
    run_id: str,
    task: str,
    stop_reason: str,
    lesson: str,
    *,
    on_error: Callable[[str, dict[str, object]], None] | None = None,
) -> str | None:
    """Store ``lesson`` (one of :func:`lesson_candidates`); returns it, or None if nothing
    was stored."""
    if not is_nib_lesson(lesson):
        if on_error:
            on_error(
                "lesson.error",
                {
                    "op": "write",
                    "error": f"a lesson of {len(lesson)} characters is not one of nib's "
                    "templates; expected a sentence from agent.loop.lessons.TEMPLATES. "
                    "Nothing was stored.",
                },
            )
        return None
    try:
        store.add_lesson(run_id, task, stop_reason, lesson)
    except Exception as exc:  # advisory: never break a run
        if on_error:
            on_error("lesson.error", {"op": "write", "error": f"{type(exc).__name__}: {exc}"})
        return None
    return lesson
