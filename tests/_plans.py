"""Query plans of the statements a code path runs, for the tests that hold the paid path
to flat cost: every statement it sends is recorded at the storage seam, then each is
EXPLAINed (SQLite's ``EXPLAIN QUERY PLAN``, PostgreSQL's ``EXPLAIN`` with sequential
scans priced out), and any that reads a whole table is named with its plan.

A test built on this fails for a query nobody listed: the class (a per-request scan),
not one example.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from judge.storage import Cursor, Database

#: Statements that read no table rows worth planning (transaction control, the lock rows).
_SKIP_PREFIXES = ("BEGIN", "COMMIT", "ROLLBACK", "PRAGMA", "SET", "SAVEPOINT", "RELEASE")
_SKIP_TABLES = ("nib_locks", "nib_schema")


@dataclass
class Recorded:
    """The statements a section sent to one database, in order."""

    db: Database
    statements: list[tuple[str, tuple[object, ...]]] = field(default_factory=list)
    #: The connection's synchronous level when recording began (SQLite; 0 elsewhere).
    level: int = 0

    def commits(self) -> list[bool]:
        """Whether each commit in order waited for the disk: COMMIT, or a write outside a
        transaction, at the SQLite level then in effect (FULL or EXTRA: synced), or on
        PostgreSQL unless its transaction set ``synchronous_commit = off``."""
        level, in_tx, relaxed, out = self.level, False, False, []
        for sql, _ in self.statements:
            head = sql.split(None, 1)[0].upper() if sql.strip() else ""
            if any(t in sql for t in _SKIP_TABLES):
                continue  # the storage seam's own bookkeeping (a lock row made once)
            if sql.startswith("PRAGMA synchronous="):
                level = int(sql.split("=", 1)[1])
            elif sql == "SET LOCAL synchronous_commit = off":
                relaxed = True
            elif head == "BEGIN":
                in_tx, relaxed = True, False
            elif head in ("COMMIT", "INSERT", "UPDATE", "DELETE") and (head == "COMMIT" or not in_tx):
                synced = level >= 2 if self.db.dialect == "sqlite" else not relaxed
                out.append(synced)
                in_tx = False if head == "COMMIT" else in_tx
        return out

    def touching(self, table: str) -> list[str]:
        """The statements that name ``table`` (as a whole word)."""
        word = re.compile(rf"\b{re.escape(table)}\b")
        return [sql for sql, _ in self.statements if word.search(sql)]

    def full_scans(self) -> list[str]:
        """Each recorded statement whose plan reads a whole table, with that plan."""
        found = []
        seen: set[str] = set()
        for sql, params in self.statements:
            text = " ".join(sql.split())
            if text in seen or text.upper().startswith(_SKIP_PREFIXES):
                continue
            if any(t in text for t in _SKIP_TABLES):
                continue
            seen.add(text)
            plan = explain(self.db, text, params)
            if scans_a_table(self.db, plan):
                found.append(f"{text}\n    plan: {' | '.join(plan)}")
        return found


@contextmanager
def recording(*dbs: Database) -> Iterator[list[Recorded]]:
    """Record every statement sent to ``dbs`` while the block runs."""
    logs = [Recorded(db, level=getattr(db, "_level", 0)) for db in dbs]
    originals = []
    for log in logs:
        original = log.db._execute

        def execute(sql: str, params: Sequence[object], _o=original, _log=log) -> Cursor:  # type: ignore[no-untyped-def]
            _log.statements.append((sql, tuple(params)))
            return _o(sql, params)

        originals.append(original)
        log.db._execute = execute  # type: ignore[method-assign]
    try:
        yield logs
    finally:
        for log in logs:
            del log.db._execute  # the instance attribute; the method shows again


def explain(db: Database, sql: str, params: Sequence[object]) -> list[str]:
    """The plan of ``sql`` as lines of text, full reads marked ``FULL READ`` (nothing is
    executed)."""
    with db.lock:
        conn = db.conn
        if isinstance(conn, sqlite3.Connection):
            rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}", tuple(params)).fetchall()
            return [
                f"FULL READ {r[3]}" if _sqlite_scan(str(r[3])) else str(r[3]) for r in rows
            ]
        return _pg_plan(conn, sql, params)


def scans_a_table(db: Database, plan: list[str]) -> bool:
    """Whether ``plan`` reads every row of a table or of an index."""
    return any(line.startswith("FULL READ") for line in plan)


def _sqlite_scan(detail: str) -> bool:
    # SEARCH: an index range or key; SCAN: every row (of the table or a covering index).
    return detail.startswith("SCAN ") and not detail.startswith("SCAN CONSTANT ROW")


def _pg_plan(conn: object, sql: str, params: Sequence[object]) -> list[str]:
    """PostgreSQL's plan with sequential scans priced out, so a ``Seq Scan`` is left only
    where no index can answer; an index scan whose condition does not bound the index's
    leading column reads the whole index, and counts as a full read too."""
    import psycopg

    assert isinstance(conn, psycopg.Connection)
    conn.execute("SET enable_seqscan = off")
    try:
        cur = psycopg.ClientCursor(conn)
        cur.execute(
            f"EXPLAIN (FORMAT JSON) {sql.replace('%', '%%').replace('?', '%s')}", tuple(params)
        )
        [[doc]] = cur.fetchall()
    finally:
        conn.execute("SET enable_seqscan = on")
    lines: list[str] = []
    _walk(conn, doc[0]["Plan"], lines)
    return lines


def _walk(conn: object, node: dict[str, object], out: list[str]) -> None:
    kind = str(node["Node Type"])
    index = node.get("Index Name")
    cond = str(node.get("Index Cond") or "")
    text = f"{kind} on {node.get('Relation Name') or index or ''} {cond}".strip()
    full = kind == "Seq Scan"
    if index is not None and (kind.endswith("Index Scan") or kind == "Index Only Scan"):
        lead = _leading_column(conn, str(index))
        full = not re.search(rf"\b{re.escape(lead)}\b", cond)
    out.append(f"FULL READ {text}" if full else text)
    for child in node.get("Plans", ()) or ():  # type: ignore[attr-defined]
        _walk(conn, child, out)


def _leading_column(conn: object, index: str) -> str:
    import psycopg

    assert isinstance(conn, psycopg.Connection)
    row = conn.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = i.indkey[0] WHERE i.indexrelid = to_regclass(%s)",
        (index,),
    ).fetchone()
    return "" if row is None else str(row[0])
