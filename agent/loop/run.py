"""The agent loop: one turn in the design's order, every exit a named stop.

Budgets first, a fresh self-model, checklist focus, a proposal, gates, the judge,
execution, learning. The model proposes, the judge disposes, tools execute. A run's
whole state is a serializable value (``RunState``), so a run paused for a human
resumes later in another process with the same budgets and clock accounting.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from agent.errors import ProposalInvalid, RunStateError, ToolArgsError
from agent.loop import detectors
from agent.loop.checklist import FACT_KINDS, Checklist, parse_checklist
from agent.loop.core import Stop, literal_args
from agent.loop.history import one_line, render
from agent.loop.lessons import lesson_prompt, record_lesson, similar_lessons
from agent.loop.limits import Limits, limits_for
from agent.loop.paid import PaidSteps
from agent.loop.proposal import (
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
from agent.loop.result import (
    FINISHED_STOPS,
    AgentResult,
    SpendSummary,
    TokenSummary,
    backstop_answer,
    usdc_display,
)
from agent.loop.selfmodel import SelfModel
from agent.loop.state import Decision, Deps, PendingCall, RunState, unjsonable
from agent.tools.base import Observation, Quote, Tool, addresses_named_in

__all__ = ["Decision", "Deps", "PendingCall", "RunState", "resume", "run_task"]

_NO_MODEL_AFTER: frozenset[str] = frozenset(
    {"llm-unreachable", "token-budget", "deadline", "awaiting-approval"}
)


_ACTION: dict[type, str] = {
    Call: "call",
    Batch: "batch",
    SubmitAnswer: "submit_answer",
    Done: "done",
    NoAction: "none",
}


def _proposal_event(step: int, proposal: Proposal) -> dict[str, Any]:
    """Every call as proposed, gated or not: the audit shows what the model asked for."""
    data: dict[str, Any] = {"step": step, "action": _ACTION[type(proposal)]}
    if isinstance(proposal, Call):
        data.update(tool=proposal.tool, args=literal_args(proposal.args))
    if isinstance(proposal, Call | Batch):
        calls = [proposal] if isinstance(proposal, Call) else list(proposal.calls)
        data["calls"] = [{"tool": c.tool, "args": literal_args(c.args)} for c in calls]
    elif isinstance(proposal, SubmitAnswer):
        data["evidence"] = list(proposal.evidence)
    return data


def _detector_message(reason: str, limits: Limits, st: RunState, last_invalid: str) -> str:
    """A detector stop's line (the limit and the observed value) plus the human fix."""
    line = detectors.describe(
        reason,
        limits,
        failures=st.consecutive_failures,
        failed_proposals=st.consecutive_failed_proposals,
        skips=st.consecutive_skips,
        last_tool=st.successful_tools[-1] if st.successful_tools else "?",
    )
    if reason == "proposal-lost":
        last = f" (last error: {one_line(last_invalid, 200).rstrip('.')})" if last_invalid else ""
        line += (
            f": the model's replies, each with its retry, were not valid proposal JSON{last}. "
            "Fix: use a model that follows JSON instructions (check NIB_MODEL and "
            "NIB_MODEL_PROVIDER), lower its temperature, or raise max_failed_proposals "
            "if it is only occasionally malformed."
        )
    return line


