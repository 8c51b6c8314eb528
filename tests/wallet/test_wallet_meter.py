"""The spend meter and ledger on SQLite and on PostgreSQL: atomic reservations, caps, gas,
transitions (each test runs once per backend through ``store_location``)."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from chain.money import gas_to_usdc
from judge.storage import Database
from wallet._store import ensure_tables
from wallet.errors import CapExceeded, InsufficientBalance, LedgerError, VerdictReplayed
from wallet.ledger import Ledger
from wallet.meter import SpendMeter

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
SELLER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
DIME = 100_000
ONE = 1_000_000


@dataclass(frozen=True)
class FakeVerdict:
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    payload_fingerprint: str = "0x" + "ab" * 32
    asset: str = USDC
    recipient: str = SELLER
    chain_id: int = 31337


@pytest.fixture
def meter(store_location: str | Path) -> SpendMeter:
    return SpendMeter(store_location)


def test_reserve_writes_a_reserved_row_and_uses_the_verdict(meter: SpendMeter) -> None:
    v = FakeVerdict()
    res = meter.reserve("run-1", v, DIME, ONE, 10 * ONE)
    row = meter.ledger.get(res.id)
    assert (row.status, row.amount, row.run_id, row.verdict_id) == ("reserved", DIME, "run-1", v.id)
    assert row.asset == USDC.lower() and row.recipient == SELLER.lower() and row.kind == "x402"
    assert meter.ledger.is_used(v.id)
    assert meter.reserved("run-1") == DIME and meter.spent("run-1") == 0


def test_a_verdict_reserves_once(meter: SpendMeter) -> None:
    v = FakeVerdict()
    meter.reserve("run-1", v, DIME, ONE, 10 * ONE)
    with pytest.raises(VerdictReplayed) as info:
        meter.reserve("run-2", v, DIME, ONE, 10 * ONE)
    assert info.value.code == "replayed"
    assert f"Verdict {v.id} was already used" in str(info.value)
    assert len(meter.ledger.rows()) == 1


def test_cap_refusal_names_limit_and_observed_and_rolls_back(meter: SpendMeter) -> None:
    for _ in range(9):
        meter.reserve("run-1", FakeVerdict(), DIME, ONE, 10 * ONE)
    v = FakeVerdict()
    with pytest.raises(CapExceeded) as info:
        meter.reserve("run-1", v, 2 * DIME, ONE, 10 * ONE)
    err = info.value
    assert (err.code, err.limit, err.observed) == ("cap-exceeded", ONE, 1_100_000)
    assert "cap 1000000 atomic USDC, already committed 900000" in str(err)
    assert not meter.ledger.is_used(v.id)  # the refusal rolled the verdict back
    assert meter.reserve("run-2", FakeVerdict(), 2 * DIME, ONE, 10 * ONE)  # caps are per run


def test_balance_check_counts_other_outstanding_reservations(meter: SpendMeter) -> None:
    meter.reserve("run-1", FakeVerdict(), 3 * DIME, ONE, 5 * DIME)
    with pytest.raises(InsufficientBalance) as info:
        meter.reserve("run-2", FakeVerdict(), 3 * DIME, ONE, 5 * DIME)
    assert (info.value.limit, info.value.observed) == (2 * DIME, 3 * DIME)
    assert "holds 500000 and 300000 is held by outstanding reservations" in str(info.value)


def test_release_and_fail_free_the_cap_but_the_verdict_stays_used(meter: SpendMeter) -> None:
    v1, v2 = FakeVerdict(), FakeVerdict()
    r1 = meter.reserve("run-1", v1, 6 * DIME, ONE, 10 * ONE)
    meter.release(r1, note="not needed")
    r2 = meter.reserve("run-1", v2, 6 * DIME, ONE, 10 * ONE)
    meter.mark_signed(r2, auth_nonce="0x" + "11" * 32)
    meter.fail(r2, "seller refused")
    assert meter.reserved("run-1") == 0
    assert meter.ledger.is_used(v1.id) and meter.ledger.is_used(v2.id)
    with pytest.raises(VerdictReplayed):
        meter.reserve("run-1", v1, DIME, ONE, 10 * ONE)
    assert meter.ledger.get(r1.id).note == "not needed"


def test_settle_moves_reserved_to_spent(meter: SpendMeter) -> None:
    res = meter.reserve("run-1", FakeVerdict(), DIME, ONE, 10 * ONE)
    meter.mark_signed(res, auth_nonce="0x" + "22" * 32)
    row = meter.settle(res, "0x" + "AB" * 32)
    assert row.status == "settled" and row.tx_hash == "0x" + "ab" * 32
    assert (meter.spent("run-1"), meter.reserved("run-1")) == (DIME, 0)


def test_illegal_transitions_are_refused(meter: SpendMeter) -> None:
    res = meter.reserve("run-1", FakeVerdict(), DIME, ONE, 10 * ONE)
    with pytest.raises(LedgerError, match="is 'reserved'; cannot move it to 'settled'"):
        meter.settle(res, "0x" + "ab" * 32)
    meter.release(res)
    with pytest.raises(LedgerError, match="Allowed from 'released': none"):
        meter.mark_signed(res)
    with pytest.raises(LedgerError, match="No ledger row with id 'nope'"):
        meter.release("nope")


def test_amounts_must_be_positive_ints(meter: SpendMeter) -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(LedgerError, match="amount must be an int >= 1"):
            meter.reserve("run-1", FakeVerdict(), bad, ONE, ONE)  # type: ignore[arg-type]


def test_gas_converts_rounding_up_and_counts_against_the_cap(meter: SpendMeter) -> None:
    assert gas_to_usdc(1, 3_000) == 1
    assert gas_to_usdc(10**18, 3_000) == 3_000_000_000
    assert gas_to_usdc(0, 3_000) == 0
    usdc = meter.record_gas("run-1", 21_000 * 10**9 * 100)  # 0.0021 ETH -> 6.3 USDC
    assert usdc == 6_300_000
    usage = meter.usage("run-1")
    assert (usage.gas_wei, usage.gas_usdc, usage.spent) == (2_100_000_000_000_000, usdc, usdc)
    with pytest.raises(CapExceeded) as info:
        meter.reserve("run-1", FakeVerdict(), DIME, 6_350_000, 10 * ONE)
    assert info.value.observed == 6_400_000


def test_twenty_parallel_reservations_against_a_dollar_cap(store_location: str | Path) -> None:
    # Two meters = two connections: the database's lock, not the Python lock, decides.
    meters = [SpendMeter(store_location), SpendMeter(store_location)]
    barrier = threading.Barrier(20)
    outcomes: list[str] = []

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            meters[i % 2].reserve("run-1", FakeVerdict(), DIME, ONE, 100 * ONE)
            outcomes.append("ok")
        except CapExceeded:
            outcomes.append("cap")

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["cap"] * 10 + ["ok"] * 10
    assert meters[0].reserved("run-1") == ONE
    assert len(Ledger(store_location).rows("run-1")) == 10


def test_tables_are_created_idempotently_with_the_documented_columns(tmp_path: Path) -> None:
    db = Database(tmp_path / "nib.db")
    ensure_tables(db)
    ensure_tables(db)
    assert db.scalar("PRAGMA journal_mode") == "wal"
    with db.transaction() as tx:
        spends, used = tx.columns("wallet_spends"), tx.columns("wallet_used_verdicts")
    assert spends == {
        "id",
        "run_id",
        "verdict_id",
        "payload_fingerprint",
        "kind",
        "asset",
        "amount",
        "recipient",
        "chain_id",
        "status",
        "tx_hash",
        "auth_nonce",
        "created_at",
        "updated_at",
        "note",
        "valid_before",
        "gas_hold",
        "resource",
        "x402_payment",
        "tx_nonce",
    }
    assert used == {"verdict_id", "used_at", "run_id"}
    assert db.scalar("SELECT pk FROM pragma_table_info('wallet_used_verdicts') "
                     "WHERE name = 'verdict_id'") == 1


def test_signed_rows_hold_the_cap_and_the_balance_until_settled_or_failed(
    meter: SpendMeter,
) -> None:
    res = meter.reserve("run-1", FakeVerdict(), 6 * DIME, ONE, ONE)
    meter.mark_signed(res, auth_nonce="0x" + "33" * 32, valid_before=1_700_000_000)
    assert meter.ledger.get(res.id).valid_before == 1_700_000_000
    assert meter.usage("run-1").committed == 6 * DIME
    with pytest.raises(CapExceeded, match="already committed 600000"):
        meter.reserve("run-1", FakeVerdict(), 5 * DIME, ONE, 10 * ONE)
    with pytest.raises(InsufficientBalance, match="600000 is held by outstanding"):
        meter.reserve("run-2", FakeVerdict(), 5 * DIME, ONE, ONE)
    meter.fail(res, "authorization expired unused")
    assert meter.reserve("run-1", FakeVerdict(), 5 * DIME, ONE, ONE)


def test_keep_signed_notes_a_pending_spend_without_freeing_its_cap(meter: SpendMeter) -> None:
    res = meter.reserve("run-1", FakeVerdict(), DIME, ONE, 10 * ONE)
    with pytest.raises(LedgerError, match="is 'reserved'; keep_signed expects 'signed'"):
        meter.keep_signed(res, "too early")
    meter.mark_signed(res, auth_nonce="0x" + "44" * 32)
    row = meter.keep_signed(res, "seller refused; still valid")
    assert (row.status, row.note) == ("signed", "seller refused; still valid")
    assert meter.reserved("run-1") == DIME
    meter.settle(res, "0x" + "cd" * 32)  # the seller submitted it after all
    row = meter.keep_signed(res, "late note")  # the newer truth wins: unchanged
    assert (row.status, row.note) == ("settled", "seller refused; still valid")
    with pytest.raises(LedgerError, match="No ledger row with id 'nope'"):
        meter.keep_signed("nope", "x")


def test_a_ledger_written_before_valid_before_existed_opens_and_gains_the_column(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    old = Database(path)
    old.execute(
        """CREATE TABLE wallet_spends (
            id TEXT PRIMARY KEY, run_id TEXT NOT NULL, verdict_id TEXT,
            payload_fingerprint TEXT, kind TEXT NOT NULL, asset TEXT NOT NULL,
            amount INTEGER NOT NULL, recipient TEXT NOT NULL, chain_id INTEGER NOT NULL,
            status TEXT NOT NULL, tx_hash TEXT, auth_nonce TEXT, created_at REAL NOT NULL,
            updated_at REAL NOT NULL, note TEXT NOT NULL DEFAULT ''
        )"""
    )
    old.execute(
        "INSERT INTO wallet_spends VALUES ('old-1', 'run-0', 'v0', NULL, 'x402', ?, ?, ?, "
        "31337, 'signed', NULL, ?, 1.0, 1.0, '')",
        (USDC.lower(), DIME, SELLER.lower(), "0x" + "55" * 32),
    )
    old.close()

    meter = SpendMeter(path)
    Ledger(path)  # a second open is a no-op
    with Database(path).transaction() as tx:
        assert "valid_before" in tx.columns("wallet_spends")
    [row] = meter.ledger.rows()
    assert (row.id, row.status, row.valid_before) == ("old-1", "signed", None)
    assert meter.reserved("run-0") == DIME  # an old pending row still holds its cap
    res = meter.reserve("run-1", FakeVerdict(), DIME, ONE, 10 * ONE)
    assert meter.mark_signed(res, valid_before=42).valid_before == 42


def test_the_treasury_cap_holds_over_every_run_on_two_connections(
    store_location: str | Path,
) -> None:
    # Twenty runs, each well inside its own cap, race for one treasury of ten dimes.
    meters = [SpendMeter(store_location, treasury_cap_atomic=ONE) for _ in range(2)]
    barrier = threading.Barrier(20)
    outcomes: list[str] = []

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            meters[i % 2].reserve(f"run-{i}", FakeVerdict(), DIME, ONE, 100 * ONE)
            outcomes.append("ok")
        except CapExceeded as exc:
            assert "Treasury cap exceeded: cap 1000000" in str(exc)
            outcomes.append("cap")

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["cap"] * 10 + ["ok"] * 10
    rows = Ledger(store_location).rows()
    assert len(rows) == 10 and sum(r.amount for r in rows) == ONE


def test_a_reservation_for_an_authorization_is_written_signed_in_one_write(
    meter: SpendMeter,
) -> None:
    nonce = "0x" + "AB" * 32
    res = meter.reserve("run-1", FakeVerdict(), DIME, ONE, 10 * ONE, authorization=(nonce, 1234))
    row = meter.ledger.get(res.id)
    assert (row.status, row.auth_nonce, row.valid_before) == ("signed", nonce.lower(), 1234)
    assert meter.reserved("run-1") == DIME  # held like any pending spend until settled
    meter.settle(res, "0x" + "cd" * 32)
    assert meter.spent("run-1") == DIME and meter.reserved("run-1") == 0


def test_rows_are_read_a_page_at_a_time_in_insertion_order(store_location: str | Path) -> None:
    # One clock tick for every row: the order is the insertion order (rowid) alone.
    meter = SpendMeter(store_location, clock=lambda: 1_700_000_000.0)
    ids = [meter.reserve(f"run-{i % 3}", FakeVerdict(), 1, ONE, ONE).id for i in range(11)]
    ledger = meter.ledger
    assert [r.id for r in ledger.iter_rows(page=4)] == ids == [r.id for r in ledger.rows()]
    assert [r.id for r in ledger.iter_rows("run-1", page=2)] == ids[1::3]
    assert list(ledger.iter_rows("run-9", page=2)) == []
