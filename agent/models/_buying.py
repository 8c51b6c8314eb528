"""Where the offline planner buys a paid fact: fixed once by the task's own words, and never
moved by a refusal or a failure.

The task names a resource by its URL: that resource exactly (its query included), nothing
else. It asks for the market: the offers discovery lists, never the local paywall in their
place. A request resolved against a seller's catalog: the offer it picked. Otherwise: the
local paywall. When the source has nothing left to try, no call is proposed for the fact and
the reason says why (the run ends ``cannot-plan``) instead of buying something else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from agent.errors import not_delivered_words
from agent.jsonvalues import JSONObject, as_int, as_list, as_object
from agent.loop.history import one_line
from agent.models._offline_context import PlanContext, origin
from agent.tools.x402.fetch import POST_ROUTE
from agent.tools.x402.offers import (
    asks_for_market,
    resources_named_in,
    seller_of,
    unrequestable_in,
)
from chain.mcp_client import McpTransport, split_endpoint

__all__ = [
    "Planned", "Source", "Tried", "bought_within", "fill_path", "seller_in", "source_of",
]

Source = Literal["offer", "named", "market", "paywall"]
"""Where a paid fact may be bought, read from the task before any tool output.

``offer``: the offer a request to buy picked from the catalog of the seller it names
(agent/loop/offerpick.py), and only that offer.
``named``: the resource the task names by URL, exactly as written (query included); over
POST with the same question when the resource's own 402 says it sells over POST; for a URL
that names only a seller's origin, also that origin's path for the fact. A URL ending in
``/mcp`` or ``/sse`` names an MCP server: its tools listed (``mcp_tools``, free), the one
that sells the fact is called with ``pay_mcp``, never plain HTTP.
``market``: the offers discovery lists (the task asks for the market, or picks among
offers); discovery first when it has not run.
``paywall``: the local paywall's path for the fact (the task names no seller).
"""

#: Words with which a task asks the planner to look for sellers (with a subject to ask for).
_MARKET_WORDS = ("market", "discover", "seller", "x402")
#: How discover's observation lists an offer: "GET http://h:p/path 0.01 [token_factsheet]".
_OFFER = re.compile(r"\b(GET|POST) (https?://\S+) \S+(?: USDC)? \[([^\]]*)\]")
_POST_ROUTE = re.compile(re.escape(POST_ROUTE) + r" POST (https?://\S+)")
_SUMMARY_CHARS = 160


@dataclass(frozen=True)
class Planned:
    """A call the planner may propose: the tool, its arguments, and the tool's kind
    (``free`` calls may be batched; anything else goes alone, through the judge)."""

    tool: str
    args: JSONObject
    kind: str


@dataclass(frozen=True)
class Tried:
    """What the run's history says of the calls already made: those not to propose again
    (refused by the judge, skipped by a gate, or executed), the steps at which each call
    failed (0 where the history gives no step), and the sellers the loop refuses for the
    rest of the run (origin -> why): paid, they did not deliver."""

    blocked: frozenset[str]
    failures: Mapping[str, tuple[int, ...]]
    sellers: Mapping[str, str]
    #: Seller origins a call of this run failed at (for good or not): their other offers
    #: go after other sellers' (its 402 may still send the same question to its POST route).
    failing: frozenset[str] = frozenset()

    @classmethod
    def read(cls, plan: PlanContext) -> Tried:
        blocked: set[str] = set()
        failures: dict[str, tuple[int, ...]] = {}
        failing: set[str] = set()
        sellers = {
            origin: f"{origin} {not_delivered_words(None)} in this run"
            for origin in sorted(plan.failed_sellers)
        }
        for row in plan.history:
            tool = str(row.get("tool") or "")
            if not tool:
                continue
            key = plan.key(tool, row.get("args"))
            outcome = str(row.get("outcome") or row.get("status") or "").lower()
            if outcome in ("refused", "skipped", "ok", "failed-for-good") or "refus" in outcome:
                # Proposing it again would be refused, skipped or stopped as a duplicate
                # (a call that failed for good is skipped by the loop's gate).
                blocked.add(key)
            elif outcome == "failed":
                step = row.get("step")
                failures[key] = (*failures.get(key, ()), step if isinstance(step, int) else 0)
            origin = seller_in(as_object(row.get("args")))
            if outcome in ("failed", "failed-for-good") and origin:
                failing.add(origin)
        for ev in plan.evidence:
            blocked.add(plan.key(str(ev.get("tool", "")), ev.get("args")))
        return cls(frozenset(blocked), failures, sellers, frozenset(failing))

    def seller_refused(self, args: Mapping[str, object]) -> str:
        """Why the seller a call's arguments name gets no call again in this run ("" when
        it may be asked)."""
        origin = seller_in(args)
        return self.sellers.get(origin, "") if origin else ""

    def open(self, key: str) -> bool:
        """Whether the call keyed ``key`` may be proposed (again): not blocked, and not
        failed twice."""
        return key not in self.blocked and len(self.failures.get(key, ())) < 2

    def why_not(self, plan: PlanContext, tool: str, key: str) -> str:
        """Why a call is not proposed again, naming the real cause: the judge's refusal (its
        reason), a gate's skip, the failures (the steps that failed, the last one's words),
        or an earlier result (what it read)."""
        said = ""
        for row in reversed(plan.history):
            if plan.key(str(row.get("tool") or ""), row.get("args")) != key:
                continue
            outcome = str(row.get("outcome") or row.get("status") or "").lower()
            summary = str(row.get("summary") or "").strip()
            if "refus" in outcome:
                return f"{tool} was refused: {summary}" if summary else f"{tool} was refused"
            if outcome == "skipped":
                return f"{tool} was skipped: {summary}" if summary else f"{tool} was skipped"
            if outcome == "failed-for-good":
                return f"{tool} failed for good: {summary}" if summary else f"{tool} failed for good"
            if outcome == "failed" and key not in self.blocked:
                failed = f"{tool} failed {_in_steps(self.failures.get(key, ()))}"
                last = one_line(summary, _SUMMARY_CHARS)
                return f"{failed} (last error: {last})" if last else failed
            said = one_line(summary, _SUMMARY_CHARS)
            break
        if said:  # "22 USDC transfers in blocks 0..23, more than 20: not listed one by one"
            return f"{tool} was already tried (it read: {said}; no value for this item)"
        return f"{tool} was already tried (it gave no value for this item)"


def _in_steps(steps: tuple[int, ...]) -> str:
    """Where a call failed, as counted in the history: "in steps 1 and 3", or "in 2 calls"
    when the history gives no step numbers. Each is a call the loop made, whether or not it
    reached the seller again."""
    if not steps or 0 in steps:
        return f"in {len(steps)} call{'s' if len(steps) != 1 else ''}"
    if len(steps) == 1:
        return f"in step {steps[0]}"
    return f"in steps {', '.join(map(str, steps[:-1]))} and {steps[-1]}"


def source_of(plan: PlanContext, item: Mapping[str, object]) -> Source:
    """Where ``item``'s paid fact may be bought (see :data:`Source`)."""
    params = as_object(item.get("params"))
    if params.get("seller") and params.get("url"):
        return "offer"
    if resources_named_in(plan.task) or unrequestable_in(plan.task):
        return "named"
    if asks_for_market(plan.task):
        return "market"
    task = plan.task.lower()
    if re.search(r"\bpaywall\b", task) and "market" not in task:
        return "paywall"  # the task names nib's own paywall as its seller
    discover = any(t.get("name") == "discover" for t in plan.tools)
    subject = params.get("symbol") or params.get("name")
    looks = bool(params.get("pick")) or any(w in task for w in _MARKET_WORDS)
    return "market" if discover and subject and looks else "paywall"


