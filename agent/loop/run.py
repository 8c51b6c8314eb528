"""The agent loop: one turn in the design's order, every exit a named stop.

Budgets first, a fresh self-model, checklist focus, a proposal, gates, the judge,
execution, learning. The model proposes, the judge disposes, tools execute. A run's
whole state is a serializable value (``RunState``), so a run paused for a human
resumes later in another process with the same budgets and clock accounting.
"""

from __future__ import annotations

import traceback
import uuid
from collections.abc import Awaitable, Callable
from typing import NoReturn

from agent.errors import RunStateError
from agent.interrupts import Interrupted
from agent.loop import detectors
from agent.loop.budget import BudgetGate
from agent.loop.context import RunContext, literal_args
from agent.loop.finish import Finisher
from agent.loop.free import FreeBatch
from agent.loop.gates import Admitted, Gates
from agent.loop.history import one_line
from agent.loop.learning import Learning
from agent.loop.lessons import is_nib_lesson, similar_lessons
from agent.loop.limits import Limits, run_limits, within_task_bound
from agent.loop.modelcall import ModelCaller
from agent.loop.paid import ApprovalDeferred, PaidStep
from agent.loop.planning import Planner
from agent.loop.proposal import Batch, Call, Done, NoAction, Proposal, SubmitAnswer
from agent.loop.result import AgentResult
from agent.loop.selfmodel import SelfModelReader
from agent.loop.state import Decision, Deps, PendingCall, RunState
from agent.loop.stop import INTERRUPTS, Stop, dependency_stop
from agent.tools.base import addresses_named_in
from agent.tools.x402.fetch import seller_client
from chain.money import format_usdc
from judge.fingerprint import fingerprint

__all__ = ["Decision", "Deps", "PendingCall", "RunState", "resume", "run_task"]

_ACTION: dict[type, str] = {
    Call: "call",
    Batch: "batch",
    SubmitAnswer: "submit_answer",
    Done: "done",
    NoAction: "none",
}


def _proposal_event(step: int, proposal: Proposal) -> dict[str, object]:
    """Every call as proposed, gated or not: the audit shows what the model asked for."""
    data: dict[str, object] = {"step": step, "action": _ACTION[type(proposal)]}
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
        churn_steps=st.churn_steps,
        drifts=st.checklist_drifts,
    )
    if reason == "failure-budget" and st.feedback:
        # The stop names why the calls failed (e.g. a seller the task names is not allowed).
        line += f"; last failure: {one_line(st.feedback[-1], 300)}"
    if reason == "skip-loop" and st.feedback:
        # The stop names why the proposals were skipped (e.g. arguments a tool refuses).
        line += f"; last skipped: {one_line(st.feedback[-1], 300)}"
    if reason == "proposal-lost":
        last = f" (last error: {one_line(last_invalid, 200).rstrip('.')})" if last_invalid else ""
        line += (
            f": the model's replies, each with its retry, were not valid proposal JSON{last}. "
            "Fix: use a model that follows JSON instructions (check NIB_MODEL and "
            "NIB_MODEL_PROVIDER), lower its temperature, or raise max_failed_proposals "
            "if it is only occasionally malformed."
        )
    return line


