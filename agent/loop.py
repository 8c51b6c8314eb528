"""The agent loop: one turn in the design's order, every exit a named stop.

Budgets first, a fresh self-model, checklist focus, a proposal, gates, the judge,
execution, learning. The model proposes, the judge disposes, tools execute. A run's
whole state is a serializable value (``RunState``), so a run paused for a human
resumes later in another process with the same budgets and clock accounting.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent import detectors
from agent.checklist import FACT_KINDS, Checklist, parse_checklist
from agent.errors import ModelUnavailable, ProposalInvalid, RunStateError, ToolArgsError
from agent.history import HistoryEntry, Outcome, one_line, render
from agent.lessons import lesson_prompt, record_lesson, similar_lessons
from agent.limits import Limits, limits_for
from agent.models.base import Model, ModelRequest, Purpose
from agent.proposal import (
    Batch,
    Call,
    Done,
    NoAction,
    Proposal,
    SubmitAnswer,
    checklist_messages,
    parse_proposal,
    propose_messages,
    replan_messages,
    retry_messages,
    synthesis_messages,
)
from agent.result import (
    FINISHED_STOPS,
    AgentResult,
    EvidenceItem,
    SpendSummary,
    StopReason,
    TokenSummary,
    usdc_display,
)
from agent.selfmodel import AGENT_NAME, SelfModel, agent_version, read_balance
from agent.store import RunStore
from agent.tokens import count_messages
from agent.tools.base import Observation, Quote, Tool, ToolContext, ToolRegistry

__all__ = ["Decision", "Deps", "PendingCall", "RunState", "resume", "run_task"]

Decision = Literal["approve", "deny"]
"""A human's ruling on a paused paid call: ``approve`` it (the judge re-issues an approving
verdict for the same payload and the run goes on) or ``deny`` it (the run stops)."""

RunStatus = Literal["running", "paused", "stopped"]
"""``running``: a process is driving it. ``paused``: awaiting approval, state in the store.
``stopped``: it returned its result."""

_NO_MODEL_AFTER: frozenset[str] = frozenset(
    {"llm-unreachable", "token-budget", "deadline", "awaiting-approval"}
)


# ------------------------------------------------------------------------ state


class PendingCall(BaseModel):
    """A paid call held for a human: the exact quote and the judge's escalate verdict."""

    step: int
    tool: str
    args: dict[str, Any]
    fingerprint: str
    quote: dict[str, Any]
    verdict: dict[str, Any]


class RunState(BaseModel):
    """Everything a run knows; JSON round-trips, so another process can resume it."""

    run_id: str
    task: str
    profile: str
    limits: dict[str, Any]
    status: RunStatus = "running"
    started_at: float = Field(default_factory=time.time)
    elapsed_s: float = 0.0
    step: int = 0
    checklist: list[dict[str, Any]] = Field(default_factory=list)
    checklist_done: bool = False
    plan: str = ""
    replanned_at: int = 0
    lessons: list[str] = Field(default_factory=list)
    messages: list[dict[str, str]] = Field(default_factory=list)
    history: list[dict[str, Any]] = Field(default_factory=list)
    feedback: list[str] = Field(default_factory=list)
    evidence: list[EvidenceItem] = Field(default_factory=list)
    executed: dict[str, int] = Field(default_factory=dict)
    attempted: list[str] = Field(default_factory=list)
    proposed: list[str] = Field(default_factory=list)
    nudged: dict[str, int] = Field(default_factory=dict)
    free_calls: dict[str, int] = Field(default_factory=dict)
    successful_tools: list[str] = Field(default_factory=list)
    signatures: list[str] = Field(default_factory=list)
    consecutive_failures: int = 0
    consecutive_skips: int = 0
    consecutive_failed_proposals: int = 0
    spend_usdc: int = 0
    gas_wei: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_estimated: bool = False
    pending: PendingCall | None = None
    stop_reason: StopReason | None = None
    message: str = ""


@dataclass
class Deps:
    """What a run uses, injected. ``judge`` is an in-process Judge or a JudgeClient.

    ``chain`` is a ChainClient (live balance, free reads); ``wallet`` signs paid calls;
    ``meter`` (default ``wallet.meter``) reports spent + reserved for the spend cap.
    """

    model: Model
    registry: ToolRegistry
    store: RunStore
    network: Any
    chain: Any = None
    judge: Any = None
    wallet: Any = None
    wallet_address: str | None = None
    meter: Any = None
    free_policy: Any = None
    limits: Limits | None = None
    profile: str | None = None
    http: Any = None
    allowlist: tuple[str, ...] = ()
    extras: dict[str, Any] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    on_event: Callable[[str, str, dict[str, Any]], None] | None = None


_ACTION: dict[type, str] = {
    Call: "call",
    Batch: "batch",
    SubmitAnswer: "submit_answer",
    Done: "done",
    NoAction: "none",
}


class _Stop(Exception):
    """Internal: a stop reason fired somewhere inside a turn."""

    def __init__(self, reason: StopReason, message: str = "", answer: str | None = None):
        super().__init__(reason)
        self.reason: StopReason = reason
        self.message = message
        self.answer = answer


