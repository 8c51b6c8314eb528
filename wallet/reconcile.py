"""Reconcile the spend ledger with the wallet's outgoing USDC Transfer logs.

``unmatched_onchain`` is money that left the wallet without an audited spend (an alarm);
``unmatched_ledger`` is an audited spend not on chain in the range, either still pending
(reserved, signed) or failed. Each Transfer log accounts for one ledger row at most.
Signed rows whose money is found on chain are settled here (x402 rows without a tx hash
are found through the token's ``AuthorizationUsed(authorizer, nonce)`` event); a signed
x402 row whose authorization expired unused is failed here, since it can never land, and
so is a signed transfer whose nonce the chain has used for another transaction.

A chain that lost blocks (a devnet restarted from an older state, a reorganisation) can
lose a settled row's transaction: such a row is found (its transaction has no receipt)
and reopened as ``signed`` (listed in ``rolled_back``), because its signature can move
money again; it is then closed like any signed row, when the chain decides: used again
(settled, re-tied to the new transaction), cancelled, or expired unused (failed). Given the
wallet's ``abandon`` (``Wallet.abandon_authorization``, the one cancel path), reconcile makes
a reopened authorization the restored chain has not used dead at once: cancelled on chain,
the cancel's transaction recorded on the row.

Given the judge's ``outcomes``, each non-delivery whose payment was undecided when its run
ended is filed once its row is settled (counted as ``paid-not-delivered``, the judge reading
the chain itself) and dropped once the row can never move money (wallet.held_outcomes).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from web3 import Web3
from web3.types import FilterParams

from chain.client import raw_rpc
from chain.usdc import AUTHORIZATION_CANCELED_TOPIC, AUTHORIZATION_USED_TOPIC
from judge.storage import Migration, cell_int, migrate
from wallet._store import Store
from wallet._tables import SPENDS
from wallet.backing import Unbacked, VerdictStanding, unbacked_among, unbacked_rows
from wallet.held_outcomes import file_held_outcomes
from wallet.journal import LedgerCheck, Since, verify, verify_since
from wallet.ledger import OUTSTANDING, Ledger, SpendRow, transition_in

if TYPE_CHECKING:
    from chain.client import ChainClient, TransferLog
    from judge.outcomes import Outcomes

log = logging.getLogger(__name__)

#: How the token and its events spell an EIP-3009 nonce: ``bytes32``, 0x and 64 hex digits.
_NONCE = re.compile(r"^0x[0-9a-fA-F]{64}\Z")

#: Ledger statuses a reconciliation looks at, in the order they may claim a Transfer log:
#: a row already settled with the tx keeps it; then a signed row; a failed or cancelled row
#: (corrected if its money did move) only takes a log nobody else accounts for. Reserved rows never
#: match (nothing was signed) but are reported as pending.
_CLAIM_ORDER: tuple[str, ...] = ("settled", "signed", "failed", "cancelled", "reserved")


def authorization_expired(valid_before: int, *, chain_time: int, wall_time: float) -> bool:
    """Whether an EIP-3009 authorization valid before ``valid_before`` can never land.

    The token accepts it only in a block with ``timestamp < validBefore``, and block
    timestamps never go back, so the chain's latest timestamp having reached it is enough
    on an honest chain. The wall clock must agree too: a devnet's clock can be pushed
    ahead (and a snapshot revert can bring it back), and failing a spend that could still
    land would understate what the run may have spent.
    """
    return chain_time >= valid_before and wall_time >= valid_before


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
class Unreadable:
    """A ledger row the chain cannot be asked about, left as it stands and named every pass."""

    ledger_id: str
    run_id: str
    status: str
    why: str


def unreadable_why(row: SpendRow) -> str | None:
    """Why the chain cannot be asked about ``row``, or None when it can.

    An x402 row is tied to its authorization by ``AuthorizationUsed(authorizer, nonce)``
    and ``authorizationState``, which take a ``bytes32``. A ledger written before the judge
    refused other spellings (an integer, 31 bytes: 5ade554) may hold one; the token read
    that authorization with another nonce, so no log can be tied to the row, and asking
    the node about it fails. Such a row is left as it stands, holding its cap while signed,
    instead of stopping the pass for every other row."""
    if row.kind != "x402" or row.auth_nonce is None or _NONCE.match(row.auth_nonce):
        return None
    return (f"its authorization nonce {row.auth_nonce[:80]!r} is not the 32-byte hex (0x and 64 "
            "digits) the token reads, so the chain cannot be asked about it and no transfer can "
            "be tied to it; it is left as it stands (a signed row keeps holding its cap). Fix: "
            "find its transfer with `nib audit --run " + row.run_id + "` and the wallet's "
            "Transfer logs, and close the row by hand")


@dataclass(frozen=True)
class OnchainTransfer:
    """An outgoing Transfer from the wallet that no ledger row accounts for."""

    tx_hash: str
    block_number: int
    log_index: int
    recipient: str
    value: int


#: The wallet's ``abandon_authorization(spend_id, why)``: ends an x402 row's authorization
#: (cancelled on chain, or settled/failed if the chain already decided) and returns the row.
Abandon = Callable[[str, str], SpendRow]
#: The note prefix of a row reopened because its transaction was rolled back.
_ROLLED_BACK = "rolled back"


@dataclass(frozen=True)
class ReconcileReport:
    """The result of one reconciliation over ``[from_block, to_block]``.

    ``unmatched_ledger`` rows carry their status after this pass: ``reserved``/``signed``
    are still pending (money may yet move), ``failed`` are accounted for (no money moved),
    ``settled`` means the row's tx is not in the range.
    """

    wallet: str
    asset: str
    from_block: int
    to_block: int
    matched: tuple[Match, ...]
    unmatched_onchain: tuple[OnchainTransfer, ...]
    unmatched_ledger: tuple[SpendRow, ...]
    resolved: tuple[str, ...]  # ledger ids this pass moved to "settled", "failed" or "cancelled"
    #: x402 rows recorded as settled whose authorization the chain has not used: the
    #: receipt they were settled under did not carry it, and the signature is still live.
    unproven: tuple[SpendRow, ...] = ()
    #: The ledger's hash chain checked against its tables (``nib audit verify``).
    ledger_check: LedgerCheck | None = None
    #: Settled spends the judge's record does not back (when the judge was asked).
    unbacked: tuple[Unbacked, ...] = ()
    #: Ledger ids this pass found settled in a transaction the chain no longer has (a
    #: rollback or reorganisation) and reopened as signed.
    rolled_back: tuple[str, ...] = ()
    #: The block an earlier pass proved every row it closed through (this pass started
    #: from its checkpoint and did not read those rows again); None for a full pass.
    proven_through: int | None = None
    #: ``verdict_id:fact_kind`` of each non-delivery the judge held while its payment was
    #: undecided, counted as ``paid-not-delivered`` by this pass (its row now settled).
    outcomes_filed: tuple[str, ...] = ()
    #: Rows the chain cannot be asked about (``unreadable_why``), also in ``unmatched_ledger``.
    unreadable: tuple[Unreadable, ...] = ()

    @property
    def pending(self) -> tuple[SpendRow, ...]:
        """Unmatched rows whose money may still move (reserved or signed): they hold cap."""
        return tuple(r for r in self.unmatched_ledger if r.status in OUTSTANDING)

    @property
    def clean(self) -> bool:
        """No money left the wallet unaudited and no audited spend is still pending.

        Failed rows are accounted for: their money provably did not move.
        """
        tampered = self.ledger_check is not None and not self.ledger_check.ok
        return not (
            self.unmatched_onchain or self.pending or self.unproven or self.unbacked or tampered
            or self.unreadable
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (``nib audit reconcile --json``)."""
        return {
            "wallet": self.wallet,
            "asset": self.asset,
            "from_block": self.from_block,
            "to_block": self.to_block,
            "clean": self.clean,
            "matched": [asdict(m) for m in self.matched],
            "unmatched_onchain": [asdict(t) for t in self.unmatched_onchain],
            "unmatched_ledger": [r.to_dict() for r in self.unmatched_ledger],
            "resolved": list(self.resolved),
            "unproven": [r.to_dict() for r in self.unproven],
            "ledger": None if self.ledger_check is None else self.ledger_check.to_dict(),
            "unbacked": [asdict(u) for u in self.unbacked],
            "rolled_back": list(self.rolled_back),
            "proven_through": self.proven_through,
            "outcomes_filed": list(self.outcomes_filed),
            "unreadable": [asdict(u) for u in self.unreadable],
        }


