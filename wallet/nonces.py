"""Transaction nonces for concurrent sends from one key: no gaps, no collisions.

Seeded once from ``eth_getTransactionCount(address, "pending")``; after that numbers are
handed out locally under a lock. A number whose send failed is released and handed out
again before any new one, so a failure never leaves a gap the node would wait on.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from web3 import Web3


class NonceManager:
    """Allocates nonces for ``address``; safe across threads and asyncio tasks.

    The lock is a plain ``threading.Lock`` held only for the (synchronous) allocation,
    so coroutines on one loop and threads in one process see one sequence. Use one
    manager per address per process.
    """

    def __init__(self, w3: Web3, address: str) -> None:
        self.w3 = w3
        self.address = Web3.to_checksum_address(address)
        self._lock = threading.Lock()
        self._next: int | None = None
        self._free: list[int] = []  # released numbers below _next, smallest first
        self._in_flight: set[int] = set()

    def __repr__(self) -> str:
        return f"NonceManager(address={self.address!r}, next={self._next})"

    def _pending_count(self) -> int:
        return int(self.w3.eth.get_transaction_count(self.address, "pending"))

    def allocate(self) -> int:
        """The next nonce to use; pair it with ``confirm`` or ``release`` (or ``claim`` it
        back after a release)."""
        with self._lock:
            if self._next is None:
                self._next = self._pending_count()
            if self._free:
                n = heapq.heappop(self._free)
            else:
                n = self._next
                self._next += 1
            self._in_flight.add(n)
            return n

    def confirm(self, n: int) -> None:
        """``n`` was accepted by the node; it is used for good."""
        with self._lock:
            self._in_flight.discard(n)

    def release(self, n: int) -> None:
        """``n``'s send failed before the node accepted it: hand it out again.

        Only a number allocated here and not yet confirmed can be released; anything
        else is ignored, so a caller's own nonce is never handed out twice.
        """
        with self._lock:
            if n not in self._in_flight:
                return
            self._in_flight.discard(n)
            if self._next is None or n >= self._next:
                return
            if n == self._next - 1 and not self._free:
                self._next = n
            elif n not in self._free:
                heapq.heappush(self._free, n)

    def claim(self, n: int) -> bool:
        """Take back ``n`` for a quote that pinned it and gave it back (a paused run resumed).

        True, and ``n`` is in flight again, only when nothing else holds or used it: ``n``
        was released here, or it is the next fresh number. False when another caller
        holds it, it was confirmed, or taking it would skip numbers (a gap the node would
        wait on); the caller must then quote afresh instead of signing ``n``.
        """
        with self._lock:
            if self._next is None:
                self._next = self._pending_count()
            if n in self._in_flight:
                return False
            if n in self._free:
                self._free.remove(n)
                heapq.heapify(self._free)
            elif n == self._next:
                self._next += 1
            else:
                return False
            self._in_flight.add(n)
            return True

    def resync(self) -> int:
        """Re-read the pending count (after "nonce too low", a dropped tx, an outside send).

        Every number from the chain's pending count up is free again except those still
        in flight, so nothing the chain has not seen is skipped. Returns the pending count.
        """
        with self._lock:
            pending = self._pending_count()
            top = max([pending, *(n + 1 for n in self._in_flight)])
            self._free = [n for n in range(pending, top) if n not in self._in_flight]
            heapq.heapify(self._free)
            self._next = top
            return pending

    @contextmanager
    def use(self) -> Iterator[int]:
        """``with nonces.use() as n:`` send; released if the block raises, else confirmed."""
        n = self.allocate()
        try:
            yield n
        except BaseException:
            self.release(n)
            raise
        self.confirm(n)

    def snapshot(self) -> dict[str, Any]:
        """Debug view: next fresh number, released numbers, numbers in flight."""
        with self._lock:
            return {
                "next": self._next,
                "free": sorted(self._free),
                "in_flight": sorted(self._in_flight),
            }
