"""The wallet's handle on nib's database (SQLite or PostgreSQL) and its versioned tables.

Atomic sections are write sections of the storage seam holding the ``wallet`` lock:
``BEGIN IMMEDIATE`` on SQLite (safe across processes on one host), a row lock on
PostgreSQL (safe across connections and machines); see ``judge.storage.db`` for why.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from judge.storage import (
    Database,
    Location,
    Migration,
    Tx,
    add_missing_columns,
    migrate,
    open_database,
)
from wallet._tables import CAPS, GAS, JOURNAL, LOCK, SPENDS, TOTALS, USED_VERDICTS
from wallet.totals import rebuild

#: Columns added to ``wallet_spends`` after its first release, with their SQL types.
#: Files written by an older nib gain them on open; old rows read them as NULL.
ADDED_SPEND_COLUMNS: tuple[tuple[str, str], ...] = (
    ("valid_before", "{int}"),
    ("gas_hold", "{int} NOT NULL DEFAULT 0"),
)


def _insertion_order(tx: Tx) -> None:
    """PostgreSQL has no implicit rowid: give the wallet's tables one, for ``ORDER BY rowid``."""
    if tx.dialect == "postgres":
        for table in (SPENDS, GAS):
            tx.execute(
                f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS rowid BIGINT "
                "GENERATED ALWAYS AS IDENTITY"
            )


def _count_totals(tx: Tx) -> None:
    """Count the running totals once from the rows a file already holds."""
    rebuild(tx)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "spends, used verdicts and gas; columns added since the first release",
        (
            f"""CREATE TABLE IF NOT EXISTS {SPENDS} (
                id TEXT PRIMARY KEY,
                run_id TEXT NOT NULL,
                verdict_id TEXT,
                payload_fingerprint TEXT,
                kind TEXT NOT NULL,
                asset TEXT NOT NULL,
                amount {{int}} NOT NULL,
                recipient TEXT NOT NULL,
                chain_id {{int}} NOT NULL,
                status TEXT NOT NULL,
                tx_hash TEXT,
                auth_nonce TEXT,
                created_at {{real}} NOT NULL,
                updated_at {{real}} NOT NULL,
                note TEXT NOT NULL DEFAULT '',
                valid_before {{int}},
                gas_hold {{int}} NOT NULL DEFAULT 0
            )""",
            add_missing_columns(SPENDS, ADDED_SPEND_COLUMNS),
            f"CREATE INDEX IF NOT EXISTS idx_{SPENDS}_run ON {SPENDS}(run_id, status)",
            f"CREATE INDEX IF NOT EXISTS idx_{SPENDS}_tx ON {SPENDS}(tx_hash)",
            f"""CREATE TABLE IF NOT EXISTS {USED_VERDICTS} (
                verdict_id TEXT PRIMARY KEY,
                used_at {{real}} NOT NULL,
                run_id TEXT NOT NULL
            )""",
            f"""CREATE TABLE IF NOT EXISTS {GAS} (
                id TEXT PRIMARY KEY,
                run_id TEXT NOT NULL,
                spend_id TEXT,
                tx_hash TEXT,
                wei {{int}} NOT NULL,
                usdc {{int}} NOT NULL,
                created_at {{real}} NOT NULL
            )""",
            f"CREATE INDEX IF NOT EXISTS idx_{GAS}_run ON {GAS}(run_id)",
            _insertion_order,
        ),
    ),
    Migration(
        2,
        "the nonce allocator's shared state (one row per chain and address)",
        (
            """CREATE TABLE IF NOT EXISTS wallet_nonces (
                scope TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at {real} NOT NULL)""",
        ),
    ),
    Migration(
        3,
        "one live x402 authorization per resource (resource, stored payment header) and "
        "the ledger's hash chain",
        (
            add_missing_columns(SPENDS, (("resource", "TEXT"), ("x402_payment", "TEXT"))),
            f"CREATE INDEX IF NOT EXISTS idx_{SPENDS}_resource ON {SPENDS}(resource, status)",
            f"""CREATE TABLE IF NOT EXISTS {JOURNAL} (
                seq {{id}},
                entry TEXT NOT NULL,
                prev TEXT NOT NULL,
                hash TEXT NOT NULL
            )""",
        ),
    ),
    Migration(
        4,
        "a signed transaction's nonce on its ledger row, so reconcile can tell a transfer "
        "that can never land (its nonce used by another transaction) from one still pending",
        (add_missing_columns(SPENDS, (("tx_nonce", "{int}"),)),),
    ),
    Migration(
        5,
        "running totals (treasury committed, outstanding per asset) kept in each write's "
        "transaction, so the reservation checks read one row instead of summing the ledger",
        (
            f"CREATE TABLE IF NOT EXISTS {TOTALS} (name TEXT PRIMARY KEY, value {{int}} NOT NULL)",
            _count_totals,
        ),
    ),
    Migration(
        6,
        "each run's cap, so a cancel's gas is bounded by what is left of it",
        (f"CREATE TABLE IF NOT EXISTS {CAPS} (run_id TEXT PRIMARY KEY, cap {{int}} NOT NULL)",),
    ),
)


def ensure_tables(db: Database) -> None:
    """Bring the wallet's tables to the newest schema version (idempotent)."""
    migrate(db, "wallet", MIGRATIONS)


class Store:
    """The wallet's database handle: atomic sections and plain reads."""

    def __init__(self, location: Location | Database) -> None:
        self.db = open_database(location)
        self.path = self.db.location
        ensure_tables(self.db)

    @property
    def dialect(self) -> str:
        return self.db.dialect

    @property
    def conn(self) -> object:
        """The driver connection underneath (tests close it to simulate a lost handle)."""
        return self.db.conn

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[Tx]:
        """An atomic write section holding the wallet lock (rollback on error);
        ``durable=False`` only for writes whose loss fails closed (see
        ``Database.transaction``)."""
        with self.db.transaction(lock=LOCK, durable=durable) as tx:
            yield tx

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[dict[str, object]]:
        """Rows of ``sql`` as plain dicts (column -> value)."""
        return self.db.query(sql, params)

    def close(self) -> None:
        self.db.close()


def as_store(location: Location | Database | Store) -> Store:
    """``location`` as a Store (an open one is passed through)."""
    return location if isinstance(location, Store) else Store(location)
