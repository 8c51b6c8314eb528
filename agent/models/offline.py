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
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import Decimal

from agent.jsonvalues import JSONObject, as_int, as_list, as_object
from agent.loop.answers import asked_value, fit_line, item_line
from agent.models._buying import Planned, Tried, bought_within, fill_path, source_of
from agent.models._factpatterns import FACT_PATTERNS, FactPattern, extract_checklist
from agent.models._offline_context import PlanContext, endpoint_price, origin, schema_of
from agent.models.base import ModelReply, ModelRequest, Usage
from chain.facts import DERIVED_KINDS, KIND_PARAMS
from chain.money import format_usdc

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

PAYWALL_PATHS: dict[str, str] = {
    "gas_stats": "/analytics/gas",
    "transfer_stats": "/analytics/transfers",
    "token_factsheet": "/datasets/token/{symbol}",
    "protocol_factsheet": "/datasets/protocol/{name}",
    "premium_report": "/premium/report",
}
"""Where the local paywall (chain/paywall.py) sells each paid fact kind."""

MAX_BATCH = 3


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
        plan = PlanContext.read(request.context, request.messages)
        if request.purpose == "checklist":
            return json.dumps({"items": extract_checklist(plan.task, network=plan.network)})
        if request.purpose in ("propose", "replan"):
            return json.dumps(_propose(plan))
        if request.purpose == "synthesize":
            return _answer(plan)[0]
        return "1"  # lesson: the first candidate (agent.loop.lessons ranks them)


# --------------------------------------------------------------------------- proposing


_SKIP_PARAMS = frozenset({"if", "of", "op", "than"})


def _paywall_url(plan: PlanContext, item: Mapping[str, object], kind: str) -> str | None:
    """The local paywall's URL for a paid ``kind`` (a task naming no seller): a paid tool's
    advertised endpoint for it, else the paywall's path (PAYWALL_PATHS). A seller the task
    names is bought from in agent/models/_buying.py, and only there."""
    path = PAYWALL_PATHS.get(kind)
    url = next(
        (
            str(ep["url"])
            for tool in plan.tools
            for ep in map(as_object, as_list(tool.get("endpoints")))
            if kind in as_list(ep.get("facts")) and ep.get("url")
        ),
        None,
    )
    if url is None:
        if path is None or not plan.paywall_url:
            return None
        url = origin(plan.paywall_url) + path
    return fill_path(url, as_object(item.get("params")))


def _build_args(
    plan: PlanContext, item: Mapping[str, object], kind: str, tool: Mapping[str, object]
) -> tuple[JSONObject | None, str]:
    """Arguments for ``tool`` from the item's parameters only: nothing the task did not
    name is filled in (no default address, block or seller)."""
    schema = schema_of(tool)
    props = as_object(schema.get("properties"))
    required = set(as_list(schema.get("required")))
    params = as_object(item.get("params"))
    in_url = {"symbol", "name"} if any("url" in n.lower() for n in props) else set()
    untaken = [
        k for k in KIND_PARAMS.get(kind, ()) if params.get(k) and k not in props and k not in in_url
    ]
    if untaken:
        return None, f"{tool.get('name')} cannot take {', '.join(untaken)}"
    args: JSONObject = {}
    for name in props:
        value: object = None
        if "url" in name.lower() or name in ("endpoint", "resource"):
            value = _paywall_url(plan, item, kind)
        elif name == "address" and params.get("wallet") == "self" and not params.get(name):
            value = plan.wallet  # the task asked about the agent's own wallet
        elif name not in _SKIP_PARAMS and params.get(name) not in (None, ""):
            value = params[name]
            prop = props[name]
            if isinstance(prop, Mapping) and _is_int(prop):
                value = as_int(value)
        if value is not None:
            args[name] = value
        elif name in required and "url" in name.lower():
            where = "no seller URL is known for it"
            if kind in PAYWALL_PATHS and not plan.paywall_url:
                where = "the paywall URL is unknown (run `nib devnet up` or set NIB_PAYWALL_URL)"
            return None, f"{tool.get('name')} needs {name!r}: {where}"
        elif name in required:
            return None, f"{tool.get('name')} needs {name!r} and the task does not give one"
    return args, ""


_PAID_TOOLS = ("pay_http", "pay_mcp")


