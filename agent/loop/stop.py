"""The run's internal stop signal, and the dependency failures that become stops.

A step raises ``Stop`` when a stop reason fires; the run's finisher turns it into the
result, so it never escapes ``run_task`` or ``resume``.
"""

from __future__ import annotations

import asyncio

from agent.errors import ModelUnavailable
from agent.loop.result import StopReason
from agent.tasks import Interrupted
from chain.errors import RpcUnreachable
from judge.errors import JudgeUnreachable
from wallet.errors import WalletUnreachable

__all__ = ["DEPENDENCY_STOPS", "INTERRUPTS", "Stop", "raise_if_dependency"]

#: Stops that mean a dependency (chain, judge, model) did not answer: nothing about the
#: task itself was decided, so a paused run hit by one stays paused.
DEPENDENCY_STOPS: frozenset[StopReason] = frozenset(
    {"chain-unreachable", "judge-unreachable", "llm-unreachable"}
)

_JUDGE_FIX = (
    " Fix: start the judge (`nib judge serve`) or unset NIB_JUDGE_URL to use the in-process judge."
)


class Stop(Exception):
    """Internal: a stop reason fired somewhere inside a turn."""

    def __init__(self, reason: StopReason, message: str = "", answer: str | None = None):
        super().__init__(reason)
        self.reason: StopReason = reason
        self.message = message
        self.answer = answer


def raise_if_dependency(exc: BaseException) -> None:
    """Raise the stop for a dependency outage (chain, judge, model); else return.

    Anything else is the caller's to handle (usually a failed observation)."""
    if isinstance(exc, RpcUnreachable):
        raise Stop("chain-unreachable", str(exc)) from exc
    if isinstance(exc, JudgeUnreachable):
        fix = "" if "Fix" in str(exc) else _JUDGE_FIX
        raise Stop("judge-unreachable", f"{exc}{fix}") from exc
    if isinstance(exc, ModelUnavailable):
        raise Stop("llm-unreachable", f"{exc.kind}: {exc.fix}") from exc
    if isinstance(exc, WalletUnreachable):
        raise Stop("wallet-unreachable", str(exc)) from exc


#: What ends a run as ``interrupted``: Ctrl-C, cancellation (how ``asyncio.run`` delivers
#: Ctrl-C), an exit request, and either of those carried out of an inner task.
INTERRUPTS: tuple[type[BaseException], ...] = (
    KeyboardInterrupt,
    SystemExit,
    asyncio.CancelledError,
    Interrupted,
)
