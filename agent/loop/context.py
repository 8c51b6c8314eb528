"""One run's shared context while a process drives it: state, dependencies, limits,
the audit trail, the clock, and the history and feedback the model is shown.

Every step of a turn (budget gate, model calls, gates, free batch, paid step,
learning, finishing) holds the same ``RunContext``; none of them inherits from another.
"""

from __future__ import annotations

import json

from agent.loop.checklist import Checklist
from agent.loop.history import HistoryEntry, Outcome, one_line, render
from agent.loop.lessons import distrusted_sellers
from agent.loop.limits import Limits
from agent.loop.state import Deps, RunState
from agent.tools.base import ToolContext, judge_reads_terms, terms_ahead_of
from agent.tools.x402.offers import asks_for_market, sellers_named_in

__all__ = ["ARGS_EVENT_CHARS", "RunContext", "literal_args"]

#: Proposed arguments kept in an audit event: enough for any real call, bounded so a
#: model (or an injection it obeys) cannot bloat the audit store.
ARGS_EVENT_CHARS = 2_000


def literal_args(args: object, limit: int = ARGS_EVENT_CHARS) -> object:
    """Proposed arguments as the model wrote them, JSON-safe, at most ``limit`` chars.

    Small arguments come back as a JSON copy; larger ones as ``{"truncated": true,
    "chars": N, "json": first limit chars}``, so the event says it was cut and by how much.
    """
    text = json.dumps(args, default=repr, ensure_ascii=False)
    if len(text) <= limit:
        return json.loads(text)
    return {"truncated": True, "chars": len(text), "json": text[:limit]}


class RunContext:
    """One run being driven by this process (a fresh one, or a resumed one)."""

    def __init__(self, state: RunState, deps: Deps, limits: Limits) -> None:
        self.state = state
        self.deps = deps
        self.limits = limits
        self.segment_start = deps.clock()
        #: The wallet's USDC balance as last read by the self-model (None: no wallet).
        self.balance: int | None = None
        #: The last malformed-proposal error, named in a ``proposal-lost`` stop.
        self.last_invalid = ""
        self.tools = ToolContext(
            run_id=state.run_id,
            chain=deps.chain,
            network=deps.network,
            wallet=deps.wallet,
            emit=self.emit,
            allowlist=deps.allowlist,
            http=deps.http,
            extras=dict(deps.extras),
            spend_cap_atomic=limits.spend_cap_atomic,
            task_addresses=tuple(state.task_addresses),
            task_sellers=sellers_named_in(state.task),
            market_only=asks_for_market(state.task),
            response_deadline_s=limits.response_deadline_s,
            time_left=lambda: limits.wall_clock_s - self.elapsed(),
            judge_reads_terms=judge_reads_terms(deps.judge),
            read_terms_ahead=terms_ahead_of(deps.judge, state.run_id),
        )

    def emit(self, type_: str, data: dict[str, object]) -> None:
        """Append one audit event (and show it live when someone is watching)."""
        self.deps.store.event(self.state.run_id, type_, data)
        if self.deps.on_event is not None:
            self.deps.on_event(self.state.run_id, type_, data)

    def elapsed(self) -> float:
        """Seconds this run has been driven, over every process that drove it."""
        return self.state.elapsed_s + (self.deps.clock() - self.segment_start)

    @property
    def checklist(self) -> Checklist:
        return Checklist.from_dicts(self.state.checklist)

    def distrusted_sellers(self) -> frozenset[str]:
        """Seller origins this task distrusts (:func:`agent.loop.lessons.distrusted_sellers`
        of this run's failed sellers and the lessons it is shown); the offline planner
        reads the same two from :meth:`model_context`."""
        return distrusted_sellers(self.state.failed_sellers, self.state.lessons)

    def history(self) -> list[HistoryEntry]:
        return [HistoryEntry.from_dict(h) for h in self.state.history]

    def history_text(self) -> str:
        return render(self.history())

    def add_history(
        self,
        tool: str,
        args: dict[str, object],
        outcome: Outcome,
        summary: str,
        evidence_id: str | None = None,
        *,
        error_class: str | None = None,
        http_status: int | None = None,
    ) -> None:
        entry = HistoryEntry(
            self.state.step, tool, args, outcome, one_line(summary), evidence_id,
            error_class=error_class, http_status=http_status,
        )
        self.state.history.append(entry.as_dict())

    def skip(self, why: str, feedback: str, **data: object) -> None:
        """A proposal not executed: free, audited, the model told why."""
        self.state.consecutive_skips += 1
        self.state.feedback.append(feedback)
        self.emit("gate.skip", {"step": self.state.step, "why": why, "feedback": feedback, **data})

    def model_context(self) -> dict[str, object]:
        """What every model request is shown about the run (prompt builders read it)."""
        return {
            "task": self.state.task,
            "network": self.deps.network.name,
            "tools": self.deps.registry.describe_for(self.state.task),
            "checklist": self.state.checklist,
            "evidence": [e.model_dump() for e in self.state.evidence],
            "lessons": self.state.lessons,
            # Origins of sellers paid in this run that did not deliver: the loop refuses
            # any further call to them, so a planner should not propose one.
            "failed_sellers": sorted(self.state.failed_sellers),
            "history": self.history_text(),
        }