def _bought_for(plan: PlanContext, item: Mapping[str, object]) -> str | None:
    """A request to buy buys once: the summary of the purchase already made for ``item``'s
    kind in this run (whatever it delivered), or None."""
    kind = item.get("kind")
    for row in plan.history:
        if row.get("tool") not in _PAID_TOOLS or str(row.get("outcome", "")).lower() != "ok":
            continue
        covers = as_list(as_object(row.get("args")).get("covers"))
        if not covers or kind in covers:
            return fit_line(str(row.get("summary") or f"{row.get('tool')} was paid"), 200)
    return None


def _asked_to_buy(plan: PlanContext, item: Mapping[str, object]) -> bool:
    """True for a request to buy's item, and for a question about the sheet it buys ("...
    and tell me who the issuer is"): the request buys once for both, so no second seller is
    paid for the question."""
    params = as_object(item.get("params"))
    subject = params.get("symbol") or params.get("name")
    return bool(params.get("pick")) or any(
        as_object(i.get("params")).get("pick") and i.get("kind") == item.get("kind")
        and (as_object(i.get("params")).get("symbol") or as_object(i.get("params")).get("name"))
        == subject
        for i in plan.items
    )


def _purchase_line(plan: PlanContext, item: Mapping[str, object]) -> str:
    """A request to buy's answer line: what was bought (seller, price), then what it
    contains, then its evidence."""
    ev = next((e for e in plan.evidence if e.get("id") == item.get("evidence_id")), None)
    if ev is None or not ev.get("cost_usdc"):
        return item_line(item)
    args = as_object(ev.get("args"))
    where = args.get("url") or args.get("server") or ev.get("tool")
    paid = as_int(ev["cost_usdc"])
    price = format_usdc(paid)
    found, cheapest = _offers_found(plan, str(item.get("kind")))
    params = as_object(item.get("params"))
    of = _picked_from(params)
    if of and str(params.get("price", "")).isdigit() and as_int(params["price"]) != paid:
        # The pay path compared the seller's offers and the judge approved another one.
        of = (f", not the {params.get('pick', 'cheapest')} offer {_seller_named(params)} "
              "lists: the judge compared its offers for it and approved this one")
    if not of and found and cheapest is not None and cheapest < paid:
        of = (f", the cheapest the judge approved of {found} offers found (the cheapest listed, "
              f"{format_usdc(cheapest)}, was not approved)")
    elif not of and found:
        of = f", the cheapest of {found} offers found"
    return (f"{item.get('text')}: bought from {where} for {price}{of}; it contains "
            f"{asked_value(item)} (observed, evidence {item.get('evidence_id')})")


def _seller_named(params: Mapping[str, object]) -> str:
    seller = str(params.get("seller", ""))
    return {"paywall": "the local paywall", "market": "the market"}.get(seller, seller)


def _picked_from(params: Mapping[str, object]) -> str:
    """How a request resolved against its seller's catalog picked the offer bought, from
    what the pick recorded (agent/loop/offerpick.py); "" for any other purchase. Counts
    of the catalog are left out: the catalog read is no evidence an answer can cite."""
    if not params.get("seller") or not str(params.get("offers", "")).isdigit():
        return ""
    where = _seller_named(params)
    bound = f" under {format_usdc(as_int(params['under']))}" if params.get("under") else ""
    about = f" about {params['about']!r}" if params.get("about") else ""
    how = {"cheapest": "the cheapest", "priciest": "the priciest", "only": "the only",
           "any": "the cheapest"}.get(str(params.get("pick") or "cheapest"), "the")  # fmt: skip
    said = f", {how} offer{about}{bound} {where} lists within the per-call cap"
    if str(params.get("tied", "")).isdigit() and as_int(params["tied"]) > 1:
        said += " (others tie at its price; the first listed was bought)"
    return said


#: An offer in discover's summary, with its price: "GET http://h:p/path 0.01 USDC [kinds]".
_PRICED = re.compile(r"\b(?:GET|POST|MCP) https?://\S+ (\d+(?:\.\d+)?) USDC \[([^\]]*)\]")


def _offers_found(plan: PlanContext, kind: str) -> tuple[int, int | None]:
    """(how many offers discovery found, the lowest listed price of one for ``kind``)."""
    for ev in plan.evidence:
        summary = str(ev.get("summary", ""))
        m = re.match(r"discovered (\d+) offers", summary)
        if ev.get("tool") == "discover" and m:
            prices = [int(Decimal(p).scaleb(6)) for p, kinds in _PRICED.findall(summary)
                      if kind in [k.strip() for k in kinds.split(",")]]  # fmt: skip
            return int(m.group(1)), min(prices, default=None)
    return 0, None


