"""The wallet's balance a decision reads, per asset, started before the decision lock.

The judge service reads the paying wallet's balance itself for a registered task. Read
inside the decision lock, every decision of every task waited there on the node in turn
(~0.5 ms each on the devnet); read on pool threads while the sellers' terms are read
(before the lock), the lock waits on nothing but the database. Only assets the judge
allows are read (an unknown asset is refused before anything is read for it), and a read
that failed raises where the balance is used, as it did when read there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future

from judge.connections import thread_pool

__all__ = ["BalanceReads"]


class BalanceReads:
    """One decision's balance reads: ``of(asset)`` is the balance read for ``asset`` when
    it started, else read now; None without a reader."""

    def __init__(self, balance_of: Callable[[str], int] | None, assets: Iterable[str]) -> None:
        self._balance_of = balance_of
        self._reads: dict[str, Future[int]] = {}
        if balance_of is not None:
            for asset in dict.fromkeys(assets):
                self._reads[asset] = thread_pool("judge-balance").submit(balance_of, asset)

    def of(self, asset: str) -> int | None:
        if self._balance_of is None:
            return None
        read = self._reads.get(asset)
        return read.result() if read is not None else self._balance_of(asset)
