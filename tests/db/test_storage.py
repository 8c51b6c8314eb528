"""The storage seam on both engines: versioned migrations run once, in order, atomically
(also when several processes start together), and SQL is written once for both."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from judge.storage import Database, Migration, StorageError, describe, migrate, schema_version

STEPS = [
    Migration(1, "a table", ("CREATE TABLE IF NOT EXISTS t_items (id {id}, name TEXT, n {int})",)),
    Migration(2, "a column", ("ALTER TABLE t_items ADD COLUMN price {real}",)),
]


def test_migrations_apply_in_order_once(store_location: str | Path) -> None:
    db = Database(store_location)
    assert schema_version(db, "demo") == 0
    assert migrate(db, "demo", STEPS[:1]) == 1
    assert migrate(db, "demo", STEPS) == 2
    assert migrate(db, "demo", STEPS) == 2  # nothing left to apply: a no-op
    with db.transaction() as tx:
        assert tx.columns("t_items") == {"id", "name", "n", "price"}
        tx.execute("INSERT INTO t_items (name, n, price) VALUES (?, ?, ?)", ("a%b", 2**40, 1.5))
    # One SQL text for both engines: ? placeholders, a literal % beside them, 64-bit ints.
    rows = db.query("SELECT name, n, price FROM t_items WHERE name LIKE ?", ("a%",))
    assert rows == [{"name": "a%b", "n": 2**40, "price": 1.5}]


def test_a_failing_step_leaves_the_schema_where_it_was(store_location: str | Path) -> None:
    db = Database(store_location)
    migrate(db, "demo", STEPS[:1])
    broken = [*STEPS[:1], Migration(2, "half done", (
        "CREATE TABLE t_other (id TEXT)", "ALTER TABLE no_such_table ADD COLUMN x TEXT"))]
    with pytest.raises(Exception, match="no_such_table|does not exist"):
        migrate(db, "demo", broken)
    assert schema_version(db, "demo") == 1
    with db.transaction() as tx:
        assert tx.columns("t_other") == set()  # the first step was rolled back too


def test_a_database_newer_than_this_nib_is_refused(store_location: str | Path) -> None:
    db = Database(store_location)
    migrate(db, "demo", STEPS)
    with pytest.raises(StorageError, match="schema version 2; this nib knows versions up to 1"):
        migrate(db, "demo", STEPS[:1])
    with pytest.raises(StorageError, match="expected 1, 2, 3"):
        migrate(db, "demo", [STEPS[1]])


def test_processes_starting_together_migrate_once(store_location: str | Path) -> None:
    handles = [Database(store_location) for _ in range(4)]
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def start(db: Database) -> None:
        barrier.wait()
        try:
            migrate(db, "demo", STEPS)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(h,)) for h in handles]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert {schema_version(h, "demo") for h in handles} == {2}


def test_a_url_is_logged_without_its_password() -> None:
    assert describe("postgresql://nib:s3cret@db:5432/nib") == "postgresql://nib:***@db:5432/nib"
    assert describe(Path("/tmp/nib.db")) == "/tmp/nib.db"


def test_an_unreachable_server_names_the_setting_to_fix() -> None:
    with pytest.raises(StorageError, match="Fix: check NIB_DATABASE_URL") as info:
        Database("postgresql://nib:s3cret@127.0.0.1:9/nib")
    assert "s3cret" not in str(info.value)