def reconcile(
    db_path: str | Path | Store,
    chain: ChainClient,
    usdc: str,
    wallet_address: str,
    from_block: int = 0,
    to_block: int | str = "latest",
    *,
    emit: Callable[[str, dict[str, object]], None] | None = None,
    clock: Callable[[], float] = time.time,
    verdict_standing: VerdictStanding | None = None,
    abandon: Abandon | None = None,
    checkpoint: bool = False,
    outcomes: Outcomes | None = None,
) -> ReconcileReport:
    """Compare the ledger's spend rows with on-chain Transfer logs; settle or fail what
    the chain has decided.

    Rows match by tx hash, or (x402 rows without one) by their authorization nonce via
    ``AuthorizationUsed``; a match also needs the same recipient and amount, and each log
    matches one row at most (a settled row keeps its log over a signed or failed row
    with the same hash). Matched rows that were not settled are settled. A signed x402
    row left unmatched whose authorization is unused on chain and expired on both the
    chain's clock and ``clock`` (the wall clock) is failed, and so is a signed transfer
    that can never land (``_fail_unlandable_transfers``: its nonce used by another
    transaction, its identical transaction settling another row, or reverted). Every such
    change is listed in ``resolved``. Ledger rows carry no block number, so a row whose tx lies
    outside the range shows as unmatched.

    With ``verdict_standing`` (the judge's ``verdict_standing``), every settled row must
    name a verdict the judge issued for its payload fingerprint and that was consumed;
    any other is listed in ``unbacked`` (a row forged with a made-up or reused verdict).

    With ``abandon`` (the wallet's ``abandon_authorization``), a signed x402 row reopened
    after a rollback (this pass or an earlier one) whose authorization is still unused is
    ended through it: cancelled on chain (listed in ``resolved``), so no stored signature
    stays usable until ``validBefore``.

    With ``outcomes`` (the judge's, reading the chain: ``judge.outcomes.Outcomes``), each
    outcome the judge holds for a non-delivery whose payment was undecided at its run's end
    is filed once its row is settled, counted once (listed in ``outcomes_filed``), and
    dropped once the row is cancelled or failed (``wallet.held_outcomes``).

    With ``checkpoint`` (``nib audit reconcile``), a pass to the latest block starts from
    the :class:`Checkpoint` the previous such pass over the same range left, and leaves
    its own (none when it found the ledger tampered with): it reads only the rows written
    since and the rows the checkpoint left open, and the chain's logs after its block, so
    its cost follows the activity since, not the ledger's size. A chain that no longer
    has the checkpoint's block (a rollback, a reorganisation, a restart from an older
    state) or a journal cut at its entry makes the pass a full one. Without it, every
    row and log of the range is read, and no checkpoint is read or written.
    """
    own = not isinstance(db_path, Store)
    store = Store(db_path) if not isinstance(db_path, Store) else db_path
    try:
        start, check, scope = _begin(store, chain, usdc, wallet_address, from_block, to_block,
                                     checkpoint=checkpoint and to_block == "latest")
        report, rows = _reconcile(store, scope, start, check, clock, abandon)
        if verdict_standing is not None:
            found = (unbacked_rows(Ledger(store), verdict_standing) if start is None else
                     unbacked_among(_reread(Ledger(store), rows), verdict_standing))
            report = replace(report, unbacked=found)
        if outcomes is not None:
            report = replace(report, outcomes_filed=file_held_outcomes(Ledger(store), outcomes))
        if checkpoint and to_block == "latest":
            head = start.since.seq if start is not None else check.entries
            _keep_checkpoint(store, scope, report, head)
        if emit is not None:
            emit("wallet.reconciled", _reconciled_event(report, ledger_ok=_ledger_ok(report)))
        return report
    finally:
        if own:
            store.close()


