"""Inner tasks that cannot take the event loop down.

asyncio re-raises a KeyboardInterrupt or SystemExit raised inside a Task out of the event
loop itself, past every ``await``: no handler of the run sees it, and ``asyncio.run``
raises instead of returning the run's result. Every task the agent creates inside a run
(a call under a time limit, a batch gathered together, in the loop and in tools) goes
through ``within`` or ``gather_within``, which carry such an exception out as
``Interrupted``; the run ends ``interrupted`` (``agent.loop.stop.INTERRUPTS``). A task
group (anyio's, inside httpx and the MCP client) wraps what its tasks raised in an
exception group: ``innermost`` is the real cause a message names, never "unhandled errors
in a TaskGroup".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar, cast

from chain.errors import innermost

__all__ = ["Interrupted", "gather_pair", "gather_within", "innermost", "within"]

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")


class Interrupted(BaseException):
    """A KeyboardInterrupt or SystemExit raised inside a task the run awaits, carried out
    of that task. asyncio re-raises those two from the event loop itself, past every
    ``await`` (so no handler in the run sees them and ``asyncio.run`` raises instead of
    returning the result); this one travels like any exception. A BaseException, so the
    ``except Exception`` of a step cannot turn it into a failed call."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"{type(original).__name__} inside {original!r}")
        self.original = original


async def _carried(call: Awaitable[T]) -> T:
    try:
        return await call
    except (KeyboardInterrupt, SystemExit) as exc:
        raise Interrupted(exc) from exc
    except BaseExceptionGroup as group:  # a task group's: an interrupt inside is still one
        hit = group.subgroup((KeyboardInterrupt, SystemExit))
        if hit is not None:
            raise Interrupted(innermost(hit)) from group
        raise


async def within(call: Awaitable[T], timeout: float) -> T:
    """``asyncio.wait_for(call, timeout)`` whose inner task cannot take the event loop
    down: the one way a run awaits anything under a time limit."""
    return await asyncio.wait_for(_carried(call), timeout)


async def gather_within(*calls: Awaitable[T]) -> list[T | BaseException]:
    """``asyncio.gather(..., return_exceptions=True)`` over inner tasks that cannot take the
    event loop down: each call's result or exception, once all are done; an interrupt in
    any of them is raised (it ends the run, it is not one call's failure)."""
    results = list(await asyncio.gather(*(_carried(c) for c in calls), return_exceptions=True))
    for result in results:
        if isinstance(result, Interrupted):
            raise result
    return results


async def gather_pair(
    first: Awaitable[A], second: Awaitable[B]
) -> tuple[A | BaseException, B | BaseException]:
    """``gather_within`` for two calls of different types, each result or its exception."""
    a, b = await gather_within(first, second)
    return cast("A | BaseException", a), cast("B | BaseException", b)
