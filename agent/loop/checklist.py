"""The run's checklist: up to 5 bare measurable facts the task needs, and their coverage.

One model call per run extracts it ("base fee gwei at block 1", not "current fees").
An item is covered only by an observation holding a typed value for *that* item with
*its* parameters (the base fee at block 1 is not covered by the latest base fee); an
item without a fact kind is never covered. Derived items (a comparison of two items, a
condition on one) are computed here from covered values, with the computation shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from agent.loop.answers import fit_line, in_unit, sheet_field, with_own_unit
from agent.models.base import OutputSchema
from chain.facts import DERIVED_KINDS, FACT_KINDS, KIND_PARAMS, OPEN_PARAMS

__all__ = [
    "DERIVED_KINDS",
    "KIND_PARAMS",
    "OPEN_PARAMS",
    "Checklist",
    "ChecklistItem",
    "ItemProvenance",
    "checklist_schema",
    "has_block_refs",
    "leading_number",
    "parse_checklist",
    "resolve_blocks",
    "task_checklist",
    "words",
]

ItemProvenance = Literal["observed", "derived"]
"""How a covered item's value was reached. ``observed``: a tool result holds it (cited by
evidence id). ``derived``: computed here from observed items (the computation is kept)."""

_OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_STARTS_NUMBER = re.compile(r"\s*-?\d")
_WORD = re.compile(r"[a-z0-9]+")


#: Parameters of derived items that name other items by id (positional, so not identity).
_ID_REFS = frozenset({"of", "if"})


def words(text: str) -> set[str]:
    """Lower-case alphanumeric words of ``text`` (for similarity and lessons)."""
    return set(_WORD.findall(text.lower()))


def leading_number(value: str | None) -> Decimal | None:
    """The first decimal number in a fact value (``"1.50 USDC"`` -> 1.50), or None."""
    m = _NUMBER.search(value or "")
    if m is None:
        return None
    try:
        return Decimal(m.group(0))
    except InvalidOperation:  # pragma: no cover - the regex admits only digits
        return None


def _norm(value: object) -> str | None:
    text = "" if value is None else str(value).strip().lower()
    return text or None


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _url_names(url: str, value: str) -> bool:
    """True when ``value`` is one of the path segments of ``url`` (a seller route's subject)."""
    path = re.sub(r"^https?://[^/]+", "", url.lower()).split("?")[0]
    return value in [s for s in path.split("/") if s]


def params_match(
    kind: str,
    item: Mapping[str, object],
    observed: Mapping[str, object],
    defaults: Mapping[str, object],
) -> bool:
    """True when an observation's parameters are the item's for every parameter of ``kind``.

    A value equal to the default counts as absent on both sides; a parameter the
    observation does not report may be named by its ``url`` (a route such as
    ``/datasets/token/USDC`` names the symbol).
    """
    for key in KIND_PARAMS.get(kind, ()):
        default = _norm(defaults.get(key))
        want, got = _norm(item.get(key)), _norm(observed.get(key))
        if want is None and key in OPEN_PARAMS:
            continue
        want = None if want == default else want
        got = None if got == default else got
        if want == got:
            continue
        if got is None and want is not None and isinstance(observed.get("url"), str):
            if _url_names(str(observed["url"]), want):
                continue
        return False
    return True


@dataclass(frozen=True)
class ChecklistItem:
    """One measurable fact. ``value``/``evidence_id`` are set once it is covered.

    ``params`` pins which value is meant (see KIND_PARAMS); ``unanswerable`` names why a
    planner cannot obtain the item (it stays uncovered and is named in the answer).
    """

    id: str
    text: str
    kind: str | None = None
    covered: bool = False
    value: str | None = None
    evidence_id: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    provenance: ItemProvenance | None = None
    computation: str | None = None
    unanswerable: str | None = None
    #: The block an item asked of the latest block was read at (its params name none).
    read_at: str | None = None
    #: The blocks a value over a window or range was read over ("0..11"): its answer
    #: names them (agent.loop.answers), whatever words the task used for the window.
    read_range: str | None = None

    @classmethod
    def from_dict(cls, row: Mapping[str, object]) -> ChecklistItem:
        """The item :meth:`as_dict` wrote (a run's saved state)."""
        params, provenance = row.get("params"), row.get("provenance")
        return cls(
            id=str(row["id"]),
            text=str(row["text"]),
            kind=_text_or_none(row.get("kind")),
            covered=bool(row.get("covered", False)),
            value=_text_or_none(row.get("value")),
            evidence_id=_text_or_none(row.get("evidence_id")),
            params={str(k): str(v) for k, v in params.items()} if isinstance(params, Mapping) else {},
            provenance="observed" if provenance == "observed" else "derived" if provenance == "derived" else None,
            computation=_text_or_none(row.get("computation")),
            unanswerable=_text_or_none(row.get("unanswerable")),
            read_at=_text_or_none(row.get("read_at")),
            read_range=_text_or_none(row.get("read_range")),
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "covered": self.covered,
            "value": self.value,
            "evidence_id": self.evidence_id,
            "params": dict(self.params),
            "provenance": self.provenance,
            "computation": self.computation,
            "unanswerable": self.unanswerable,
            "read_at": self.read_at,
            "read_range": self.read_range,
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
        """The first uncovered item a tool could still obtain: what this turn aims at."""
        return next((i for i in self.missing if not i.unanswerable), None)

    def cover(
        self,
        facts: Mapping[str, str],
        evidence_id: str,
        *,
        params: Mapping[str, object] | None = None,
        defaults: Mapping[str, object] | None = None,
        read_at: str | None = None,
        read_range: str | None = None,
    ) -> Checklist:
        """Mark items covered by one observation: same fact kind and same parameters.

        ``params`` are the parameters the observation's facts hold for (the call's
        arguments plus what the tool resolved); ``defaults`` the values that mean
        "absent" (the configured USDC, a tool's default window); ``read_at`` the block a
        block read was read at, kept when neither the item nor the call named a block
        (the latest); ``read_range`` the blocks a log scan read ("0..11"). Derived
        items whose inputs are now covered are computed too.
        """
        params, defaults = params or {}, defaults or {}
        out = []
        for item in self.items:
            kind = item.kind
            if (
                not item.covered
                and kind in facts
                and kind is not None
                and params_match(kind, item.params, params, defaults)
                and _holds_field(item, facts[kind])
            ):
                item = replace(
                    item,
                    covered=True,
                    value=facts[kind],
                    evidence_id=evidence_id,
                    provenance="observed",
                    # A block named, or the block a transaction was mined in: no head read.
                    read_at=None if any(p.get(k) for p in (item.params, params)
                                        for k in ("block", "of_tx")) else read_at,  # fmt: skip
                    read_range=read_range,
                )
            out.append(item)
        return Checklist(tuple(out)).derive()

    def derive(self) -> Checklist:
        """Compute every derived item (and settle every item gated by a false condition)
        whose inputs are covered; repeats until nothing changes (a chain of derivations)."""
        items = list(self.items)
        changed = True
        while changed:
            changed = False
            by_id = {i.id: i for i in items}
            for n, item in enumerate(items):
                if item.covered:
                    continue
                done = _derived(item, by_id)
                if done is not None:
                    items[n] = done
                    changed = True
                    by_id[item.id] = done
        return Checklist(tuple(items))

    def as_dicts(self) -> list[dict[str, object]]:
        return [i.as_dict() for i in self.items]

    def wants(self) -> frozenset[tuple[str, ...]]:
        """What the checklist asks for, order and wording aside: each item's kind and the
        parameters that pin its value (references to other items' ids left out), or the
        words of an item without a kind. Two checklists asking for the same facts agree."""
        out: set[tuple[str, ...]] = set()
        for item in self.items:
            if item.kind is None:
                out.add(("text", *sorted(words(item.text))))
                continue
            pins = sorted(f"{k}={str(v).lower()}" for k, v in item.params.items() if k not in _ID_REFS)
            out.add((item.kind, *pins))
        return frozenset(out)

    @classmethod
    def from_dicts(cls, rows: Sequence[Mapping[str, object]]) -> Checklist:
        return cls(tuple(ChecklistItem.from_dict(row) for row in rows))


def _holds_field(item: ChecklistItem, value: str) -> bool:
    """An item asking one field of a sheet ("who issues USDC": ``field=issuer``) is covered
    only by a value that holds that field: a sheet without it delivers nothing asked."""
    field_ = item.params.get("field")
    return not field_ or sheet_field(value, str(field_)) is not None


def _inputs(item: ChecklistItem, by_id: Mapping[str, ChecklistItem]) -> list[ChecklistItem] | None:
    """The covered items ``item`` derives from, or None while one is still missing."""
    ids = [s.strip() for s in str(item.params.get("of", "")).split(",") if s.strip()]
    found = [by_id.get(i) for i in ids]
    if not found or any(f is None or not f.covered for f in found):
        return None
    return [f for f in found if f is not None]


def _subject(item: ChecklistItem) -> str:
    for key in ("address", "token", "tx_hash", "symbol", "name"):
        if item.params.get(key):
            return str(item.params[key])
    if item.params.get("wallet") == "self":  # "Does my wallet hold more than 0xB?"
        return "the agent's wallet"
    return item.text


def _derived(item: ChecklistItem, by_id: Mapping[str, ChecklistItem]) -> ChecklistItem | None:
    """``item`` computed from its covered inputs, or None when it cannot be (yet)."""
    gate = by_id.get(str(item.params.get("if", "")))
    if gate is not None and gate.covered and gate.value == "false":
        return replace(
            item,
            covered=True,
            value=f"not done: condition {gate.id} is false",
            provenance="derived",
            computation=f"{gate.id} ({gate.text}) = false: {gate.computation}",
        )
    if item.kind not in DERIVED_KINDS:
        return None
    inputs = _inputs(item, by_id)
    if inputs is None:
        return None
    # A value computes only from the number it starts with: "none: no USDC transfers in
    # blocks 3..12" (the largest of no transfers) is no 3.
    numbers = [leading_number(i.value) if _STARTS_NUMBER.match(i.value or "") else None
               for i in inputs]  # fmt: skip
    if any(n is None for n in numbers):
        return None
    values = [n for n in numbers if n is not None]
    op = str(item.params.get("op", ""))
    # Values read at one latest block are computed at that block: the line names it too.
    read_at = {i.read_at for i in inputs}
    at = read_at.pop() if len(read_at) == 1 else None
    if item.kind == "comparison" and len(inputs) == 1 and op == "unit":
        # "in cents": a unit the tool does not state, computed from the value it does.
        src, unit = inputs[0], str(item.params.get("unit", ""))
        converted = in_unit(src.kind or "", unit, src.value or "")
        if converted is None:
            return None
        own = with_own_unit(src.kind or "", src.value or "")
        return replace(item, covered=True, value=f"{converted} ({own})", provenance="derived",
                       computation=f"{src.id} {own} = {converted}", read_at=at)  # fmt: skip
    if item.kind == "comparison" and len(inputs) >= 2 and op in _AGGREGATE:
        found = _AGGREGATE[op](inputs, values, item.params)
        if found is None:
            return None
        value, comp = found
        return replace(item, covered=True, value=value, provenance="derived", computation=comp,
                       read_at=at)  # fmt: skip
    if item.kind == "condition" and len(inputs) == 1 and op in _OPS:
        threshold = leading_number(str(item.params.get("than", "")))
        if threshold is None:
            return None
        truth = "true" if _OPS[op](values[0], threshold) else "false"
        comp = f"{inputs[0].id} {values[0]} {op} {threshold} = {truth}"
        return replace(item, covered=True, value=truth, provenance="derived", computation=comp,
                       read_at=at)  # fmt: skip
    return None


_UNIT_WORD = re.compile(r"^\s*-?\d+(?:\.\d+)?\s*([A-Za-z]+)?")


def _unit_of(item: ChecklistItem) -> str:
    """The unit word a value is written in ("USDC" of "1.50 USDC"; "" for a count)."""
    m = _UNIT_WORD.match(item.value or "")
    return (m.group(1) or "") if m else ""


def _in_asked_unit(inputs: Sequence[ChecklistItem], amount: Decimal) -> str:
    """``amount`` (in the inputs' own unit) written as the inputs' values are asked: the
    asked unit first ("250 cents (2.50 USDC)"), exact."""
    return _shown(inputs[0], f"{amount:f} {_unit_of(inputs[0])}".strip())


def _shown(item: ChecklistItem, value: str | None = None) -> str:
    """``value`` (the item's own by default) in the unit the task asked for the item, its
    own unit after ("250 cents (2.50 USDC)"); as it is when none was asked."""
    own = item.value or "" if value is None else value
    unit = item.params.get("unit")
    converted = in_unit(item.kind or "", unit, own) if unit else None
    return f"{converted} ({own})" if converted else own


def _listed(inputs: Sequence[ChecklistItem]) -> str:
    return ", ".join(f"{i.id} {i.value}" for i in inputs)


def _extreme(
    inputs: Sequence[ChecklistItem], values: Sequence[Decimal], params: Mapping[str, str]
) -> tuple[str, str]:
    """Which holds the most (``max``) or the least (``min``). A tie reads as a tie whatever
    the wording (larger, smaller, most, least): "neither: both hold 10000 ETH", "none: all 3
    hold 1 USDC", "a tie for the most: 0xA and 0xB, 2.50 USDC each" (outside test 21, Q20,
    read "equal (10000 ETH and 10000 ETH) is smaller")."""
    op = params.get("op")
    best = max(values) if op == "max" else min(values)
    won = [i for i, v in zip(inputs, values, strict=True) if v == best]
    if len(inputs) == 2:
        word = "larger" if op == "max" else "smaller"
    else:
        word = "the largest" if op == "max" else "the smallest"
    listed = " vs ".join(f"{i.id} {i.value}" for i in inputs)
    if len(won) == 1:
        value = f"{_subject(won[0])} ({_shown(won[0])})"
        return value, f"{listed}: {value} is {word}"
    verb, amount = _TIED.get(won[0].kind or "", ("are", "{}"))
    amount = amount.format(_shown(won[0]))
    if len(won) == len(inputs):
        who = "neither" if len(inputs) == 2 else "none"
        every = "both" if len(inputs) == 2 else f"all {len(inputs)}"
        return f"{who}: {every} {verb} {amount}", f"{listed}: a tie, {who} is {word}"
    most = "the most" if op == "max" else "the least"
    names = " and ".join(_subject(i) for i in won)
    return (f"a tie for {most}: {names}, {amount} each",
            f"{listed}: {' and '.join(i.id for i in won)} tie for {word}")  # fmt: skip


#: How tied values are said, per kind (verb, amount): a balance is held, transfers had.
_TIED = {"usdc_balance": ("hold", "{}"), "eth_balance": ("hold", "{}"),
         "transfer_count": ("have", "{} transfers")}  # fmt: skip


def _sum(
    inputs: Sequence[ChecklistItem], values: Sequence[Decimal], params: Mapping[str, str]
) -> tuple[str, str] | None:
    """The values added, exactly (Decimal of the exact values the tools state)."""
    if len({_unit_of(i) for i in inputs}) != 1:
        return None
    total = sum(values, Decimal(0))
    shown = _in_asked_unit(inputs, total)
    return shown, f"{' + '.join(f'{i.id} {i.value}' for i in inputs)} = {total:f} {_unit_of(inputs[0])}"


def _count(
    inputs: Sequence[ChecklistItem], values: Sequence[Decimal], params: Mapping[str, str]
) -> tuple[str, str] | None:
    """How many values pass the count's test (above 0 unless the task names a threshold)."""
    cmp = params.get("cmp", ">")
    than = leading_number(params.get("than", "0"))
    if cmp not in _OPS or than is None:
        return None
    held = [i for i, v in zip(inputs, values, strict=True) if _OPS[cmp](v, than)]
    who = ", ".join(_subject(i) for i in held) or "none"
    value = f"{len(held)} of {len(inputs)} ({who})"
    return value, f"{_listed(inputs)}: {len(held)} of {len(inputs)} {cmp} {than}"


def _diff(
    inputs: Sequence[ChecklistItem], values: Sequence[Decimal], params: Mapping[str, str]
) -> tuple[str, str] | None:
    """The first value minus the second: its size first, then which holds more."""
    if len(inputs) != 2 or _unit_of(inputs[0]) != _unit_of(inputs[1]):
        return None
    (a, b), (x, y) = inputs, values
    size = _in_asked_unit(inputs, abs(x - y))
    if x == y:
        value = f"{size}: {_subject(a)} and {_subject(b)} hold the same ({a.value})"
    else:
        word = "more" if x > y else "less"
        value = f"{size}: {_subject(a)} holds {word} than {_subject(b)}"
    return value, f"{a.id} {a.value} - {b.id} {b.value} = {x - y:f} {_unit_of(a)}".rstrip()


_Aggregate = Callable[
    [Sequence[ChecklistItem], Sequence[Decimal], Mapping[str, str]], "tuple[str, str] | None"
]
#: The aggregates a ``comparison`` item computes over the values of its inputs (``op``):
#: which is largest or smallest, their sum, how many pass a test, the difference of two.
_AGGREGATE: dict[str, _Aggregate] = {
    "max": _extreme, "min": _extreme, "sum": _sum, "count": _count, "diff": _diff,
}  # fmt: skip


#: Parameters that name a block, absolute ("27") or relative to the head ("latest-2").
BLOCK_PARAMS = ("block", "from_block", "to_block")
_RELATIVE = r"(?:latest|head)\s*-\s*(\d+)"
_RELATIVE_BLOCK = re.compile(rf"^{_RELATIVE}\Z", re.IGNORECASE)
#: The same reference said inside a label ("USDC transfer count in blocks 4 to latest-0").
_RELATIVE_IN_TEXT = re.compile(rf"\b{_RELATIVE}\b", re.IGNORECASE)


def has_block_refs(checklist: Checklist) -> bool:
    """True when an item names a block (the head is then needed to check or resolve it),
    also only in its label ("in blocks 2 to latest-0: not answered" showed the notation;
    outside round 57, Q39)."""
    return any(i.params.get(k) for i in checklist.items for k in BLOCK_PARAMS) or any(
        _RELATIVE_IN_TEXT.search(i.text) for i in checklist.items)


def resolve_blocks(checklist: Checklist, head: int) -> Checklist:
    """Block references made exact against ``head`` (the chain head at run start):
    ``latest-N`` becomes ``head - N``; a block before genesis or past the head is a
    premise the chain contradicts, so its item is marked unanswerable, naming the head."""
    out = []
    for item in checklist.items:
        params, text, why = dict(item.params), item.text, None
        for key in BLOCK_PARAMS:
            raw = str(params.get(key, "")).strip()
            if not raw:
                continue
            rel = _RELATIVE_BLOCK.match(raw)
            number = head - int(rel.group(1)) if rel else (int(raw) if raw.isdigit() else None)
            if number is None:
                why = f"block {raw!r} is not a block number or latest-N"
                continue
            if rel and number < 0:
                # Said in the task's words, never as a block number below 0 ("block -1").
                said = f"the block {rel.group(1)} before the latest"
                text = re.sub(rf"\bblock {re.escape(raw)}\b", said, text)
                why = (f"{said} is before the first block: the head at run start is {head}, "
                       f"so only blocks 0 to {head} exist")
                continue
            if rel:
                params[key] = str(number)
            if number > head:
                why = f"block {number} does not exist yet (the head at run start is {head})"
        if why and not item.unanswerable:
            item = replace(item, unanswerable=why)
        # Every label names its blocks by number, its own parameters' and any it borrows
        # ("... in blocks 4 to latest-0 > 5 usdc", a test of a windowed total: outside
        # round 52's line kept "latest-0", a number no evidence holds, and stopped unbacked).
        text = _RELATIVE_IN_TEXT.sub(lambda m: str(head - int(m[1])) if int(m[1]) <= head else m[0], text)
        out.append(replace(item, params=params, text=text))
    return Checklist(tuple(out))


class _ItemModel(BaseModel):
    text: str = Field(min_length=1, max_length=200)
    kind: str | None = None
    params: dict[str, str | int] = Field(default_factory=dict)
    unanswerable: str | None = None


class _ChecklistModel(BaseModel):
    items: list[_ItemModel]


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
        kind = item.kind if item.kind in FACT_KINDS | DERIVED_KINDS else None
        items.append(
            ChecklistItem(
                id=f"c{n}",
                text=item.text.strip(),
                kind=kind,
                params={k: str(v) for k, v in item.params.items()},
                unanswerable=item.unanswerable,
            )
        )
    return Checklist(tuple(items))


def checklist_schema(max_items: int = 5) -> OutputSchema:
    """The checklist reply as a JSON Schema: at most ``max_items`` items, kinds enumerated
    (a server that enforces schemas by grammar cannot produce anything else)."""
    kinds = sorted(FACT_KINDS | DERIVED_KINDS)
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
                            "params": {
                                "type": "object",
                                "description": "Which value the task asks for, in the task's "
                                "own values: " + ", ".join(sorted(_PARAM_NAMES)),
                                "additionalProperties": {"type": "string"},
                            },
                        },
                        "required": ["text", "kind"],
                    },
                }
            },
            "required": ["items"],
        },
    )


_PARAM_NAMES = {p for names in KIND_PARAMS.values() for p in names}

#: Longest task text kept as the fallback checklist item (the item's own limit; a hash or
#: an address in it is kept whole and not counted).
TASK_ITEM_CHARS = 200


def task_checklist(task: str) -> Checklist:
    """The checklist when extraction failed twice: the task itself is the one item.

    It has no fact kind, so no observation covers it: a run cannot look finished because
    it had nothing to find (it ends ``cannot-plan`` naming the task as not answered).
    """
    text = fit_line(task, TASK_ITEM_CHARS) or "(empty task)"
    return Checklist((ChecklistItem(id="c1", text=text),))
