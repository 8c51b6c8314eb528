"""Sellers' terms, read for one decision before the judge takes its decision lock.

A decision on an x402 purchase needs what the seller's own 402 states now (judge.payto
over HTTP, judge.mcp_terms over MCP), and a seller answers when it likes: a read held
under the judge's decision lock would hold every other task's decisions with it. So the
judge reads first, outside the lock, running the same checks it rules with
(:meth:`SellerTerms.reading`: each read a decision's checks ask for is made now, bounded
in time and size by its reader), then rules under the lock on what was read
(:meth:`SellerTerms.sealed`: the same checks find their reads there and nothing more is
fetched). The terms are read for this decision, never kept from an earlier one nor
taken from the agent; a seller that stalls delays only the decision that names it.

A read may start a moment before its decision is asked for (:class:`TermsAhead`): when
the agent starts quoting a purchase it tells the judge which resource it is about to ask
about, and the judge starts its own read of that 402 beside the agent's. The decision
that follows takes that read, once, while it is still being answered or when its answer
came at most :data:`AHEAD_FRESH_S` before (what the seller stated then is what the judge
rules on, as when it reads on arrival); otherwise the decision reads again. The agent only names the resource: what it names is
read by the judge's own reader, for a seller the task may pay.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from judge.mcp_terms import McpTermsUnread, McpTool, OfferedTerms

__all__ = ["AHEAD_FRESH_S", "SellerTerms", "TermsAhead"]

#: ``(url, method, body) -> the offers`` the seller's own 402 for that resource states.
_TermsOf = Callable[[str, str, object], tuple[OfferedTerms, ...]]
_Offers = tuple[OfferedTerms, ...]


@dataclass
class SellerTerms:
    """The terms sellers stated for one decision's purchases (HTTP 402s by resource, MCP
    tools' 402s by tool); ``read`` reads a 402 not yet read, until :meth:`sealed`."""

    read: _TermsOf | None
    _http: dict[tuple[str, str, str], tuple[OfferedTerms, ...]] = field(default_factory=dict)
    _mcp: dict[tuple[str, ...], frozenset[OfferedTerms] | McpTermsUnread] = field(
        default_factory=dict)

    @classmethod
    def reading(cls, read: _TermsOf) -> SellerTerms:
        """Terms read as the checks ask for them (outside the decision lock)."""
        return cls(read)

    def sealed(self) -> SellerTerms:
        """These terms as read, and no further read (under the decision lock)."""
        return SellerTerms(None, dict(self._http), dict(self._mcp))

    def __call__(self, url: str, method: str, body: object) -> tuple[OfferedTerms, ...]:
        """What the 402 of ``url`` (``method``, ``body``) stated; empty when it was not read."""
        key = (url, method, _canonical(body))
        if key not in self._http and self.read is not None:
            self._http[key] = self.read(url, method, body)
        return self._http.get(key, ())

    def mcp(self, tool: McpTool) -> frozenset[OfferedTerms]:
        """What ``tool``'s own 402 stated; raises McpTermsUnread when it could not be read."""
        key = (tool.server, tool.tool, _canonical(dict(tool.arguments)), str(tool.transport))
        if key not in self._mcp and self.read is not None:
            try:
                self._mcp[key] = tool.offered_terms()
            except McpTermsUnread as exc:
                self._mcp[key] = exc
        found = self._mcp.get(key, McpTermsUnread("its terms were not read for this decision"))
        if isinstance(found, McpTermsUnread):
            raise found
        return found


#: A read started ahead serves a decision asked for while it is answered or at most this
#: many seconds after its answer came (the agent quotes in milliseconds).
AHEAD_FRESH_S = 2.0
#: Reads started ahead and not yet taken, per task and in all; past either a read is not
#: started ahead (the decision reads on arrival, as without it).
AHEAD_PER_TASK = 4
AHEAD_MAX = 64


class TermsAhead:
    """Reads of sellers' 402s started for the decision that follows (see the module).

    Each read runs on its own worker thread (at most :data:`AHEAD_MAX`), so a seller that
    stalls holds only its own read. A decision takes its read while it is still being
    answered, or when its answer came at most :data:`AHEAD_FRESH_S` before; an older
    answer is dropped, and a read not yet running when its decision comes is cancelled;
    either way the decision reads anew."""

    def __init__(self, read: _TermsOf, clock: Callable[[], float] = time.monotonic) -> None:
        self._read = read
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str, str, str], _Ahead] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0

    def start(self, task_id: str, url: str, method: str, body: object) -> bool:
        """Start reading the 402 of ``url`` for ``task_id``'s next decision; False when
        one is already waiting for it or too many are (the decision then reads itself)."""
        key = (task_id, url, method, _canonical(body))
        now = self._clock()
        with self._lock:
            if self._pool is None or self._pid != os.getpid():  # none yet, or a forked child's
                self._pid, self._pending = os.getpid(), {}
                self._pool = ThreadPoolExecutor(AHEAD_MAX, thread_name_prefix="judge-ahead")
            for old in [k for k, a in self._pending.items() if a.stale(now)]:
                self._pending.pop(old).future.cancel()
            waiting = sum(1 for k in self._pending if k[0] == task_id)
            if key in self._pending or waiting >= AHEAD_PER_TASK or (
                len(self._pending) >= AHEAD_MAX
            ):
                return False
            ahead = _Ahead(now)
            ahead.future = self._pool.submit(self._answer, ahead, url, method, body)
            self._pending[key] = ahead
        return True

    def _answer(self, ahead: _Ahead, url: str, method: str, body: object) -> _Offers:
        try:
            return self._read(url, method, body)
        finally:
            ahead.answered = self._clock()  # before the future is done

    def reader(self, task_id: str) -> _TermsOf:
        """How one decision of ``task_id`` reads a 402: the read started ahead for it when
        still being answered or answered at most AHEAD_FRESH_S ago (taken: it serves no
        other decision), else a new read."""

        def read(url: str, method: str, body: object) -> _Offers:
            with self._lock:
                ahead = self._pending.pop((task_id, url, method, _canonical(body)), None)
            if ahead is not None and not ahead.future.cancel():
                try:
                    offers = ahead.future.result()
                except Exception:  # noqa: BLE001 - the reader failed: read again now
                    pass
                else:
                    if not ahead.stale(self._clock()):
                        return offers
            return self._read(url, method, body)

        return read


#: A read started ahead and never answered is dropped after this many seconds (its
#: reader gives up well before: judge.payto reads for at most SELLER_READ_S).
_AHEAD_GIVE_UP_S = 60.0


class _Ahead:
    """One read started ahead: when it started and when its answer came (None: not yet)."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.answered: float | None = None
        self.future: Future[_Offers] = Future()

    def stale(self, now: float) -> bool:
        if self.answered is None:
            return now - self.started > _AHEAD_GIVE_UP_S
        return now - self.answered > AHEAD_FRESH_S


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)
