"""The free batch: admitted read-only calls, each ruled on by the free-read policy,
run concurrently within their row's timeout and result size, then learned from.

No verdict is signed and no money moves here.
"""

from __future__ import annotations

import json

from agent.interrupts import gather_within, innermost, within
from agent.loop.context import RunContext, literal_args
from agent.loop.gates import Admitted
from agent.loop.learning import Learning
from agent.loop.stop import Stop, raise_if_dependency
from agent.tools.base import Observation, retry_after
from judge.policy import FreeDecision, FreeReadPolicy

__all__ = ["FreeBatch"]


class FreeBatch:
    """Runs one run's batches of free calls under the free-read policy."""

    def __init__(self, run: RunContext, policy: FreeReadPolicy, learning: Learning) -> None:
        self.run = run
        self.policy = policy
        self.learning = learning

    async def run_batch(self, calls: list[Admitted]) -> None:
        """Rule on each call, run the allowed ones together, learn from each result."""
        allowed = [
            (call, decision) for call in calls if (decision := self._decide(call)) is not None
        ]
        if not allowed:
            return
        self.run.state.consecutive_skips = 0
        results = await gather_within(*(self._run_one(c, d) for c, d in allowed))
        for (call, _decision), obs in zip(allowed, results, strict=True):
            if isinstance(obs, BaseException):
                raise obs
            self.learning.record(call.tool, call.norm, call.fingerprint, obs)

    def _decide(self, call: Admitted) -> FreeDecision | None:
        """The policy's ruling, audited; a refusal is a skip (None)."""
        run, name = self.run, call.tool.name
        decision = self.policy.decide_free(name, run.state.free_calls.get(name, 0))
        run.emit(
            "verdict",
            {
                "step": run.state.step,
                "tool": name,
                "kind": "free",
                "decision": decision.outcome,
                "reason": decision.reason,
            },
        )
        if not decision.allowed:
            run.skip(
                "policy",
                decision.reason,
                tool=name,
                args=literal_args(call.norm),
                fingerprint=call.fingerprint,
            )
            run.add_history(name, call.norm, "skipped", decision.reason)
            return None
        return decision

    async def _run_one(self, call: Admitted, decision: FreeDecision) -> Observation:
        tool, state = call.tool, self.run.state
        state.free_calls[tool.name] = state.free_calls.get(tool.name, 0) + 1
        row = decision.row
        timeout = row.timeout_s if row is not None else 10.0
        # Never past the run's deadline: the shorter of the row's timeout and the time left.
        left = self.run.limits.wall_clock_s - self.run.elapsed()
        try:
            obs = await within(tool.run(call.args, self.run.tools), max(0.001, min(timeout, left)))
        except TimeoutError:
            if left < timeout:
                raise Stop(
                    "deadline",
                    f"{tool.name} was cut at the wall clock of {self.run.limits.wall_clock_s:g} s; "
                    "raise wall_clock_s if the task needs longer.",
                ) from None
            obs = Observation.failure(tool.name, f"timed out after {timeout:g} s")
        except Exception as exc:
            raise_if_dependency(exc)
            cause = innermost(exc)  # a task group's wrapping names no cause
            obs = Observation.failure(
                tool.name, f"{type(cause).__name__}: {cause}", retry_after(exc), cause=cause
            )
        if obs.ok and row is not None:
            size = len(json.dumps(obs.data, default=str))
            check = self.policy.check_result(tool.name, size)
            if not check.allowed:
                obs = Observation.failure(tool.name, check.reason)
        return obs