class _Run:
    """One run being driven by this process, composed of one object per job.

    The turn itself (order of steps, dispatch of a proposal, the detectors) lives here;
    everything else is delegated: budgets, model calls, the self-model, planning, the
    gates, the free batch, the paid step, learning and finishing.
    """

    def __init__(self, state: RunState, deps: Deps, limits: Limits) -> None:
        self.ctx = run = RunContext(state, deps, limits)
        self.budget = BudgetGate(run)
        model = ModelCaller(run, self.budget)
        self.self_model = SelfModelReader(run, self.budget)
        self.planner = Planner(run, model)
        self.gates = Gates(run)
        learning = Learning(run)
        policy = deps.free_policy if deps.free_policy is not None else deps.registry.free_policy()
        self.free = FreeBatch(run, policy, learning)
        self.paid = PaidStep(run, self.budget, learning, self.self_model)
        self.finisher = Finisher(run, model, self.budget)

    async def handle(self, proposal: Proposal) -> None:
        """Dispatch one proposal: stop on a finish, skip what the gates refuse, else run
        the paid call (alone) or the free batch."""
        run, st = self.ctx, self.ctx.state
        run.emit("proposal", _proposal_event(st.step, proposal))
        if isinstance(proposal, NoAction):
            raise Stop(
                "model-stopped",
                f"the model replied without a call or a finish: "
                f"{one_line(proposal.text, 120) or '(empty reply)'}",
            )
        if isinstance(proposal, Done):
            raise Stop("done-signal", "the model said done", answer=proposal.answer)
        if isinstance(proposal, SubmitAnswer):
            self._submit(proposal)
            return
        calls = [proposal] if isinstance(proposal, Call) else list(proposal.calls)
        if isinstance(proposal, Batch) and len(calls) > run.limits.batch_max_calls:
            run.skip(
                "batch-too-large",
                f"a batch holds at most {run.limits.batch_max_calls} free calls; got {len(calls)}.",
                calls=[{"tool": c.tool, "args": literal_args(c.args)} for c in calls],
            )
            return
        in_batch = isinstance(proposal, Batch)
        admitted = [a for c in calls if (a := self.gates.admit(c, in_batch=in_batch)) is not None]
        if admitted:
            self._check_oscillation(admitted)
        admitted = [a for a in admitted if self.gates.fresh(a)]
        paid = [a for a in admitted if a.tool.kind == "paid"]
        if paid:
            if not self.gates.task_read(paid[0]):
                return
            # The skip counter is reset by the paid step only once the seller is asked: a
            # call refused before that (a seller that failed to deliver) is a skip like
            # any gate's, so proposing it again and again ends the run (skip-loop).
            await self.paid.run_call(paid[0])
            return
        await self.free.run_batch(admitted)

    def _submit(self, proposal: SubmitAnswer) -> None:
        """A finish citing evidence: accepted (the run stops) or skipped with the reason."""
        known = {e.id for e in self.ctx.state.evidence}
        unknown = [i for i in proposal.evidence if i not in known]
        if proposal.evidence and not unknown:
            raise Stop("finish-tool", "submit_answer accepted", answer=proposal.answer)
        why = f"unknown evidence ids {', '.join(unknown)}" if unknown else "no evidence ids cited"
        self.ctx.skip(
            "invalid-submit",
            f"submit_answer refused: {why}; known ids: "
            f"{', '.join(sorted(known)) or 'none yet, gather evidence first'}.",
        )

    def _check_oscillation(self, admitted: list[Admitted]) -> None:
        st = self.ctx.state
        prints = [a.fingerprint for a in admitted]
        st.proposed.append(prints[0] if len(prints) == 1 else fingerprint(sorted(prints)))
        if (reason := detectors.oscillation(st.proposed, self.ctx.limits)) is not None:
            raise Stop(
                reason,
                "the recent proposals repeat a cycle: "
                f"{' -> '.join(p[:10] for p in st.proposed[-4:])}",
            )

    def detect(self) -> None:
        """After a step: the first detector to fire stops the run."""
        run = self.ctx
        st, lim = run.state, run.limits
        if run.checklist.complete:
            raise Stop("evidence-covered", "every checklist item is covered by evidence")
        covered, calls = len(run.checklist.covered), len(st.attempted)
        if covered > st.covered_seen:
            st.churn_steps = st.checklist_drifts = 0
            # A streak is of successes that cover nothing new: reading four balances
            # of a sum with one tool is progress, not churn.
            st.successful_tools.clear()
        elif calls > st.calls_seen:  # the step called or spent and covered nothing
            st.churn_steps += 1
        st.covered_seen, st.calls_seen = covered, calls
        for reason in (
            detectors.failure_budget(st.consecutive_failures, lim),
            detectors.proposal_lost(st.consecutive_failed_proposals, lim),
            detectors.skip_loop(st.consecutive_skips, lim),
            detectors.no_novelty(st.signatures, lim),
            detectors.streak_exhausted(st.successful_tools, lim),
            # last: the specific reasons name more
            detectors.churn(st.churn_steps + st.checklist_drifts, lim),
        ):
            if reason is not None:
                raise Stop(reason, _detector_message(reason, lim, st, run.last_invalid))

    async def turns(self) -> None:
        run = self.ctx
        if not run.state.checklist_done:
            self.budget.check_deadline()
            await self.planner.extract_checklist()
        while True:
            self.budget.check_before_turn()
            sm = await self.self_model.read()
            run.emit("selfmodel", {"step": run.state.step + 1, **sm.as_dict()})
            await self.planner.replan_if_due()
            proposal = await self.planner.propose(sm)
            run.state.step += 1
            if proposal is None:
                run.state.consecutive_failed_proposals += 1
                run.add_history("", {}, "failed", "no valid proposal")
            else:
                run.state.consecutive_failed_proposals = 0
                marks = (len(run.state.history), len(run.state.feedback))
                await self.handle(proposal)
                self.planner.answer_calls(*marks)
            self.detect()

    async def drive(self, body: Callable[[], Awaitable[None]] | None = None) -> AgentResult:
        """Run ``body`` (the turns, by default) until the first stop; every exit (Ctrl-C,
        cancellation, a bug, one inside the finish itself) returns an AgentResult and
        closes the run row. Sellers are asked through one client for the whole run (kept-
        alive connections; a client per request cost a TCP connection each, three per
        purchase), unless the caller gave one (``Deps.http``)."""
        tools = self.ctx.tools
        if tools.http is not None:
            return await self._drive(body)
        async with seller_client() as http:
            tools.http = http
            try:
                return await self._drive(body)
            finally:
                tools.http = None

    async def _drive(self, body: Callable[[], Awaitable[None]] | None) -> AgentResult:
        try:
            await (body or self.turns)()
            raise AssertionError("unreachable: turns() only exits by Stop")
        except Stop as stop:
            ended = stop
        except INTERRUPTS as exc:
            ended = _interrupted(exc, self.ctx.state.step)
        except Exception as exc:
            # A dependency's outage where no step translated it is still that outage.
            ended = dependency_stop(exc) or Stop(
                "internal-error", _bug_message(exc, self.ctx.state.step)
            )
        try:
            return await self.finisher.finish(ended)
        except INTERRUPTS as exc:  # Ctrl-C during the synthesis or the lesson
            again = _interrupted(exc, self.ctx.state.step)
        except Exception as exc:  # e.g. the store lost while closing the row
            again = Stop("internal-error", _bug_message(exc, self.ctx.state.step))
        return await self.finisher.finish(again, best_effort=True)


