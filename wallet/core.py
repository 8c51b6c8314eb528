"""What every part of the wallet shares: the key, the chain, the token, the meter, the
nonces, the clocks, and the audit trail the parts write to.

One mutable object, so a setting changed on the ``Wallet`` after construction (the
service sets ``emit``; tests set ``clock``) reaches every part at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chain.errors import ChainError
from judge.connections import thread_pool
from judge.verdict import Verdict
from wallet.keystore import KeyHandle
from wallet.ledger import SpendRow
from wallet.meter import Reservation, SpendMeter
from wallet.nonces import NonceManager
from wallet.signed import SignedTx, SignedTypedData

if TYPE_CHECKING:
    from chain.client import ChainClient

__all__ = ["ChainReads", "Emit", "WalletCore", "refusal_event", "spend_event"]

Emit = Callable[[str, dict[str, object]], None]

log = logging.getLogger(__name__)


@dataclass(eq=False, repr=False)
class WalletCore:
    """The wallet's shared state (never in a repr: it holds the key handle)."""

    key: KeyHandle
    chain: ChainClient
    usdc: str
    meter: SpendMeter
    nonces: NonceManager
    clock: Callable[[], float]
    receipt_timeout_s: float
    sink: Emit | None = None

    @property
    def address(self) -> str:
        return self.key.address

    def balance(self) -> int:
        """The wallet's live USDC balance, atomic units."""
        return self.chain.token_balance(self.usdc, self.address)

    def head_time(self) -> int:
        """The latest block's timestamp (unix seconds)."""
        return self.chain.block_timestamp("latest")

    def emit(self, name: str, data: dict[str, object]) -> None:
        """Hand an audit event to the sink; a failing sink is logged, never raised.

        The ledger (with its journal) is the book of record: an event store that cannot
        take a line must not turn a signature into one that is never broadcast, nor a
        settled payment into a failed call the loop would pay again.
        """
        if self.sink is None:
            return
        try:
            self.sink(name, data)
        except Exception:
            log.exception("wallet event %s (run %s) was not recorded", name, data.get("run_id"))


def refusal_event(run_id: str, verdict: Verdict | None, kind: str) -> dict[str, object]:
    """The fields of a ``wallet.refused`` event (the verdict's, when it is one)."""
    is_verdict = isinstance(verdict, Verdict)
    return {
        "run_id": run_id,
        "kind": kind,
        "verdict_id": verdict.id if is_verdict else None,  # type: ignore[union-attr]
        "payload_fingerprint": verdict.payload_fingerprint if is_verdict else None,  # type: ignore[union-attr]
        "amount": verdict.amount if is_verdict else None,  # type: ignore[union-attr]
    }


def spend_event(spend: Reservation | SpendRow | SignedTypedData | SignedTx) -> dict[str, object]:
    """The fields every event about one spend carries, from its reservation, its ledger
    row or a signed record (whose reservation is its row)."""
    row = spend.reservation if isinstance(spend, (SignedTypedData, SignedTx)) else spend
    return {
        "run_id": row.run_id,
        "spend_id": row.id,
        "verdict_id": row.verdict_id,
        "kind": row.kind,
        "asset": row.asset,
        "amount": row.amount,
        "recipient": row.recipient,
        "chain_id": row.chain_id,
    }


class ChainReads:
    """The chain reads one authorization needs (the head's time for the validity window,
    the live balance for the reservation), started together on a pool thread when the
    authorization starts, so they wait on the node while the verdict checks and the
    judge's re-check run; the two go as one batch, one exchange with the node
    (ChainClient.clock_and_balance). Each is used where it was read before, in the same
    order: a node that fails raises its ChainError there, and a refusal before that
    point leaves the reads unused. Measured on the bench devnet: two serial reads cost
    ~0.9 ms of a ~38 ms purchase, overlapped they cost about nothing."""

    def __init__(self, core: WalletCore, *, head_time: bool) -> None:
        pool = thread_pool("wallet-reads")
        self._core = core
        self._both: Future[tuple[int | ChainError, int | ChainError]] | None = None
        self._balance: Future[int] | None = None
        if head_time:
            self._both = pool.submit(core.chain.clock_and_balance, core.usdc, core.address)
        else:
            self._balance = pool.submit(core.balance)

    def head_time(self) -> int:
        if self._both is None:
            return self._core.head_time()
        return _value(self._both.result()[0])

    def balance(self) -> int:
        if self._both is None:
            assert self._balance is not None
            return self._balance.result()
        return _value(self._both.result()[1])


def _value(read: int | ChainError) -> int:
    if isinstance(read, ChainError):
        raise read
    return read