def _wired(plan: PlanContext, tool: str) -> bool:
    return any(t.get("name") == tool for t in plan.tools)


def _is_int(prop: Mapping[str, object]) -> bool:
    if prop.get("type") == "integer":
        return True
    return any(
        isinstance(o, Mapping) and o.get("type") == "integer" for o in as_list(prop.get("anyOf"))
    )


def _gate_open(plan: PlanContext, item: Mapping[str, object]) -> tuple[bool, str]:
    """An item gated by a condition may be fetched only once the condition is true."""
    gate_id = as_object(item.get("params")).get("if")
    if not gate_id:
        return True, ""
    gate = next((i for i in plan.items if i.get("id") == gate_id), None)
    if gate is None or not gate.get("covered"):
        return False, f"waits for condition {gate_id}"
    if gate.get("value") != "true":
        return False, f"condition {gate_id} is false"
    return True, ""


def _call_for(
    plan: PlanContext, item: Mapping[str, object], tried: Tried
) -> tuple[Planned | None, str]:
    """The call to propose for ``item``, or None and the reason it cannot be fetched."""
    kind = str(item.get("kind") or "")
    if item.get("unanswerable"):
        return None, str(item["unanswerable"])
    if not kind:
        return None, "no known fact kind"
    if kind in DERIVED_KINDS:
        return None, "computed from the items it compares once they are observed"
    open_, why = _gate_open(plan, item)
    if not open_:
        return None, why
    bought = _bought_for(plan, item) if _asked_to_buy(plan, item) else None
    if bought is not None:
        return None, (f"{bought}; it gave none of the {kind.replace('_', ' ')}, and a request "
                      "to buy buys once")  # fmt: skip
    source = source_of(plan, item) if kind in PAYWALL_PATHS and _wired(plan, "pay_http") else None
    if source is not None and source != "paywall":
        # The task fixed where this fact is bought: nothing else is proposed for it, after a
        # refusal or a failure either (the local paywall is planned below, from its tools).
        call, why = bought_within(plan, item, kind, source, tried, PAYWALL_PATHS[kind])
        if call is not None and call.kind != "free" and (unread := _unread(plan)):
            return None, unread
        return _bid_within(call, item), why
    tools = [t for t in plan.tools if kind in as_list(t.get("facts"))]
    if not tools:
        return None, f"no wired tool provides {kind}"
    tools.sort(key=lambda t: t.get("kind") != "free")  # free first, stable otherwise
    reasons = []
    own = str(as_object(item.get("params")).get("max_price", ""))
    bound = as_int(own) if own.isdigit() else None
    for tool in tools:
        args, why = _build_args(plan, item, kind, tool)
        if args is None:
            reasons.append(why)
            continue
        key = plan.key(str(tool["name"]), args)
        price = endpoint_price(plan, str(args.get("url", "")))
        if tried.open(key) and (refused := tried.seller_refused(args)):
            reasons.append(f"{tool['name']} is not proposed: {refused}")
        elif price is not None and bound is not None and price > bound:
            reasons.append(f"{tool['name']} costs {format_usdc(price)}, more than the task's "
                           f"bound of {format_usdc(bound)}")  # fmt: skip
        elif price is not None and plan.spend_left is not None and price > plan.spend_left:
            # The loop would stop the run on the spend cap before the judge saw it.
            reasons.append(
                f"{tool['name']} costs {price} atomic USDC, more than the {plan.spend_left} "
                "left to spend"
            )
        elif not tried.open(key):
            reasons.append(tried.why_not(plan, str(tool["name"]), key))
        elif tool.get("kind", "free") != "free" and (unread := _unread(plan)):
            reasons.append(unread)
        else:
            return _bid_within(Planned(str(tool["name"]), args, str(tool.get("kind", "free"))), item), ""
    return None, "; ".join(reasons)


def _bid_within(call: Planned | None, item: Mapping[str, object]) -> Planned | None:
    """``call``, bidding at most the item's ``max_price`` (a request's price bound, or the
    bound the task sets on its spending) when it pays a seller: the seller's terms above it
    are refused before anything is signed (agent/tools/x402/protocol.py)."""
    own = str(as_object(item.get("params")).get("max_price", ""))
    if call is None or call.tool not in _PAID_TOOLS or not own.isdigit():
        return call
    bid = as_int(call.args.get("max_price", own))
    return replace(call, args={**call.args, "max_price": min(bid, as_int(own))})


