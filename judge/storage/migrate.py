"""Versioned schemas: each package lists its migrations; they run on start, once.

``nib_schema`` holds one row per component (``wallet``, ``agent``, ``judge``, ...) with
the version its tables are at. ``migrate`` applies the steps above that version inside
one write section holding the ``schema`` lock, so processes starting together apply
each step exactly once, and a step that fails leaves the version where it was (DDL is
transactional on both engines). Steps are DDL written with the ``{int}``, ``{real}``,
``{id}`` placeholders of ``Tx.ddl``, or a callable for anything else.

Version 1 of every component is idempotent (``CREATE ... IF NOT EXISTS`` and columns
added only when missing), so files written before versioning existed adopt it as-is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from judge.storage.db import Database, StorageError, Tx, cell_int

__all__ = ["Migration", "add_missing_columns", "migrate", "schema_version"]

Step = str | Callable[[Tx], None]


@dataclass(frozen=True)
class Migration:
    """One schema version: what it changes (for people) and its steps, in order."""

    version: int
    description: str
    steps: tuple[Step, ...]


def schema_version(db: Database, component: str) -> int:
    """The version ``component``'s tables are at (0 when never migrated)."""
    db.bootstrap()
    found = db.scalar("SELECT version FROM nib_schema WHERE component = ?", (component,))
    return 0 if found is None else cell_int(found)


def migrate(db: Database, component: str, migrations: Sequence[Migration]) -> int:
    """Bring ``component``'s tables to the newest of ``migrations``; returns that version."""
    latest = _check_sequence(component, migrations)
    if schema_version(db, component) == latest:
        return latest
    with db.transaction(lock="schema") as tx:
        found = tx.scalar("SELECT version FROM nib_schema WHERE component = ?", (component,))
        current = 0 if found is None else cell_int(found)
        if current > latest:
            raise StorageError(
                f"The database's {component} tables are at schema version {current}; this "
                f"nib knows versions up to {latest}. Fix: upgrade nib on this machine (an "
                "older nib must not write to a newer schema)."
            )
        for m in migrations:
            if m.version <= current:
                continue
            for step in m.steps:
                if callable(step):
                    step(tx)
                else:
                    tx.ddl(step)
        tx.execute(
            "INSERT INTO nib_schema (component, version, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (component) DO UPDATE SET version = excluded.version, "
            "updated_at = excluded.updated_at",
            (component, latest, time.time()),
        )
    return latest


def add_missing_columns(table: str, columns: Sequence[tuple[str, str]]) -> Callable[[Tx], None]:
    """A step adding each ``(name, type)`` column ``table`` lacks (types use DDL placeholders)."""

    def step(tx: Tx) -> None:
        have = tx.columns(table)
        for name, kind in columns:
            if name not in have:
                tx.ddl(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")

    return step


def _check_sequence(component: str, migrations: Sequence[Migration]) -> int:
    versions = [m.version for m in migrations]
    if not versions or versions != list(range(1, len(versions) + 1)):
        raise StorageError(
            f"{component}'s migrations are numbered {versions}; expected 1, 2, 3, ... with "
            "no gaps. Fix: append a new Migration with the next number; never renumber."
        )
    return versions[-1]
