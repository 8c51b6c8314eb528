"""The offline planner: a deterministic Model that plans from ``request.context`` alone.

It extracts the checklist with patterns over the fact-kind vocabulary, proposes the tool
that provides the first uncovered fact (free tools first; a paid one goes through the
judge like any call), and writes the answer from the evidence. It is the default when
no model is configured, so a fresh machine can run a task; when a task is outside what
it can plan it says so and names how to configure a real model.

``local`` is True: it runs on this machine and generation is free, so the default profile
is ``local-guarded`` (more steps and time, tighter progress guards), as for a local LLM.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from agent.models.base import ModelReply, ModelRequest, Usage

__all__ = [
    "CANNOT_PLAN",
    "CONFIGURE_MODEL",
    "FACT_PATTERNS",
    "PAYWALL_PATHS",
    "FactPattern",
    "OfflinePlanner",
    "extract_checklist",
]

CONFIGURE_MODEL = (
    "Configure a real model: set NIB_MODEL_PROVIDER=openai (or anthropic), NIB_MODEL and the "
    "API key variable (NIB_OPENAI_API_KEY or NIB_ANTHROPIC_API_KEY)."
)
CANNOT_PLAN = (
    "The offline planner cannot plan this task: it found none of the facts it knows how to "
    "fetch ({known}) in the task text. " + CONFIGURE_MODEL
)

Subject = Literal["none", "account", "token", "tx", "symbol", "protocol"]
"""What a fact is about. ``none``: the chain itself. ``account``: a 0x address holding
funds. ``token``: a 0x token contract. ``tx``: a 0x transaction hash. ``symbol``: a token
symbol (USDC). ``protocol``: a protocol name (uniswap)."""


@dataclass(frozen=True)
class FactPattern:
    """Task phrases that ask for one fact kind, the item text, and what the fact is about."""

    kind: str
    pattern: re.Pattern[str]
    label: str
    subject: Subject
    needs_hash: bool = False


def _p(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.IGNORECASE)


FACT_PATTERNS: tuple[FactPattern, ...] = (
    # Priority order: an earlier pattern claims its span, so "average gas price" is
    # gas_stats, not gas_price_gwei, and "ETH balance of" is not a USDC "balance of".
    FactPattern("premium_report", _p(r"premium\s+report"), "premium report", "none"),
    FactPattern(
        "protocol_factsheet",
        _p(r"protocol\s+fact[\s-]*sheets?|\bprotocols?\b"),
        "protocol fact sheet",
        "protocol",
    ),
    FactPattern(
        "token_factsheet",
        _p(r"(?:token\s+)?fact[\s-]*sheets?"),
        "token fact sheet",
        "symbol",
    ),
    FactPattern(
        "gas_stats",
        _p(r"gas\s+(?:usage\s+)?(?:statistics|stats)|average\s+gas(?:\s+(?:price|used|usage))?"),
        "gas statistics",
        "none",
    ),
    FactPattern(
        "transfer_stats",
        _p(r"transfers?\s+(?:statistics|stats|volume)|\bvolume\b"),
        "USDC transfer statistics",
        "none",
    ),
    FactPattern("tx_gas_used", _p(r"gas\s+used"), "transaction gas used", "tx"),
    FactPattern("base_fee_gwei", _p(r"base[\s-]*fee"), "base fee (gwei)", "none"),
    FactPattern("gas_price_gwei", _p(r"gas\s+price|price\s+of\s+gas"), "gas price (gwei)", "none"),
    FactPattern(
        "block_timestamp",
        _p(r"(?:(?:latest|current)\s+)?(?:block\s+)?timestamp|block\s+time\b"),
        "latest block timestamp",
        "none",
    ),
    FactPattern(
        "block_number",
        _p(r"block\s+number|block\s+height|(?:latest|current)\s+block"),
        "latest block number",
        "none",
    ),
    FactPattern("eth_balance", _p(r"\b(?:eth|ether)\s+balance"), "ETH balance", "account"),
    FactPattern(
        "usdc_balance",
        _p(r"usdc\s+balance|token\s+balance|balance\s+of|\bbalance\b"),
        "USDC balance",
        "account",
    ),
    FactPattern("token_symbol", _p(r"\bsymbols?\b"), "token symbol", "token"),
    FactPattern("token_decimals", _p(r"\bdecimals\b"), "token decimals", "token"),
    FactPattern("token_supply", _p(r"(?:total\s+)?supply"), "token total supply", "token"),
    FactPattern(
        "transfer_count",
        _p(r"(?:number\s+of\s+)?(?:usdc\s+)?transfers\b|transfer\s+count"),
        "USDC transfer count",
        "account",
    ),
    FactPattern("tx_status", _p(r"\breceipt\b|\bstatus\b"), "transaction status", "tx"),
    FactPattern(
        "tx_status", _p(r"\b(?:transaction|tx)\b"), "transaction status", "tx", needs_hash=True
    ),
)
"""The checklist pattern table (see the module docstring); the kinds are the shared
fact-kind vocabulary of agent/checklist.py."""

PAYWALL_PATHS: dict[str, str] = {
    "gas_stats": "/analytics/gas",
    "transfer_stats": "/analytics/transfers",
    "token_factsheet": "/datasets/token/{symbol}",
    "protocol_factsheet": "/datasets/protocol/{name}",
    "premium_report": "/premium/report",
}
"""Where the local paywall (chain/paywall.py) sells each paid fact kind."""

MAX_ITEMS = 5
MAX_BATCH = 3
_VALUE_CHARS = 300

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}(?![0-9a-fA-F])")
_TX_HASH = re.compile(r"0x[0-9a-fA-F]{64}(?![0-9a-fA-F])")
_URL = re.compile(r"https?://[^\s'\"<>)]+")
_HISTORY_LINE = re.compile(r"^step \d+: (\S+) (\{.*?\}) -> (\w+)(?: \[([^\]]+)\])?:? ?(.*)$")


@lru_cache(maxsize=1)
def _datasets() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(token symbols, protocol names) the paywall has fact sheets for."""

    def keys(name: str, field: str, fallback: tuple[str, ...]) -> tuple[str, ...]:
        try:
            text = resources.files("chain").joinpath("data", f"{name}.json").read_text("utf-8")
            return tuple(json.loads(text)[field])
        except (OSError, ValueError, KeyError, ModuleNotFoundError):
            return fallback

    return keys("tokens", "tokens", ("USDC",)), keys("protocols", "protocols", ())


