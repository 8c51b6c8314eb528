"""Whom the judge's HTTP service answers when it is flooded: a share per caller, not
first come.

An outside red team held the judge with 4 processes x 200 connections that each sent a
request head one header line every 2 s: uvicorn counted them against its connection
limit, so every other task's decision, and ``/health``, got a 503. Two limits replace it:

- **Waiting for a request.** A connection (a new one, or a kept one between requests)
  has :data:`HEAD_DEADLINE_S` to deliver its whole request, head and body, however the
  bytes trickle; past it the connection is closed. At most :data:`MAX_WAITING` wait at
  once: a new connection past that closes the one that has waited longest. Before its
  request arrives nothing names the caller (loopback TCP carries no credentials), so the
  share here is time: every connection gets the same deadline, and the judge's clients
  send a request at once (< 1 ms), so only connections that hold a place without asking
  are closed.
- **Being answered.** Each task token (and the worker token) has at most
  :data:`PER_CALLER_IN_FLIGHT` requests in flight; past ``max_in_flight`` in all, only a
  caller with none in flight gets in. Of the :data:`DECISION_THREADS` that decisions run
  on (they wait on the chain and on sellers' terms), the last :data:`DECISION_RESERVE` go
  only to callers using none, so tasks that hold decisions on a stalling seller cannot
  take them all. ``/health``, the admin token (the user's commands) and the services' own
  token (the wallet's re-check before it signs) are always answered.

The wallet's socket has its own share (wallet/admission.py): there the kernel names the
process behind each connection when it is accepted (``SO_PEERCRED``, and the tasks that
process proved), so it evicts by who holds the most; here nothing names a caller until its
request's token does, so waiting connections are shared by time and requests by task. The
rules differ, so the two share no code.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "DECISION_RESERVE",
    "DECISION_THREADS",
    "HEAD_DEADLINE_S",
    "MAX_WAITING",
    "PER_CALLER_IN_FLIGHT",
    "InFlight",
    "Waiting",
    "admitting_protocol",
]

#: Seconds a connection has to deliver a whole request once it starts waiting for one.
HEAD_DEADLINE_S = 5.0
#: Connections waiting for a request at once; a new one past it closes the oldest.
MAX_WAITING = 1024
#: Requests one task (or the worker token) may have in flight at the judge at once.
PER_CALLER_IN_FLIGHT = 16
#: The judge's decision threads (the routes that wait on the chain or a seller run on
#: them), and how many of them are kept for callers with none in use: past
#: DECISION_THREADS - DECISION_RESERVE in use, a caller already using one is refused.
DECISION_THREADS = 40
DECISION_RESERVE = 8
#: Callers the judge always answers: the user's admin token, the services' own token, and
#: anyone asking /health.
EXEMPT = frozenset({"admin", "service", "health"})


class Waiting:
    """The connections waiting for a request, oldest first, each with its deadline."""

    def __init__(self, limit: int = MAX_WAITING, deadline_s: float = HEAD_DEADLINE_S) -> None:
        self.limit, self.deadline_s = limit, deadline_s
        self._since: OrderedDict[_Admitting, asyncio.TimerHandle] = OrderedDict()
        #: Connections closed for waiting past the deadline, and crowded out by newer ones.
        self.expired = self.crowded_out = 0

    def __len__(self) -> int:
        return len(self._since)

    def update(self, conn: _Admitting, waiting: bool) -> None:
        if waiting and conn not in self._since:
            while len(self._since) >= self.limit:
                oldest, timer = self._since.popitem(last=False)
                timer.cancel()
                self.crowded_out += 1
                oldest.transport.abort()
            self._since[conn] = conn.loop.call_later(self.deadline_s, self._expire, conn)
        elif not waiting and conn in self._since:
            self._since.pop(conn).cancel()

    def _expire(self, conn: _Admitting) -> None:
        if self._since.pop(conn, None) is not None:
            self.expired += 1
            conn.transport.abort()


class _Admitting(H11Protocol):
    """uvicorn's h11 protocol, telling :class:`Waiting` whether it waits for a request."""

    waiting: Waiting  # one per server: see admitting_protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[arg-type]
        self._admit()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._admit()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._admit()

    def connection_lost(self, exc: Exception | None) -> None:
        self.waiting.update(self, False)
        super().connection_lost(exc)

    def _admit(self) -> None:
        # IDLE: no request head yet; SEND_BODY: a head without all of its body.
        asking = self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
        self.waiting.update(self, asking and not self.transport.is_closing())


def admitting_protocol(waiting: Waiting) -> type[H11Protocol]:
    """uvicorn's ``http`` protocol class for one server, its connections in ``waiting``."""
    return type("JudgeH11Protocol", (_Admitting,), {"waiting": waiting})


class InFlight:
    """Requests being answered, per caller (``TokenGate`` names it in ``scope``)."""

    def __init__(self, limit: int, per_caller: int = PER_CALLER_IN_FLIGHT,
                 threads: int = DECISION_THREADS, reserve: int = DECISION_RESERVE) -> None:
        self.limit, self.per_caller = limit, per_caller
        self.threads, self.reserve = threads, reserve
        self.total = self.on_threads = 0
        self._by: dict[str, int] = {}
        self._threads_by: dict[str, int] = {}

    def refusal(self, caller: str, threaded: bool = False) -> str | None:
        """Why ``caller`` is not answered now (a JudgeOverloaded message), else None;
        ``threaded``: the request runs on a decision thread."""
        if caller in EXEMPT:
            return None
        if threaded and caller != "anyone" and self._threads_by.get(caller, 0) and (
                self.on_threads >= self.threads - self.reserve):
            return (f"found {self.on_threads} of the judge's {self.threads} decision threads "
                    f"in use, {self._threads_by[caller]} by {caller}; expected the last "
                    f"{self.reserve} kept for callers using none; fix: wait for the answers "
                    "before asking again")
        mine = self._by.get(caller, 0)
        if caller != "anyone" and mine >= self.per_caller:
            return (f"found {mine} requests of {caller} in flight at the judge; expected at "
                    f"most {self.per_caller} per task; fix: wait for the answers before "
                    "asking again")
        if self.total >= self.limit and (mine or caller == "anyone"):
            return (f"found {self.total} requests in flight at the judge; expected at most "
                    f"{self.limit}; fix: retry after a moment, or run fewer agents against "
                    "this judge at once")
        return None

    def enter(self, caller: str, threaded: bool = False) -> None:
        self.total += 1
        _count(self._by, caller, 1)
        if threaded:
            self.on_threads += 1
            _count(self._threads_by, caller, 1)

    def leave(self, caller: str, threaded: bool = False) -> None:
        self.total -= 1
        _count(self._by, caller, -1)
        if threaded:
            self.on_threads -= 1
            _count(self._threads_by, caller, -1)


def _count(by: dict[str, int], caller: str, step: int) -> None:
    left = by.get(caller, 0) + step
    if left:
        by[caller] = left
    else:
        by.pop(caller, None)