def _ledger_ok(report: ReconcileReport) -> bool:
    return report.ledger_check is None or report.ledger_check.ok


def _reconcile(
    store: Store,
    scope: Scope,
    start: _Start | None,
    ledger_check: LedgerCheck,
    clock: Callable[[], float],
    abandon: Abandon | None = None,
) -> tuple[ReconcileReport, list[str]]:
    """One pass; returns its report and the ids of the rows it looked at."""
    ledger = Ledger(store)
    chain, usdc, wallet = scope.chain, scope.usdc, scope.wallet.lower()
    rows, log_from = _rows(ledger, scope, start)
    position = {r.id: i for i, r in enumerate(rows)}
    unreadable = [Unreadable(r.id, r.run_id, r.status, why) for r in rows
                  if (why := unreadable_why(r)) is not None]
    left = {u.ledger_id for u in unreadable}
    kept = [r for r in rows if r.id in left]  # as read: this pass changes none of them
    rows = [r for r in rows if r.id not in left]
    last = scope.last
    pool = _transfers_out(chain, usdc, wallet, log_from, last)

    # An x402 row is tied to its authorization, not to whatever tx a seller named: the
    # token's AuthorizationUsed(wallet, nonce) says which tx (if any) carried it.
    by_nonce: dict[str, str] = {}
    if log_from <= last and any(r.kind == "x402" and r.auth_nonce for r in rows):
        by_nonce = _authorizations_used(chain, usdc, wallet, log_from, last)

    rolled_back = _reopen_rolled_back(ledger, chain, usdc, wallet, rows, pool, by_nonce)
    rows = [ledger.get(r.id) if r.id in rolled_back else r for r in rows]
    matched, unmatched, resolved, unproven = _match_rows(
        ledger, chain, usdc, wallet, rows, pool, by_nonce
    )

    cancelled = _cancel_rolled_back(unmatched, abandon)
    unmatched = [ledger.get(r.id) if r.id in cancelled else r for r in unmatched]
    expired = _close_cancelled_authorizations(ledger, chain, usdc, wallet, unmatched)
    expired += _fail_expired_authorizations(ledger, chain, usdc, wallet, unmatched, clock)
    claimed = {m.tx_hash: m.ledger_id for m in matched}
    expired += _fail_unlandable_transfers(ledger, chain, wallet, last, unmatched, claimed)
    resolved.extend(cancelled + expired)
    unmatched = [ledger.get(r.id) if r.id in expired else r for r in unmatched]

    unmatched_onchain = tuple(
        OnchainTransfer(t.tx_hash.lower(), t.block_number, t.log_index, t.recipient, int(t.value))
        for group in pool.values()
        for t in group
    )
    report = ReconcileReport(
        wallet=Web3.to_checksum_address(wallet),
        asset=Web3.to_checksum_address(usdc),
        from_block=scope.from_block,
        to_block=last,
        matched=tuple(sorted(matched, key=lambda m: (m.block_number, m.log_index))),
        unmatched_onchain=tuple(
            sorted(unmatched_onchain, key=lambda t: (t.block_number, t.log_index))
        ),
        unmatched_ledger=tuple(sorted(unmatched + kept,
                                      key=lambda r: position[r.id])),
        resolved=tuple(resolved),
        unproven=tuple(sorted(unproven, key=lambda r: position[r.id])),
        ledger_check=ledger_check,
        rolled_back=tuple(rolled_back),
        proven_through=None if start is None else start.checkpoint.block,
        unreadable=tuple(unreadable),
    )
    return report, [r.id for r in rows + kept]


