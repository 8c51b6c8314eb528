"""The wallet's handle on the shared SQLite file: one connection, WAL, atomic sections.

Atomic sections are ``BEGIN IMMEDIATE`` transactions (safe across processes) taken under
a process-local lock (one connection is shared by threads, and SQLite transactions are
per connection, so threads must not interleave inside one).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

SPENDS = "wallet_spends"
USED_VERDICTS = "wallet_used_verdicts"
GAS = "wallet_gas"
#: Columns added to ``wallet_spends`` after its first release, with their SQL types.
#: Files written by an older nib gain them on open; old rows read them as NULL.
ADDED_SPEND_COLUMNS: tuple[tuple[str, str], ...] = (
    ("valid_before", "INTEGER"),
    ("gas_hold", "INTEGER NOT NULL DEFAULT 0"),
)


def connect(path: str | Path) -> sqlite_utils.Database:
    """Open ``path`` the way every nib package does (see the team contract)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=30000")
    return sqlite_utils.Database(conn)


def ensure_tables(db: sqlite_utils.Database) -> None:
    """Create the wallet's tables and indexes if they are missing (idempotent)."""
    db.execute(
        f"""CREATE TABLE IF NOT EXISTS {SPENDS} (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            verdict_id TEXT,
            payload_fingerprint TEXT,
            kind TEXT NOT NULL,
            asset TEXT NOT NULL,
            amount INTEGER NOT NULL,
            recipient TEXT NOT NULL,
            chain_id INTEGER NOT NULL,
            status TEXT NOT NULL,
            tx_hash TEXT,
            auth_nonce TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            note TEXT NOT NULL DEFAULT '',
            valid_before INTEGER,
            gas_hold INTEGER NOT NULL DEFAULT 0
        )"""
    )
    _add_missing_columns(db, SPENDS, ADDED_SPEND_COLUMNS)
    db.execute(f"CREATE INDEX IF NOT EXISTS idx_{SPENDS}_run ON {SPENDS}(run_id, status)")
    db.execute(f"CREATE INDEX IF NOT EXISTS idx_{SPENDS}_tx ON {SPENDS}(tx_hash)")
    db.execute(
        f"""CREATE TABLE IF NOT EXISTS {USED_VERDICTS} (
            verdict_id TEXT PRIMARY KEY,
            used_at REAL NOT NULL,
            run_id TEXT NOT NULL
        )"""
    )
    db.execute(
        f"""CREATE TABLE IF NOT EXISTS {GAS} (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            spend_id TEXT,
            tx_hash TEXT,
            wei INTEGER NOT NULL,
            usdc INTEGER NOT NULL,
            created_at REAL NOT NULL
        )"""
    )
    db.execute(f"CREATE INDEX IF NOT EXISTS idx_{GAS}_run ON {GAS}(run_id)")


def _add_missing_columns(
    db: sqlite_utils.Database, table: str, columns: tuple[tuple[str, str], ...]
) -> None:
    """``ALTER TABLE ... ADD COLUMN`` for each of ``columns`` the table lacks.

    The check is repeated inside ``BEGIN IMMEDIATE`` so two processes opening an old file
    at once cannot both add the same column.
    """

    def missing() -> list[tuple[str, str]]:
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})").fetchall()}
        return [(name, kind) for name, kind in columns if name not in have]

    if not missing():
        return
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        for name, kind in missing():
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class Store:
    """One connection to the SQLite file plus the lock that makes sections atomic."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.db = connect(self.path)
        self.lock = threading.RLock()
        with self.lock:
            ensure_tables(self.db)

    @property
    def conn(self) -> sqlite3.Connection:
        return self.db.conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An exclusive write section: ``BEGIN IMMEDIATE`` ... ``COMMIT`` (rollback on error)."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[dict[str, Any]]:
        """Rows of ``sql`` as plain dicts (column -> value)."""
        with self.lock:
            cur = self.conn.execute(sql, params)
            cols = [c[0] for c in cur.description]
            return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def close(self) -> None:
        with self.lock:
            self.conn.close()