def bought_within(
    plan: PlanContext, item: Mapping[str, object], kind: str, source: Source, tried: Tried,
    path: str | None,
) -> tuple[Planned | None, str]:  # fmt: skip
    """The next call for ``item``'s paid ``kind`` within ``source``, or None and why nothing
    is left there. ``path``: the local paywall's path for ``kind``, asked at a seller origin
    the task names. The ``paywall`` source is the caller's, planned from the tools' endpoints."""
    if source == "market":
        return _market_call(plan, item, kind, tried)
    params = as_object(item.get("params"))
    whys: list[str] = []
    if source == "offer":
        args: JSONObject = {"url": str(params["url"]), "covers": [kind]}
        if str(params.get("max_price", "")).isdigit():
            args["max_price"] = as_int(params["max_price"])
        candidates = [Planned("pay_http", args, "paid")]
        within = f"the offer it picked from the seller the task names ({params['url']})"
    elif source == "named":
        if bad := unrequestable_in(plan.task):
            # Nothing is bought for a task that names a URL no request can reach: it is
            # the task's mistake, never answered from another resource or seller.
            url, why = bad[0]
            return None, f"the task names {url}, which nib cannot request: {why}"
        candidates, whys = _named_calls(plan, item, kind, path)
        named = ", ".join(resources_named_in(plan.task))
        within = f"what the task names ({named})"
    else:
        raise ValueError(f"bought_within plans the offer, named and market sources, not {source!r}")
    for call in candidates:
        key = plan.key(call.tool, call.args)
        if not tried.open(key):
            whys.append(tried.why_not(plan, call.tool, key))
        elif refused := tried.seller_refused(call.args):
            whys.append(f"{call.tool} is not proposed: {refused}")
        else:
            return call, ""
    return None, (f"{'; '.join(dict.fromkeys(whys))}; the offline planner buys only {within}, "
                  "never another resource or seller in its place")  # fmt: skip