def _interrupted(exc: BaseException, step: int) -> Stop:
    what = exc.original if isinstance(exc, Interrupted) else exc
    return Stop(
        "interrupted",
        f"the run was interrupted ({type(what).__name__}) at step {step}; no further "
        "call was made; what it signed before, if anything, is as the ledger recorded it "
        "(the result's spend says). Fix: `nib audit reconcile` settles or releases an "
        "outstanding authorization; run the task again.",
    )


def _bug_message(exc: BaseException, step: int) -> str:
    """An unexpected error as a stop message: what it was and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" in {frames[-1].name} ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return (
        f"a bug in nib ended the run at step {step}: {type(exc).__name__}: {str(exc)[:300]}"
        f"{where}. The money state is the ledger's (`nib audit`). Fix: report it with "
        "`nib show RUN --json`."
    )


# --------------------------------------------------------------------- entry points


async def run_task(task: str, deps: Deps, *, run_id: str | None = None) -> AgentResult:
    """Run one research task to its first stop; every exit returns an AgentResult.

    May move money (through the judged paid tools wired in ``deps.registry``).
    """
    profile, limits = run_limits(deps.profile, deps.limits, model_local=deps.model.local)
    limits = within_task_bound(limits, task)  # "don't spend more than 0.20 USDC": never raised
    state = RunState(
        run_id=run_id or uuid.uuid4().hex[:12],
        task=task,
        profile=profile,
        limits=limits.as_dict(),
        task_addresses=list(addresses_named_in(task)),
    )
    run = _Run(state, deps, limits)

    async def start_then_turns() -> None:
        deps.store.start_run(state.run_id, task, profile)
        run.ctx.emit(
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
        state.lessons = similar_lessons(deps.store, task, on_error=run.ctx.emit)
        if state.lessons:
            run.ctx.emit("lesson", {"shown": state.lessons})
        await run.turns()

    return await run.drive(start_then_turns)


async def _deny(run: _Run, pending: PendingCall) -> NoReturn:
    """A human denied the held call: give its quote back and stop."""
    tool = run.ctx.deps.registry.get(pending.tool)
    quote = pending.held_quote()
    if tool is not None:
        await run.paid.abandon(tool, quote)
    run.ctx.add_history(pending.tool, pending.args, "refused", "denied by a human")
    raise Stop(
        "approval-denied",
        f"a human denied {pending.tool} "
        f"({format_usdc(quote.amount)}); the run ends with the "
        "evidence it has.",
    )


async def _approve(run: _Run, pending: PendingCall) -> None:
    """A human approved the held call: execute it, or, when a dependency fails before
    anything was decided or signed, go back to waiting for the approval."""
    try:
        await run.paid.approved(pending)
    except ApprovalDeferred as deferred:
        run.ctx.state.pending = pending
        why = deferred.stop
        run.ctx.emit("approval.deferred", {"reason": why.reason, "message": why.message})
        raise Stop(
            "awaiting-approval",
            f"the approval could not be carried out ({why.reason}: {why.message}); the "
            f"run stays paused. Run `nib approve {run.ctx.state.run_id}` again once it is "
            "back.",
        ) from why


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
    # A state saved by an older version may name limits since retired (eth_price_usdc),
    # and lessons in free text, which may quote another task's seller: not shown again.
    limits = Limits.from_saved(state.limits)
    state.lessons = [lesson for lesson in state.lessons if is_nib_lesson(lesson)]
    state.status = "running"
    run = _Run(state, deps, limits)
    pending = state.pending
    state.pending = None

    async def decide_then_turns() -> None:
        run.ctx.emit("run.resume", {"decision": decision, "elapsed_s": state.elapsed_s})
        run.ctx.emit(
            "approval",
            {
                "decision": decision,
                "tool": pending.tool if pending else None,
                "fingerprint": pending.fingerprint if pending else None,
            },
        )
        if pending is None:
            raise Stop("approval-denied", "the paused state held no pending call")
        if decision == "deny":
            await _deny(run, pending)
        await _approve(run, pending)
        run.detect()
        await run.turns()

    return await run.drive(decide_then_turns)
