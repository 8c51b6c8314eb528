"""Finishing a run: the answer (the model's, a synthesis, or the backstop), the
result, and either the paused state saved for a human or the stop recorded with its
lesson."""

from __future__ import annotations

from agent.loop.answers import with_covered_values, with_paid_for_nothing
from agent.loop.budget import BudgetGate
from agent.loop.context import RunContext
from agent.loop.lessons import chosen_lesson, lesson_candidates, lesson_prompt, record_lesson
from agent.loop.modelcall import ModelCaller
from agent.loop.proposal import synthesis_messages
from agent.loop.provenance import answer_grade, backing, grade_answer, name_missing
from agent.loop.result import (
    FINISHED_STOPS,
    AgentResult,
    AnswerLine,
    SpendSummary,
    TokenSummary,
    backstop_answer,
)
from agent.loop.stop import Stop
from chain.money import format_usdc

__all__ = ["Finisher"]

#: Stops after which no model call is made (the model, the tokens or the clock is gone,
#: or a human is about to rule).
_NO_MODEL_AFTER: frozenset[str] = frozenset(
    {
        "llm-unreachable",
        "token-budget",
        "deadline",
        "awaiting-approval",
        "interrupted",
        "internal-error",
    }
)


class Finisher:
    """Turns one run's stop into its result, and pauses or closes the run."""

    def __init__(self, run: RunContext, model: ModelCaller, budget: BudgetGate) -> None:
        self.run = run
        self.model = model
        self.budget = budget

    async def finish(self, stop: Stop, *, best_effort: bool = False) -> AgentResult:
        """The run's result; the paused state saved or the row closed. ``best_effort``
        (a second finish after the first one raised): the result is returned even when
        the store or the meter cannot be reached, its message saying what was not done."""
        run, st = self.run, self.run.state
        stop, answer, lines = self.settle(stop, await self._answer(stop))
        st.stop_reason = stop.reason
        st.message = stop.message
        finished = stop.reason in FINISHED_STOPS
        elapsed = run.elapsed()
        if stop.reason == "awaiting-approval":
            st.status = "paused"
            st.elapsed_s = elapsed
            run.emit(
                "pause",
                {
                    "step": st.step,
                    "message": stop.message,
                    "tool": st.pending.tool if st.pending else None,
                },
            )
            run.deps.store.save_paused(st.run_id, st.model_dump_json())
        else:
            st.status = "stopped"
        result = AgentResult(
            run_id=st.run_id,
            task=st.task,
            stop_reason=stop.reason,
            finished=finished,
            partial=not finished,
            answer=answer,
            lines=lines,
            provenance=answer_grade(lines),
            evidence=list(st.evidence),
            steps=st.step,
            attempted=list(st.attempted),
            spend=self._spend(best_effort),
            tokens=TokenSummary(
                input=st.tokens_in, output=st.tokens_out, estimated=st.tokens_estimated
            ),
            elapsed_s=round(elapsed, 3),
            message=stop.message,
            profile=st.profile,
        )
        if st.status == "stopped":
            try:
                await self._close(stop, result)
            except Exception as exc:
                if not best_effort:
                    raise
                note = f" The run row could not be closed: {type(exc).__name__}: {exc}"
                result = result.model_copy(update={"message": f"{result.message}{note}"})
        return result

    def _spend(self, best_effort: bool) -> SpendSummary:
        try:
            return self.budget.spend_summary()
        except Exception:
            if not best_effort:
                raise
            st = self.run.state  # what this run saw move; `nib audit` has the ledger's
            return SpendSummary(usdc_atomic=st.spend_usdc, gas_wei=st.gas_wei,
                                usdc_display=format_usdc(st.spend_usdc),
                                settled_atomic=st.spend_usdc, source="run")

    def settle(self, stop: Stop, answer: str) -> tuple[Stop, str, list[AnswerLine]]:
        """Finished means backed: a finish whose answer leaves an item uncovered or holds an
        asserted line becomes ``cannot-plan`` / ``unbacked-answer``, naming what is missing.
        Returns the stop, the answer and its graded lines."""
        st, checklist = self.run.state, self.run.checklist
        answer = with_paid_for_nothing(with_covered_values(answer, st.checklist), st.evidence)
        # What the run's calls that did not succeed answered: its own words on a decline.
        said = [str(h.get("summary") or "") for h in st.history if h.get("outcome") != "ok"]
        if stop.reason in FINISHED_STOPS:
            unbacked = backing(checklist, grade_answer(answer, st.task, st.evidence, checklist,
                                                       said=said))
            if unbacked is not None:
                stop = Stop(unbacked[0], f"{stop.reason}, but {unbacked[1]}", answer=answer)
                answer = name_missing(answer, checklist)
        return stop, answer, grade_answer(answer, st.task, st.evidence, checklist, stop.message,
                                          said)

    async def _answer(self, stop: Stop) -> str:
        """The model's answer; else a synthesis from the evidence; else the backstop."""
        st = self.run.state
        answer = (stop.answer or "").strip()
        if not answer and stop.reason not in _NO_MODEL_AFTER:
            try:
                answer = (
                    await self.model.ask(
                        "synthesize",
                        synthesis_messages(
                            st.task, [e.model_dump() for e in st.evidence], stop.reason
                        ),
                        self.run.model_context(),
                    )
                ).strip()
            except (Stop, TimeoutError) as exc:
                self.run.emit("synthesis.skipped", {"why": str(exc)})
        if not answer:
            answer = backstop_answer(st.task, st.checklist, st.evidence, stop.reason, stop.message)
        return answer

    async def _close(self, stop: Stop, result: AgentResult) -> None:
        """A stopped run: its lesson (when it failed), the stop event, the stored result."""
        run, st = self.run, self.run.state
        if not result.finished and stop.reason not in _NO_MODEL_AFTER:
            await self._distil_lesson(stop.reason)
        run.emit(
            "stop",
            {
                "reason": stop.reason,
                "finished": result.finished,
                "steps": st.step,
                "spend_usdc": result.spend.usdc_atomic,
                "gas_wei": result.spend.gas_wei,
                "tokens": self.budget.tokens_used(),
                "message": stop.message,
            },
        )
        run.deps.store.finish_run(st.run_id, result.model_dump(mode="json"))

    async def _distil_lesson(self, reason: str) -> None:
        """Advisory: the lesson is one of the candidates built from the run's structured
        record, in nib's words only (other tasks are shown it: a seller's text must not
        ride along). When there is a choice the model picks one by number, and nothing
        else of its reply is kept; if it cannot, the first. Every failure is logged."""
        run, st = self.run, self.run.state
        history = run.history()
        candidates = lesson_candidates(reason, st.step, history, st.failed_sellers, run.checklist)
        if not candidates:
            return
        choice = 1
        if len(candidates) > 1:
            try:
                reply = await self.model.ask(
                    "lesson", lesson_prompt(st.task, reason, history, candidates)
                )
                choice = chosen_lesson(reply, len(candidates))
            except (Stop, TimeoutError, Exception) as exc:
                run.emit("lesson.error", {"op": "distil", "error": str(exc)})
        lesson = record_lesson(
            run.deps.store, st.run_id, st.task, reason, candidates[choice - 1], on_error=run.emit
        )
        if lesson:
            run.emit("lesson", {"recorded": lesson, "chosen": choice, "of": len(candidates)})