def _unread(plan: PlanContext) -> str:
    """Why nothing may be paid yet: a part of the task that is not read ("" when every
    part is). Money moves only once every clause of the task is accounted for: a part not
    read may be the one that forbids, retracts or conditions the payment."""
    unread = [i for i in plan.items if i.get("unanswerable")]
    if not unread:
        return ""
    return (f"nothing is paid while a part of the task is not read: "
            f"{fit_line(str(unread[0].get('text')), 80)!r}")  # fmt: skip


def _propose(plan: PlanContext) -> JSONObject:
    if not plan.items:
        return {"action": "done", "answer": _cannot_plan()}
    uncovered = [i for i in plan.items if not i.get("covered")]
    if not uncovered:
        answer, evidence = _answer(plan)
        if evidence:
            return {"action": "submit_answer", "answer": answer, "evidence": evidence}
        return {"action": "done", "answer": answer}
    if plan.focus:  # the loop's focus goes first when it names an uncovered item
        uncovered.sort(key=lambda i: plan.focus not in (i.get("id"), i.get("text")))
    tried = Tried.read(plan)
    calls: list[Planned] = []
    for item in uncovered:
        call, _why = _call_for(plan, item, tried)
        if call is not None:
            calls.append(call)
    # A call that failed once is retried only after everything fresh has had its turn.
    calls.sort(key=lambda c: bool(tried.failures.get(plan.key(c.tool, c.args))))
    if not calls:
        # Parts remain that nothing here can obtain: say so (the loop ends cannot-plan).
        return {"action": "done", "answer": _answer(plan)[0]}
    first = calls[0]
    if first.kind != "free":
        return {"action": "call", "tool": first.tool, "args": first.args}
    batch: list[JSONObject] = []
    keys: set[str] = set()
    for call in calls:
        key = plan.key(call.tool, call.args)
        if call.kind == "free" and key not in keys and len(batch) < MAX_BATCH:
            keys.add(key)
            batch.append({"tool": call.tool, "args": call.args})
    if len(batch) == 1:
        return {"action": "call", **batch[0]}
    return {"action": "batch", "calls": batch}


def _cannot_plan() -> str:
    known = ", ".join(dict.fromkeys(fp.label for fp in FACT_PATTERNS))
    return CANNOT_PLAN.format(known=known)


# --------------------------------------------------------------------------- answering


def _answer_order(items: Sequence[JSONObject]) -> list[JSONObject]:
    """``items`` in checklist order, except that a condition gating nothing (a yes/no
    question: "Does 0x... hold any USDC?", "Is the base fee above 1 gwei?") comes before the
    value it tests: the answer says yes or no first, then the value."""
    gates = {as_object(i.get("params")).get("if") for i in items}
    out = list(items)
    for cond in items:
        tested = str(as_object(cond.get("params")).get("of", ""))
        if cond.get("kind") != "condition" or cond.get("id") in gates:
            continue
        at = next((n for n, i in enumerate(out) if i.get("id") == tested), None)
        if at is not None and out.index(cond) > at:
            out.remove(cond)
            out.insert(at, cond)
    return out


def _answer(plan: PlanContext) -> tuple[str, list[str]]:
    """The answer text (one line per checklist item, each saying how it was reached) and
    the evidence ids it cites. Lines the planner could not back say "not answered"."""
    if not plan.items:
        return _cannot_plan(), []
    tried = Tried.read(plan)
    lines, ids, missing = [], [], []
    for item in _answer_order(plan.items):
        text = str(item.get("text", item.get("kind", "")))
        value, ev_id = item.get("value"), item.get("evidence_id")
        if item.get("covered") and value is not None:
            params = as_object(item.get("params"))
            lines.append(_purchase_line(plan, item) if params.get("pick") else item_line(item))
            if ev_id and item.get("provenance") != "derived" and ev_id not in ids:
                ids.append(str(ev_id))
        else:
            _call, why = _call_for(plan, item, tried)
            reason = f" ({why})" if why else ""
            lines.append(f"{text}: not answered{reason}")
            missing.append(text)
    if missing:
        lines.append(f"Partial answer: {len(missing)} of {len(plan.items)} parts not answered.")
    if missing and not ids and not any(i.get("kind") for i in plan.items):
        lines.append(CONFIGURE_MODEL)
    return "\n".join(lines), ids
