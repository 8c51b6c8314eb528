"""Sellers' terms, read for one decision before the judge takes its decision lock.

A decision on an x402 purchase needs what the seller's own 402 states now (judge.payto
over HTTP, judge.mcp_terms over MCP), and a seller answers when it likes: a read held
under the judge's decision lock would hold every other task's decisions with it. So the
judge reads first, outside the lock, running the same checks it rules with
(:meth:`SellerTerms.reading`: each read a decision's checks ask for is made now, bounded
in time and size by its reader), then rules under the lock on what was read
(:meth:`SellerTerms.sealed`: the same checks find their reads there and nothing more is
fetched). The terms are read for this decision, never kept from an earlier one nor
taken from the agent; a seller that stalls delays only the decision that buys from it
(one that only compares its offer, for at most :data:`COMPARED_READ_S`).

A read may start a moment before its decision is asked for (:class:`TermsAhead`): when
the agent starts quoting a purchase it tells the judge which resource it is about to ask
about, and the judge starts its own read of that 402. The decision that follows takes
that read, once, while it is still being answered or when its answer came at most
:data:`AHEAD_FRESH_S` before (what the seller stated then is what the judge rules on, as
when it reads on arrival); otherwise the decision reads again. The agent only names the
resource: what it names is read by the judge's own reader, for a seller the task may pay.
The 402 that read found is handed back to the agent (:class:`AheadRead`), which quotes
from it instead of asking the seller a second time: the agent and the judge then see the
same terms, and the seller answers one unpaid request a purchase, not two.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from judge.mcp_terms import SELLER_READ_S, McpTermsUnread, McpTool, NoOffers, OfferedTerms

__all__ = [
    "AHEAD_FRESH_S",
    "COMPARED_READ_S",
    "AheadRead",
    "Compared",
    "SellerTerms",
    "Stated402",
    "StatedOffers",
    "TermsAhead",
]

#: ``(url, method, body) -> the offers`` the seller's own 402 for that resource states.
_TermsOf = Callable[[str, str, object], tuple[OfferedTerms, ...]]
_Offers = tuple[OfferedTerms, ...]


@dataclass(frozen=True)
class Stated402:
    """A seller's 402 as the judge's own read found it: its ``PAYMENT-REQUIRED`` header
    (x402 v2, None without) and its body as read (the terms of x402 v1; empty for v2,
    whose body the read does not keep)."""

    header: str | None
    body: bytes

    def to_wire(self) -> dict[str, object]:
        return {"header": self.header, "body": base64.b64encode(self.body).decode()}

    @classmethod
    def from_wire(cls, data: object) -> Stated402 | None:
        """The 402 a judge service sent, or None for anything else (the agent reads itself)."""
        if not isinstance(data, dict):
            return None
        header, body = data.get("header"), data.get("body")
        if not (header is None or isinstance(header, str)) or not isinstance(body, str):
            return None
        try:
            return cls(header, base64.b64decode(body, validate=True))
        except ValueError:
            return None


class StatedOffers(tuple):  # type: ignore[type-arg]
    """The offers a read of a seller's 402 found, with that 402 as read (``stated``)."""

    stated: Stated402

    def __new__(cls, offers: _Offers, stated: Stated402) -> StatedOffers:
        found = super().__new__(cls, offers)
        found.stated = stated
        return found


@dataclass(frozen=True)
class AheadRead:
    """What the judge answers a read started ahead (:meth:`TermsAhead.read`): whether it
    read at all (False: not a seller the task may pay, or too many reads waiting), the
    402 it found with offers the judge can rule on, and otherwise what it found instead:
    whether the seller gave no whole answer within the judge's bound (``stalled``), the
    HTTP status it answered (``status``; None: no answer read) and why no offer was
    found (``why``, the judge's words)."""

    started: bool
    stated: Stated402 | None = None
    stalled: bool = False
    status: int | None = None
    why: str | None = None

    def to_wire(self) -> dict[str, object]:
        """The judge service's answer to ``POST /v1/terms-ahead``."""
        return {"started": self.started, "stalled": self.stalled, "status": self.status,
                "why": self.why, "stated": self.stated.to_wire() if self.stated else None}

    @classmethod
    def from_wire(cls, data: Mapping[str, object]) -> AheadRead:
        """A service's answer read back; a field of the wrong type reads as not given."""
        status, why = data.get("status"), data.get("why")
        return cls(data.get("started") is True, Stated402.from_wire(data.get("stated")),
                   data.get("stalled") is True,
                   status if isinstance(status, int) and not isinstance(status, bool) else None,
                   why if isinstance(why, str) else None)


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

    def taking(self, other: SellerTerms) -> None:
        """Add what ``other`` read (a compared offer's reads) to these terms; a 402 read
        here already stays as read here."""
        for key, offers in other._http.items():
            self._http.setdefault(key, offers)
        for mkey, found in other._mcp.items():
            self._mcp.setdefault(mkey, found)

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


#: Seconds a decision waits, from its start, for the 402s of the offers it only compares.
#: A seller answers in well under a second and the agent's own quote of the offer started
#: the judge's read ahead (TermsAhead) a moment before; past this an offer's terms count
#: as not read and it is dropped, so a seller that stalls holds only its own offer.
COMPARED_READ_S = 2.0
#: Worker threads for compared offers' reads in all; a read past them waits for one, and
#: is dropped like a stalled one when none comes free within COMPARED_READ_S.
_COMPARED_WORKERS = 32


