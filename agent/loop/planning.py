"""The model's side of a turn: the task's checklist, the periodic re-plan, and the
proposal (with its malformed-reply retries). Nothing here executes a call.

The checklist is asked for as schema-enforced JSON with one minimal retry; when both
replies fail, the task itself becomes the one item, so the run never goes on as if there
were nothing to find. With the churn guard on, each re-plan asks for it again: a reply
asking for other facts is checklist drift, counted toward the churn stop. Proposals are native tool calls (the tools' schemas, plus
``submit_answer`` and ``done``), or JSON text where the server has no tools; after a step,
its calls and their results become the provider's tool-result messages of the next
request (:meth:`Planner.answer_calls`).
"""

from __future__ import annotations

import asyncio

from agent.errors import ProposalInvalid
from agent.loop.checklist import (
    Checklist,
    checklist_schema,
    has_block_refs,
    parse_checklist,
    resolve_blocks,
    task_checklist,
)
from agent.loop.context import RunContext
from agent.loop.history import one_line
from agent.loop.modelcall import ModelCaller
from agent.loop.offerpick import SellerOffer, catalog_offers, needs_offers, resolve_picks
from agent.loop.orders import with_every_order
from agent.loop.proposal import (
    PROPOSAL_SCHEMA,
    PROTOCOL,
    Proposal,
    checklist_messages,
    checklist_retry_messages,
    parse_proposal,
    proposal_from_calls,
    propose_messages,
    replan_messages,
    retry_messages,
    text_protocol,
    tool_specs,
)
from agent.loop.selfmodel import SelfModel
from agent.loop.stop import raise_if_dependency
from agent.models.base import ModelReply, ToolCall
from chain.facts import FACT_KINDS

__all__ = ["Planner"]


