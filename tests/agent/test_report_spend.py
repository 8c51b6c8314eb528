"""A run's reported spend is the ledger's, read at report time (agent.report.spend): it
follows the ledger's later changes (a release by reconcile), and only a run the ledger never
held falls back to the figure the run stored, marked as the run's."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from agent.cli.commands.history import spent
from agent.config import NibSettings
from agent.report.spend import ledger_spend
from wallet.meter import SpendMeter


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
    stored = {"spend": {"usdc_atomic": 0, "settled_atomic": 0}}  # what the run process saw
    read = spent(stored, ledger_spend(settings)("run-1"))
    assert (read["usdc_atomic"], read["settled_atomic"], read["outstanding_atomic"]) == (50_000, 30_000, 20_000)
    assert read["source"] == "ledger"
    meter.release(held, "reconcile: expired unused")
    assert ledger_spend(settings)("run-1")["usdc_atomic"] == 30_000  # type: ignore[index]
    # A run the ledger never held: the stored figure, marked as the run's own.
    assert ledger_spend(settings)("run-2") is None
    assert spent({"spend": {"usdc_atomic": 7}}, None) == {"usdc_atomic": 7, "source": "run"}


def test_the_report_shows_the_ledgers_spend_over_the_stored_one() -> None:
    import json

    from agent.report.page import run_from_store

    row = {"run_id": "r", "task": "t", "status": "stopped", "stop_reason": "wallet-unreachable",
           "result": json.dumps({"spend": {"usdc_atomic": 0, "gas_wei": 0}, "steps": 2})}
    ledger = {"usdc_atomic": 50_000, "gas_wei": 7, "settled_atomic": 50_000, "source": "ledger"}
    assert run_from_store(row)["spend_usdc_atomic"] == 0
    shown = run_from_store(row, (), ledger)
    assert (shown["spend_usdc_atomic"], shown["gas_wei"]) == (50_000, 7)
