"""Recovering the money state of a run whose worker died (SIGKILL, power loss, OOM).

A dead worker can leave three things behind: reservations it never signed (they hold
cap and balance for nothing), transfers it signed but never broadcast (the signed bytes
died with the process, so they can never move money), and nonces it held in flight (a
gap the node would wait on). ``recover_run`` gives all three back. What it never
touches: a spend whose money may still move (an x402 authorization the seller may hold,
a transaction the node knows). Those stay ``signed`` and keep their cap share until
reconcile settles them from the chain or fails them once they can no longer land; the
task they belong to is not run again, so a paid call in flight is never paid twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chain.client import ChainClient
    from wallet.meter import SpendMeter
    from wallet.nonces import NonceManager

__all__ = ["RunRecovery", "recover_run"]


@dataclass(frozen=True)
class RunRecovery:
    """What recovery found and did for one run (spend row ids; nonces given back)."""

    run_id: str
    released: tuple[str, ...]
    failed: tuple[str, ...]
    pending: tuple[str, ...]
    settled: tuple[str, ...]
    nonces: tuple[int, ...]

    @property
    def money_moved_or_may_move(self) -> bool:
        """Whether re-running the task could pay twice for what this run bought."""
        return bool(self.pending or self.settled)


def recover_run(
    meter: SpendMeter,
    nonces: NonceManager,
    chain: ChainClient,
    run_id: str,
    holder: str,
    why: str,
) -> RunRecovery:
    """Give back what the dead ``holder`` left for ``run_id`` in the wallet's ``meter`` and
    ``nonces`` (``chain`` says which transfers the node knows); ``why`` goes into the notes.

    Warning: call it only once ``holder`` can no longer act (its lease ran out); a live
    worker's unbroadcast transfer looks exactly like a dead one's.
    """
    released: list[str] = []
    failed: list[str] = []
    pending: list[str] = []
    for row in meter.ledger.rows(run_id):
        if row.status == "reserved":
            meter.release(row.id, note=f"{why}: never signed")
            released.append(row.id)
        elif row.status == "signed" and row.kind != "x402" and not _known(chain, row.tx_hash):
            meter.fail(row.id, note=f"{why}: signed but never broadcast")
            failed.append(row.id)
        elif row.status == "signed":
            pending.append(row.id)
    settled = tuple(r.id for r in meter.ledger.rows(run_id) if r.status == "settled")
    given_back = tuple(nonces.recover(holder))
    return RunRecovery(run_id, tuple(released), tuple(failed), tuple(pending), settled, given_back)


def _known(chain: ChainClient, tx_hash: str | None) -> bool:
    """Whether the node has ``tx_hash`` pooled or mined (True when it cannot say)."""
    if not tx_hash:
        return False
    # web3 loads where the node is asked, not for the RunRecovery a wallet client reads.
    from web3.exceptions import TransactionNotFound

    try:
        chain.w3.eth.get_transaction(tx_hash)  # type: ignore[arg-type]
    except TransactionNotFound:
        return False
    except Exception:  # no answer: the money may still move, leave it to reconcile
        return True
    return True