class Planner:
    """Asks one run's model for its checklist, its plan and its next proposal."""

    def __init__(self, run: RunContext, model: ModelCaller) -> None:
        self.run = run
        self.model = model
        #: Each named seller's offers as read at run start (or why they could not be).
        self._offers: dict[str, tuple[SellerOffer, ...] | str] = {}

    async def _ask_checklist(self, attempts: int) -> tuple[Checklist | None, str]:
        """The model's checklist for the task (schema-enforced JSON, a minimal retry per
        extra attempt), or None and the last parse error."""
        run, max_items = self.run, self.run.limits.checklist_max_items
        schema = checklist_schema(max_items)
        messages = checklist_messages(run.state.task, sorted(FACT_KINDS), max_items)
        error = ""
        for attempt in range(attempts):
            text = await self.model.ask("checklist", messages, run.model_context(), output=schema)
            try:
                parsed = await self._exact_blocks(parse_checklist(text, max_items=max_items))
                return self._every_order(await self._exact_offers(parsed)), ""
            except ValueError as exc:
                error = str(exc)
                run.emit("checklist.invalid", {"error": error, "retry": attempt})
            messages = checklist_retry_messages(run.state.task, error, max_items)
        return None, error

    def _every_order(self, checklist: Checklist) -> Checklist:
        """Each payment the task orders made an item, when the model's checklist left it
        out: it is then made or named as not made, never dropped (agent/loop/orders.py)."""
        checklist, added = with_every_order(checklist, self.run.state.task)
        if added:
            self.run.emit("checklist.orders", {"added": added})
        return checklist

    async def _exact_blocks(self, checklist: Checklist) -> Checklist:
        """Relative block references resolved against the head at run start (read once,
        only when an item names a block)."""
        if not has_block_refs(checklist):
            return checklist
        st = self.run.state
        if st.head_at_start is None:
            try:
                st.head_at_start = await asyncio.to_thread(self.run.deps.chain.block_number)
            except Exception as exc:
                raise_if_dependency(exc)
                raise
            self.run.emit("checklist.head", {"head_at_start": st.head_at_start})
        return resolve_blocks(checklist, st.head_at_start)

    async def _exact_offers(self, checklist: Checklist) -> Checklist:
        """Requests to buy that name a seller but no subject, resolved against the offers
        of that seller's catalog at run start (read once per seller, free)."""
        sellers = {i.params["seller"] for i in checklist.items if needs_offers(i)}
        if not sellers:
            return checklist
        for seller in sorted(sellers - set(self._offers)):
            self._offers[seller] = await seller_offers(self.run, seller)
            found = self._offers[seller]
            self.run.emit("checklist.offers", {
                "seller": seller,
                "offers": found if isinstance(found, str) else
                [{"url": o.url, "kind": o.kind, "price_atomic": o.price} for o in found],
            })  # fmt: skip
        cap = min(self.run.limits.per_call_cap_atomic, self.run.limits.spend_cap_atomic)
        return resolve_picks(checklist, self._offers, cap)

    async def extract_checklist(self) -> None:
        """The run's checklist: schema-enforced JSON, one minimal retry, else the task."""
        run = self.run
        checklist, error = await self._ask_checklist(attempts=2)
        if checklist is None:
            checklist = self._every_order(task_checklist(run.state.task))
            run.emit(
                "checklist",
                {"items": checklist.as_dicts(), "error": error, "fallback": "task"},
            )
        else:
            run.emit("checklist", {"items": checklist.as_dicts()})
        run.state.checklist = checklist.as_dicts()
        run.state.checklist_done = True

    async def recheck_checklist(self) -> None:
        """Checklist drift, half of the churn guard's wrong-path signal: ask for the
        checklist again and count it when it asks for other facts than the run's.

        The run keeps its checklist (a model cannot move the goalposts of what "finished"
        means); a model whose idea of what the task needs keeps changing is going nowhere.
        A reply that does not parse, or holds no items, is no reading (not counted)."""
        run = self.run
        again, _ = await self._ask_checklist(attempts=1)
        if again is None or not again.items:
            return
        have, now = run.checklist.wants(), again.wants()
        if have == now:
            return
        run.state.checklist_drifts += 1
        run.emit(
            "checklist.drift",
            {
                "step": run.state.step + 1,
                "drifts": run.state.checklist_drifts,
                "added": sorted(" ".join(w) for w in now - have),
                "dropped": sorted(" ".join(w) for w in have - now),
            },
        )

    async def replan_if_due(self) -> None:
        run, step = self.run, self.run.state.step
        if step == 0 or step % run.limits.replan_every or run.state.replanned_at == step:
            return
        checklist = "\n".join(
            f"- {i['text']}: {'covered' if i['covered'] else 'missing'}"
            for i in run.state.checklist
        )
        text = await self.model.ask(
            "replan",
            replan_messages(run.state.task, checklist, run.history_text()),
            run.model_context(),
        )
        run.state.plan = one_line(text, 400)
        run.state.replanned_at = step
        run.emit("replan", {"step": step, "plan": run.state.plan})
        if run.limits.churn_steps:  # the guard is on: its drift half re-reads the checklist
            await self.recheck_checklist()

    async def propose(self, sm: SelfModel) -> Proposal | None:
        """The model's next proposal; None after its malformed replies used every retry."""
        run = self.run
        focus = run.checklist.focus()
        context = {
            **run.model_context(),
            "self_model": sm.as_dict(),
            "self_model_text": sm.render(),
            "focus": focus.as_dict() if focus else None,
            "plan": run.state.plan,
            "feedback": list(run.state.feedback),
            "exchange": list(run.state.exchange),
        }
        described = run.deps.registry.describe_for(run.state.task)  # as model_context shows
        specs = tool_specs(described)
        run.state.feedback.clear()
        run.state.exchange = []
        reply = await self.model.request(
            "propose",
            propose_messages(context),
            context,
            tools=specs,
            text_protocol=text_protocol(described),
            output=PROPOSAL_SCHEMA,
        )
        attempts = 0
        while True:
            try:
                return self._read(reply)
            except ProposalInvalid as exc:
                run.last_invalid = str(exc)
                run.emit(
                    "proposal.invalid",
                    {"step": run.state.step + 1, "error": str(exc), "retry": attempts},
                )
                if attempts >= run.limits.malformed_retries:
                    run.state.feedback.append(f"Your reply was rejected: {exc}")
                    self.calls = ()
                    return None
                attempts += 1
                reply = await self.model.request(
                    "propose",
                    retry_messages(str(exc), run.deps.registry.names()),
                    context,
                    tools=specs,
                    text_protocol=PROTOCOL,
                    output=PROPOSAL_SCHEMA,
                )

    #: The tool calls of the proposal being handled (answered by :meth:`answer_calls`).
    calls: tuple[ToolCall, ...] = ()

    def _read(self, reply: ModelReply) -> Proposal:
        if reply.tool_calls:
            self.calls = reply.tool_calls
            return proposal_from_calls(reply.tool_calls)
        self.calls = ()
        return parse_proposal(reply.text)

    def answer_calls(self, history_from: int, feedback_from: int) -> None:
        """After a step: the proposal's tool calls and what became of each, as the
        messages the next proposal request ends with (tool results are data)."""
        run, calls = self.run, self.calls
        self.calls = ()
        if not calls:
            return
        entries = list(run.state.history[history_from:])
        feedback = " ".join(run.state.feedback[feedback_from:])
        results: list[dict[str, object]] = []
        for call in calls:
            entry = next((e for e in entries if e.get("tool") == call.name), None)
            if entry is not None:
                entries.remove(entry)
                content = f"{entry['outcome']}: {entry['summary']}"
                if entry.get("evidence_id"):
                    content += f" [evidence {entry['evidence_id']}]"
            else:
                content = f"not run: {feedback or 'another call in this reply ended the turn'}"
            results.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "name": call.name,
                    "content": one_line(content, 600),
                }
            )
        run.state.exchange = [
            {"role": "assistant", "content": "", "tool_calls": [c.as_message() for c in calls]},
            *results,
        ]