def seller_in(args: Mapping[str, object]) -> str:
    """The seller origin a paid call's arguments name (its ``url`` or MCP ``server``), as
    the loop normalises it; "" for none."""
    url = args.get("url") or args.get("server")
    if not isinstance(url, str) or "://" not in url:
        return ""
    try:
        return seller_of(url)
    except Exception:  # a URL no request can reach names no seller
        return ""


def fill_path(path: str, params: Mapping[str, object]) -> str | None:
    """``path`` with its ``{symbol}`` / ``{name}`` slot filled from the item's parameters,
    or None when the item does not name what the slot needs."""
    for slot, key in (("{symbol}", "symbol"), ("{name}", "name")):
        if slot in path:
            value = params.get(key)
            if not value:
                return None
            path = path.replace(slot, str(value) if key == "symbol" else str(value).lower())
    return path


def _named_calls(
    plan: PlanContext, item: Mapping[str, object], kind: str, path: str | None
) -> tuple[list[Planned], list[str]]:
    """The calls that buy what the task names, in its order: each URL exactly as written
    (or the same question over POST once its 402 said it sells over POST), and for a URL
    naming only a seller's origin, that origin's path for ``kind``; an MCP server's URL is
    asked through its tools (:func:`_mcp_calls`). Also why a named MCP server has no call."""
    params = as_object(item.get("params"))
    subject = params.get("symbol") or params.get("name")
    out: list[Planned] = []
    whys: list[str] = []
    for url in resources_named_in(plan.task):
        server, transport = split_endpoint(url)
        if transport is not None:
            calls, why = _mcp_calls(plan, params, kind, server, transport)
            out += calls
            whys += [why] if why else []
            continue
        parts = urlsplit(url)
        post = _sells_over_post(plan, url)
        # The question the task asks the resource: its query, else the item's subject.
        body = dict(parse_qsl(parts.query)) or ({"symbol": str(subject)} if subject else {})
        if post and body:
            args: JSONObject = {"url": post, "method": "POST", "body": dict(body), "covers": [kind]}
            out.append(Planned("pay_http", args, "paid"))
            continue
        out.append(Planned("pay_http", {"url": url, "covers": [kind]}, "paid"))
        filled = fill_path(path, params) if path else None
        if filled and parts.path in ("", "/") and not parts.query:
            out.append(Planned("pay_http", {"url": origin(url) + filled, "covers": [kind]}, "paid"))
    return out, whys


def _mcp_calls(
    plan: PlanContext, params: Mapping[str, object], kind: str, server: str,
    transport: McpTransport,
) -> tuple[list[Planned], str]:  # fmt: skip
    """The calls for ``kind`` at the MCP server the task names (``server`` over
    ``transport``, as its URL's endpoint says): its tool list first (free), then ``pay_mcp``
    for each listed tool that sells ``kind`` with the item's subject as its input; none and
    why when the list has no such tool. Never ``pay_http``: an MCP endpoint answers no GET."""
    where = f"the MCP server {server}"
    unwired = [t for t in ("mcp_tools", "pay_mcp") if not any(w.get("name") == t for w in plan.tools)]
    if unwired:
        return [], f"{where} is asked through mcp_tools and pay_mcp, and {unwired[0]} is not wired"
    listing = _mcp_listing(plan, server)
    if listing is None:
        return [Planned("mcp_tools", {"server": server, "transport": transport}, "free")], ""
    names = [str(row.get("tool")) for row in listing]
    what = kind.replace("_", " ").replace("factsheet", "fact sheet")
    calls: list[Planned] = []
    needs: list[str] = []
    for row in listing:
        if kind not in as_list(row.get("kinds")):
            continue
        arguments = _mcp_arguments(row, params)
        if arguments is None:
            needs.append(f"{row.get('tool')} needs {', '.join(map(str, as_list(row.get('inputs'))))}")
            continue
        args: JSONObject = {"server": server, "tool": str(row.get("tool")),
                            "arguments": arguments, "covers": [kind], "transport": transport}  # fmt: skip
        calls.append(Planned("pay_mcp", args, "paid"))
    if calls:
        return calls, ""
    if needs:
        return [], f"{where} sells a {what} only with inputs the task does not give ({'; '.join(needs)})"
    return [], f"{where} lists no tool selling a {what} (tools: {', '.join(names) or 'none'})"


def _mcp_listing(plan: PlanContext, server: str) -> list[Mapping[str, object]] | None:
    """The tools the run's ``mcp_tools`` read listed at ``server`` (offer rows), or None
    when it has not been read."""
    for ev in plan.evidence:
        args = as_object(ev.get("args"))
        if ev.get("tool") == "mcp_tools" and str(args.get("server", "")).rstrip("/") == server:
            return [o for o in as_list(ev.get("offers")) if isinstance(o, Mapping)]
    return None


