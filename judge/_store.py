"""The judge's handle on nib's database (SQLite or PostgreSQL, through ``storage``).

Write sections hold the ``judge`` lock: ``BEGIN IMMEDIATE`` on SQLite, the judge's row
of ``nib_locks`` on PostgreSQL (see ``judge.storage.db``), so a verdict is consumed once even
when several judge processes share one database.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from judge.storage import Database, Location, Migration, Tx, migrate, open_database

#: The lock every judge write section holds.
LOCK = "judge"


class Store:
    """The judge's database handle (``None``: an in-memory SQLite database, for tests),
    with ``component``'s tables brought to the newest schema version (idempotent)."""

    def __init__(
        self,
        db: Location | Database | None = None,
        *,
        component: str | None = None,
        migrations: Sequence[Migration] = (),
    ) -> None:
        self.db = open_database(db or ":memory:")
        if component is not None:
            migrate(self.db, component, migrations)

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[Tx]:
        """An atomic write section holding the judge lock (rollback on error);
        ``durable=False``: see ``Database.transaction``."""
        with self.db.transaction(lock=LOCK, durable=durable) as tx:
            yield tx

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[dict[str, object]]:
        """Rows of ``sql`` as plain dicts (column -> value)."""
        return self.db.query(sql, params)

    def execute(
        self, sql: str, params: tuple[object, ...] = (), *, durable: bool = True
    ) -> int:
        """One statement, committed on its own; returns the rows it changed
        (``durable``: see ``Database.execute``)."""
        return self.db.execute(sql, params, durable=durable)

