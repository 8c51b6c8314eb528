"""The process dies between signing and settlement (SIGKILL). On restart the ledger shows
the spend as pending; reconciliation resolves it from the chain; and a retry never pays
twice for the same purchase (the verdict is single-use; one Transfer log at most)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fault_support import AGENT_ADDR, SELLER_ADDR, Agent, build_agent, poll, relay_authorization

from agent.models.scripted import ScriptedModel
from chain.usdc import USDC_NAME, USDC_VERSION, eip3009_typed_data, usdc_contract
from judge.verdict import Verdict
from wallet.errors import VerdictReplayed
from wallet.ledger import Ledger
from wallet.reconcile import reconcile

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("crash_child.py")
PRICE = 100_000


def crash_after_signing(tmp_path: Path, chain: Any) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """Run the child until the ledger says 'signed', then SIGKILL it."""
    db, out = tmp_path / "nib.db", tmp_path / "out"
    out.mkdir()
    child = subprocess.Popen(
        [sys.executable, str(CHILD), chain.rpc_url, chain.usdc, str(db), str(out)],
        cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        def signed_on_disk() -> bool:
            if child.poll() is not None:
                raise AssertionError(f"child exited early: {child.stdout.read()!r}")  # type: ignore[union-attr]
            if not (out / "signed.json").exists() or not db.exists():
                return False
            rows = Ledger(db).rows()
            return bool(rows) and rows[0].status == "signed"

        poll(signed_on_disk, timeout_s=60, what="the child's ledger row 'signed'")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    return db, json.loads((out / "intent.json").read_text()), json.loads((out / "signed.json").read_text())


def restart(db: Path, chain: Any) -> Agent:
    """A fresh process's view: a new wallet over the same SQLite file."""
    return build_agent(db, chain.rpc_url, chain.usdc, ScriptedModel({}))


def retry_same_purchase(agent: Agent, chain: Any, intent: dict[str, Any]) -> None:
    """Sign the same purchase again under its verdict: the wallet refuses (single use)."""
    typed = eip3009_typed_data(
        name=USDC_NAME, version=USDC_VERSION, chain_id=31337, verifying_contract=chain.usdc,
        sender=AGENT_ADDR, recipient=SELLER_ADDR, value=PRICE,
        valid_after=intent["valid_after"], valid_before=intent["valid_before"],
        nonce=bytes.fromhex(intent["nonce"][2:]),
    )
    verdict = Verdict.model_validate(intent["verdict"])
    with pytest.raises(VerdictReplayed):
        agent.wallet.sign_typed_data(typed, verdict, run_id="crash-run-retry", cap=1_000_000)


def authorization_used(chain: Any, nonce: str) -> bool:
    token = usdc_contract(chain.w3, chain.usdc)
    return bool(token.functions.authorizationState(AGENT_ADDR, bytes.fromhex(nonce[2:])).call())


@pytest.mark.slow
def test_crash_then_the_authorization_lands_reconcile_settles_it_once(
    tmp_path: Path, chain: Any
) -> None:
    before = usdc_contract(chain.w3, chain.usdc).functions.balanceOf(AGENT_ADDR).call()
    db, intent, signed = crash_after_signing(tmp_path, chain)
    agent = restart(db, chain)
    [row] = agent.ledger()
    assert (row.status, row.amount, row.run_id) == ("signed", PRICE, "crash-run")
    assert agent.wallet.meter.usage("crash-run").reserved == PRICE  # still holds the cap

    # The seller had the signature and submits it after our crash: the money moves.
    assert relay_authorization(chain.w3, chain.usdc, signed["authorization"],
                               signed["signature"]).startswith("ok:")
    report = reconcile(db, agent.client, chain.usdc, AGENT_ADDR, agent.start_block)
    assert report.clean and report.resolved == (row.id,)
    [row] = agent.ledger()
    assert row.status == "settled" and "settled by reconcile" in row.note

    # Retries: the verdict is spent, and the same authorization cannot land twice.
    retry_same_purchase(agent, chain, intent)
    assert relay_authorization(chain.w3, chain.usdc, signed["authorization"],
                               signed["signature"]).startswith("reverted:")
    logs = agent.transfers_from_agent()
    assert [(t.recipient, t.value) for t in logs] == [(SELLER_ADDR, PRICE)]
    assert agent.balance(AGENT_ADDR) == before - PRICE
    assert reconcile(db, agent.client, chain.usdc, AGENT_ADDR, agent.start_block).clean


@pytest.mark.slow
def test_crash_and_the_authorization_never_lands_nothing_moves_and_no_retry_pays(
    tmp_path: Path, chain: Any
) -> None:
    before = usdc_contract(chain.w3, chain.usdc).functions.balanceOf(AGENT_ADDR).call()
    db, intent, signed = crash_after_signing(tmp_path, chain)
    agent = restart(db, chain)
    [row] = agent.ledger()
    assert row.status == "signed"

    # Nobody submits it; the chain's clock passes validBefore: it can never land now.
    chain.rpc("evm_increaseTime", [3_600])
    chain.rpc("evm_mine")
    assert agent.client.block_timestamp("latest") > intent["valid_before"]
    assert not authorization_used(chain, intent["nonce"])
    assert relay_authorization(chain.w3, chain.usdc, signed["authorization"],
                               signed["signature"]).startswith("reverted:")
    retry_same_purchase(agent, chain, intent)
    assert agent.transfers_from_agent() == []
    assert agent.balance(AGENT_ADDR) == before
    report = reconcile(db, agent.client, chain.usdc, AGENT_ADDR, agent.start_block)
    assert report.unmatched_onchain == ()  # no money moved unaudited


@pytest.mark.slow
def test_reconcile_fails_an_expired_unused_authorization(tmp_path: Path, chain: Any) -> None:
    db, intent, signed = crash_after_signing(tmp_path, chain)
    agent = restart(db, chain)
    [row] = agent.ledger()
    assert (row.status, row.valid_before) == ("signed", intent["valid_before"])

    # An hour passes on both clocks (the chain's and the wall clock reconcile reads).
    chain.rpc("evm_increaseTime", [3_600])
    chain.rpc("evm_mine")
    later = time.time() + 3_600
    assert not authorization_used(chain, intent["nonce"])
    report = reconcile(db, agent.client, chain.usdc, AGENT_ADDR, agent.start_block,
                       clock=lambda: later)
    [row] = agent.ledger()
    assert row.status == "failed", row
    assert f"authorization expired unused at {intent['valid_before']}" in row.note
    assert report.resolved == (row.id,) and report.clean
    assert [(r.id, r.status) for r in report.unmatched_ledger] == [(row.id, "failed")]
    assert agent.wallet.meter.usage("crash-run").reserved == 0

    # Failing it was safe: the chain refuses the authorization, and nothing moved.
    assert relay_authorization(chain.w3, chain.usdc, signed["authorization"],
                               signed["signature"]).startswith("reverted:")
    assert agent.transfers_from_agent() == []
    again = reconcile(db, agent.client, chain.usdc, AGENT_ADDR, agent.start_block,
                      clock=lambda: later)
    assert again.resolved == () and again.clean
