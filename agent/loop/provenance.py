"""How each line of an answer was reached, and whether the answer backs a finish.

``observed``: a tool result holds the line's values (it may cite the evidence id).
``derived``: computed from observed values, the computation shown (a comparison, a
condition). ``asserted``: the line claims something no evidence holds. Lines that name
what was not answered, and headings, claim nothing. A run finishes only when every
checklist item is covered and no line is asserted (DESIGN: finished means backed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from decimal import Decimal, InvalidOperation

from agent.loop.checklist import Checklist, ChecklistItem
from agent.loop.result import AnswerGrade, AnswerLine, EvidenceItem, StopReason

__all__ = ["answer_grade", "backing", "grade_answer", "name_missing"]

#: A number, never a piece of one ("3" of "1.2.3"); both ends of a range ("0..11") count.
_NUMBER = re.compile(r"(?<![\w])(?<![^.]\.)-?\d[\d,]*(?:\.\d+)?(?![\w])")
_HEX = re.compile(r"0x[0-9a-fA-F]{6,}")
_EVIDENCE_ID = re.compile(r"\be\d+\b")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_NOT_ANSWERED = re.compile(
    r"\bnot (?:answered|obtained|available|done)\b|\bcannot\b|\bcan't\b|\bcould not\b|"
    r"\bunable to\b|\bno evidence\b",
    re.IGNORECASE,
)
_DERIVED = re.compile(r"\bderived\b", re.IGNORECASE)
_ALPHA = re.compile(r"[A-Za-z][A-Za-z-]{2,}")
_VERDICT = re.compile(r"\b(?:yes|no|true|false)\b", re.IGNORECASE)
_PROPER = re.compile(r"\b[A-Z][a-z]{2,}\b")


def _numbers(text: str) -> set[Decimal]:
    out: set[Decimal] = set()
    for raw in _NUMBER.findall(text):
        try:
            out.add(Decimal(raw.replace(",", "")).normalize())
        except InvalidOperation:
            continue
    return out


def _hexes(text: str) -> set[str]:
    return {h.lower().rstrip("…") for h in _HEX.findall(text)}


class _Sources:
    """The values a line may restate: from observations, from derivations, from the task."""

    def __init__(self, task: str, evidence: Sequence[EvidenceItem], items: Iterable[ChecklistItem],
                 said: Iterable[str] = ()):
        observed = []
        for ev in evidence:
            observed += [ev.summary, *ev.facts.values(), *map(str, ev.params.values())]
            observed += [str(v) for v in ev.args.values()]
        derived = [f"{i.value} {i.computation}" for i in items if i.provenance == "derived"]
        self.obs_numbers = _numbers(" ".join(observed))
        self.obs_hexes = _hexes(" ".join(observed))
        self.der_numbers = _numbers(" ".join(derived))
        self.der_hexes = _hexes(" ".join(derived))
        self.task_numbers, self.task_hexes = _numbers(task), _hexes(task)
        # What the run itself said of what it could not answer (the head, a chain id, the
        # steps a tool failed in; its items' reasons and its calls' failures), and the items
        # as it read them ("send 0.5 USDC to it" for "send half a USDC to it", outside round
        # 64): restated on a "not answered" line, they claim nothing.
        reasons = " ".join([*(f"{i.text} {i.unanswerable}" for i in items if i.unanswerable), *said])
        self.reason_numbers, self.reason_hexes = _numbers(reasons), _hexes(reasons)
        self.ids = {ev.id for ev in evidence}
        self.task_words = {w.lower() for w in _ALPHA.findall(task)}
        self.has_derived = bool(derived)
        self.fact_words = {
            w.lower() for ev in evidence for v in ev.facts.values() for w in _ALPHA.findall(v)
        } | {w.lower() for text in derived for w in _ALPHA.findall(text)}

    def claim_words(self, line: str) -> set[str]:
        """Words that state a value in prose: a verdict (yes, no, true, false) or a proper
        name not at the start of a sentence and not taken from the task."""
        words = {w.lower() for w in _VERDICT.findall(line)}
        for m in _PROPER.finditer(line):
            head = line[: m.start()].rstrip()
            if head and head[-1] not in ".:!?" and m.group(0).lower() not in self.task_words:
                words.add(m.group(0).lower())
        return words

    def claims_on_a_decline(self, token: str) -> bool:
        """Whether an unbacked value on a "not answered" line still claims something: a
        hex, a fraction or a number of 1000 or more (a value, not a count of steps), that
        the run's own reasons for its unanswered items do not hold."""
        if token.startswith("0x"):
            return not self._hex_in(token, self.reason_hexes)
        n = Decimal(token)
        big = n != n.to_integral_value() or abs(n) >= 1000
        return big and n not in self.reason_numbers

    @staticmethod
    def _hex_in(h: str, pool: set[str]) -> bool:
        return any(p.startswith(h) or h.startswith(p) for p in pool) if len(h) >= 8 else False

    def split(self, line: str) -> tuple[list[str], list[str], list[str]]:
        """(unbacked, observed, derived-only) value tokens of ``line``, the task's excluded."""
        unbacked: list[str] = []
        observed: list[str] = []
        derived: list[str] = []
        for n in _numbers(line) - self.task_numbers:
            bucket = (
                observed
                if n in self.obs_numbers
                else derived
                if n in self.der_numbers
                else unbacked
            )
            bucket.append(str(n))
        for h in _hexes(line):
            if self._hex_in(h, self.task_hexes):
                continue
            if self._hex_in(h, self.obs_hexes):
                observed.append(h)
            elif self._hex_in(h, self.der_hexes):
                derived.append(h)
            else:
                unbacked.append(h)
        return unbacked, observed, derived