def _rows(ledger: Ledger, scope: Scope, start: _Start | None) -> tuple[list[SpendRow], int]:
    """The rows a pass looks at and the first block whose logs it reads: every row (a full
    pass), or the rows the journal wrote since the checkpoint plus the ones it left open,
    by primary key."""
    if start is None:
        rows = [r for r in ledger.by_status(*_CLAIM_ORDER) if r.asset.lower() == scope.asset]
        return rows, scope.from_block
    ids = start.since.spend_ids | set(start.checkpoint.open)
    rows = [r for r in _reread(ledger, ids)
            if r.asset.lower() == scope.asset and r.status in _CLAIM_ORDER]
    return rows, start.checkpoint.block + 1


def _reread(ledger: Ledger, ids: Iterable[str]) -> list[SpendRow]:
    """The rows ``ids`` name as they stand now (by primary key), oldest first."""
    found: list[SpendRow] = []
    wanted = sorted(set(ids))
    for at in range(0, len(wanted), 500):
        chunk = wanted[at : at + 500]
        marks = ", ".join("?" for _ in chunk)
        found += [SpendRow.from_row(r) for r in ledger.store.query(
            f"SELECT * FROM {SPENDS} WHERE id IN ({marks})", tuple(chunk))]
    return sorted(found, key=lambda r: (r.created_at, r.id))


# ------------------------------------------------------------------------ checkpoint

#: Each reconciled scope's checkpoint (one row per chain, token, wallet).
CHECKPOINTS = "wallet_reconcile_checkpoints"
_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "reconcile's checkpoint: the block (and its hash) and journal entry (and its hash) "
        "a pass proved the ledger through, and the rows it left open",
        (
            f"""CREATE TABLE IF NOT EXISTS {CHECKPOINTS} (
                scope TEXT PRIMARY KEY,
                from_block {{int}} NOT NULL,
                block {{int}} NOT NULL,
                block_hash TEXT NOT NULL,
                journal_seq {{int}} NOT NULL,
                journal_hash TEXT NOT NULL,
                open_rows TEXT NOT NULL,
                saved_at {{real}} NOT NULL
            )""",
        ),
    ),
)


@dataclass(frozen=True)
class Scope:
    """What one pass reconciles: a wallet's spends in one token on one chain, from
    ``from_block`` to ``last`` (whose hash ``last_hash`` was read before any log)."""

    chain: ChainClient
    usdc: str
    wallet: str
    from_block: int
    last: int
    last_hash: str | None

    @property
    def asset(self) -> str:
        return self.usdc.lower()

    @property
    def key(self) -> str:
        return _scope_key(self.chain, self.usdc, self.wallet)


def _scope_key(chain: ChainClient, usdc: str, wallet: str) -> str:
    """The checkpoint's key: one per chain, token and wallet."""
    return f"{chain.chain_id()}:{usdc.lower()}:{wallet.lower()}"


def _scope(
    chain: ChainClient, usdc: str, wallet: str, from_block: int, to_block: int | str
) -> Scope:
    last = chain.block_number() if to_block == "latest" else int(to_block)
    return Scope(chain, usdc, wallet, from_block, last, _block_hash(chain, last))


