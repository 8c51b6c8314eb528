"""What the offline planner reads from a request: the loop's context, made uniform.

The loop's context dict (task, tools, checklist, focus, evidence, rendered history,
self-model) becomes one frozen value; calls are keyed the way the loop keys them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from agent.jsonvalues import JSONObject, as_list, as_object
from agent.loop.lessons import distrusted_sellers
from agent.models._factpatterns import ADDRESS, extract_checklist, infer_kind

__all__ = [
    "PlanContext",
    "canon",
    "endpoint_price",
    "origin",
    "schema_of",
]

_URL = re.compile(r"https?://[^\s'\"<>)]+")
_HISTORY_LINE = re.compile(r"^step (\d+): (\S+) (\{.*?\}) -> ([\w-]+)(?: \[([^\]]+)\])?:? ?(.*)\Z")


def canon(tool: str, args: Mapping[str, object]) -> str:
    """A case-insensitive canonical string of one call, for set membership."""
    return json.dumps([tool, args], sort_keys=True, separators=(",", ":"), default=str).lower()


def is_address(value: object) -> bool:
    return isinstance(value, str) and bool(ADDRESS.fullmatch(value))


def find_address(obj: object, names: tuple[str, ...], depth: int = 0) -> str | None:
    """The first 0x address under one of ``names`` in a nested dict (self-model shapes vary)."""
    if not isinstance(obj, Mapping) or depth > 3:
        return None
    for name in names:
        value = obj.get(name)
        if is_address(value):
            return str(value)
        if isinstance(value, Mapping):
            inner = find_address(value, ("address", *names), depth + 1)
            if inner:
                return inner
    for value in obj.values():
        if isinstance(value, Mapping):
            inner = find_address(value, names, depth + 1)
            if inner:
                return inner
    return None


def find_str(obj: object, names: tuple[str, ...], depth: int = 0) -> str | None:
    if not isinstance(obj, Mapping) or depth > 3:
        return None
    for name in names:
        value = obj.get(name)
        if isinstance(value, str) and value:
            return value
    for value in obj.values():
        inner = find_str(value, names, depth + 1)
        if inner:
            return inner
    return None


@dataclass(frozen=True)
class PlanContext:
    """What the offline planner reads from one request's context (and messages)."""

    task: str
    tools: tuple[JSONObject, ...]
    items: tuple[JSONObject, ...]
    focus: str | None
    evidence: tuple[JSONObject, ...]
    history: tuple[JSONObject, ...]
    wallet: str | None
    usdc: str | None
    paywall_url: str | None
    spend_left: int | None = None
    network: str = ""
    #: Seller origins paid in this run that did not deliver (the loop refuses them).
    failed_sellers: frozenset[str] = frozenset()
    #: Seller origins the task distrusts (the failed ones, and those a lesson from a
    #: similar task says failed to deliver; ``lessons.distrusted_sellers``, the rule the
    #: loop's best offer follows): their offers go after other sellers' (a preference,
    #: not a ban; the judge rules either way).
    distrusted_sellers: frozenset[str] = frozenset()

    @classmethod
    def read(
        cls, context: Mapping[str, object], messages: Sequence[Mapping[str, object]]
    ) -> PlanContext:
        task = str(context.get("task") or "") or task_from_messages(messages)
        network = str(context.get("network") or "")
        checklist = context.get("checklist")
        if isinstance(checklist, Mapping):  # {"items": [...]} shape
            checklist = checklist.get("items")
        if checklist is None:
            items: list[JSONObject] = [
                {"id": f"c{n}", **item, "covered": False}
                for n, item in enumerate(extract_checklist(task, network=network), start=1)
            ]
        else:
            items = [as_object(i) for i in as_list(checklist) if isinstance(i, Mapping)]
        for item in items:
            if not item.get("kind"):
                item["kind"] = infer_kind(str(item.get("text", "")))
        history = context.get("history")
        focus = context.get("focus")
        if isinstance(focus, Mapping):
            focus = focus.get("id") or focus.get("text")
        self_model = context.get("self_model") or {}
        tools = tuple(as_object(t) for t in as_list(context.get("tools")) if isinstance(t, Mapping))
        failed = frozenset(str(o) for o in as_list(context.get("failed_sellers")))
        return cls(
            task=task,
            tools=tools,
            items=tuple(items),
            focus=str(focus) if focus else None,
            evidence=tuple(
                as_object(e) for e in as_list(context.get("evidence")) if isinstance(e, Mapping)
            ),
            history=tuple(history_rows(history)),
            wallet=find_address(self_model, ("wallet_address", "wallet", "agent_address")),
            usdc=find_address(self_model, ("usdc_address", "usdc", "asset")),
            paywall_url=(
                find_str(self_model, ("paywall_url",))
                or find_str(context, ("paywall_url",))
                or url_in_tools(tools)  # the runtime's paywall (NibSettings), via the tools
            ),
            spend_left=int_or_none(self_model.get("spend_left_usdc"))
            if isinstance(self_model, Mapping)
            else None,
            network=network,
            failed_sellers=failed,
            distrusted_sellers=distrusted_sellers(failed, as_list(context.get("lessons"))),
        )

    def key(self, tool: str, args: object) -> str:
        """A call's identity as the loop sees it: arguments with schema defaults filled in
        (the loop records ``model_dump`` of the validated arguments), case-insensitive."""
        schema = next((schema_of(t) for t in self.tools if t.get("name") == tool), {})
        full = {
            name: prop["default"]
            for name, prop in as_object(schema.get("properties")).items()
            if isinstance(prop, Mapping) and "default" in prop
        }
        full.update(as_object(args))
        return canon(tool, full)


