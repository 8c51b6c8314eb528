"""The wallet's balance a decision reads, per asset, started before the decision lock.

The judge service reads the paying wallet's balance itself for a registered task. Read
inside the decision lock, every decision of every task waited there on the node in turn
(~0.5 ms each on the devnet); read on pool threads while the sellers' terms are read
(before the lock), the lock waits on nothing but the database. Only assets the judge
allows are read (an unknown asset is refused before anything is read for it), and a read
that failed raises where the balance is used, as it did when read there.

A read ahead of a seller's terms for a task (``Judge.read_ahead``, while the agent
quotes) starts the task's balance reads too (:class:`BalancesAhead`): its coming
decision takes them, when no older than CARRIED_S, instead of waiting on the node again.
The balance is the judge's early refusal only; the wallet meters every payment against
the balance it reads itself in the transaction that reserves it.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, wait

from judge.connections import thread_pool

__all__ = ["CARRIED_S", "BalanceReads", "BalancesAhead"]

#: How long balance reads started with a task's read ahead serve its next decision.
CARRIED_S = 5.0
#: Tasks whose balance reads are kept for their coming decision at once (the oldest go).
_KEPT = 1024

Reads = Mapping[str, "Future[int]"]


def _started(balance_of: Callable[[str], int], assets: Iterable[str]) -> dict[str, Future[int]]:
    """A read started for each of ``assets``, by its lower-case address."""
    return {asset.lower(): thread_pool("judge-balance").submit(balance_of, asset)
            for asset in dict.fromkeys(assets)}


class BalanceReads:
    """One decision's balance reads: ``of(asset)`` is the balance read for ``asset`` when
    it started (or carried from the task's read ahead, ``carried``; one that failed is
    read again), else read now; None without a reader."""

    def __init__(self, balance_of: Callable[[str], int] | None, assets: Iterable[str],
                 carried: Reads | None = None) -> None:
        self._balance_of = balance_of
        self._carried = dict(carried or {}) if balance_of is not None else {}
        self._reads: dict[str, Future[int]] = {}
        if balance_of is not None:
            self._reads = {**_started(balance_of, (a for a in assets
                                                   if a.lower() not in self._carried)),
                           **self._carried}

    def ready(self) -> None:
        """Wait for every read started (before the decision lock: it never waits on the node)."""
        wait(self._reads.values())

    def of(self, asset: str) -> int | None:
        if self._balance_of is None:
            return None
        read = self._reads.get(asset.lower())
        if read is None:
            return self._balance_of(asset)
        try:
            return read.result()
        except Exception:
            if asset.lower() in self._carried:  # read ahead and failed: read it now
                return self._balance_of(asset)
            raise


class BalancesAhead:
    """Balance reads started with a task's read ahead, each taken once by the task's next
    decision within CARRIED_S (``clock``: seconds, monotonic). A task has one set kept: a
    read ahead while one younger than CARRIED_S is kept starts none, so repeated reads
    ahead cost the node no more than the task's decisions do."""

    def __init__(self, balance_of: Callable[[str], int] | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._balance_of, self._clock = balance_of, clock
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[float, Reads]] = OrderedDict()
        self._pid = os.getpid()

    def start(self, task_id: str, assets: Iterable[str]) -> None:
        if self._balance_of is None:
            return
        with self._lock:
            self._own_process()
            kept = self._kept.get(task_id)
            if kept is not None and self._clock() - kept[0] <= CARRIED_S:
                return
            self._kept.pop(task_id, None)
            self._kept[task_id] = (self._clock(), _started(self._balance_of, assets))
            while len(self._kept) > _KEPT:
                self._kept.popitem(last=False)

    def take(self, task_id: str | None) -> Reads:
        """The task's reads started ahead, when no older than CARRIED_S; else none."""
        if task_id is None:
            return {}
        with self._lock:
            self._own_process()
            kept = self._kept.pop(task_id, None)
        if kept is None or self._clock() - kept[0] > CARRIED_S:
            return {}
        return kept[1]

    def _own_process(self) -> None:
        """Drop reads a forked child inherited: their threads are its parent's."""
        if self._pid != os.getpid():
            self._pid, self._kept = os.getpid(), OrderedDict()