def _word_positions(text: str, names: Iterable[str]) -> list[tuple[int, str]]:
    found = []
    for name in names:
        for m in re.finditer(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.IGNORECASE):
            found.append((m.start(), name))
    return sorted(found)


def _nearest(found: list[tuple[int, str]], start: int, end: int) -> str | None:
    """The first subject after the phrase, else the last one before it."""
    after = [v for pos, v in found if pos >= end]
    if after:
        return after[0]
    before = [v for pos, v in found if pos < start]
    return before[-1] if before else None


def extract_checklist(task: str, *, max_items: int = MAX_ITEMS) -> list[dict[str, Any]]:
    """Checklist items ``{"text", "kind"}`` for ``task``, in the order the task asks.

    One item per fact kind; the item text names its subject (address, tx hash, token
    symbol or protocol) when the task gives one, so the proposal can find it again.
    """
    symbols, protocols = _datasets()
    subjects: dict[Subject, list[tuple[int, str]]] = {
        "account": [(m.start(), m.group(0)) for m in _ADDRESS.finditer(task)],
        "token": [(m.start(), m.group(0)) for m in _ADDRESS.finditer(task)],
        "tx": [(m.start(), m.group(0)) for m in _TX_HASH.finditer(task)],
        "symbol": _word_positions(task, symbols),
        "protocol": _word_positions(task, protocols),
    }
    claimed: list[tuple[int, int]] = []
    hits: list[tuple[int, str, str]] = []
    for fp in FACT_PATTERNS:
        if fp.needs_hash and not subjects["tx"]:
            continue
        for m in fp.pattern.finditer(task):
            start, end = m.span()
            if any(start < e and s < end for s, e in claimed):
                continue
            claimed.append((start, end))
            kind, label, subject = fp.kind, fp.label, fp.subject
            if kind == "token_factsheet":
                # "fact sheet of Uniswap" is a protocol's sheet: the nearest name decides.
                sym = _nearest(subjects["symbol"], start, end)
                proto = _nearest(subjects["protocol"], start, end)
                if proto and (not sym or _closer(task, proto, sym, end)):
                    kind, label, subject = "protocol_factsheet", "protocol fact sheet", "protocol"
            value = None if subject == "none" else _nearest(subjects[subject], start, end)
            text = f"{label} of {value}" if value else label
            hits.append((start, kind, text))
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for _, kind, text in sorted(hits):
        if kind in seen:
            continue
        seen.add(kind)
        items.append({"text": text, "kind": kind})
    return items[:max_items]


