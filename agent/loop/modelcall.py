"""Model calls of a run: budget-checked before sending, counted after, audited.

A model outage or a blown deadline becomes the run's stop; so does a request the model's
context window cannot hold (``token-budget``, naming the window). A request is counted
before sending: exactly where the provider offers counting (``count_tokens``), else by
the offline estimator, which errs high. The provider's reported usage replaces the
estimate once the reply arrives. How tools travelled (native or the JSON text fallback)
is recorded on the run the first time it is known and whenever it changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict

from agent.errors import ModelUnavailable
from agent.interrupts import within
from agent.loop.budget import BudgetGate
from agent.loop.context import RunContext
from agent.loop.stop import Stop
from agent.loop.tokens import budget_tokens, count_messages
from agent.models.base import ModelReply, ModelRequest, OutputSchema, Purpose, ToolSpec

__all__ = ["ModelCaller"]


class ModelCaller:
    """Sends one run's model requests under its token budget and wall clock."""

    def __init__(self, run: RunContext, budget: BudgetGate) -> None:
        self.run = run
        self.budget = budget

    async def ask(
        self,
        purpose: Purpose,
        messages: Sequence[Mapping[str, object]],
        context: dict[str, object] | None = None,
        *,
        output: OutputSchema | None = None,
    ) -> str:
        """One model call whose reply is text (plain, or JSON following ``output``)."""
        return (await self.request(purpose, messages, context, output=output)).text

    async def request(
        self,
        purpose: Purpose,
        messages: Sequence[Mapping[str, object]],
        context: dict[str, object] | None = None,
        *,
        tools: tuple[ToolSpec, ...] = (),
        text_protocol: str = "",
        output: OutputSchema | None = None,
    ) -> ModelReply:
        """One model call, budget-checked before sending (tokens projected, deadline)."""
        run = self.run
        request = ModelRequest(
            purpose,
            [dict(m) for m in messages],
            context or {},
            max_output_tokens=run.limits.reply_reserve_tokens,
            tools=tools,
            text_protocol=text_protocol,
            output=output,
        )
        self.budget.check_before_request(purpose, await self._count(request))
        remaining = run.limits.wall_clock_s - run.elapsed()
        try:
            reply = await within(run.deps.model.complete(request), remaining)
        except TimeoutError:
            self.budget.check_deadline()
            raise
        except ModelUnavailable as exc:
            raise _stop_for(exc, run.deps.model.name, purpose) from exc
        usage = reply.usage
        run.state.tokens_in += usage.input_tokens
        run.state.tokens_out += usage.output_tokens
        run.state.tokens_estimated |= usage.estimated
        run.emit(
            "model.call",
            {
                "purpose": purpose,
                "input": usage.input_tokens,
                "output": usage.output_tokens,
                "estimated": usage.estimated,
                "stop_reason": reply.stop_reason,
            },
        )
        if reply.protocol is not None and reply.protocol != run.state.tool_protocol:
            run.state.tool_protocol = reply.protocol
            run.emit(
                "model.protocol",
                {
                    "protocol": reply.protocol,
                    "model": run.deps.model.name,
                    "why": "native tool calling"
                    if reply.protocol == "native"
                    else "the server rejected native tools: JSON text protocol (fallback)",
                },
            )
        return reply

    async def _count(self, request: ModelRequest) -> int:
        """Input tokens of ``request`` for the budget check: the provider's exact count when
        it offers one, else the estimate with its safety margin."""
        estimate = budget_tokens(
            count_messages(request.messages, [asdict(t) for t in request.tools])
        )
        counter = getattr(self.run.deps.model, "count_tokens", None)
        if counter is None:
            return estimate
        try:
            return int(await counter(request))
        except ModelUnavailable as exc:
            self.run.emit("model.count.error", {"error": str(exc), "estimate": estimate})
            return estimate


def _stop_for(exc: ModelUnavailable, model: str, purpose: Purpose) -> Stop:
    """The stop a model failure ends the run with (the provider's words and the fix)."""
    if exc.kind == "context-overflow":
        return Stop(
            "token-budget",
            f"the {purpose} request does not fit the context window of model {model}: {exc}",
        )
    return Stop("llm-unreachable", f"model {model} unavailable ({exc.kind}): {exc.fix}")