def _grade(line: str, src: _Sources, notes: str) -> AnswerLine:
    text = _BULLET.sub("", line).strip()
    cited = sorted(set(_EVIDENCE_ID.findall(text)) & src.ids)
    unbacked, observed, derived = src.split(text)
    if _NOT_ANSWERED.search(text) and not any(src.claims_on_a_decline(u) for u in unbacked):
        return AnswerLine(text=text, grade="not-answered", evidence=cited)
    if unbacked:
        return AnswerLine(text=text, grade="asserted", evidence=cited)
    if observed or derived:
        derived_line = bool(derived) or bool(_DERIVED.search(text))
        return AnswerLine(
            text=text, grade="derived" if derived_line else "observed", evidence=cited
        )
    if cited:
        return AnswerLine(text=text, grade="observed", evidence=cited)
    if _DERIVED.search(text) and src.has_derived:
        return AnswerLine(text=text, grade="derived")
    if (notes and text in notes) or text.startswith("Stopped ("):
        return AnswerLine(text=text, grade="note")
    claims = src.claim_words(text)
    if not claims:
        return AnswerLine(text=text, grade="note")  # prose that states no value
    if claims <= src.fact_words:
        return AnswerLine(text=text, grade="observed")
    return AnswerLine(text=text, grade="asserted")


def grade_answer(
    answer: str,
    task: str,
    evidence: Sequence[EvidenceItem],
    checklist: Checklist,
    notes: str = "",
    said: Iterable[str] = (),
) -> list[AnswerLine]:
    """One graded line per non-empty line of ``answer``. ``notes`` (the stop message) are
    the run's own words, not claims; so are ``said`` (what its calls that did not succeed
    answered) on a line that says what was not answered."""
    src = _Sources(task, evidence, checklist.items, said)
    return [_grade(line, src, notes) for line in answer.splitlines() if line.strip()]


def answer_grade(lines: Sequence[AnswerLine]) -> AnswerGrade:
    """The whole answer's grade: its weakest claim (asserted < derived < observed)."""
    grades = {line.grade for line in lines}
    for grade in ("asserted", "derived", "observed"):
        if grade in grades:
            return grade  # type: ignore[return-value]
    return "none"


def backing(checklist: Checklist, lines: Sequence[AnswerLine]) -> tuple[StopReason, str] | None:
    """Why a finish is not backed, as (stop reason, message), or None when it is."""
    if not checklist.items:
        return (
            "unbacked-answer",
            "the checklist is empty (its extraction failed or found no fact to fetch), so "
            "nothing backs an answer",
        )
    if checklist.missing:
        parts = "; ".join(
            f"{i.text} ({i.unanswerable or 'no evidence'})" for i in checklist.missing
        )
        return "cannot-plan", f"not answered: {parts}"
    asserted = [line.text for line in lines if line.grade == "asserted"]
    if asserted:
        return (
            "unbacked-answer",
            f"{len(asserted)} answer line(s) hold values no evidence holds, e.g. {asserted[0]!r}",
        )
    return None


def name_missing(answer: str, checklist: Checklist) -> str:
    """``answer`` with a "not answered" line for every uncovered item it does not name."""
    lower = answer.lower()
    extra = [
        f"{i.text}: not answered ({i.unanswerable or 'no evidence was gathered for it'})"
        for i in checklist.missing
        if i.text.lower() not in lower
    ]
    return "\n".join([answer, *extra]) if extra else answer