def _block_hash(chain: ChainClient, number: int) -> str | None:
    """Block ``number``'s hash, or None when the chain has no such block (yet, or now)."""
    found = chain.call(
        "eth_getBlockByNumber", lambda: raw_rpc(chain.w3, "eth_getBlockByNumber", [hex(number), False])
    )
    return str(found["hash"]).lower() if isinstance(found, dict) and found.get("hash") else None


@dataclass(frozen=True)
class Checkpoint:
    """What a pass whose ledger check was clean proved, for the next pass to start from.

    Every row the journal had written by entry ``journal_seq`` (hash ``journal_hash``) and
    that the pass closed was accounted for by the chain through ``block`` (hash
    ``block_hash``): settled by a log in range or an authorization the token shows used,
    failed or cancelled as the chain decided. ``open`` lists the rows it could not close
    (pending, unproven, unbacked): the next pass reads them again. The block's hash is what
    makes skipping safe: a chain that lost or replaced any block up to ``block`` has
    another hash there (each block commits to its parent), and the next pass is full."""

    from_block: int
    block: int
    block_hash: str
    journal_seq: int
    journal_hash: str
    open: tuple[str, ...]


@dataclass(frozen=True)
class _Start:
    checkpoint: Checkpoint
    since: Since


def _begin(
    store: Store,
    chain: ChainClient,
    usdc: str,
    wallet: str,
    from_block: int,
    to_block: int | str,
    *,
    checkpoint: bool,
) -> tuple[_Start | None, LedgerCheck, Scope]:
    """Where a pass starts (its checkpoint, or None for a full pass), the ledger check and
    the range.

    The ledger is checked before any row is read or changed: a forged or moved row must
    not be "matched" into looking clean. The journal is read before the chain's head: the
    wallet records a payment settled only once its transaction is mined, so every row the
    journal holds as settled then was mined by the head read after, within the range the
    checkpoint then says is proven."""
    point = _load_checkpoint(store, _scope_key(chain, usdc, wallet)) if checkpoint else None
    if point is not None and point.from_block == from_block:
        since = verify_since(store, point.journal_seq, point.journal_hash)
        if since is not None:
            scope = _scope(chain, usdc, wallet, from_block, to_block)
            if point.block <= scope.last and _block_hash(chain, point.block) == point.block_hash:
                return _Start(point, since), since.check, scope
            log.warning("reconcile: block %d is not the one the checkpoint proved (the chain "
                        "lost or replaced blocks): a full pass", point.block)
    check = verify(store)
    return None, check, _scope(chain, usdc, wallet, from_block, to_block)


def _load_checkpoint(store: Store, key: str) -> Checkpoint | None:
    migrate(store.db, "wallet_reconcile", _MIGRATIONS)
    found = store.query(f"SELECT * FROM {CHECKPOINTS} WHERE scope = ?", (key,))
    if not found:
        return None
    row = found[0]
    return Checkpoint(cell_int(row["from_block"]), cell_int(row["block"]), str(row["block_hash"]),
                      cell_int(row["journal_seq"]), str(row["journal_hash"]),
                      tuple(json.loads(str(row["open_rows"]))))


def _keep_checkpoint(store: Store, scope: Scope, report: ReconcileReport, head: int) -> None:
    """Save where ``report``'s pass leaves the ledger proven; a pass that found the ledger
    tampered with leaves none (the next pass is full, and names it again), and one that
    found money gone without a row keeps the checkpoint it started from (the next pass
    reads those logs again and reports them again)."""
    migrate(store.db, "wallet_reconcile", _MIGRATIONS)
    check = report.ledger_check
    with store.transaction(durable=False) as tx:  # lost, the next pass is a full one
        if check is None or not check.ok or scope.last_hash is None:
            tx.execute(f"DELETE FROM {CHECKPOINTS} WHERE scope = ?", (scope.key,))
            return
        if report.unmatched_onchain:
            return
        held = {r.id for r in report.pending} | {r.id for r in report.unproven}
        held |= {u.ledger_id for u in report.unbacked} | set(report.rolled_back)
        held |= {u.ledger_id for u in report.unreadable}
        tx.execute(
            f"INSERT INTO {CHECKPOINTS} (scope, from_block, block, block_hash, journal_seq, "
            "journal_hash, open_rows, saved_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (scope) DO UPDATE SET from_block = excluded.from_block, "
            "block = excluded.block, block_hash = excluded.block_hash, "
            "journal_seq = excluded.journal_seq, journal_hash = excluded.journal_hash, "
            "open_rows = excluded.open_rows, saved_at = excluded.saved_at",
            (scope.key, scope.from_block, scope.last, scope.last_hash, head, check.head,
             json.dumps(sorted(held)), time.time()),
        )


