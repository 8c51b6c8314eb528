"""The ledger's hash chain: every write to the wallet's tables is also journalled here.

Each journal entry commits to the one before it (``hash = sha256(prev_hash + entry)``),
inside the same transaction as the write it records. :func:`verify` walks the chain and
replays it into the rows the tables should hold, so an edited, deleted, forged or moved
ledger row, a deleted used verdict (which would re-enable a replay) or an edited journal
entry is named. ``nib audit verify`` prints the result; reconcile runs it too.

Limit: deleting the newest journal entries *together with* their rows leaves a shorter
chain that still verifies; the head (``entries``, ``head``) is printed so it can be
compared with a copy kept elsewhere. What such a cut could hide is caught outside the
file: a settled payment's Transfer is on chain with no row (reconcile is not clean), and
its verdict stays consumed in the judge's record (no replay)
(``tests/wallet/test_wallet_reconcile.py::test_cutting_the_newest_rows_...``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from judge.storage import Tx, cell_int
from wallet._store import Store
from wallet._tables import GAS, JOURNAL, SPENDS, USED_VERDICTS
from wallet.totals import check as check_totals

__all__ = [
    "GENESIS",
    "LedgerCheck",
    "Since",
    "append",
    "journal_spend",
    "verify",
    "verify_ledger",
    "verify_since",
]

#: The ``prev`` of the first entry.
GENESIS = "0" * 64

EntryOp = Literal["verdict", "spend", "set", "payment", "gas"]
"""verdict: a verdict was consumed; spend: a ledger row was inserted; set: a row's
mutable fields after a transition; payment: the digest of a stored payment header;
gas: a gas row was inserted."""

#: Fields of a spend row a transition may change (``set`` entries carry all of them).
_MUTABLE = (
    "status", "tx_hash", "auth_nonce", "valid_before", "note", "updated_at", "tx_nonce", "gas_hold",
)


def _digest(prev: str, body: str) -> str:
    return hashlib.sha256((prev + body).encode()).hexdigest()


def _dumps(entry: dict[str, object]) -> str:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"), allow_nan=False)


def append(conn: Tx, op: EntryOp, data: dict[str, object]) -> None:
    """Append one entry inside the caller's open write section (it holds the wallet lock,
    so entries are appended one at a time, across processes too)."""
    # The head by its primary key (MAX(seq) is one index probe): never a scan of the chain.
    last = conn.scalar(
        f"SELECT hash FROM {JOURNAL} WHERE seq = (SELECT MAX(seq) FROM {JOURNAL})"
    )
    prev = str(last) if last else GENESIS
    body = _dumps({"op": op, **data})
    conn.execute(
        f"INSERT INTO {JOURNAL} (entry, prev, hash) VALUES (?, ?, ?)",
        (body, prev, _digest(prev, body)),
    )


def journal_spend(conn: Tx, spend_id: str, op: EntryOp = "set") -> None:
    """Journal row ``spend_id`` as it now stands: all columns (``spend``) or the mutable
    ones (``set``); the payment header only as a digest (it is a bearer authorization)."""
    found = conn.rows(f"SELECT * FROM {SPENDS} WHERE id = ?", (spend_id,))
    if not found:
        return
    row = _columns(found[0])
    if op == "spend":
        append(conn, "spend", {"row": _public(row)})
    elif op == "payment":
        append(conn, "payment", {"id": spend_id, "sha256": _payment_digest(row)})
    else:
        append(conn, "set", {"id": spend_id, "fields": {k: row[k] for k in _MUTABLE}})


def _columns(row: dict[str, object]) -> dict[str, object]:
    """A stored row without PostgreSQL's explicit ``rowid`` (SQLite's is implicit)."""
    return {k: v for k, v in row.items() if k != "rowid"}


def _public(row: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in row.items() if k != "x402_payment"}


def _payment_digest(row: dict[str, object]) -> str | None:
    value = row.get("x402_payment")
    return None if value is None else hashlib.sha256(str(value).encode()).hexdigest()


@dataclass(frozen=True)
class LedgerCheck:
    """What :func:`verify` found. ``ok`` means the chain is intact and the tables are
    exactly what it records; ``problems`` names each difference."""

    entries: int
    head: str
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "entries": self.entries,
            "head": self.head,
            "problems": list(self.problems),
        }


def verify_ledger(db_path: str | Path) -> LedgerCheck:
    """:func:`verify` on the database file at ``db_path`` (``nib audit verify``)."""
    store = Store(db_path)
    try:
        return verify(store)
    finally:
        store.close()


def verify(store: Store) -> LedgerCheck:
    """Check the journal's hash chain, then compare its replay with the wallet's tables."""
    with store.transaction() as tx:  # one consistent snapshot
        chain = [
            (cell_int(r["seq"]), str(r["entry"]), str(r["prev"]), str(r["hash"]))
            for r in tx.rows(f"SELECT seq, entry, prev, hash FROM {JOURNAL} ORDER BY seq")
        ]
        spends = _table(tx, SPENDS)
        verdicts = _table(tx, USED_VERDICTS, key="verdict_id")
        gas = _table(tx, GAS)
        drifted = check_totals(tx)
    want = _Replay(GENESIS, 1)
    want.walk(chain)
    problems = want.problems
    problems += _compare_spends(want.spends, want.payments, spends)
    problems += _compare("used verdict", want.verdicts, verdicts, deleted_means=(
        "deleted: the verdict could be presented again"
    ))
    problems += _compare("gas row", want.gas, gas, deleted_means="deleted: spend under-counted")
    if not problems:  # an edited row moves the sums too; name the row, not its echo
        problems += drifted
    return LedgerCheck(len(chain), want.prev, tuple(problems))


@dataclass(frozen=True)
class Since:
    """What :func:`verify_since` found after a known entry: the check of the entries since,
    the ledger rows they wrote (``spend_ids``), and the head it read (``seq``, ``check.head``)."""

    check: LedgerCheck
    spend_ids: frozenset[str]
    seq: int


def verify_since(store: Store, seq: int, head: str) -> Since | None:
    """The journal after entry ``seq``, checked as :func:`verify` checks it, for the rows
    those entries wrote only; None when entry ``seq`` no longer has hash ``head`` (the
    journal was cut or edited there: only the full :func:`verify` can say what changed).

    Reads the entries since ``seq`` and the rows they name, by primary key: its cost is
    the writes since, not the ledger's size. Rows no entry since ``seq`` names are not
    compared (``nib audit verify`` walks everything)."""
    with store.transaction() as tx:  # one consistent snapshot
        anchor = tx.scalar(f"SELECT hash FROM {JOURNAL} WHERE seq = ?", (seq,)) if seq else GENESIS
        if anchor is None or str(anchor) != head:
            return None
        chain = [
            (cell_int(r["seq"]), str(r["entry"]), str(r["prev"]), str(r["hash"]))
            for r in tx.rows(
                f"SELECT seq, entry, prev, hash FROM {JOURNAL} WHERE seq > ? ORDER BY seq", (seq,)
            )
        ]
        want = _Replay(head, seq + 1, partial=True)
        want.walk(chain)
        spends = _by_key(tx, SPENDS, "id", want.spends.keys() | want.payments.keys())
        verdicts = _by_key(tx, USED_VERDICTS, "verdict_id", want.verdicts.keys())
        gas = _by_key(tx, GAS, "id", want.gas.keys())
    problems = want.problems + _compare_spends(
        want.spends, want.payments, spends, since_checkpoint=True
    )
    problems += _compare("used verdict", want.verdicts, verdicts, deleted_means=(
        "deleted: the verdict could be presented again"
    ))
    problems += _compare("gas row", want.gas, gas, deleted_means="deleted: spend under-counted")
    last = chain[-1][0] if chain else seq
    return Since(LedgerCheck(len(chain), want.prev, tuple(problems)),
                 frozenset(want.spends.keys() | want.payments.keys()), last)


class _Replay:
    """The tables a run of journal entries says should exist, and what breaks the chain.

    ``partial``: the run starts after entries not read, so a ``set`` may name a row whose
    ``spend`` entry came before; it is kept with the fields it sets."""

    def __init__(self, prev: str, expected_seq: int, *, partial: bool = False) -> None:
        self.prev, self.expected_seq, self.partial = prev, expected_seq, partial
        self.problems: list[str] = []
        self.spends: dict[str, dict[str, object]] = {}
        self.payments: dict[str, str | None] = {}
        self.verdicts: dict[str, dict[str, object]] = {}
        self.gas: dict[str, dict[str, object]] = {}

    def walk(self, chain: list[tuple[int, str, str, str]]) -> None:
        for seq, body, entry_prev, entry_hash in chain:
            if seq != self.expected_seq:
                self.problems.append(
                    f"journal entries {self.expected_seq}..{seq - 1} are missing (deleted); "
                    f"the chain continues at entry {seq}"
                )
            self.expected_seq = seq + 1
            if entry_prev != self.prev or entry_hash != _digest(entry_prev, body):
                self.problems.append(
                    f"journal entry {seq} does not chain: it was edited, or an entry before "
                    "it was removed (its hash does not commit to its content and predecessor)"
                )
            self.prev = entry_hash
            self._apply(body)

    def _apply(self, body: str) -> None:
        entry = json.loads(body)
        op = entry.get("op")
        if op == "spend":
            self.spends[entry["row"]["id"]] = dict(entry["row"])
        elif op == "set" and (entry["id"] in self.spends or self.partial):
            self.spends.setdefault(entry["id"], {"id": entry["id"]}).update(entry["fields"])
        elif op == "payment":
            self.payments[entry["id"]] = entry["sha256"]
        elif op == "verdict":
            self.verdicts[entry["verdict_id"]] = {
                k: entry[k] for k in ("verdict_id", "used_at", "run_id")
            }
        elif op == "gas":
            self.gas[entry["row"]["id"]] = dict(entry["row"])


def _by_key(
    tx: Tx, table: str, key: str, wanted: Iterable[str]
) -> dict[str, dict[str, object]]:
    """The rows of ``table`` whose ``key`` is one of ``wanted``, by primary key."""
    out: dict[str, dict[str, object]] = {}
    ids = sorted(wanted)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        for r in tx.rows(f"SELECT * FROM {table} WHERE {key} IN ({marks})", tuple(chunk)):
            out[str(r[key])] = _columns(r)
    return out


def _table(tx: Tx, table: str, key: str = "id") -> dict[str, dict[str, object]]:
    return {str(r[key]): _columns(r) for r in tx.rows(f"SELECT * FROM {table}")}


def _compare_spends(
    want: dict[str, dict[str, object]],
    payments: dict[str, str | None],
    have: dict[str, dict[str, object]],
    *,
    since_checkpoint: bool = False,
) -> list[str]:
    """The ledger rows ``have`` against the journal's replay ``want`` (and the payment
    header digests ``payments``).

    ``since_checkpoint``: the replay holds only the entries since a checkpoint, so a row
    is known by the fields those entries set, a header only when an entry since stored
    it, and rows no entry since names are not compared (nor called forged)."""
    problems: list[str] = []
    ids = sorted(want.keys() | payments.keys()) if since_checkpoint else list(want)
    for spend_id in ids:
        expected = want.get(spend_id, {})
        found = have.get(spend_id)
        if found is None:
            problems.append(
                f"ledger row {spend_id}, written since the checkpoint, was deleted from {SPENDS}"
                if since_checkpoint else
                f"ledger row {spend_id} (run {expected['run_id']}, {expected['amount']} "
                f"atomic units, {expected['status']}) was deleted from {SPENDS}"
            )
            continue
        if not since_checkpoint and found["run_id"] != expected["run_id"]:
            problems.append(
                f"ledger row {spend_id} was moved from run {expected['run_id']} to run "
                f"{found['run_id']} (that run's cap would be freed)"
            )
        for name, value in _public(found).items():
            named = since_checkpoint or name != "run_id"  # a move is named above
            if named and name in expected and expected[name] != value:
                problems.append(
                    f"ledger row {spend_id}: {name} is {value!r} in {SPENDS}, the journal "
                    f"records {expected[name]!r} (edited)"
                )
        header_known = not since_checkpoint or spend_id in payments
        if header_known and _payment_digest(found) != payments.get(spend_id):
            problems.append(f"ledger row {spend_id}: its stored payment header was edited")
    if since_checkpoint:
        return problems
    for spend_id, found in have.items():
        if spend_id not in want:
            problems.append(
                f"ledger row {spend_id} (run {found['run_id']}, {found['amount']} atomic "
                f"units to {found['recipient']}, {found['status']}) is not in the journal: "
                "forged, or written outside the wallet"
            )
    return problems


def _compare(
    what: str,
    want: dict[str, dict[str, object]],
    have: dict[str, dict[str, object]],
    *,
    deleted_means: str,
) -> list[str]:
    problems: list[str] = []
    for key, expected in want.items():
        found = have.get(key)
        if found is None:
            problems.append(f"{what} {key} (run {expected.get('run_id')}) was {deleted_means}")
        elif found != expected:
            diff = sorted(k for k in expected if found.get(k) != expected[k])
            problems.append(f"{what} {key}: {', '.join(diff)} edited")
    problems += [
        f"{what} {key} (run {found.get('run_id')}) is not in the journal: forged"
        for key, found in have.items()
        if key not in want
    ]
    return problems
