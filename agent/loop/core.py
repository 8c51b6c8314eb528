"""The shared machinery of a turn: audit, clock, budgets, model calls, self-model, learning.

``RunCore`` holds one run's state while a process drives it; the loop's steps (free
reads in agent/loop.py, money-moving calls in agent/paid.py) build on it. ``Stop`` is
the internal signal a step raises when a stop reason fires; it never escapes a run.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent.errors import ModelUnavailable
from agent.loop.checklist import Checklist
from agent.loop.history import HistoryEntry, Outcome, one_line
from agent.loop.limits import Limits
from agent.loop.result import EvidenceItem, StopReason
from agent.loop.selfmodel import AGENT_NAME, SelfModel, agent_version, read_balance
from agent.loop.state import Deps, RunState
from agent.loop.tokens import count_messages
from agent.models.base import ModelRequest, Purpose
from agent.tools.base import Observation, Tool, ToolContext

__all__ = ["ARGS_EVENT_CHARS", "RunCore", "Stop", "literal_args"]

#: Proposed arguments kept in an audit event: enough for any real call, bounded so a
#: model (or an injection it obeys) cannot bloat the audit store.
ARGS_EVENT_CHARS = 2_000


def literal_args(args: Any, limit: int = ARGS_EVENT_CHARS) -> Any:
    """Proposed arguments as the model wrote them, JSON-safe, at most ``limit`` chars.

    Small arguments come back as a JSON copy; larger ones as ``{"truncated": true,
    "chars": N, "json": first limit chars}``, so the event says it was cut and by how much.
    """
    text = json.dumps(args, default=repr, ensure_ascii=False)
    if len(text) <= limit:
        return json.loads(text)
    return {"truncated": True, "chars": len(text), "json": text[:limit]}


class Stop(Exception):
    """Internal: a stop reason fired somewhere inside a turn."""

    def __init__(self, reason: StopReason, message: str = "", answer: str | None = None):
        super().__init__(reason)
        self.reason: StopReason = reason
        self.message = message
        self.answer = answer


class RunCore:
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
            task_addresses=tuple(state.task_addresses),
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
            raise Stop(
                "max-steps",
                f"used all {self.limits.max_steps} steps (max_steps={self.limits.max_steps}); "
                "raise max_steps or choose the quality-first profile for deeper tasks.",
            )
        self.check_deadline()

    def check_deadline(self) -> None:
        elapsed = self.elapsed()
        if elapsed >= self.limits.wall_clock_s:
            raise Stop(
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
            raise Stop(
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
            raise Stop(
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
            raise Stop("chain-unreachable", str(exc)) from exc
        if isinstance(exc, JudgeUnreachable):
            fix = (
                ""
                if "Fix" in str(exc)
                else (
                    " Fix: start the judge (`nib judge serve`) or unset NIB_JUDGE_URL to use the "
                    "in-process judge."
                )
            )
            raise Stop("judge-unreachable", f"{exc}{fix}") from exc
        if isinstance(exc, ModelUnavailable):
            raise Stop("llm-unreachable", f"{exc.kind}: {exc.fix}") from exc

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
