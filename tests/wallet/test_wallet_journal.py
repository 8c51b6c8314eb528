"""The ledger's hash chain: `verify` names every edit, deletion, forgery and moved row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from wallet._store import Store
from wallet._tables import JOURNAL, SPENDS, USED_VERDICTS
from wallet.journal import verify
from wallet.meter import SpendMeter

ONE = 1_000_000
DIME = 100_000


class FakeVerdict:
    def __init__(self, vid: str) -> None:
        self.id = vid
        self.payload_fingerprint = "0x" + "ab" * 32
        self.asset = "0x" + "11" * 20
        self.recipient = "0x" + "22" * 20
        self.chain_id = 31337


@pytest.fixture
def meter(tmp_path: Path) -> SpendMeter:
    m = SpendMeter(tmp_path / "nib.db")
    a = m.reserve("run-a", FakeVerdict("v1"), DIME, ONE, ONE)
    m.mark_signed(a, auth_nonce="0x" + "01" * 32, valid_before=2_000_000_000)
    m.settle(a, "0x" + "aa" * 32)
    b = m.reserve("run-b", FakeVerdict("v2"), 2 * DIME, ONE, ONE)
    m.release(b, "never signed")
    m.record_gas("run-b", 10**12)
    return m


def tamper(meter: SpendMeter, sql: str, params: tuple[object, ...] = ()) -> None:
    """Edit the file the way an attacker with write access would: a raw connection."""
    conn = sqlite3.connect(str(meter.store.path))
    conn.execute(sql, params)
    conn.commit()
    conn.close()


def check(meter: SpendMeter) -> list[str]:
    store = Store(meter.store.path)
    try:
        return list(verify(store).problems)
    finally:
        store.close()


def test_an_untouched_ledger_verifies(meter: SpendMeter) -> None:
    result = verify(meter.store)
    assert result.ok and result.entries >= 7, result.to_dict()


def test_a_forged_row_is_named(meter: SpendMeter) -> None:
    tamper(
        meter,
        f"INSERT INTO {SPENDS} (id, run_id, verdict_id, kind, asset, amount, recipient, "
        "chain_id, status, tx_hash, created_at, updated_at) VALUES ('forged', 'run-a', 'v9', "
        "'x402', '0x11', 5, '0x33', 31337, 'settled', '0xbb', 1, 1)",
    )
    [problem] = check(meter)
    assert "ledger row forged" in problem and "not in the journal" in problem


def test_moving_a_settled_row_to_another_run_is_named(meter: SpendMeter) -> None:
    tamper(meter, f"UPDATE {SPENDS} SET run_id = 'run-z' WHERE run_id = 'run-a'")
    [problem] = check(meter)
    assert "moved from run run-a to run run-z" in problem


def test_an_edited_amount_and_a_deleted_row_are_named(meter: SpendMeter) -> None:
    tamper(meter, f"UPDATE {SPENDS} SET amount = 1 WHERE run_id = 'run-a'")
    tamper(meter, f"DELETE FROM {SPENDS} WHERE run_id = 'run-b'")
    problems = check(meter)
    assert any("amount is 1" in p and "edited" in p for p in problems), problems
    assert any("run run-b" in p and "was deleted" in p for p in problems), problems


def test_deleting_a_used_verdict_is_named(meter: SpendMeter) -> None:
    tamper(meter, f"DELETE FROM {USED_VERDICTS} WHERE verdict_id = 'v1'")
    [problem] = check(meter)
    assert "used verdict v1" in problem and "presented again" in problem


def test_editing_a_journal_entry_breaks_the_chain(meter: SpendMeter) -> None:
    tamper(meter, f"UPDATE {JOURNAL} SET entry = replace(entry, '100000', '1') WHERE seq = 2")
    problems = check(meter)
    assert any("journal entry 2 does not chain" in p for p in problems), problems


def test_nib_audit_verify_exits_1_and_names_the_edit(meter: SpendMeter, tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    home = meter.store.path.parent
    env = {**os.environ, "NIB_HOME": str(home)}
    env.pop("NIB_CONFIG", None)
    env.pop("NIB_DATABASE_URL", None)

    def nib_verify() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agent.cli", "audit", "verify", "--json"],
            env=env, capture_output=True, text=True, timeout=120,
        )

    ok = nib_verify()
    assert ok.returncode == 0 and json.loads(ok.stdout)["ok"], ok.stderr
    tamper(meter, f"UPDATE {SPENDS} SET run_id = 'run-z' WHERE run_id = 'run-a'")
    bad = nib_verify()
    assert bad.returncode == 1, bad.stderr
    assert any("moved from run run-a" in p for p in json.loads(bad.stdout)["problems"])


def test_nib_db_and_its_wal_and_shm_are_owner_only(tmp_path: Path) -> None:
    import stat

    home = tmp_path / "fresh-home"
    meter = SpendMeter(home / "nib.db")
    meter.reserve("run-p", FakeVerdict("vp"), DIME, ONE, ONE)
    modes = {
        p.name: stat.S_IMODE(p.stat().st_mode) for p in home.iterdir() if p.name.startswith("nib.db")
    }
    assert set(modes) >= {"nib.db", "nib.db-wal", "nib.db-shm"}, modes
    assert all(m == 0o600 for m in modes.values()), modes
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
