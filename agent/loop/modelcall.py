"""Model calls of a run: budget-checked before sending, counted after, audited.

A model outage or a blown deadline becomes the run's stop; a reply is plain text for
the caller to parse.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent.errors import ModelUnavailable
from agent.loop.budget import BudgetGate
from agent.loop.context import RunContext
from agent.loop.stop import Stop
from agent.loop.tokens import count_messages
from agent.models.base import ModelRequest, Purpose

__all__ = ["ModelCaller"]


class ModelCaller:
    """Sends one run's model requests under its token budget and wall clock."""

    def __init__(self, run: RunContext, budget: BudgetGate) -> None:
        self.run = run
        self.budget = budget

    async def ask(
        self,
        purpose: Purpose,
        messages: list[dict[str, str]],
        context: dict[str, Any] | None = None,
    ) -> str:
        """One model call, budget-checked before sending (tokens projected, deadline)."""
        run = self.run
        self.budget.check_before_request(purpose, count_messages(messages))
        request = ModelRequest(
            purpose, messages, context or {}, max_output_tokens=run.limits.reply_reserve_tokens
        )
        remaining = run.limits.wall_clock_s - run.elapsed()
        try:
            reply = await asyncio.wait_for(run.deps.model.complete(request), remaining)
        except TimeoutError:
            self.budget.check_deadline()
            raise
        except ModelUnavailable as exc:
            raise Stop(
                "llm-unreachable",
                f"model {run.deps.model.name} unavailable ({exc.kind}): {exc.fix}",
            ) from exc
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
            },
        )
        return reply.text