def _jsonable(value: Any) -> Any:
    """JSON-safe copy of a payload; bytes become ``{"__bytes__": hex}`` (reversible)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return {"__bytes__": bytes(value).hex()}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _unjsonable(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__bytes__"}:
            return bytes.fromhex(value["__bytes__"])
        return {k: _unjsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unjsonable(v) for v in value]
    return value


# --------------------------------------------------------------------- the run


class _Run:
    """One run being driven by this process (a fresh one, or a resumed one)."""

    def __init__(self, state: RunState, deps: Deps, limits: Limits) -> None:
        self.state = state
        self.deps = deps
        self.limits = limits
        self.segment_start = deps.clock()
        self.balance: int | None = None
        self.ctx = ToolContext(
            run_id=state.run_id,
            chain=deps.chain,
            network=deps.network,
            wallet=deps.wallet,
            emit=self.emit,
            allowlist=deps.allowlist,
            http=deps.http,
            extras={**deps.extras, "spend_cap_usdc": limits.spend_cap_usdc},
            spend_cap_usdc=limits.spend_cap_usdc,
        )
        if deps.free_policy is None:
            from judge.policy import FreeReadPolicy

            deps.free_policy = FreeReadPolicy.default()

    # ---------------------------------------------------------------- plumbing
    def emit(self, type_: str, data: dict[str, Any]) -> None:
        self.deps.store.event(self.state.run_id, type_, data)
        if self.deps.on_event is not None:
            self.deps.on_event(self.state.run_id, type_, data)

    def elapsed(self) -> float:
        return self.state.elapsed_s + (self.deps.clock() - self.segment_start)

    @property
    def checklist(self) -> Checklist:
        return Checklist.from_dicts(self.state.checklist)

    def _history(self) -> list[HistoryEntry]:
        return [HistoryEntry(**h) for h in self.state.history]

    def _add_history(
        self,
        tool: str,
        args: dict[str, Any],
        outcome: Outcome,
        summary: str,
        evidence_id: str | None = None,
    ) -> None:
        entry = HistoryEntry(self.state.step, tool, args, outcome, one_line(summary), evidence_id)
        self.state.history.append(entry.as_dict())

    def _skip(self, why: str, feedback: str, **data: Any) -> None:
        """A proposal not executed: free, audited, the model told why."""
        self.state.consecutive_skips += 1
        self.state.feedback.append(feedback)
        self.emit("gate.skip", {"step": self.state.step, "why": why, "feedback": feedback, **data})

    # ---------------------------------------------------------------- budgets
    def check_clock_and_steps(self) -> None:
        """Budgets before any call: steps left and the deadline."""
        if self.state.step >= self.limits.max_steps:
            raise _Stop(
                "max-steps",
                f"used all {self.limits.max_steps} steps (max_steps={self.limits.max_steps}); "
                "raise max_steps or choose the quality-first profile for deeper tasks.",
            )
        self.check_deadline()

    def check_deadline(self) -> None:
        elapsed = self.elapsed()
        if elapsed >= self.limits.wall_clock_s:
            raise _Stop(
                "deadline",
                f"exceeded the wall clock of {self.limits.wall_clock_s:g} s "
                f"(elapsed={elapsed:.1f} s); raise wall_clock_s if the task needs longer.",
            )

    def tokens_used(self) -> int:
        return self.state.tokens_in + self.state.tokens_out

    def spend_committed(self) -> int:
        """USDC spent + gas (as USDC) + still-reserved, per our counters and the meter."""
        ours = self.state.spend_usdc + self.limits.gas_as_usdc(self.state.gas_wei)
        meter = self.deps.meter or getattr(self.deps.wallet, "meter", None)
        if meter is None:
            return ours
        usage = meter.usage(self.state.run_id)
        return max(ours, int(usage.committed))

    # ---------------------------------------------------------------- model calls
    async def ask(
        self,
        purpose: Purpose,
        messages: list[dict[str, str]],
        context: dict[str, Any] | None = None,
    ) -> str:
        """One model call, budget-checked before sending (tokens projected, deadline)."""
        self.check_deadline()
        needed = count_messages(messages)
        projected = self.tokens_used() + needed + self.limits.reply_reserve_tokens
        if projected > self.limits.max_tokens:
            raise _Stop(
                "token-budget",
                f"the next {purpose} request would cross max_tokens={self.limits.max_tokens} "
                f"(used={self.tokens_used()}, request~{needed}, reply reserve "
                f"{self.limits.reply_reserve_tokens}); not sent. Raise max_tokens to go on.",
            )
        request = ModelRequest(
            purpose, messages, context or {}, max_output_tokens=self.limits.reply_reserve_tokens
        )
        remaining = self.limits.wall_clock_s - self.elapsed()
        try:
            reply = await asyncio.wait_for(self.deps.model.complete(request), remaining)
        except TimeoutError:
            self.check_deadline()
            raise
        except ModelUnavailable as exc:
            raise _Stop(
                "llm-unreachable",
                f"model {self.deps.model.name} unavailable ({exc.kind}): {exc.fix}",
            ) from exc
        usage = reply.usage
        self.state.tokens_in += usage.input_tokens
        self.state.tokens_out += usage.output_tokens
        self.state.tokens_estimated |= usage.estimated
        self.emit(
            "model.call",
            {
                "purpose": purpose,
                "input": usage.input_tokens,
                "output": usage.output_tokens,
                "estimated": usage.estimated,
            },
        )
        return reply.text

    # ---------------------------------------------------------------- turn parts
    async def self_model(self) -> SelfModel:
        net = self.deps.network
        wallet_addr = self.deps.wallet_address or getattr(self.deps.wallet, "address", None)
        try:
            balance = await read_balance(self.deps.chain, net.usdc, wallet_addr)
        except Exception as exc:
            self._raise_if_dependency(exc)
            raise
        self.balance = balance
        spend_left = max(0, self.limits.spend_cap_usdc - self.spend_committed())
        return SelfModel(
            agent=AGENT_NAME,
            version=agent_version(),
            network=net.name,
            chain_id=net.chain_id,
            rpc_url=net.rpc_url,
            usdc=net.usdc,
            wallet=wallet_addr,
            wallet_balance_usdc=balance,
            spend_left_usdc=spend_left,
            tokens_left=max(0, self.limits.max_tokens - self.tokens_used()),
            steps_left=max(0, self.limits.max_steps - self.state.step),
            deadline_left_s=max(0.0, self.limits.wall_clock_s - self.elapsed()),
            tools=tuple(
                (n, t.kind)
                for n in self.deps.registry.names()
                if (t := self.deps.registry.get(n)) is not None
            ),
        )

    def _raise_if_dependency(self, exc: BaseException) -> None:
        from chain.errors import RpcUnreachable
        from judge.errors import JudgeUnreachable

        if isinstance(exc, RpcUnreachable):
            raise _Stop("chain-unreachable", str(exc)) from exc
        if isinstance(exc, JudgeUnreachable):
            raise _Stop(
                "judge-unreachable",
                f"{exc} Fix: start the judge (`nib judge serve`) "
                "or unset NIB_JUDGE_URL to use the in-process judge.",
            ) from exc
        if isinstance(exc, ModelUnavailable):
            raise _Stop("llm-unreachable", f"{exc.kind}: {exc.fix}") from exc

    async def extract_checklist(self) -> None:
        messages = checklist_messages(
            self.state.task, sorted(FACT_KINDS), self.limits.checklist_max_items
        )
        text = await self.ask("checklist", messages, self.context_base())
        try:
            checklist = parse_checklist(text, max_items=self.limits.checklist_max_items)
        except ValueError as exc:
            checklist = Checklist()
            self.emit("checklist", {"items": [], "error": str(exc)})
        else:
            self.emit("checklist", {"items": checklist.as_dicts()})
        self.state.checklist = checklist.as_dicts()
        self.state.checklist_done = True

    def context_base(self) -> dict[str, Any]:
        return {
            "task": self.state.task,
            "tools": self.deps.registry.describe(),
            "checklist": self.state.checklist,
            "evidence": [e.model_dump() for e in self.state.evidence],
            "lessons": self.state.lessons,
            "history": render(self._history()),
        }

    async def replan_if_due(self) -> None:
        every = self.limits.replan_every
        step = self.state.step
        if step == 0 or step % every or self.state.replanned_at == step:
            return
        checklist = "\n".join(
            f"- {i['text']}: {'covered' if i['covered'] else 'missing'}"
            for i in self.state.checklist
        )
        text = await self.ask(
            "replan",
            replan_messages(self.state.task, checklist, render(self._history())),
            self.context_base(),
        )
        self.state.plan = one_line(text, 400)
        self.state.replanned_at = step
        self.emit("replan", {"step": step, "plan": self.state.plan})

    async def propose(self, sm: SelfModel) -> Proposal | None:
        focus = self.checklist.focus()
        context = {
            **self.context_base(),
            "self_model": sm.as_dict(),
            "self_model_text": sm.render(),
            "focus": focus.as_dict() if focus else None,
            "plan": self.state.plan,
            "feedback": list(self.state.feedback),
        }
        messages = propose_messages(context)
        self.state.feedback.clear()
        text = await self.ask("propose", messages, context)
        self.state.messages.append({"role": "assistant", "content": one_line(text, 400)})
        attempts = 0
        while True:
            try:
                return parse_proposal(text)
            except ProposalInvalid as exc:
                self.emit(
                    "proposal.invalid",
                    {"step": self.state.step + 1, "error": str(exc), "retry": attempts},
                )
                if attempts >= self.limits.malformed_retries:
                    self.state.feedback.append(f"Your reply was rejected: {exc}")
                    return None
                attempts += 1
                text = await self.ask(
                    "propose", retry_messages(str(exc), self.deps.registry.names()), context
                )

    # ---------------------------------------------------------------- gates
    def gate(
        self, call: Call, *, in_batch: bool = False
    ) -> tuple[Tool, Any, dict[str, Any], str] | None:
        """Unknown tool / invalid args: refused free. Returns (tool, args, normalised, fp)."""
        from judge.fingerprint import call_fingerprint

        tool = self.deps.registry.get(call.tool)
        if tool is None:
            self._skip(
                "unknown-tool",
                f"tool {call.tool!r} is not wired; wired tools: "
                f"{', '.join(self.deps.registry.names()) or 'none'}. Propose one of them.",
                tool=call.tool,
            )
            return None
        if in_batch and tool.kind != "free":
            self._skip(
                "paid-in-batch",
                f"{tool.name} moves money and cannot be batched; propose it alone as a call.",
                tool=tool.name,
            )
            return None
        try:
            args = tool.parse_args(call.args)
        except ToolArgsError as exc:
            self._skip("invalid-args", str(exc), tool=tool.name, args=call.args)
            return None
        norm = args.model_dump(mode="json")
        return tool, args, norm, call_fingerprint(tool.name, norm)

    def fresh(self, tool: Tool, norm: dict[str, Any], fp: str) -> bool:
        """The duplicate gate: an executed call is skipped with one nudge, then stops the run."""
        if fp in self.state.executed:
            earlier = self.state.executed[fp]
            if self.state.nudged.get(fp, 0) >= self.limits.duplicate_nudges:
                raise _Stop(
                    "executed-duplicate",
                    f"{tool.name} {json.dumps(norm, sort_keys=True)} was executed at "
                    f"step {earlier} and proposed again after a nudge.",
                )
            self.state.nudged[fp] = self.state.nudged.get(fp, 0) + 1
            note = (
                f"{tool.name} with these exact arguments already ran at step {earlier}; its "
                f"result is in the history. Use it or try something different."
            )
            self._skip(
                "executed-duplicate", note, tool=tool.name, fingerprint=fp, earlier_step=earlier
            )
            self.emit(
                "nudge", {"step": self.state.step, "fingerprint": fp, "earlier_step": earlier}
            )
            self._add_history(tool.name, norm, "skipped", f"duplicate of step {earlier}")
            return False
        return True

    def free_allowed(self, tool: Tool, norm: dict[str, Any], fp: str) -> Any | None:
        decision = self.deps.free_policy.decide_free(
            tool.name, self.state.free_calls.get(tool.name, 0)
        )
        self.emit(
            "verdict",
            {
                "step": self.state.step,
                "tool": tool.name,
                "kind": "free",
                "decision": decision.outcome,
                "reason": decision.reason,
            },
        )
        if not decision.allowed:
            self._skip("policy", decision.reason, tool=tool.name, fingerprint=fp)
            self._add_history(tool.name, norm, "skipped", decision.reason)
            return None
        return decision

    # ---------------------------------------------------------------- execute + learn
    async def run_free(
        self, tool: Tool, args: Any, norm: dict[str, Any], fp: str, decision: Any
    ) -> Observation:
        self.state.free_calls[tool.name] = self.state.free_calls.get(tool.name, 0) + 1
        row = decision.row
        timeout = row.timeout_s if row is not None else 10.0
        try:
            obs = await asyncio.wait_for(tool.run(args, self.ctx), timeout)
        except TimeoutError:
            obs = Observation.failure(tool.name, f"timed out after {timeout:g} s")
        except Exception as exc:
            self._raise_if_dependency(exc)
            obs = Observation.failure(tool.name, f"{type(exc).__name__}: {exc}")
        if obs.ok and row is not None:
            size = len(json.dumps(obs.data, default=str))
            check = self.deps.free_policy.check_result(tool.name, size)
            if not check.allowed:
                obs = Observation.failure(tool.name, check.reason)
        return obs

    def learn(self, tool: Tool, norm: dict[str, Any], fp: str, obs: Observation) -> None:
        """Record one executed call: audit, executed set, evidence, coverage, counters."""
        st = self.state
        st.attempted.append(fp)
        self.emit(
            "tool.call",
            {
                "step": st.step,
                "tool": tool.name,
                "args": norm,
                "fingerprint": fp,
                "ok": obs.ok,
                "cost_usdc": obs.cost_usdc,
                "gas_wei": obs.gas_wei,
                "summary": one_line(obs.summary),
            },
        )
        if obs.cost_usdc or obs.gas_wei:
            st.spend_usdc += obs.cost_usdc
            st.gas_wei += obs.gas_wei
            self.emit(
                "spend",
                {
                    "step": st.step,
                    "tool": tool.name,
                    "usdc": obs.cost_usdc,
                    "gas_wei": obs.gas_wei,
                    "total_usdc": st.spend_usdc,
                    "total_gas_wei": st.gas_wei,
                },
            )
        if not obs.ok:
            st.consecutive_failures += 1
            self._add_history(tool.name, norm, "failed", obs.error or obs.summary)
            st.feedback.append(
                f"{tool.name} failed: {one_line(obs.error or obs.summary)} "
                "(failures are retryable; fix the cause first)"
            )
            return
        st.consecutive_failures = 0
        st.executed[fp] = st.step
        eid = f"e{len(st.evidence) + 1}"
        st.evidence.append(
            EvidenceItem(
                id=eid,
                step=st.step,
                tool=tool.name,
                args=norm,
                summary=one_line(obs.summary),
                facts=dict(obs.facts),
                cost_usdc=obs.cost_usdc,
            )
        )
        self._add_history(tool.name, norm, "ok", obs.summary, eid)
        before = {i.id for i in self.checklist.covered}
        after = self.checklist.cover(obs.facts, obs.summary, eid)
        st.checklist = after.as_dicts()
        newly = [i.id for i in after.covered if i.id not in before]
        if newly:
            self.emit("coverage", {"step": st.step, "covered": newly, "evidence": eid})
        st.successful_tools.append(tool.name)
        facts = " ".join(f"{k}={v}" for k, v in sorted(obs.facts.items()))
        st.signatures.append(f"{obs.summary} {facts}")

    async def paid(self, tool: Tool, args: Any, norm: dict[str, Any], fp: str) -> None:
        """Quote -> spend-cap projection -> judge -> (pause | refuse | execute)."""
        try:
            quote = await tool.quote(args, self.ctx)
        except Exception as exc:
            self._raise_if_dependency(exc)
            self.learn(tool, norm, fp, Observation.failure(tool.name, f"quote failed: {exc}"))
            return
        self.emit(
            "quote",
            {
                "step": self.state.step,
                "tool": tool.name,
                "amount": quote.amount,
                "recipient": quote.recipient,
                "asset": quote.asset,
                "payload_fingerprint": quote.payload_fingerprint,
            },
        )
        self.check_spend(quote)
        verdict = await self.judge_decide(tool, norm, fp, quote, human_approved=False)
        self.emit(
            "verdict",
            {
                "step": self.state.step,
                "tool": tool.name,
                "kind": "paid",
                "decision": verdict.decision,
                "reason": verdict.reason,
                "verdict_id": verdict.id,
                "amount": verdict.amount,
                "p": verdict.p,
                "ev": verdict.ev,
            },
        )
        if verdict.decision == "answer":
            raise _Stop("judge-answered", f"judge: {verdict.reason}")
        if verdict.decision == "refuse":
            self._skip(
                "judge-refused",
                f"the judge refused {tool.name}: {verdict.reason}",
                tool=tool.name,
                fingerprint=fp,
            )
            self._add_history(tool.name, norm, "refused", verdict.reason)
            return
        if verdict.decision == "escalate":
            self.state.pending = PendingCall(
                step=self.state.step,
                tool=tool.name,
                args=norm,
                fingerprint=fp,
                quote=_jsonable(asdict(quote)),
                verdict=verdict.model_dump(mode="json"),
            )
            raise _Stop(
                "awaiting-approval",
                f"{tool.name} for {usdc_display(quote.amount)} needs a human: "
                f"{verdict.reason}. Run `nib approve {self.state.run_id}` or "
                f"`nib deny {self.state.run_id}`.",
            )
        await self.execute_paid(tool, norm, fp, quote, verdict)

    def check_spend(self, quote: Quote) -> None:
        """Projected spend (spent + reserved + this price + its gas) must fit the cap."""
        gas = 0
        payload = quote.payload
        if "gas" in payload and "maxFeePerGas" in payload:
            gas = int(payload["gas"]) * int(payload["maxFeePerGas"])
        gas = int(quote.meta.get("max_gas_wei", gas))
        committed = self.spend_committed()
        projected = committed + quote.amount + self.limits.gas_as_usdc(gas)
        if projected > self.limits.spend_cap_usdc:
            raise _Stop(
                "cost-budget",
                f"{quote.tool} would bring spend to {usdc_display(projected)} "
                f"(committed {usdc_display(committed)} + price {usdc_display(quote.amount)} "
                f"+ gas), over spend_cap_usdc={usdc_display(self.limits.spend_cap_usdc)}; "
                "nothing was signed. Raise the cap to allow it.",
            )

    def judge_request(
        self, tool: Tool, norm: dict[str, Any], fp: str, quote: Quote, *, human_approved: bool
    ) -> Any:
        """The judge's view of one paid call: price, budgets, balance, checklist, history.

        A human-approved call is asked without an approval threshold: the human has ruled
        on the escalation, and the judge still checks EV, caps, budget and balance.
        """
        from judge.jev import CallRecord, PaidCallRequest

        cl = self.checklist
        by_evidence: dict[str, list[str]] = {}
        for item in cl.covered:
            by_evidence.setdefault(item.evidence_id or "", []).append(item.kind or item.text)
        costs = {e.id: e.cost_usdc for e in self.state.evidence}
        history = tuple(
            CallRecord(
                h["tool"],
                h["outcome"] == "ok",
                tuple(by_evidence.get(h.get("evidence_id") or "", ())),
                costs.get(h.get("evidence_id") or "", 0),
            )
            for h in self.state.history
            if h["tool"] and h["outcome"] in ("ok", "failed")
        )
        committed = self.spend_committed()
        return PaidCallRequest(
            tool=tool.name,
            args=norm,
            call_fingerprint=fp,
            payload_fingerprint=quote.payload_fingerprint,
            price=quote.amount,
            asset=quote.asset,
            recipient=quote.recipient,
            chain_id=quote.chain_id,
            remaining_budget=max(0, self.limits.spend_cap_usdc - committed),
            balance=self.balance or 0,
            per_call_cap=self.limits.per_call_cap_usdc,
            spend_cap=self.limits.spend_cap_usdc,
            approval_threshold=None if human_approved else self.limits.approval_threshold_usdc,
            missing=tuple(i.kind or i.text for i in cl.missing),
            covered=tuple(i.kind or i.text for i in cl.covered),
            tool_facts=tuple(tool.facts_for(tool.args_model.model_validate(norm))),
            history=history,
            checklist_size=len(cl.items),
        )

    async def _call_judge(self, method: str, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self.deps.judge, method)
        try:
            if inspect.iscoroutinefunction(fn):
                return await fn(*args, **kwargs)
            return await asyncio.to_thread(fn, *args, **kwargs)
        except Exception as exc:
            self._raise_if_dependency(exc)
            raise

    async def judge_decide(
        self, tool: Tool, norm: dict[str, Any], fp: str, quote: Quote, *, human_approved: bool
    ) -> Any:
        if self.deps.judge is None:
            raise _Stop(
                "judge-unreachable",
                "no judge is wired, so no money can move. Fix: "
                "configure the judge (in-process key or NIB_JUDGE_URL).",
            )
        request = self.judge_request(tool, norm, fp, quote, human_approved=human_approved)
        return await self._call_judge("decide", request)

    async def execute_paid(
        self, tool: Tool, norm: dict[str, Any], fp: str, quote: Quote, verdict: Any
    ) -> None:
        self.check_deadline()
        try:
            obs = await tool.execute(quote, verdict, self.ctx)
        except Exception as exc:
            code = getattr(exc, "code", None)
            if code == "verdict-void":
                raise _Stop("verdict-void", f"{exc}") from exc
            if code in ("cap-exceeded", "insufficient-balance"):
                raise _Stop("cost-budget", f"{exc}") from exc
            self._raise_if_dependency(exc)
            obs = Observation.failure(tool.name, f"{type(exc).__name__}: {exc}")
        missing_before = tuple(i.kind or i.text for i in self.checklist.missing)
        self.learn(tool, norm, fp, obs)
        await self.record_outcome(tool, verdict, missing_before)

    async def record_outcome(
        self, tool: Tool, verdict: Any, missing_before: tuple[str, ...]
    ) -> None:
        """Tell the judge, per missing item the tool could cover, whether the call covered
        it (its calibration data). Advisory: a failure here is logged, not fatal."""
        from judge.calibration import fact_key

        judge = self.deps.judge
        if judge is None or not hasattr(judge, "record_outcome"):
            return
        keys = {fact_key(f) for f in tool.facts}
        still = {i.kind or i.text for i in self.checklist.missing}
        for item in missing_before:
            if fact_key(item) not in keys:
                continue
            try:
                await self._call_judge(
                    "record_outcome", tool.name, fact_key(item), verdict.p, item not in still
                )
            except _Stop:
                raise
            except Exception as exc:  # calibration data is advisory
                self.emit("judge.outcome.error", {"error": f"{type(exc).__name__}: {exc}"})

    async def approved(self, pending: PendingCall) -> None:
        """Execute a human-approved held call under a fresh judge-signed approve verdict.

        The human's approval lifts only the approval threshold: the judge re-decides the
        exact held payload (EV, caps, budget, live balance) and signs a new verdict, and
        the wallet still checks that verdict against the payload before signing.
        """
        tool = self.deps.registry.get(pending.tool)
        if tool is None:
            raise _Stop("approval-denied", f"{pending.tool} is no longer wired; cannot execute.")
        quote = Quote(**_unjsonable(pending.quote))
        self.check_deadline()
        await self.self_model()  # fresh balance for the judge; chain outage stops here
        self.check_spend(quote)
        verdict = await self.judge_decide(
            tool, pending.args, pending.fingerprint, quote, human_approved=True
        )
        self.emit(
            "verdict",
            {
                "step": self.state.step,
                "tool": tool.name,
                "kind": "paid",
                "decision": verdict.decision,
                "reason": verdict.reason,
                "verdict_id": verdict.id,
                "amount": verdict.amount,
                "human_approved": True,
            },
        )
        if verdict.decision == "answer":
            raise _Stop("judge-answered", f"judge: {verdict.reason}")
        if verdict.decision != "approve":
            self._skip(
                "judge-refused",
                f"a human approved {tool.name} but the judge refused it: {verdict.reason}",
                tool=tool.name,
                fingerprint=pending.fingerprint,
            )
            self._add_history(tool.name, pending.args, "refused", verdict.reason)
            return
        await self.execute_paid(tool, pending.args, pending.fingerprint, quote, verdict)

    # ---------------------------------------------------------------- one turn
    async def handle(self, proposal: Proposal) -> None:
        st = self.state
        if not isinstance(proposal, Call | Batch):
            self.emit("proposal", {"step": st.step, "action": _ACTION[type(proposal)]})
        if isinstance(proposal, NoAction):
            raise _Stop(
                "model-stopped",
                f"the model replied without a call or a finish: "
                f"{one_line(proposal.text, 120) or '(empty reply)'}",
            )
        if isinstance(proposal, Done):
            raise _Stop("done-signal", "the model said done", answer=proposal.answer)
        if isinstance(proposal, SubmitAnswer):
            known = {e.id for e in st.evidence}
            unknown = [i for i in proposal.evidence if i not in known]
            if not proposal.evidence or unknown:
                why = (
                    f"unknown evidence ids {', '.join(unknown)}"
                    if unknown
                    else "no evidence ids cited"
                )
                self._skip(
                    "invalid-submit",
                    f"submit_answer refused: {why}; known ids: "
                    f"{', '.join(sorted(known)) or 'none yet, gather evidence first'}.",
                )
                return
            raise _Stop("finish-tool", "submit_answer accepted", answer=proposal.answer)
        calls = [proposal] if isinstance(proposal, Call) else list(proposal.calls)
        if isinstance(proposal, Batch) and len(calls) > self.limits.batch_max_calls:
            self._skip(
                "batch-too-large",
                f"a batch holds at most "
                f"{self.limits.batch_max_calls} free calls; got {len(calls)}.",
            )
            return
        admitted = []
        for call in calls:
            gated = self.gate(call, in_batch=isinstance(proposal, Batch))
            if gated is not None:
                admitted.append(gated)
        from judge.fingerprint import fingerprint as fp_of

        if admitted:
            key = admitted[0][3] if len(admitted) == 1 else fp_of(sorted(a[3] for a in admitted))
            st.proposed.append(key)
            if (reason := detectors.oscillation(st.proposed, self.limits)) is not None:
                raise _Stop(
                    reason,
                    "the recent proposals repeat a cycle: "
                    f"{' -> '.join(p[:10] for p in st.proposed[-4:])}",
                )
        self.emit(
            "proposal",
            {
                "step": st.step,
                "action": _ACTION[type(proposal)],
                "calls": [
                    {"tool": t.name, "args": n, "fingerprint": f} for t, _a, n, f in admitted
                ],
            },
        )
        admitted = [a for a in admitted if self.fresh(a[0], a[2], a[3])]
        paid = [a for a in admitted if a[0].kind == "paid"]
        if paid:
            st.consecutive_skips = 0
            await self.paid(*paid[0])
            return
        allowed = []
        for tool, args, norm, fp in admitted:
            decision = self.free_allowed(tool, norm, fp)
            if decision is not None:
                allowed.append((tool, args, norm, fp, decision))
        if not allowed:
            return
        st.consecutive_skips = 0
        results = await asyncio.gather(
            *(self.run_free(*a) for a in allowed), return_exceptions=True
        )
        for (tool, _args, norm, fp, _d), obs in zip(allowed, results, strict=True):
            if isinstance(obs, BaseException):
                raise obs
            self.learn(tool, norm, fp, obs)

    def detect(self) -> None:
        """After a step: the first detector to fire stops the run."""
        st, lim = self.state, self.limits
        if self.checklist.complete:
            raise _Stop("evidence-covered", "every checklist item is covered by evidence")
        for reason in (
            detectors.failure_budget(st.consecutive_failures, lim),
            detectors.proposal_lost(st.consecutive_failed_proposals, lim),
            detectors.skip_loop(st.consecutive_skips, lim),
            detectors.no_novelty(st.signatures, lim),
            detectors.streak_exhausted(st.successful_tools, lim),
        ):
            if reason is not None:
                raise _Stop(reason, detectors_message(reason, st, lim))

    async def turns(self) -> None:
        if not self.state.checklist_done:
            self.check_deadline()
            await self.extract_checklist()
        while True:
            self.check_clock_and_steps()
            sm = await self.self_model()
            self.emit("selfmodel", {"step": self.state.step + 1, **sm.as_dict()})
            await self.replan_if_due()
            proposal = await self.propose(sm)
            self.state.step += 1
            if proposal is None:
                self.state.consecutive_failed_proposals += 1
                self._add_history("", {}, "failed", "no valid proposal")
            else:
                self.state.consecutive_failed_proposals = 0
                await self.handle(proposal)
            self.detect()

    # ---------------------------------------------------------------- the end
    async def finish(self, stop: _Stop) -> AgentResult:
        st = self.state
        st.stop_reason = stop.reason
        st.message = stop.message
        finished = stop.reason in FINISHED_STOPS
        answer = (stop.answer or "").strip()
        if not answer and stop.reason not in _NO_MODEL_AFTER:
            try:
                answer = (
                    await self.ask(
                        "synthesize",
                        synthesis_messages(
                            st.task, [e.model_dump() for e in st.evidence], stop.reason
                        ),
                        self.context_base(),
                    )
                ).strip()
            except (_Stop, TimeoutError) as exc:
                self.emit("synthesis.skipped", {"why": str(exc)})
        if not answer:
            answer = backstop_answer(st, stop.reason, stop.message)
        elapsed = self.elapsed()
        if stop.reason == "awaiting-approval":
            st.status = "paused"
            st.elapsed_s = elapsed
            self.emit(
                "pause",
                {
                    "step": st.step,
                    "message": stop.message,
                    "tool": st.pending.tool if st.pending else None,
                },
            )
            self.deps.store.save_paused(st.run_id, st.model_dump_json())
        else:
            st.status = "stopped"
        result = AgentResult(
            run_id=st.run_id,
            task=st.task,
            stop_reason=stop.reason,
            finished=finished,
            partial=not finished,
            answer=answer,
            evidence=list(st.evidence),
            steps=st.step,
            attempted=list(st.attempted),
            spend=SpendSummary(
                usdc_atomic=st.spend_usdc,
                gas_wei=st.gas_wei,
                usdc_display=usdc_display(st.spend_usdc),
            ),
            tokens=TokenSummary(
                input=st.tokens_in, output=st.tokens_out, estimated=st.tokens_estimated
            ),
            elapsed_s=round(elapsed, 3),
            message=stop.message,
            profile=st.profile,
        )
        if st.status == "stopped":
            if not finished and stop.reason not in _NO_MODEL_AFTER:
                await self.distil_lesson(stop.reason)
            self.emit(
                "stop",
                {
                    "reason": stop.reason,
                    "finished": finished,
                    "steps": st.step,
                    "spend_usdc": st.spend_usdc,
                    "gas_wei": st.gas_wei,
                    "tokens": self.tokens_used(),
                    "message": stop.message,
                },
            )
            self.deps.store.finish_run(st.run_id, result.model_dump(mode="json"))
        return result

    async def distil_lesson(self, reason: str) -> None:
        """Advisory: one model call; every failure is swallowed and logged."""
        try:
            text = await self.ask(
                "lesson", lesson_prompt(self.state.task, reason, render(self._history()))
            )
        except (_Stop, TimeoutError, Exception) as exc:
            self.emit("lesson.error", {"op": "distil", "error": str(exc)})
            return
        lesson = record_lesson(
            self.deps.store, self.state.run_id, self.state.task, reason, text, on_error=self.emit
        )
        if lesson:
            self.emit("lesson", {"recorded": lesson})

    async def drive(self) -> AgentResult:
        try:
            await self.turns()
        except _Stop as stop:
            return await self.finish(stop)
        raise AssertionError("unreachable: turns() only exits by _Stop")


def detectors_message(reason: str, st: RunState, lim: Limits) -> str:
    """The human line for a detector stop: the limit and the observed value."""
    return {
        "failure-budget": f"{st.consecutive_failures} consecutive tool failures "
        f"(max_consecutive_failures={lim.max_consecutive_failures})",
        "proposal-lost": f"{st.consecutive_failed_proposals} invalid proposals in a row "
        f"(max_failed_proposals={lim.max_failed_proposals})",
        "skip-loop": f"{st.consecutive_skips} skipped proposals in a row "
        f"(max_consecutive_skips={lim.max_consecutive_skips})",
        "no-novelty": f"the last {lim.novelty_window} observations were near-identical "
        f"(novelty_similarity>={lim.novelty_similarity})",
        "streak-exhausted": f"{st.successful_tools[-1] if st.successful_tools else '?'} "
        f"succeeded {lim.streak_length} times in a row (streak_length={lim.streak_length})",
    }.get(reason, reason)


def backstop_answer(st: RunState, reason: str, message: str) -> str:
    """The deterministic answer when no synthesis is available: the evidence, extracted."""
    lines = [f"Stopped ({reason}) before a final answer to: {st.task}"]
    covered = [i for i in st.checklist if i.get("covered")]
    for item in covered:
        lines.append(f"- {item['text']}: {item['value']} [{item['evidence_id']}]")
    for ev in st.evidence:
        lines.append(f"- {ev.tool}: {ev.summary} [{ev.id}]")
    if not covered and not st.evidence:
        lines.append("No evidence was gathered.")
    if message:
        lines.append(message)
    return "\n".join(lines)


# --------------------------------------------------------------------- entry points


def _resolve_limits(deps: Deps) -> tuple[str, Limits]:
    if deps.limits is not None:
        return deps.profile or "custom", deps.limits
    return limits_for(deps.profile, model_local=bool(getattr(deps.model, "local", False)))


async def run_task(task: str, deps: Deps, *, run_id: str | None = None) -> AgentResult:
    """Run one research task to its first stop; every exit returns an AgentResult.

    May move money (through the judged paid tools wired in ``deps.registry``).
    """
    profile, limits = _resolve_limits(deps)
    state = RunState(
        run_id=run_id or uuid.uuid4().hex[:12], task=task, profile=profile, limits=limits.as_dict()
    )
    run = _Run(state, deps, limits)
    deps.store.start_run(state.run_id, task, profile)
    run.emit(
        "run.start",
        {
            "task": task,
            "profile": profile,
            "limits": limits.as_dict(),
            "model": deps.model.name,
            "tools": deps.registry.names(),
        },
    )
    state.lessons = similar_lessons(deps.store, task, on_error=run.emit)
    if state.lessons:
        run.emit("lesson", {"shown": state.lessons})
    return await run.drive()


async def resume(run_id: str, decision: Decision, deps: Deps) -> AgentResult:
    """Resume a run paused awaiting approval: ``approve`` executes the held call and goes
    on; ``deny`` stops with ``approval-denied``. Same budgets; elapsed time carries over.

    May move money (``approve`` executes the held paid call under a judge-signed verdict).
    """
    raw = deps.store.take_paused(run_id)
    if raw is None:
        row = deps.store.run(run_id)
        status = row["status"] if row else "unknown"
        raise RunStateError(
            f"run {run_id} is {status}, not paused awaiting approval; only paused runs can be "
            "approved or denied. Fix: list paused runs with `nib runs`."
        )
    state = RunState.model_validate_json(raw)
    limits = Limits(**state.limits)
    state.status = "running"
    run = _Run(state, deps, limits)
    pending = state.pending
    run.emit("run.resume", {"decision": decision, "elapsed_s": state.elapsed_s})
    run.emit(
        "approval",
        {
            "decision": decision,
            "tool": pending.tool if pending else None,
            "fingerprint": pending.fingerprint if pending else None,
        },
    )
    state.pending = None
    try:
        if pending is None:
            raise _Stop("approval-denied", "the paused state held no pending call")
        if decision == "deny":
            run._add_history(pending.tool, pending.args, "refused", "denied by a human")
            raise _Stop(
                "approval-denied",
                f"a human denied {pending.tool} "
                f"({usdc_display(int(pending.quote['amount']))}); the run ends with the "
                "evidence it has.",
            )
        await run.approved(pending)
        run.detect()
        await run.turns()
    except _Stop as stop:
        return await run.finish(stop)
    raise AssertionError("unreachable: turns() only exits by _Stop")