def _transfers_out(
    chain: ChainClient, usdc: str, wallet_address: str, from_block: int, last: int
) -> dict[str, list[TransferLog]]:
    """The wallet's outgoing USDC Transfer logs in the range, by tx hash: the pool rows
    claim from (a claimed log is removed, so it cannot match twice)."""
    wallet = wallet_address.lower()
    pool: dict[str, list[TransferLog]] = {}
    if from_block > last:  # a chain that lost blocks can end before the range starts
        return pool
    for log in chain.transfer_logs(usdc, from_block, last, wallet_address, direction="out"):
        if log.sender.lower() == wallet:
            pool.setdefault(log.tx_hash.lower(), []).append(log)
    return pool


def _reopen_rolled_back(
    ledger: Ledger,
    chain: ChainClient,
    usdc: str,
    wallet: str,
    rows: list[SpendRow],
    pool: dict[str, list[TransferLog]],
    by_nonce: dict[str, str],
) -> list[str]:
    """Reopen (-> signed) the settled and cancelled rows whose recorded transaction (the
    settlement, or the cancel) the chain no longer has and whose authorization it does not
    show used or cancelled; return their ids.

    Only rows the range does not already prove are looked at (one receipt read each), and a
    row is reopened only when its transaction has no receipt at all: a transaction outside
    the range still has one. An x402 row whose authorization the chain shows used is not
    reopened (it is re-tied by the match that follows)."""
    reopened: list[str] = []
    for row in rows:
        closed = row.status in ("settled", "cancelled")
        if not closed or not row.tx_hash or row.tx_hash.lower() in pool:
            continue
        if row.kind == "x402" and row.auth_nonce and (
            row.auth_nonce.lower() in by_nonce
            or _authorization_state(chain, usdc, wallet, row.auth_nonce)
        ):
            continue
        if chain.receipt(row.tx_hash) is not None:
            continue
        note = (
            f"{_ROLLED_BACK}: its transaction {row.tx_hash} is no longer on the chain (a restart "
            "from an older state or a reorganisation); reopened until the chain decides"
        )
        if _move_if(ledger, row.id, row.status, "signed", note):
            reopened.append(row.id)
    return reopened


def _cancel_rolled_back(unmatched: list[SpendRow], abandon: Abandon | None) -> list[str]:
    """End through ``abandon`` (the wallet's one cancel path) every signed x402 row that a
    rollback reopened (its note says so; the match before left it unmatched, so the chain
    has not used its authorization in the range); return the ids no longer signed.

    ``abandon`` reads the chain again first: used meanwhile, the row is settled; expired,
    failed; otherwise ``cancelAuthorization`` is mined and the row is ``cancelled`` with
    that transaction. A cancel that could not be sent leaves the row signed (its note still
    names the rollback), so the next reconcile tries again."""
    if abandon is None:
        return []
    closed: list[str] = []
    for row in unmatched:
        if row.status != "signed" or row.kind != "x402" or not row.auth_nonce:
            continue
        if _ROLLED_BACK not in (row.note or ""):
            continue
        why = f"{_ROLLED_BACK}: its settlement is no longer on the chain; reconcile ends it"
        try:
            ended = abandon(row.id, why)
        except Exception as exc:  # the wallet service down: the row stays pending, reported
            log.warning("cancel of rolled-back ledger row %s not done: %s", row.id, exc)
            continue
        if ended.status != "signed":
            closed.append(row.id)
    return closed


def _match_rows(
    ledger: Ledger,
    chain: ChainClient,
    usdc: str,
    wallet: str,
    rows: list[SpendRow],
    pool: dict[str, list[TransferLog]],
    by_nonce: dict[str, str],
) -> tuple[list[Match], list[SpendRow], list[str], list[SpendRow]]:
    """(matched, unmatched, resolved, unproven): each row claims the transfer log of its
    transaction from ``pool`` (claimed logs leave it); a row the chain proves settled is
    marked so (resolved); a settled x402 row whose authorization no tx used is unproven."""
    matched: list[Match] = []
    unmatched: list[SpendRow] = []
    resolved: list[str] = []
    # sorted() is stable: within one status, rows keep their created_at order.
    unproven: list[SpendRow] = []
    for row in sorted(rows, key=lambda r: _CLAIM_ORDER.index(r.status)):
        used_in = by_nonce.get((row.auth_nonce or "").lower(), "").lower()
        tied = row.kind == "x402" and bool(row.auth_nonce)
        tx = used_in if tied else (row.tx_hash or "").lower()
        misattributed = tied and bool(row.tx_hash) and row.tx_hash != used_in
        if tied and row.status == "settled" and not used_in:
            if _authorization_state(chain, usdc, wallet, str(row.auth_nonce)):
                unmatched.append(row)  # used, but outside the range: like any settled row
            else:
                unproven.append(row)  # settled under a tx that never carried it
            continue
        hit = _claim(pool.get(tx, []), row) if tx and row.status != "reserved" else None
        if hit is None:
            unmatched.append(row)
            continue
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
        if row.status != "settled" or row.tx_hash is None or misattributed:
            note = "settled by reconcile" if row.status != "settled" else None
            if misattributed:
                note = (
                    f"re-tied by reconcile to {tx}, which used the authorization "
                    f"(recorded tx {row.tx_hash} did not)"
                )
            ledger.transition(row.id, "settled", tx_hash=tx, note=note)
            resolved.append(row.id)

    return matched, unmatched, resolved, unproven