class _Run(PaidSteps):
    """One run being driven by this process (a fresh one, or a resumed one)."""

    #: The last malformed-proposal error, named in a ``proposal-lost`` stop.
    last_invalid: str = ""

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
                self.last_invalid = str(exc)
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
                args=literal_args(call.args),
            )
            return None
        if in_batch and tool.kind != "free":
            self._skip(
                "paid-in-batch",
                f"{tool.name} moves money and cannot be batched; propose it alone as a call.",
                tool=tool.name,
                args=literal_args(call.args),
            )
            return None
        try:
            args = tool.parse_args(call.args)
        except ToolArgsError as exc:
            self._skip("invalid-args", str(exc), tool=tool.name, args=literal_args(call.args))
            return None
        norm = args.model_dump(mode="json")
        return tool, args, norm, call_fingerprint(tool.name, norm)

    def fresh(self, tool: Tool, norm: dict[str, Any], fp: str) -> bool:
        """The duplicate gate: an executed call is skipped with one nudge, then stops the run."""
        if fp in self.state.executed:
            earlier = self.state.executed[fp]
            if self.state.nudged.get(fp, 0) >= self.limits.duplicate_nudges:
                raise Stop(
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
                "executed-duplicate",
                note,
                tool=tool.name,
                args=literal_args(norm),
                fingerprint=fp,
                earlier_step=earlier,
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
            self._skip(
                "policy", decision.reason, tool=tool.name, args=literal_args(norm), fingerprint=fp
            )
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

    # ---------------------------------------------------------------- one turn
    async def handle(self, proposal: Proposal) -> None:
        st = self.state
        self.emit("proposal", _proposal_event(st.step, proposal))
        if isinstance(proposal, NoAction):
            raise Stop(
                "model-stopped",
                f"the model replied without a call or a finish: "
                f"{one_line(proposal.text, 120) or '(empty reply)'}",
            )
        if isinstance(proposal, Done):
            raise Stop("done-signal", "the model said done", answer=proposal.answer)
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
            raise Stop("finish-tool", "submit_answer accepted", answer=proposal.answer)
        calls = [proposal] if isinstance(proposal, Call) else list(proposal.calls)
        if isinstance(proposal, Batch) and len(calls) > self.limits.batch_max_calls:
            self._skip(
                "batch-too-large",
                f"a batch holds at most "
                f"{self.limits.batch_max_calls} free calls; got {len(calls)}.",
                calls=[{"tool": c.tool, "args": literal_args(c.args)} for c in calls],
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
                raise Stop(
                    reason,
                    "the recent proposals repeat a cycle: "
                    f"{' -> '.join(p[:10] for p in st.proposed[-4:])}",
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
            raise Stop("evidence-covered", "every checklist item is covered by evidence")
        for reason in (
            detectors.failure_budget(st.consecutive_failures, lim),
            detectors.proposal_lost(st.consecutive_failed_proposals, lim),
            detectors.skip_loop(st.consecutive_skips, lim),
            detectors.no_novelty(st.signatures, lim),
            detectors.streak_exhausted(st.successful_tools, lim),
        ):
            if reason is not None:
                raise Stop(reason, _detector_message(reason, lim, st, self.last_invalid))

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
    async def finish(self, stop: Stop) -> AgentResult:
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
            except (Stop, TimeoutError) as exc:
                self.emit("synthesis.skipped", {"why": str(exc)})
        if not answer:
            answer = backstop_answer(st.task, st.checklist, st.evidence, stop.reason, stop.message)
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
        except (Stop, TimeoutError, Exception) as exc:
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
        except Stop as stop:
            return await self.finish(stop)
        raise AssertionError("unreachable: turns() only exits by Stop")


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
        run_id=run_id or uuid.uuid4().hex[:12],
        task=task,
        profile=profile,
        limits=limits.as_dict(),
        task_addresses=list(addresses_named_in(task)),
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
            "task_addresses": state.task_addresses,
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
    # A state saved before task addresses were recorded: the task text is the same.
    state.task_addresses = state.task_addresses or list(addresses_named_in(state.task))
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
            raise Stop("approval-denied", "the paused state held no pending call")
        if decision == "deny":
            tool = deps.registry.get(pending.tool)
            if tool is not None:
                await run.abandon(tool, Quote(**unjsonable(pending.quote)))
            run._add_history(pending.tool, pending.args, "refused", "denied by a human")
            raise Stop(
                "approval-denied",
                f"a human denied {pending.tool} "
                f"({usdc_display(int(pending.quote['amount']))}); the run ends with the "
                "evidence it has.",
            )
        await run.approved(pending)
        run.detect()
        await run.turns()
    except Stop as stop:
        return await run.finish(stop)
    raise AssertionError("unreachable: turns() only exits by Stop")
