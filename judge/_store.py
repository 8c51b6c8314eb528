"""The judge's handle on the shared SQLite file: one connection, WAL, atomic sections.

The same shape as the wallet's and the agent's store helpers (connect, then
``BEGIN IMMEDIATE`` sections under a process-local lock), kept here because the judge
imports nothing of nib's; a second storage backend ports all three the same way.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils


def connect(path: str | Path) -> sqlite_utils.Database:
    """Open ``path`` (or ``":memory:"``) the way every nib package does."""
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    if str(path) != ":memory:":
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=30000")
    return sqlite_utils.Database(conn)


class Store:
    """One connection plus the lock that makes sections atomic across threads."""

    def __init__(self, db: str | Path | sqlite_utils.Database | None = None) -> None:
        self.db = db if isinstance(db, sqlite_utils.Database) else connect(db or ":memory:")
        self.lock = threading.RLock()

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
