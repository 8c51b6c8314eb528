"""The wallet's per-payment checks answer from an index or a running total, never a scan
of the ledger (on SQLite and PostgreSQL): every statement a payment's life sends is
EXPLAINed. Before the running totals, the treasury and balance checks summed every row
(232 ms per reservation at a million rows)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_wallet_meter import DIME, ONE, USDC, FakeVerdict

from tests._plans import recording
from wallet import totals
from wallet.errors import CapExceeded, InsufficientBalance
from wallet.meter import SpendMeter


def _history(meter: SpendMeter, runs: int = 40) -> None:
    """Earlier runs' rows in every status, so the planner has a ledger to scan."""
    for i in range(runs):
        run = f"old-{i}"
        done = meter.reserve(run, FakeVerdict(), 1_000, ONE, 100 * ONE, resource=f"r{i}")
        meter.mark_signed(done, auth_nonce=f"0x{i:064x}", valid_before=2_000_000_000)
        meter.settle(done, "0x" + f"{i:064x}")
        meter.release(meter.reserve(run, FakeVerdict(), 1_000, ONE, 100 * ONE))
        meter.record_gas(run, 21_000 * 10**9)
        meter.reserve(run, FakeVerdict(), 500, ONE, 100 * ONE, gas_hold=7)


def test_a_payments_statements_read_no_whole_table(store_location: str | Path) -> None:
    meter = SpendMeter(store_location, treasury_cap_atomic=1_000 * ONE)
    _history(meter)
    with recording(meter.store.db) as [log]:
        res = meter.reserve(
            "run-1", FakeVerdict(), DIME, ONE, 10 * ONE,
            resource="http://seller/a", authorization=("0x" + "11" * 32, 2_000_000_000),
        )
        meter.keep_payment(res, ("PAYMENT-SIGNATURE", "e30="))
        meter.ledger.live_for("http://seller/a")
        meter.settle(res, "0x" + "22" * 32)
        meter.record_gas("run-1", 50_000 * 10**9, spend_id=res.id)
        held = meter.reserve("run-1", FakeVerdict(), DIME, ONE, 10 * ONE, gas_hold=9)
        meter.mark_signed(held, tx_hash="0x" + "33" * 32, tx_nonce=4)
        meter.keep_signed(held, "still pending")
        meter.fail(held, "reverted")
        meter.release(meter.reserve("run-1", FakeVerdict(), DIME, ONE, 10 * ONE))
        meter.usage("run-1")
        meter.ledger.is_used(res.verdict_id)
    assert log.statements, "nothing was recorded"
    assert log.full_scans() == []


def test_the_running_totals_equal_the_rows_after_every_kind_of_write(
    store_location: str | Path,
) -> None:
    meter = SpendMeter(store_location, treasury_cap_atomic=100 * ONE)
    _history(meter, runs=5)
    with meter.store.transaction() as tx:
        assert totals.check(tx) == []
        committed, outstanding = totals.committed(tx), totals.outstanding(tx, USDC)
    # Each run: 1,000 settled, its gas, 500 reserved holding 7 for gas; released: nothing.
    per_run = [meter.usage(f"old-{i}") for i in range(5)]
    assert committed == sum(u.committed for u in per_run) > 5 * (1_000 + 500 + 7)
    assert outstanding == 5 * 500


def test_treasury_and_balance_refusals_read_the_running_totals(
    store_location: str | Path,
) -> None:
    meter = SpendMeter(store_location, treasury_cap_atomic=3 * DIME)
    first = meter.reserve("run-1", FakeVerdict(), 2 * DIME, ONE, 10 * ONE)
    with pytest.raises(CapExceeded, match="already committed 200000, this call 200000"):
        meter.reserve("run-2", FakeVerdict(), 2 * DIME, ONE, 10 * ONE)
    with pytest.raises(InsufficientBalance, match="200000 is held by outstanding"):
        meter.reserve("run-2", FakeVerdict(), DIME, ONE, 2 * DIME)
    meter.release(first)  # frees both totals
    assert meter.reserve("run-2", FakeVerdict(), 2 * DIME, ONE, 2 * DIME)


def test_only_writes_that_fail_closed_skip_the_disk_wait(store_location: str | Path) -> None:
    """Settling and storing the payment header commit without waiting for the disk (lost
    in an OS crash, the row stays signed: it keeps holding cap and balance, and no second
    authorization is signed); the reservation that precedes a signature still syncs, and
    the connection is back to syncing afterwards."""
    meter = SpendMeter(store_location)
    db = meter.store.db
    with recording(db) as [log]:
        res = meter.reserve("run-1", FakeVerdict(), DIME, ONE, 10 * ONE,
                            authorization=("0x" + "11" * 32, 2_000_000_000))
        meter.keep_payment(res, ("PAYMENT-SIGNATURE", "e30="))
        meter.settle(res, "0x" + "22" * 32)
        meter.reserve("run-1", FakeVerdict(), DIME, ONE, 10 * ONE)
    assert log.commits() == [True, False, False, True]
    again = SpendMeter(store_location)
    assert again.ledger.get(res.id).status == "settled"
