"""The run's internal stop signal, and the dependency failures that become stops.

A step raises ``Stop`` when a stop reason fires; the run's finisher turns it into the
result, so it never escapes ``run_task`` or ``resume``.
"""

from __future__ import annotations

import asyncio

from agent.errors import ModelUnavailable
from agent.interrupts import Interrupted
from agent.loop.result import DEPENDENCY_STOPS, StopReason
from chain.errors import RpcUnreachable
from judge.errors import JudgeUnreachable
from wallet.errors import WalletUnreachable

__all__ = ["DEPENDENCY_STOPS", "INTERRUPTS", "Stop", "dependency_stop", "raise_if_dependency"]

_JUDGE_FIX = (
    " Fix: `nib services status` says whether the judge service runs and on which chain;"
    " `nib devnet up` (the devnet) or `nib services up` restarts it (a judge of your own at"
    " NIB_JUDGE_URL: start it with `nib judge serve`)."
)


class Stop(Exception):
    """Internal: a stop reason fired somewhere inside a turn."""

    def __init__(self, reason: StopReason, message: str = "", answer: str | None = None):
        super().__init__(reason)
        self.reason: StopReason = reason
        self.message = message
        self.answer = answer


def dependency_stop(exc: BaseException) -> Stop | None:
    """The stop for a dependency outage (chain, judge, model, wallet), or None; a Stop
    whose reason is one of DEPENDENCY_STOPS is itself."""
    if isinstance(exc, Stop):
        return exc if exc.reason in DEPENDENCY_STOPS else None
    if isinstance(exc, RpcUnreachable):
        return Stop("chain-unreachable", str(exc))
    if isinstance(exc, JudgeUnreachable):
        fix = "" if "Fix" in str(exc) else _JUDGE_FIX
        return Stop("judge-unreachable", f"{exc}{fix}")
    if isinstance(exc, ModelUnavailable):
        return Stop("llm-unreachable", f"{exc.kind}: {exc.fix}")
    if isinstance(exc, WalletUnreachable):
        return Stop("wallet-unreachable", str(exc))
    return None


def raise_if_dependency(exc: BaseException) -> None:
    """Raise the stop for a dependency outage (chain, judge, model, wallet); else return.

    Anything else is the caller's to handle (usually a failed observation)."""
    stop = dependency_stop(exc)
    if stop is not None and stop is not exc:
        raise stop from exc


#: What ends a run as ``interrupted``: Ctrl-C, cancellation (how ``asyncio.run`` delivers
#: Ctrl-C), an exit request, and either of those carried out of an inner task.
INTERRUPTS: tuple[type[BaseException], ...] = (
    KeyboardInterrupt,
    SystemExit,
    asyncio.CancelledError,
    Interrupted,
)