def int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def endpoint_price(plan: PlanContext, url: str) -> int | None:
    """The advertised price (atomic USDC) of ``url`` when a paid tool lists it."""
    for tool in plan.tools:
        for ep in map(as_object, as_list(tool.get("endpoints"))):
            if not isinstance(ep.get("url"), str):
                continue
            pattern = re.escape(str(ep["url"])).replace(r"\{symbol\}", "[^/]+")
            pattern = pattern.replace(r"\{name\}", "[^/]+")
            if re.fullmatch(pattern, url, re.IGNORECASE):
                return int_or_none(ep.get("price_atomic"))
    return None


def schema_of(tool: Mapping[str, object]) -> JSONObject:
    """A tool's JSON Schema of its arguments, whichever key carries it ({} for none)."""
    return as_object(tool.get("args") or tool.get("args_schema") or tool.get("parameters"))


_TASK_LINE = re.compile(r"^Task:\s*(.+)$", re.MULTILINE)


def task_from_messages(messages: Sequence[Mapping[str, object]]) -> str:
    """The task when the request carries no context (minimal retry, lesson)."""
    for m in messages:
        found = _TASK_LINE.search(str(m.get("content", "")))
        if found:
            return found.group(1).strip()
    return next(
        (str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), ""
    )


def history_rows(history: object) -> Iterator[JSONObject]:
    """History entries as dicts ``{step, tool, args, outcome, evidence_id, summary}``.

    The loop sends the rendered block (``agent.loop.history.render``: one ``step N: tool {args}
    -> outcome [eid]: summary`` line per step); lists of entry dicts are accepted too.
    """
    entries = history.splitlines() if isinstance(history, str) else as_list(history)
    for entry in entries:
        if isinstance(entry, Mapping):
            yield as_object(entry)
        elif isinstance(entry, str):
            m = _HISTORY_LINE.match(entry.strip())
            if m:
                try:
                    args = json.loads(m.group(3))
                except ValueError:
                    args = {}
                yield {
                    "step": int(m.group(1)),
                    "tool": m.group(2),
                    "args": args if isinstance(args, dict) else {},
                    "outcome": m.group(4),
                    "evidence_id": m.group(5),
                    "summary": m.group(6),
                }


def url_in_tools(tools: Iterable[Mapping[str, object]]) -> str | None:
    for tool in tools:
        if tool.get("kind") == "paid":
            text = f"{tool.get('description', '')} {json.dumps(schema_of(tool), default=str)}"
            m = _URL.search(text)
            if m:
                return m.group(0).rstrip(".,;:")
    return None


def origin(url: str) -> str:
    m = re.match(r"(https?://[^/]+)", url)
    return m.group(1) if m else url.rstrip("/")
