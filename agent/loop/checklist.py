"""The run's checklist: up to 5 bare measurable facts the task needs, and their coverage.

One model call per run extracts it ("base fee gwei", not "current fees"). Items with
a fact kind are covered by an observation that reports that kind; items without one
are covered when an observation's summary mentions all of the item's words.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from agent.models.base import OutputSchema
from chain.facts import FACT_KINDS

__all__ = [
    "Checklist",
    "ChecklistItem",
    "checklist_schema",
    "parse_checklist",
    "task_checklist",
]

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    """Lower-case alphanumeric words of ``text`` (for coverage and similarity)."""
    return set(_WORD.findall(text.lower()))


@dataclass(frozen=True)
class ChecklistItem:
    """One measurable fact. ``value``/``evidence_id`` are set once an observation covers it."""

    id: str
    text: str
    kind: str | None = None
    covered: bool = False
    value: str | None = None
    evidence_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "covered": self.covered,
            "value": self.value,
            "evidence_id": self.evidence_id,
        }


@dataclass(frozen=True)
class Checklist:
    """The items of one run, in the order the model gave them."""

    items: tuple[ChecklistItem, ...] = ()

    @property
    def missing(self) -> tuple[ChecklistItem, ...]:
        return tuple(i for i in self.items if not i.covered)

    @property
    def covered(self) -> tuple[ChecklistItem, ...]:
        return tuple(i for i in self.items if i.covered)

    @property
    def complete(self) -> bool:
        """True when there is at least one item and every item is covered."""
        return bool(self.items) and not self.missing

    def focus(self) -> ChecklistItem | None:
        """The first uncovered item: what this turn should aim at."""
        return next(iter(self.missing), None)

    def cover(self, facts: dict[str, str], summary: str, evidence_id: str) -> Checklist:
        """Mark items covered by one observation's facts (by kind) or summary (by words)."""
        summary_words = words(summary) | {w for v in facts.values() for w in words(v)}
        out = []
        for item in self.items:
            if item.covered:
                out.append(item)
            elif item.kind and item.kind in facts:
                out.append(
                    replace(item, covered=True, value=facts[item.kind], evidence_id=evidence_id)
                )
            elif not item.kind and words(item.text) and words(item.text) <= summary_words:
                out.append(replace(item, covered=True, value=summary, evidence_id=evidence_id))
            else:
                out.append(item)
        return Checklist(tuple(out))

    def as_dicts(self) -> list[dict[str, Any]]:
        return [i.as_dict() for i in self.items]

    @classmethod
    def from_dicts(cls, rows: list[dict[str, Any]]) -> Checklist:
        return cls(tuple(ChecklistItem(**row) for row in rows))


class _ItemModel(BaseModel):
    text: str = Field(min_length=1, max_length=200)
    kind: str | None = None


class _ChecklistModel(BaseModel):
    items: list[_ItemModel]


def checklist_schema(max_items: int = 5) -> OutputSchema:
    """The checklist reply as a JSON Schema: at most ``max_items`` items, kinds enumerated
    (a server that enforces schemas by grammar cannot produce anything else)."""
    kinds = sorted(FACT_KINDS)
    return OutputSchema(
        "checklist",
        {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": max_items,
                    "items": {
                        "type": "object",
                        "properties": {
                            "text": {
                                "type": "string",
                                "minLength": 1,
                                "maxLength": 200,
                                "description": 'A bare measurable fact, e.g. "base fee gwei".',
                            },
                            "kind": {"anyOf": [{"enum": kinds}, {"type": "null"}]},
                        },
                        "required": ["text", "kind"],
                    },
                }
            },
            "required": ["items"],
        },
    )


#: Longest task text kept as the fallback checklist item (the item's own limit).
TASK_ITEM_CHARS = 200


def task_checklist(task: str) -> Checklist:
    """The checklist when extraction failed twice: the task itself is the one item.

    It has no fact kind, so only an observation that mentions all of its words covers
    it; a run cannot look finished because it had nothing to find.
    """
    text = " ".join(task.split())[:TASK_ITEM_CHARS] or "(empty task)"
    return Checklist((ChecklistItem(id="c1", text=text),))


def parse_checklist(text: str, *, max_items: int = 5) -> Checklist:
    """Parse a ``checklist`` reply; unknown fact kinds become None, extras are dropped.

    Raises ValueError when the reply is not the expected JSON.
    """
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError('checklist reply has no JSON object; expected {"items": [...]}.')
    try:
        parsed = _ChecklistModel.model_validate(json.loads(text[start : end + 1]))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ValueError(f"checklist reply is not the expected JSON: {exc}") from exc
    items = []
    for n, item in enumerate(parsed.items[:max_items], start=1):
        kind = item.kind if item.kind in FACT_KINDS else None
        items.append(ChecklistItem(id=f"c{n}", text=item.text.strip(), kind=kind))
    return Checklist(tuple(items))