class Compared:
    """The reads of the offers one decision compares, each on its own worker thread into
    its own :class:`SellerTerms`, started together; :meth:`taken` waits for them until
    COMPARED_READ_S after the start and names those not read by then."""

    _lock = threading.Lock()
    _pool: ThreadPoolExecutor | None = None
    _pid = 0

    def __init__(self, read: _TermsOf, checks: Sequence[Callable[[SellerTerms], None]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        pool = self._workers()
        self._reads = [(SellerTerms.reading(read), check) for check in checks]
        self._futures = [pool.submit(check, terms) for terms, check in self._reads]

    @classmethod
    def _workers(cls) -> ThreadPoolExecutor:
        with cls._lock:
            if cls._pool is None or cls._pid != os.getpid():  # none yet, or a forked child's
                cls._pid = os.getpid()
                cls._pool = ThreadPoolExecutor(_COMPARED_WORKERS,
                                               thread_name_prefix="judge-compared")
            return cls._pool

    def taken(self, into: SellerTerms, within_s: float = COMPARED_READ_S) -> dict[int, str]:
        """Add each compared offer's reads done in time to ``into``; by index, why each
        other one was not read (its reads are dropped, never ruled on)."""
        unread: dict[int, str] = {}
        for i, ((terms, _check), future) in enumerate(zip(self._reads, self._futures,
                                                          strict=True)):
            left = self._started + within_s - self._clock()
            try:
                future.result(timeout=max(left, 0.0))
            except FutureTimeout:
                future.cancel()  # the read goes on to its own bound, on its worker
                unread[i] = (f"its 402 was not read within the judge's {within_s:g} s read "
                             "of an offer it only compares")
            except Exception as exc:  # noqa: BLE001 - a compared offer's failure drops it
                unread[i] = f"its terms could not be read: {type(exc).__name__}: {exc}"[:300]
            else:
                into.taking(terms)
        return unread


#: A read started ahead serves a decision asked for while it is answered or at most this
#: many seconds after its answer came (the agent quotes in milliseconds).
AHEAD_FRESH_S = 2.0
#: Reads started ahead and not yet taken, per task and in all; past either a read is not
#: started ahead (the decision reads on arrival, as without it).
AHEAD_PER_TASK = 4
AHEAD_MAX = 64


class TermsAhead:
    """Reads of sellers' 402s made for the decision that follows (see the module).

    The agent's quote asks for each read (:meth:`read`) and waits for it, and the read is
    made on the waiting thread (the service's request thread), so a seller that stalls
    holds only its own read. A decision takes its read while it is still being answered,
    or when its answer came at most :data:`AHEAD_FRESH_S` before; an older answer is
    dropped, and the decision reads anew. At most :data:`AHEAD_PER_TASK` reads wait for
    their decisions per task, and :data:`AHEAD_MAX` in all; past either a read is not
    made ahead (its decision reads on arrival)."""

    def __init__(self, read: _TermsOf, clock: Callable[[], float] = time.monotonic) -> None:
        self._read = read
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str, str, str], _Ahead] = {}
        self._pid = 0

    def read(self, task_id: str, url: str, method: str, body: object,
             within_s: float = SELLER_READ_S) -> AheadRead:
        """Read the 402 of ``url`` for ``task_id``'s next decision (or join the read
        already waiting for it) and wait for its answer, at most ``within_s``: the 402 the
        decision will rule on, for the agent to quote from. The read stays waiting for the
        decision, which takes it (:meth:`reader`)."""
        ahead, mine = self._begin(task_id, url, method, body)
        if ahead is None:
            return AheadRead(started=False)
        if mine and ahead.future.set_running_or_notify_cancel():
            try:
                ahead.future.set_result(self._answer(ahead, url, method, body))
            except Exception as exc:  # noqa: BLE001 - kept for the decision, which reads anew
                ahead.future.set_exception(exc)
        try:
            offers = ahead.future.result(timeout=within_s)
        except FutureTimeout:
            return AheadRead(started=True, stalled=True)
        except Exception:  # noqa: BLE001 - the reader failed: the agent reads itself
            return AheadRead(started=True)
        if isinstance(offers, StatedOffers):
            return AheadRead(True, offers.stated, status=402)
        if isinstance(offers, NoOffers):
            return AheadRead(True, None, offers.stalled, offers.status, offers.why)
        return AheadRead(started=True)  # a reader that keeps no 402 (a test's): read itself

    def _begin(self, task_id: str, url: str, method: str, body: object
               ) -> tuple[_Ahead | None, bool]:
        """The read for ``task_id``'s next decision of ``url``: the fresh one already
        waiting (False: joined), or a new one the caller makes (True); None when too many
        wait."""
        key = (task_id, url, method, _canonical(body))
        now = self._clock()
        with self._lock:
            self._own_process()
            for old in [k for k, a in self._pending.items() if a.stale(now)]:
                self._pending.pop(old).future.cancel()
            if key in self._pending:
                return self._pending[key], False
            waiting = sum(1 for k in self._pending if k[0] == task_id)
            if waiting >= AHEAD_PER_TASK or len(self._pending) >= AHEAD_MAX:
                return None, False
            ahead = self._pending[key] = _Ahead(now)
        return ahead, True

    def _own_process(self) -> None:
        """Drop reads a forked child inherited (under the lock): their threads are its
        parent's, and their answers would never come."""
        if self._pid != os.getpid():
            self._pid, self._pending = os.getpid(), {}

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
                self._own_process()
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