async def seller_offers(run: RunContext, seller: str) -> tuple[SellerOffer, ...] | str:
    """The offers ``seller`` (``paywall``: the local one; else a seller URL) lists in its
    ``/catalog`` (a free GET of an allowlisted seller), or why they could not be read."""
    from agent.errors import ToolError
    from agent.tools.x402.fetch import fetch
    from agent.tools.x402.offers import check_seller, seller_of

    ctx = run.tools
    if seller == "market":
        return await _market_offers(run)
    url = str(ctx.extras.get("paywall_url") or "") if seller == "paywall" else seller
    where = "the local paywall" if seller == "paywall" else seller
    if not url:
        return ("the local paywall's URL is unknown, so its offers cannot be read (fix: "
                "`nib devnet up`, or set NIB_PAYWALL_URL)")  # fmt: skip
    try:
        origin = check_seller("catalog", url, ctx)
        resp = await fetch(ctx, origin + "/catalog")
        body = resp.json() if resp.status_code == 200 else None
    except (ToolError, ValueError) as exc:
        return f"the offers of {where} could not be read ({exc})"
    offers = catalog_offers(seller_of(url), body)
    if not offers:
        return (f"{where} lists no priced offer (found no catalog with paid endpoints at "
                f"{seller_of(url)}/catalog)")  # fmt: skip
    return offers


async def _market_offers(run: RunContext) -> tuple[SellerOffer, ...] | str:
    """The offers the market's discovery APIs list (the ``discover`` read, free), that a
    request naming no subject can buy (agent/loop/offerpick.py ``market_offers``)."""
    from agent.errors import ToolError
    from agent.loop.offerpick import market_offers
    from agent.tools.discover import DiscoverArgs, DiscoverTool
    from agent.tools.x402.offers import OfferBook

    # The run's own discover tool: what it lists is then an offer the paid tools know.
    tool = run.deps.registry.get("discover")
    discover = tool if isinstance(tool, DiscoverTool) else DiscoverTool(OfferBook())
    try:
        found = await discover.run(DiscoverArgs(), run.tools)
    except ToolError as exc:
        return f"the market's offers could not be read ({exc})"
    offers = market_offers(found.data.get("offers"))
    if not offers:
        return ("the market lists no offer an allowlisted seller sells over GET at a price "
                "without a subject (a token or protocol sheet needs one: name it)")
    return offers
