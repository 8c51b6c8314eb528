"""The run's internal stop signal, and the dependency failures that become stops.

A step raises ``Stop`` when a stop reason fires; the run's finisher turns it into the
result, so it never escapes ``run_task`` or ``resume``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from agent.errors import ModelUnavailable
from agent.loop.result import StopReason
from chain.errors import RpcUnreachable
from judge.errors import JudgeUnreachable
from wallet.errors import WalletUnreachable

__all__ = [
    "DEPENDENCY_STOPS",
    "INTERRUPTS",
    "Interrupted",
    "Stop",
    "gather_within",
    "raise_if_dependency",
    "within",
]

T = TypeVar("T")

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


class Interrupted(BaseException):
    """A KeyboardInterrupt or SystemExit raised inside a task the run awaits, carried out
    of that task. asyncio re-raises those two from the event loop itself, past every
    ``await`` (so no handler in the run sees them and ``asyncio.run`` raises instead of
    returning the result); this one travels like any exception. A BaseException, so the
    ``except Exception`` of a step cannot turn it into a failed call."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"{type(original).__name__} inside {original!r}")
        self.original = original


#: What ends a run as ``interrupted``: Ctrl-C, cancellation (how ``asyncio.run`` delivers
#: Ctrl-C), an exit request, and either of those carried out of an inner task.
INTERRUPTS: tuple[type[BaseException], ...] = (
    KeyboardInterrupt,
    SystemExit,
    asyncio.CancelledError,
    Interrupted,
)


async def _carried(call: Awaitable[T]) -> T:
    try:
        return await call
    except (KeyboardInterrupt, SystemExit) as exc:
        raise Interrupted(exc) from exc


async def within(call: Awaitable[T], timeout: float) -> T:
    """``asyncio.wait_for(call, timeout)`` whose inner task cannot take the event loop
    down: the one way a run awaits anything under a time limit."""
    return await asyncio.wait_for(_carried(call), timeout)


async def gather_within(*calls: Awaitable[T]) -> list[T | BaseException]:
    """``asyncio.gather(..., return_exceptions=True)`` over inner tasks that cannot take the
    event loop down (an interrupt comes back as ``Interrupted``)."""
    return list(await asyncio.gather(*(_carried(c) for c in calls), return_exceptions=True))