def _reconciled_event(report: ReconcileReport, *, ledger_ok: bool) -> dict[str, object]:
    """The ``wallet.reconciled`` event: the range, whether it is clean, and what is not."""
    return {
        "wallet": report.wallet,
        "from_block": report.from_block,
        "to_block": report.to_block,
        "clean": report.clean,
        "matched": len(report.matched),
        "unmatched_onchain": [asdict(t) for t in report.unmatched_onchain],
        "unmatched_ledger": [{"id": r.id, "status": r.status} for r in report.unmatched_ledger],
        "resolved": list(report.resolved),
        "unproven": [r.id for r in report.unproven],
        "ledger_ok": ledger_ok,
        "outcomes_filed": list(report.outcomes_filed),
        "unreadable": [u.ledger_id for u in report.unreadable],
    }


def _claim(candidates: list[TransferLog], row: SpendRow) -> TransferLog | None:
    """Take (remove) the first unclaimed log that pays ``row``'s recipient its amount."""
    for log in candidates:
        if log.recipient.lower() == row.recipient.lower() and int(log.value) == row.amount:
            candidates.remove(log)
            return log
    return None


def _fail_expired_authorizations(
    ledger: Ledger,
    chain: ChainClient,
    usdc: str,
    wallet: str,
    unmatched: list[SpendRow],
    clock: Callable[[], float],
) -> list[str]:
    """Fail signed x402 rows whose authorization expired unused; return their ids.

    The chain's timestamp is read before ``authorizationState``: unused at a block that is
    already past validBefore means unused forever. A used authorization stays ``signed``
    (its money moved outside the range; reconcile from an earlier block to settle it).
    """
    candidates = [
        r
        for r in unmatched
        if r.status == "signed" and r.kind == "x402" and r.auth_nonce and r.valid_before is not None
    ]
    if not candidates:
        return []
    chain_time = chain.block_timestamp("latest")
    wall_time = clock()
    failed: list[str] = []
    for row in candidates:
        valid_before, nonce = int(row.valid_before or 0), str(row.auth_nonce)
        if not authorization_expired(valid_before, chain_time=chain_time, wall_time=wall_time):
            continue
        if _authorization_state(chain, usdc, wallet, nonce):
            continue
        note = (
            f"authorization expired unused at {valid_before} (chain time {chain_time}, "
            f"wall clock {int(wall_time)}); released"
        )
        if _fail_if_signed(ledger, row.id, note):
            failed.append(row.id)
    return failed


def _close_cancelled_authorizations(
    ledger: Ledger, chain: ChainClient, usdc: str, wallet: str, unmatched: list[SpendRow]
) -> list[str]:
    """Mark cancelled the signed x402 rows whose authorization the chain shows cancelled
    (``AuthorizationCanceled``: the wallet's cancel mined, its record lost, e.g. to a crash
    between the receipt and the write); return their ids. Such a row holds no money."""
    closed: list[str] = []
    for row in unmatched:
        if row.status != "signed" or row.kind != "x402" or not row.auth_nonce:
            continue
        if not _authorization_state(chain, usdc, wallet, row.auth_nonce):
            continue
        ended = authorization_ended_in(chain, usdc, wallet, row.auth_nonce)
        if ended is None or ended[0] != "cancelled":
            continue
        note = f"authorization found cancelled on chain in {ended[1]} by reconcile"
        with ledger.store.transaction() as conn:
            current = conn.execute(f"SELECT status FROM {SPENDS} WHERE id = ?", (row.id,)).fetchone()
            if current is None or current[0] != "signed":
                continue
            transition_in(conn, row.id, "cancelled", now=ledger.clock(), tx_hash=ended[1], note=note)
        closed.append(row.id)
    return closed


