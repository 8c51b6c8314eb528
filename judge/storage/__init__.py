"""nib's storage seam: SQLite (the embedded default) or PostgreSQL (``NIB_DATABASE_URL``).

Imports nothing of nib's; every package may import it. See ``judge.storage.db`` for how write
sections lock on each engine and ``judge.storage.migrate`` for versioned schemas.
"""

from judge.storage.db import (
    Cursor,
    Database,
    Dialect,
    IntegrityError,
    Location,
    MutexTimeout,
    StorageError,
    Tx,
    cell_float,
    cell_int,
    describe,
    is_url,
    open_database,
    process_identity,
)
from judge.storage.migrate import Migration, add_missing_columns, migrate, schema_version

__all__ = [
    "Cursor",
    "Database",
    "Dialect",
    "IntegrityError",
    "Location",
    "Migration",
    "MutexTimeout",
    "StorageError",
    "Tx",
    "add_missing_columns",
    "cell_float",
    "cell_int",
    "describe",
    "is_url",
    "migrate",
    "open_database",
    "process_identity",
    "schema_version",
]