def _mcp_arguments(row: Mapping[str, object], params: Mapping[str, object]) -> JSONObject | None:
    """The arguments for a listed MCP tool from the item's parameters: each required input
    by its name (``symbol``, ``name``), the subject for a tool's one other input; None when
    an input is left that the task does not give."""
    subject = params.get("symbol") or params.get("name")
    inputs = [str(i) for i in as_list(row.get("inputs"))]
    out: JSONObject = {}
    for name in inputs:
        value = params.get(name)
        if value in (None, "") and len(inputs) == 1:
            value = subject
        if value in (None, ""):
            return None
        out[name] = str(value)
    return out


def _sells_over_post(plan: PlanContext, url: str) -> str | None:
    """The URL to POST to when pay_http found that the named ``url`` sells over POST (a
    GET refused, its 402 declaring POST), else None. Only the same resource, without its
    query: a 402 cannot send the purchase to another path or seller."""
    for h in plan.history:
        if h.get("tool") == "pay_http" and as_object(h.get("args")).get("url") == url:
            found = _POST_ROUTE.search(str(h.get("summary", "")))
            post = found.group(1) if found else ""
            if post and (seller_of(post), urlsplit(post).path) == (
                seller_of(url), urlsplit(url).path
            ):
                return post
    return None


def _listed_offers(ev: Mapping[str, object]) -> list[tuple[str, str, list[str]]]:
    """The HTTP offers a discovery's evidence lists, cheapest first: its ``offers`` (every
    one), else what its one-line summary still shows (a context without them)."""
    rows = ev.get("offers")
    if isinstance(rows, list):
        return [
            (str(r.get("method")), str(r.get("resource")), [str(k) for k in r.get("kinds") or ()])
            for r in rows
            if isinstance(r, Mapping) and r.get("method") in ("GET", "POST") and r.get("resource")
        ]
    return [
        (method, url, [k.strip() for k in kinds.split(",")])
        for method, url, kinds in _OFFER.findall(str(ev.get("summary", "")))
    ]


def _market_call(
    plan: PlanContext, item: Mapping[str, object], kind: str, tried: Tried
) -> tuple[Planned | None, str]:
    """The first offer discovery listed for ``kind`` (cheapest first) still open, else
    discovery itself when it has not run, else None and why."""
    params = as_object(item.get("params"))
    subject = params.get("symbol") or params.get("name")
    listed, whys = 0, []
    offers: list[JSONObject] = []
    for ev in plan.evidence:
        if ev.get("tool") != "discover":
            continue
        # A listed seller outside the run's allowlist would only be refused: not proposed.
        barred = {str(o.get("resource")) for o in as_list(ev.get("offers"))
                  if isinstance(o, dict) and o.get("allowlisted") is False}
        for method, url, kinds in _listed_offers(ev):
            if kind not in kinds or (method == "POST" and not subject) or url in barred:
                continue
            listed += 1
            args: JSONObject = {"url": url, "covers": [kind]}
            if method == "POST":
                args.update(method="POST", body={"symbol": subject})
            elif subject:
                args["url"] = f"{url}?symbol={subject}"
            offers.append(args)
    # Cheapest first, except that a seller that failed in this run, or that a lesson says
    # did not deliver, goes after every other seller (still tried when it alone sells the
    # fact: the judge rules on it).
    offers.sort(key=lambda a: seller_in(a) in tried.failing | plan.distrusted_sellers)
    for args in offers:
        key = plan.key("pay_http", args)
        if not tried.open(key):
            whys.append(tried.why_not(plan, "pay_http", key))
        elif refused := tried.seller_refused(args):
            whys.append(f"pay_http is not proposed: {refused}")
        else:
            return Planned("pay_http", args, "paid"), ""
    what = kind.replace("_", " ")
    runs = [h for h in plan.history if h.get("tool") == "discover"]
    if not runs and any(t.get("name") == "discover" for t in plan.tools):
        query = what.replace("factsheet", "fact sheet")
        return Planned("discover", {"query": query}, "free"), ""
    if not runs:
        why = "no discover tool is wired to find the market's offers"
    elif listed:
        why = f"every offer of a {what} discovery listed was tried (last: {whys[-1]})"
    elif any(ev.get("tool") == "discover" for ev in plan.evidence):
        why = f"discovery listed no offer of a {what}"
    else:
        last = runs[-1]
        outcome = str(last.get("outcome") or "failed").lower()
        why = f"discover {outcome}: {one_line(str(last.get('summary') or ''), _SUMMARY_CHARS) or 'no offers'}"
    return None, (f"{why}; the task asks for a seller found by discovery, and the offline "
                  "planner buys from no other (the local paywall included) in its place")  # fmt: skip
