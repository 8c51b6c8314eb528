"""Reconcile the spend ledger with the wallet's outgoing USDC Transfer logs.

``unmatched_onchain`` is money that left the wallet without an audited spend (an alarm);
``unmatched_ledger`` is an audited spend not (yet) on chain in the range. Signed rows
whose money is found on chain are settled here; x402 rows without a tx hash are found
through the token's ``AuthorizationUsed(authorizer, nonce)`` event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from web3 import Web3

from wallet._store import Store
from wallet.ledger import Ledger, SpendRow

if TYPE_CHECKING:
    from chain.client import ChainClient, TransferLog

AUTHORIZATION_USED_TOPIC = "0x" + Web3.keccak(
    text="AuthorizationUsed(address,bytes32)"
).hex().removeprefix("0x")
#: Ledger statuses whose money may be on chain.
_RECONCILED = ("signed", "settled", "failed")


@dataclass(frozen=True)
class Match:
    """A ledger row and the Transfer log that carried its money."""

    ledger_id: str
    run_id: str
    tx_hash: str
    block_number: int
    log_index: int
    recipient: str
    amount: int


@dataclass(frozen=True)
class OnchainTransfer:
    """An outgoing Transfer from the wallet that no ledger row accounts for."""

    tx_hash: str
    block_number: int
    log_index: int
    recipient: str
    value: int


@dataclass(frozen=True)
class ReconcileReport:
    """The result of one reconciliation over ``[from_block, to_block]``."""

    wallet: str
    asset: str
    from_block: int
    to_block: int
    matched: tuple[Match, ...]
    unmatched_onchain: tuple[OnchainTransfer, ...]
    unmatched_ledger: tuple[SpendRow, ...]
    resolved: tuple[str, ...]  # ledger ids this pass moved to "settled"

    @property
    def clean(self) -> bool:
        """No money moved unaudited and every audited spend was found."""
        return not self.unmatched_onchain and not self.unmatched_ledger

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``nib audit reconcile --json``)."""
        return {
            "wallet": self.wallet,
            "asset": self.asset,
            "from_block": self.from_block,
            "to_block": self.to_block,
            "matched": [asdict(m) for m in self.matched],
            "unmatched_onchain": [asdict(t) for t in self.unmatched_onchain],
            "unmatched_ledger": [r.to_dict() for r in self.unmatched_ledger],
            "resolved": list(self.resolved),
        }


def reconcile(
    db_path: str | Path | Store,
    chain: ChainClient,
    usdc: str,
    wallet_address: str,
    from_block: int = 0,
    to_block: int | str = "latest",
    *,
    emit: Callable[[str, dict[str, Any]], None] | None = None,
) -> ReconcileReport:
    """Compare the ledger's signed/settled/failed rows with on-chain Transfer logs.

    Rows match by tx hash, or (x402 rows without one) by their authorization nonce via
    ``AuthorizationUsed``; a match also needs the same recipient and amount. Matched
    rows that were not settled are settled (listed in ``resolved``). Ledger rows carry
    no block number, so a row whose tx lies outside the range shows as unmatched.
    """
    own = not isinstance(db_path, Store)
    store = Store(db_path) if not isinstance(db_path, Store) else db_path
    try:
        return _reconcile(store, chain, usdc, wallet_address, from_block, to_block, emit)
    finally:
        if own:
            store.close()


def _reconcile(
    store: Store,
    chain: ChainClient,
    usdc: str,
    wallet_address: str,
    from_block: int,
    to_block: int | str,
    emit: Callable[[str, dict[str, Any]], None] | None,
) -> ReconcileReport:
    ledger = Ledger(store)
    wallet = wallet_address.lower()
    asset = usdc.lower()
    last = chain.block_number() if to_block == "latest" else int(to_block)
    logs = [
        t
        for t in chain.transfer_logs(usdc, from_block, last, wallet_address, direction="out")
        if t.sender.lower() == wallet
    ]
    rows = [r for r in ledger.by_status(*_RECONCILED) if r.asset.lower() == asset]

    by_nonce: dict[str, str] = {}
    if any(r.tx_hash is None and r.auth_nonce for r in rows):
        by_nonce = _authorizations_used(chain, usdc, wallet, from_block, last)

    pool: dict[str, list[TransferLog]] = {}
    for log in logs:
        pool.setdefault(log.tx_hash.lower(), []).append(log)

    matched: list[Match] = []
    unmatched_ledger: list[SpendRow] = []
    resolved: list[str] = []
    for row in rows:
        tx = (row.tx_hash or by_nonce.get((row.auth_nonce or "").lower(), "")).lower()
        candidates = pool.get(tx, [])
        hit = next(
            (
                c
                for c in candidates
                if c.recipient.lower() == row.recipient.lower() and int(c.value) == row.amount
            ),
            None,
        )
        if hit is None:
            unmatched_ledger.append(row)
            continue
        candidates.remove(hit)
        matched.append(
            Match(
                row.id,
                row.run_id,
                tx,
                hit.block_number,
                hit.log_index,
                hit.recipient,
                int(hit.value),
            )
        )
        if row.status != "settled" or row.tx_hash is None:
            ledger.transition(
                row.id,
                "settled",
                tx_hash=tx,
                note="settled by reconcile" if row.status != "settled" else None,
            )
            resolved.append(row.id)

    unmatched_onchain = tuple(
        OnchainTransfer(t.tx_hash.lower(), t.block_number, t.log_index, t.recipient, int(t.value))
        for group in pool.values()
        for t in group
    )
    report = ReconcileReport(
        wallet=Web3.to_checksum_address(wallet_address),
        asset=Web3.to_checksum_address(usdc),
        from_block=from_block,
        to_block=last,
        matched=tuple(matched),
        unmatched_onchain=tuple(
            sorted(unmatched_onchain, key=lambda t: (t.block_number, t.log_index))
        ),
        unmatched_ledger=tuple(unmatched_ledger),
        resolved=tuple(resolved),
    )
    if emit is not None:
        emit(
            "wallet.reconciled",
            {
                "wallet": report.wallet,
                "from_block": from_block,
                "to_block": last,
                "matched": len(report.matched),
                "unmatched_onchain": [asdict(t) for t in report.unmatched_onchain],
                "unmatched_ledger": [r.id for r in report.unmatched_ledger],
                "resolved": list(report.resolved),
            },
        )
    return report


def _authorizations_used(
    chain: ChainClient, usdc: str, wallet: str, from_block: int, to_block: int
) -> dict[str, str]:
    """Map authorization nonce (0x hex) -> tx hash for the wallet's used authorizations."""
    topic_wallet = "0x" + wallet.removeprefix("0x").rjust(64, "0")
    params: Any = {
        "address": Web3.to_checksum_address(usdc),
        "fromBlock": from_block,
        "toBlock": to_block,
        "topics": [AUTHORIZATION_USED_TOPIC, topic_wallet],
    }
    found = chain.call("eth_getLogs", lambda: chain.w3.eth.get_logs(params))
    out: dict[str, str] = {}
    for log in found:
        nonce = "0x" + bytes(log["topics"][2]).hex()
        out[nonce.lower()] = "0x" + bytes(log["transactionHash"]).hex()
    return out
