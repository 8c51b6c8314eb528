"""The model's side of a turn: the task's checklist, the periodic re-plan, and the
proposal (with its malformed-reply retries). Nothing here executes a call."""

from __future__ import annotations

from agent.errors import ProposalInvalid
from agent.loop.checklist import FACT_KINDS, Checklist, parse_checklist
from agent.loop.context import RunContext
from agent.loop.history import one_line
from agent.loop.modelcall import ModelCaller
from agent.loop.proposal import (
    Proposal,
    checklist_messages,
    parse_proposal,
    propose_messages,
    replan_messages,
    retry_messages,
)
from agent.loop.selfmodel import SelfModel

__all__ = ["Planner"]


class Planner:
    """Asks one run's model for its checklist, its plan and its next proposal."""

    def __init__(self, run: RunContext, model: ModelCaller) -> None:
        self.run = run
        self.model = model

    async def extract_checklist(self) -> None:
        run, max_items = self.run, self.run.limits.checklist_max_items
        messages = checklist_messages(run.state.task, sorted(FACT_KINDS), max_items)
        text = await self.model.ask("checklist", messages, run.model_context())
        try:
            checklist = parse_checklist(text, max_items=max_items)
        except ValueError as exc:
            checklist = Checklist()
            run.emit("checklist", {"items": [], "error": str(exc)})
        else:
            run.emit("checklist", {"items": checklist.as_dicts()})
        run.state.checklist = checklist.as_dicts()
        run.state.checklist_done = True

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
        }
        messages = propose_messages(context)
        run.state.feedback.clear()
        text = await self.model.ask("propose", messages, context)
        attempts = 0
        while True:
            try:
                return parse_proposal(text)
            except ProposalInvalid as exc:
                run.last_invalid = str(exc)
                run.emit(
                    "proposal.invalid",
                    {"step": run.state.step + 1, "error": str(exc), "retry": attempts},
                )
                if attempts >= run.limits.malformed_retries:
                    run.state.feedback.append(f"Your reply was rejected: {exc}")
                    return None
                attempts += 1
                text = await self.model.ask(
                    "propose", retry_messages(str(exc), run.deps.registry.names()), context
                )
