"""A run's reported spend is the ledger's, read at report time (agent.report.spend): it
follows the ledger's later changes (a release by reconcile); a run the ledger holds no row
of signed nothing and is shown so; only a ledger that cannot be read falls back to the
figure the run stored, marked as the run's, naming what was found and the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from agent.cli.services import RECORDS_FILE, services_home
from agent.config import NibSettings
from agent.report.spend import LedgerSpend, ledger_spend, reported_spend
from agent.store import RunStore
from wallet.meter import SpendMeter

NIB = [sys.executable, "-m", "agent.cli"]


@dataclass(frozen=True)
class _Verdict:
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    payload_fingerprint: str = "0x" + "ab" * 32
    asset: str = "0x" + "11" * 20
    recipient: str = "0x" + "22" * 20
    chain_id: int = 31337


def test_the_reported_spend_is_the_ledgers_and_follows_a_later_release(tmp_path: Path) -> None:
    settings = NibSettings(home=tmp_path)
    meter = SpendMeter(settings.database)
    held = meter.reserve("run-1", _Verdict(), 20_000, 1_000_000, 10_000_000)
    settled = meter.reserve("run-1", _Verdict(), 30_000, 1_000_000, 10_000_000)
    meter.mark_signed(settled, auth_nonce="0x" + "01" * 32, valid_before=2_000_000_000)
    meter.settle(settled, "0x" + "aa" * 32)
    stored = {"usdc_atomic": 0, "settled_atomic": 0}  # what the run process saw
    reading = ledger_spend(settings)("run-1")
    assert reading.state == "held"
    read = reported_spend(stored, reading)
    assert (read["usdc_atomic"], read["settled_atomic"], read["outstanding_atomic"]) == (50_000, 30_000, 20_000)
    assert (read["source"], read["ledger"]) == ("ledger", "held")
    meter.release(held, "reconcile: expired unused")
    assert reported_spend(stored, ledger_spend(settings)("run-1"))["usdc_atomic"] == 30_000


def test_a_run_the_ledger_holds_no_row_of_signed_nothing_unless_its_own_figure_says_otherwise(
    tmp_path: Path,
) -> None:
    settings = NibSettings(home=tmp_path)
    SpendMeter(settings.database)  # a ledger that holds other runs' rows, or none
    reading = ledger_spend(settings)("run-2")
    assert reading.state == "unsigned" and reading.problem == ""
    nothing = reported_spend({"usdc_atomic": 0, "gas_wei": 0}, reading)
    assert (nothing["usdc_atomic"], nothing["gas_wei"], nothing["source"], nothing["ledger"]) == (
        0, 0, "ledger", "unsigned")
    # A run whose own result records money moved, absent from this ledger (its wallet kept
    # another one): its figure is reported, never a spend of nothing.
    elsewhere = reported_spend({"usdc_atomic": 7}, reading)
    assert (elsewhere["usdc_atomic"], elsewhere["source"], elsewhere["ledger"]) == (7, "run", "unsigned")
    assert "holds no row of this run" in str(elsewhere["ledger_problem"])


def test_the_report_shows_the_ledgers_spend_over_the_stored_one() -> None:
    from agent.report.page import run_from_store

    row = {"run_id": "r", "task": "t", "status": "stopped", "stop_reason": "wallet-unreachable",
           "result": json.dumps({"spend": {"usdc_atomic": 0, "gas_wei": 0}, "steps": 2})}
    ledger = {"usdc_atomic": 50_000, "gas_wei": 7, "settled_atomic": 50_000, "source": "ledger"}
    assert run_from_store(row)["spend_usdc_atomic"] == 0
    shown = run_from_store(row, (), LedgerSpend("held", ledger))
    assert (shown["spend_usdc_atomic"], shown["gas_wei"]) == (50_000, 7)
    unread = run_from_store(row, (), LedgerSpend("unreadable", problem="no ledger"))
    assert unread["spend_usdc_atomic"] == 0


# ------------------------------------------------------------------ nib show


def _nib(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NIB_HOME": str(home)}
    env.pop("NIB_CONFIG", None)
    env.pop("NIB_DATABASE_URL", None)
    return subprocess.run(NIB + list(args), env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def _finished_run(home: Path, run_id: str) -> None:
    """A finished run as the loop leaves it: its row, its result and the spend it saw."""
    store = RunStore(NibSettings(home=home).database)
    store.start_run(run_id, "What is the base fee?", "local-guarded")
    store.finish_run(run_id, {
        "run_id": run_id, "stop_reason": "evidence-covered", "finished": True, "steps": 1,
        "answer": "base fee (gwei): 0.7 gwei (observed, evidence e1)",
        "spend": {"usdc_atomic": 0, "gas_wei": 0, "settled_atomic": 0, "outstanding_atomic": 0,
                  "source": "ledger"},
    })
    store.close()


def _spend_line(home: Path, run_id: str) -> str:
    shown = _nib(home, "show", run_id)
    assert shown.returncode == 0, shown.stderr
    return next(line for line in shown.stdout.splitlines() if line.startswith("spend"))


def test_nib_show_of_a_run_that_signed_nothing_says_so_not_that_the_ledger_is_unreadable(
    tmp_path: Path,
) -> None:
    # An outside tester's free run: no payment, so no ledger row, shown "(ledger unreadable)".
    _finished_run(tmp_path, "free-run")
    line = _spend_line(tmp_path, "free-run")
    assert line == (
        "spend: none, nothing was signed for this run (the ledger holds no payment or gas of it)"
    )
    shown = json.loads(_nib(tmp_path, "show", "free-run", "--json").stdout)
    spend = shown["run"]["result"]["spend"]
    assert (spend["usdc_atomic"], spend["source"], spend["ledger"]) == (0, "ledger", "unsigned")
    # A run that did sign is still read from the ledger, figures and all.
    _finished_run(tmp_path, "paid-run")
    meter = SpendMeter(NibSettings(home=tmp_path).database)
    row = meter.reserve("paid-run", _Verdict(), 20_000, 1_000_000, 10_000_000)
    meter.mark_signed(row, auth_nonce="0x" + "02" * 32, valid_before=2_000_000_000)
    meter.settle(row, "0x" + "bb" * 32)
    assert _spend_line(tmp_path, "paid-run") == (
        "spend 0.02 USDC (settled 0.02 USDC, outstanding 0.00 USDC) + gas 0 wei, read from the "
        "ledger"
    )


def test_a_ledger_that_cannot_be_read_is_named_unreadable_with_what_was_found_and_the_fix(
    tmp_path: Path,
) -> None:
    _finished_run(tmp_path, "some-run")
    records = services_home(tmp_path)
    records.mkdir(mode=0o700)
    gone = records / "nib.db"
    (records / RECORDS_FILE).write_text(str(gone))  # the services' records, since removed
    missing = ledger_spend(NibSettings(home=tmp_path))("some-run")
    assert (missing.state, missing.spend) == ("unreadable", None)
    assert missing.problem == (
        f"no ledger at {gone}, where this home's records are kept; expected the wallet's "
        "database there. Fix: restore that file, or run nib with the NIB_HOME the run ran in"
    )
    gone.write_bytes(b"not a database, " * 512)  # a file SQLite cannot open
    line = _spend_line(tmp_path, "some-run")
    assert line.startswith(
        "spend 0.00 USDC (settled 0.00 USDC, outstanding 0.00 USDC) + gas 0 wei, read from the "
        f"run (ledger unreadable: the ledger at {gone} could not be "
    ), line
    assert "DatabaseError" in line and "Fix: check that it is up and readable by you" in line
    shown = json.loads(_nib(tmp_path, "show", "some-run", "--json").stdout)
    spend = shown["run"]["result"]["spend"]
    assert (spend["source"], spend["ledger"]) == ("run", "unreadable")
    assert "DatabaseError" in spend["ledger_problem"]
    runs = _nib(tmp_path, "runs", "--json")  # every reader of runs still reads them
    assert runs.returncode == 0, runs.stderr
    assert [(r["run_id"], r["spend_source"]) for r in json.loads(runs.stdout)] == [("some-run", "run")]