def _fail_unlandable_transfers(
    ledger: Ledger,
    chain: ChainClient,
    wallet: str,
    last: int,
    unmatched: list[SpendRow],
    claimed: dict[str, str],
) -> list[str]:
    """Fail signed transfer rows whose transaction can never move money of its own;
    return their ids. ``claimed``: tx hash -> the row this pass matched it to.

    Not mined, and the wallet's nonce count at ``last`` is past the row's nonce: another
    transaction used that nonce, so this one can never be mined (a signature dropped
    before its broadcast, a worker that died holding it). The count is read before the
    receipts, so "not mined" is not a race with our own transaction landing; reconcile
    to a block behind the head on a chain that can reorganise. Also failed: a row whose
    identical transaction (same bytes, same hash) settled another row, and a reverted
    one (its gas is metered only by the sender that saw the receipt). A row without a
    recorded nonce, or whose nonce is still unused, stays pending: whoever holds the
    signed bytes may still broadcast it.
    """
    candidates = [
        r for r in unmatched if r.status == "signed" and r.kind != "x402" and r.tx_hash
    ]
    if not candidates:
        return []
    sender = Web3.to_checksum_address(wallet)
    used = int(
        chain.call(
            "eth_getTransactionCount",
            lambda: chain.w3.eth.get_transaction_count(sender, last),
        )
    )
    failed: list[str] = []
    for row in candidates:
        tx = str(row.tx_hash).lower()
        receipt = chain.receipt(tx)
        if receipt is None:
            if row.tx_nonce is None or row.tx_nonce >= used:
                continue
            note = (
                f"never mined: its nonce {row.tx_nonce} was used by another transaction "
                f"(the wallet had sent {used} by block {last}); it can never land"
            )
        elif tx in claimed:
            note = (
                f"the same transaction as ledger row {claimed[tx]}, which it settled; no "
                "money moved for this row"
            )
        elif receipt.status != 1:
            note = f"reverted in block {receipt.block_number}"
        else:
            continue  # mined, its log outside the range or not this row's: unmatched
        if _fail_if_signed(ledger, row.id, note):
            failed.append(row.id)
    return failed


def _fail_if_signed(ledger: Ledger, spend_id: str, note: str) -> bool:
    """Fail ``spend_id`` if it is still signed; whoever changed it since (a settlement)
    knows better. Returns whether it was failed."""
    return _move_if(ledger, spend_id, "signed", "failed", note)


def _move_if(ledger: Ledger, spend_id: str, current: str, to: str, note: str) -> bool:
    """Move ``spend_id`` from ``current`` to ``to`` in one transaction, only if it is still
    ``current`` (another writer may have moved it since it was read)."""
    with ledger.store.transaction() as conn:
        found = conn.execute(f"SELECT status FROM {SPENDS} WHERE id = ?", (spend_id,)).fetchone()
        if found is None or found[0] != current:
            return False
        transition_in(conn, spend_id, to, now=ledger.clock(), note=note)
    return True


def _authorization_state(chain: ChainClient, usdc: str, wallet: str, nonce: str) -> bool:
    """Whether the token has consumed ``wallet``'s authorization ``nonce`` (at latest)."""
    return chain.authorization_state(usdc, wallet, nonce)


def authorization_used_in(chain: ChainClient, usdc: str, wallet: str, nonce: str) -> str | None:
    """The tx that used ``wallet``'s EIP-3009 authorization ``nonce``, or None if unused."""
    if not _authorization_state(chain, usdc, wallet, nonce):
        return None
    found = _authorizations_used(chain, usdc, wallet.lower(), 0, "latest", nonce=nonce)
    return found.get(nonce.lower())


def authorization_ended_in(
    chain: ChainClient, usdc: str, wallet: str, nonce: str
) -> tuple[Literal["used", "cancelled"], str] | None:
    """How ``wallet``'s authorization ``nonce`` ended on chain and in which tx: used (the
    money moved) or cancelled (``AuthorizationCanceled``); None while it is still open."""
    if not _authorization_state(chain, usdc, wallet, nonce):
        return None
    for event, topic in (("used", AUTHORIZATION_USED_TOPIC), ("cancelled", AUTHORIZATION_CANCELED_TOPIC)):
        found = _authorizations_used(chain, usdc, wallet.lower(), 0, "latest", nonce=nonce,
                                     topic=topic)
        if nonce.lower() in found:
            return event, found[nonce.lower()]  # type: ignore[return-value]
    return None


def _authorizations_used(
    chain: ChainClient,
    usdc: str,
    wallet: str,
    from_block: int,
    to_block: int | Literal["latest"],
    *,
    nonce: str | None = None,
    topic: str = AUTHORIZATION_USED_TOPIC,
) -> dict[str, str]:
    """Map authorization nonce (0x hex) -> tx hash for the wallet's used authorizations
    (``topic``: or its cancelled ones)."""
    topic_wallet = "0x" + wallet.removeprefix("0x").rjust(64, "0")
    topics: list[str] = [topic, topic_wallet]
    if nonce is not None:
        topics.append(nonce.lower())
    params: FilterParams = {
        "address": Web3.to_checksum_address(usdc),
        "fromBlock": from_block,
        "toBlock": to_block,
        "topics": topics,
    }
    found = chain.call("eth_getLogs", lambda: chain.w3.eth.get_logs(params))
    out: dict[str, str] = {}
    for log in found:
        nonce = "0x" + bytes(log["topics"][2]).hex()
        out[nonce.lower()] = "0x" + bytes(log["transactionHash"]).hex()
    return out