def _closer(task: str, a: str, b: str, end: int) -> bool:
    """True when ``a`` occurs at or after ``end`` before ``b`` does (or ``b`` never does)."""
    lower = task.lower()
    pa, pb = lower.find(a.lower(), end), lower.find(b.lower(), end)
    if pa < 0:
        return pb < 0 and lower.rfind(a.lower(), 0, end) > lower.rfind(b.lower(), 0, end)
    return pb < 0 or pa < pb


def _infer_kind(text: str) -> str | None:
    items = extract_checklist(text, max_items=1)
    return items[0]["kind"] if items else None


def _canon(tool: str, args: Mapping[str, Any]) -> str:
    return json.dumps([tool, args], sort_keys=True, separators=(",", ":"), default=str).lower()


def _clip(text: str, limit: int = _VALUE_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _is_address(value: Any) -> bool:
    return isinstance(value, str) and bool(_ADDRESS.fullmatch(value))


def _find_address(obj: Any, names: tuple[str, ...], depth: int = 0) -> str | None:
    """The first 0x address under one of ``names`` in a nested dict (self-model shapes vary)."""
    if not isinstance(obj, Mapping) or depth > 3:
        return None
    for name in names:
        value = obj.get(name)
        if _is_address(value):
            return str(value)
        if isinstance(value, Mapping):
            inner = _find_address(value, ("address", *names), depth + 1)
            if inner:
                return inner
    for value in obj.values():
        if isinstance(value, Mapping):
            inner = _find_address(value, names, depth + 1)
            if inner:
                return inner
    return None


def _find_str(obj: Any, names: tuple[str, ...], depth: int = 0) -> str | None:
    if not isinstance(obj, Mapping) or depth > 3:
        return None
    for name in names:
        value = obj.get(name)
        if isinstance(value, str) and value:
            return value
    for value in obj.values():
        inner = _find_str(value, names, depth + 1)
        if inner:
            return inner
    return None


@dataclass(frozen=True)
class _Plan:
    """What the planner can read from one request's context."""

    task: str
    tools: tuple[dict[str, Any], ...]
    items: tuple[dict[str, Any], ...]
    focus: str | None
    evidence: tuple[dict[str, Any], ...]
    history: tuple[dict[str, Any], ...]
    wallet: str | None
    usdc: str | None
    paywall_url: str | None
    spend_left: int | None = None

    @classmethod
    def read(cls, context: Mapping[str, Any], messages: list[dict[str, str]]) -> _Plan:
        task = str(context.get("task") or "") or _task_from_messages(messages)
        checklist = context.get("checklist")
        if isinstance(checklist, Mapping):  # {"items": [...]} shape
            checklist = checklist.get("items")
        if checklist is None:
            items: list[dict[str, Any]] = [
                {"id": f"c{n}", **item, "covered": False}
                for n, item in enumerate(extract_checklist(task), start=1)
            ]
        else:
            items = [dict(i) for i in checklist if isinstance(i, Mapping)]
        for item in items:
            if not item.get("kind"):
                item["kind"] = _infer_kind(str(item.get("text", "")))
        history = context.get("history")
        if history is None:  # the lesson request carries the trajectory only in its prompt
            history = [line for m in messages for line in str(m.get("content", "")).splitlines()]
        focus = context.get("focus")
        if isinstance(focus, Mapping):
            focus = focus.get("id") or focus.get("text")
        self_model = context.get("self_model") or {}
        tools = tuple(t for t in context.get("tools") or () if isinstance(t, Mapping))
        return cls(
            task=task,
            tools=tuple(dict(t) for t in tools),
            items=tuple(items),
            focus=str(focus) if focus else None,
            evidence=tuple(
                dict(e) for e in context.get("evidence") or () if isinstance(e, Mapping)
            ),
            history=tuple(_history_rows(history)),
            wallet=_find_address(self_model, ("wallet_address", "wallet", "agent_address")),
            usdc=_find_address(self_model, ("usdc_address", "usdc", "asset")),
            paywall_url=(
                _find_str(self_model, ("paywall_url",))
                or _find_str(context, ("paywall_url",))
                or _url_in_tools(tools)
                or os.environ.get("NIB_PAYWALL_URL")
            ),
            spend_left=_int_or_none(self_model.get("spend_left_usdc"))
            if isinstance(self_model, Mapping)
            else None,
        )

    def key(self, tool: str, args: Mapping[str, Any]) -> str:
        """A call's identity as the loop sees it: arguments with schema defaults filled in
        (the loop records ``model_dump`` of the validated arguments), case-insensitive."""
        schema: Mapping[str, Any] = next(
            (_schema(t) for t in self.tools if t.get("name") == tool), {}
        )
        full = {
            name: prop["default"]
            for name, prop in (schema.get("properties") or {}).items()
            if isinstance(prop, Mapping) and "default" in prop
        }
        full.update(args)
        return _canon(tool, full)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _endpoint_price(plan: _Plan, url: str) -> int | None:
    """The advertised price (atomic USDC) of ``url`` when a paid tool lists it."""
    for tool in plan.tools:
        for ep in tool.get("endpoints") or ():
            if not isinstance(ep, Mapping) or not isinstance(ep.get("url"), str):
                continue
            pattern = re.escape(ep["url"]).replace(r"\{symbol\}", "[^/]+")
            pattern = pattern.replace(r"\{name\}", "[^/]+")
            if re.fullmatch(pattern, url, re.IGNORECASE):
                return _int_or_none(ep.get("price_atomic"))
    return None


def _schema(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    schema = tool.get("args") or tool.get("args_schema") or tool.get("parameters") or {}
    return schema if isinstance(schema, Mapping) else {}


_TASK_LINE = re.compile(r"^Task:\s*(.+)$", re.MULTILINE)


def _task_from_messages(messages: list[dict[str, str]]) -> str:
    """The task when the request carries no context (minimal retry, lesson)."""
    for m in messages:
        found = _TASK_LINE.search(str(m.get("content", "")))
        if found:
            return found.group(1).strip()
    return next(
        (str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), ""
    )


def _history_rows(history: Any) -> Iterable[dict[str, Any]]:
    """History entries as dicts ``{tool, args, outcome, summary}``.

    The loop sends the rendered block (``agent.history.render``: one ``step N: tool {args}
    -> outcome [eid]: summary`` line per step); lists of entry dicts are accepted too.
    """
    if isinstance(history, str):
        history = history.splitlines()
    for entry in history:
        if isinstance(entry, Mapping):
            yield dict(entry)
        elif isinstance(entry, str):
            m = _HISTORY_LINE.match(entry.strip())
            if m:
                try:
                    args = json.loads(m.group(2))
                except ValueError:
                    args = {}
                yield {
                    "tool": m.group(1),
                    "args": args if isinstance(args, dict) else {},
                    "outcome": m.group(3),
                    "evidence_id": m.group(4),
                    "summary": m.group(5),
                }


def _url_in_tools(tools: Iterable[Mapping[str, Any]]) -> str | None:
    for tool in tools:
        if tool.get("kind") == "paid":
            text = f"{tool.get('description', '')} {json.dumps(_schema(tool), default=str)}"
            m = _URL.search(text)
            if m:
                return m.group(0).rstrip(".,;:")
    return None


def _origin(url: str) -> str:
    m = re.match(r"(https?://[^/]+)", url)
    return m.group(1) if m else url.rstrip("/")


class OfflinePlanner:
    """A deterministic planner behind the Model protocol. Uses no tokens and no network."""

    name = "offline"
    local = True

    def __repr__(self) -> str:
        return "OfflinePlanner()"

    async def complete(self, request: ModelRequest) -> ModelReply:
        """Reply to ``request`` from its context; the same request gives the same reply."""
        return ModelReply(text=self.reply_text(request), usage=Usage(0, 0, estimated=False))

    def reply_text(self, request: ModelRequest) -> str:
        """The reply text (synchronous core of :meth:`complete`)."""
        plan = _Plan.read(request.context, request.messages)
        if request.purpose == "checklist":
            return json.dumps({"items": extract_checklist(plan.task)})
        if request.purpose in ("propose", "replan"):
            return json.dumps(_propose(plan))
        if request.purpose == "synthesize":
            return _answer(plan)[0]
        return _lesson(plan)


# --------------------------------------------------------------------------- proposing


def _blocked_calls(plan: _Plan) -> tuple[set[str], dict[str, int]]:
    """(calls not to propose again, failure counts per call) from history and evidence."""
    blocked: set[str] = set()
    failures: dict[str, int] = {}
    for row in plan.history:
        tool = str(row.get("tool") or "")
        if not tool:
            continue
        key = plan.key(tool, row.get("args") or {})
        outcome = str(row.get("outcome") or row.get("status") or "").lower()
        if outcome in ("refused", "skipped", "ok") or "refus" in outcome:
            # Refused by the judge, skipped by a gate, or already executed: proposing it
            # again would be refused, skipped or stopped as a duplicate.
            blocked.add(key)
        elif outcome == "failed":
            failures[key] = failures.get(key, 0) + 1
    for ev in plan.evidence:
        blocked.add(plan.key(str(ev.get("tool", "")), ev.get("args") or {}))
    return blocked, failures


def _subject(plan: _Plan, item: Mapping[str, Any], pattern: re.Pattern[str]) -> str | None:
    text = str(item.get("text", ""))
    m = pattern.search(text) or pattern.search(plan.task)
    return m.group(0) if m else None


def _name_subject(plan: _Plan, item: Mapping[str, Any], names: tuple[str, ...]) -> str | None:
    for text in (str(item.get("text", "")), plan.task):
        found = _word_positions(text, names)
        if found:
            return found[0][1]
    return None


_TOKEN_KINDS = frozenset({"token_symbol", "token_decimals", "token_supply"})
_ACCOUNT_NAMES = frozenset({"address", "owner", "account", "holder", "wallet", "who", "addr"})
_TOKEN_NAMES = frozenset({"token", "token_address", "contract", "asset", "erc20"})


def _arg_value(
    plan: _Plan,
    item: Mapping[str, Any],
    kind: str,
    name: str,
    props: Mapping[str, Any],
    required: bool,
) -> Any:
    """A value for argument ``name``, or None. Optional arguments are filled only from the
    task (an explicit subject); required ones fall back to the wallet and USDC."""
    n = name.lower()
    symbols, protocols = _datasets()
    if "url" in n or n in ("endpoint", "resource"):
        return _paywall_url(plan, item, kind)
    if "hash" in n or n in ("tx", "transaction"):
        return _subject(plan, item, _TX_HASH)
    address = _subject(plan, item, _ADDRESS)
    token_target = n in _TOKEN_NAMES or (
        n in _ACCOUNT_NAMES and kind in _TOKEN_KINDS and not (_TOKEN_NAMES & set(props))
    )
    if token_target:
        if kind in _TOKEN_KINDS and address:
            return address
        return plan.usdc if required else None
    if n in _ACCOUNT_NAMES or n.endswith("_address"):
        return address or (plan.wallet if required else None)
    if n == "symbol":
        return _name_subject(plan, item, symbols) or ("USDC" if required else None)
    if n in ("name", "protocol"):
        return _name_subject(plan, item, protocols)
    return None


def _paywall_url(plan: _Plan, item: Mapping[str, Any], kind: str) -> str | None:
    """The seller URL for a paid ``kind``: a paid tool's advertised endpoint for it, else
    the local paywall's path (PAYWALL_PATHS) under the known paywall URL."""
    url = next(
        (
            str(ep["url"])
            for tool in plan.tools
            for ep in tool.get("endpoints") or ()
            if isinstance(ep, Mapping) and kind in (ep.get("facts") or ()) and ep.get("url")
        ),
        None,
    )
    if url is None:
        path = PAYWALL_PATHS.get(kind)
        if path is None or not plan.paywall_url:
            return None
        url = _origin(plan.paywall_url) + path
    symbols, protocols = _datasets()
    if "{symbol}" in url:
        url = url.replace("{symbol}", _name_subject(plan, item, symbols) or "USDC")
    if "{name}" in url:
        name = _name_subject(plan, item, protocols)
        if name is None:
            return None
        url = url.replace("{name}", name.lower())
    return url


def _build_args(
    plan: _Plan, item: Mapping[str, Any], kind: str, tool: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    schema = _schema(tool)
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    args: dict[str, Any] = {}
    for name in props:
        value = _arg_value(plan, item, kind, name, props, name in required)
        if value is not None:
            args[name] = value
        elif name in required:
            return None, f"{tool.get('name')} needs {name!r} and the task does not give one"
    return args, ""


def _call_for(
    plan: _Plan, item: Mapping[str, Any], blocked: set[str], failures: dict[str, int]
) -> tuple[dict[str, Any] | None, str]:
    """The call to propose for ``item``, or None and the reason it cannot be fetched."""
    kind = item.get("kind")
    if not kind:
        return None, "no known fact kind"
    tools = [t for t in plan.tools if kind in (t.get("facts") or ())]
    if not tools:
        return None, f"no wired tool provides {kind}"
    tools.sort(key=lambda t: t.get("kind") != "free")  # free first, stable otherwise
    reasons = []
    for tool in tools:
        args, why = _build_args(plan, item, kind, tool)
        if args is None:
            reasons.append(why)
            continue
        key = plan.key(str(tool["name"]), args)
        price = _endpoint_price(plan, str(args.get("url", "")))
        if price is not None and plan.spend_left is not None and price > plan.spend_left:
            # The loop would stop the run on the spend cap before the judge saw it.
            reasons.append(
                f"{tool['name']} costs {price} atomic USDC, more than the {plan.spend_left} "
                "left to spend"
            )
        elif key in blocked:
            reasons.append(f"{tool['name']} was already tried (refused, skipped or no result)")
        elif failures.get(key, 0) >= 2:
            reasons.append(f"{tool['name']} failed twice")
        else:
            return {"tool": tool["name"], "args": args, "kind": tool.get("kind", "free")}, ""
    return None, "; ".join(reasons)


def _propose(plan: _Plan) -> dict[str, Any]:
    if not plan.items:
        return {"action": "done", "answer": _cannot_plan()}
    uncovered = [i for i in plan.items if not i.get("covered")]
    if not uncovered:
        answer, evidence = _answer(plan)
        return {"action": "submit_answer", "answer": answer, "evidence": evidence}
    if plan.focus:  # the loop's focus goes first when it names an uncovered item
        uncovered.sort(key=lambda i: plan.focus not in (i.get("id"), i.get("text")))
    blocked, failures = _blocked_calls(plan)
    calls: list[dict[str, Any]] = []
    for item in uncovered:
        call, _why = _call_for(plan, item, blocked, failures)
        if call is not None:
            calls.append(call)
    # A call that failed once is retried only after everything fresh has had its turn.
    calls.sort(key=lambda c: failures.get(plan.key(c["tool"], c["args"]), 0) > 0)
    if not calls:
        answer, evidence = _answer(plan)
        if evidence:
            return {"action": "submit_answer", "answer": answer, "evidence": evidence}
        return {"action": "done", "answer": answer}
    first = calls[0]
    if first["kind"] != "free":
        return {"action": "call", "tool": first["tool"], "args": first["args"]}
    batch: list[dict[str, Any]] = []
    keys: set[str] = set()
    for call in calls:
        key = plan.key(call["tool"], call["args"])
        if call["kind"] == "free" and key not in keys and len(batch) < MAX_BATCH:
            keys.add(key)
            batch.append({"tool": call["tool"], "args": call["args"]})
    if len(batch) == 1:
        return {"action": "call", **batch[0]}
    return {"action": "batch", "calls": batch}


def _cannot_plan() -> str:
    known = ", ".join(dict.fromkeys(fp.label for fp in FACT_PATTERNS))
    return CANNOT_PLAN.format(known=known)


# --------------------------------------------------------------------------- answering


def _evidence_for(plan: _Plan, item: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(value, evidence id) for ``item``: the checklist's own, else the latest evidence."""
    if item.get("covered") and item.get("value") is not None:
        return str(item["value"]), (str(item["evidence_id"]) if item.get("evidence_id") else None)
    kind = item.get("kind")
    for ev in reversed(plan.evidence):
        facts = ev.get("facts") or {}
        if kind and kind in facts:
            return str(facts[kind]), str(ev.get("id"))
    return None, None


def _answer(plan: _Plan) -> tuple[str, list[str]]:
    """The answer text (one line per checklist item) and the evidence ids it cites."""
    if not plan.items:
        if not plan.evidence:
            return _cannot_plan(), []
        lines = [
            f"{ev.get('tool')}: {_clip(ev.get('summary', ''))} (evidence {ev.get('id')})"
            for ev in plan.evidence
        ]
        return "\n".join(lines), [str(ev.get("id")) for ev in plan.evidence]
    blocked, failures = _blocked_calls(plan)
    lines, ids, missing = [], [], []
    for item in plan.items:
        value, ev_id = _evidence_for(plan, item)
        text = str(item.get("text", item.get("kind", "")))
        if value is not None:
            ref = f" (evidence {ev_id})" if ev_id else ""
            lines.append(f"{text}: {_clip(value)}{ref}")
            if ev_id and ev_id not in ids:
                ids.append(ev_id)
        else:
            _call, why = _call_for(plan, item, blocked, failures)
            reason = f" ({why})" if why else ""
            lines.append(f"{text}: not obtained{reason}")
            missing.append(text)
    if missing:
        lines.append(f"Partial answer: {len(missing)} of {len(plan.items)} facts not obtained.")
    if not ids and missing and not any(i.get("kind") for i in plan.items):
        lines.append(CONFIGURE_MODEL)
    return "\n".join(lines), ids


def _lesson(plan: _Plan) -> str:
    for row in reversed(plan.history):
        outcome = str(row.get("outcome", "")).lower()
        summary = _clip(str(row.get("summary", "")), 160).rstrip(".")
        if outcome == "refused":
            return (
                f"The judge refused {row.get('tool')} ({summary}); plan that fact within the "
                "budget or leave it out."
            )
        if outcome == "failed":
            return f"{row.get('tool')} failed ({summary}); check its arguments before retrying."
    covered = sum(1 for i in plan.items if i.get("covered"))
    if not plan.items:
        return "The offline planner found no fact it can fetch in this task; configure a model."
    return f"Covered {covered} of {len(plan.items)} checklist items with the offline planner."
