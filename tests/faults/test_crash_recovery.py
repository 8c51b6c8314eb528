"""The process dies between signing and settlement (SIGKILL). On restart the ledger shows
the spend as pending; reconciliation resolves it from the chain; and a retry never pays
twice for the same purchase (the verdict is single-use; one Transfer log at most).

In both compositions the agent process (crash_child.py) dies holding the signature; with
services, the judge and wallet services outlive it. Below, with services only, the wallet
service itself is SIGKILLed at each crash point inside a call and restarted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fault_support import AGENT_ADDR, SELLER_ADDR, Agent, build_agent, poll, relay_authorization

from agent.models.scripted import ScriptedModel
from chain.usdc import USDC_NAME, USDC_VERSION, eip3009_typed_data, usdc_contract
from judge.fingerprint import call_fingerprint, typed_data_fingerprint
from judge.jev import PaidCallRequest
from judge.verdict import Verdict
from tests._services import Composition
from tests._support import lying_transfer
from wallet.errors import (
    AuthorizationOutstanding,
    TaskMismatch,
    VerdictReplayed,
    WalletUnreachable,
)
from wallet.ledger import Ledger
from wallet.reconcile import reconcile

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("crash_child.py")
PRICE = 100_000


def crash_after_signing(
    tmp_path: Path, chain: Any, composition: Composition
) -> tuple[Agent, dict[str, Any], dict[str, Any]]:
    """Run the child until the ledger says 'signed', then SIGKILL it. Returns the agent
    that comes back: in-process, a new wallet over the same SQLite file; with services, a
    new agent process's clients of the judge and wallet services, which outlived it."""
    db, out = tmp_path / "nib.db", tmp_path / "out"
    out.mkdir()
    agent, services = None, []
    if composition.services:
        agent = build_agent(db, chain.rpc_url, chain.usdc, ScriptedModel({}),
                            allowlist=("http://127.0.0.1:8402",), composition=composition)
        assert agent.services is not None  # the user registers the task; the child runs it
        agent.services.register("crash-run", "Buy the gas stats.", agent.deps)
        socket = agent.wallet.socket_path  # type: ignore[union-attr]
        services = [agent.services.judge.url, agent.services.agent_token, str(socket)]
    child = subprocess.Popen(
        [sys.executable, str(CHILD), chain.rpc_url, chain.usdc, str(db), str(out), *services],
        cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    ledger = Path(agent.db) if agent is not None else db  # the services' records, or its
    try:
        def signed_on_disk() -> bool:
            if child.poll() is not None:
                raise AssertionError(f"child exited early: {child.stdout.read()!r}")  # type: ignore[union-attr]
            if not (out / "signed.json").exists() or not ledger.exists():
                return False
            rows = Ledger(ledger).rows()
            return bool(rows) and rows[0].status == "signed"

        poll(signed_on_disk, timeout_s=60, what="the child's ledger row 'signed'")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    intent = json.loads((out / "intent.json").read_text())
    return agent or restart(db, chain), intent, json.loads((out / "signed.json").read_text())


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
        agent.wallet.sign_typed_data(typed, verdict, run_id=verdict.task_id or "", spend_cap_atomic=1_000_000)
    with pytest.raises(TaskMismatch):  # nor under another run
        agent.wallet.sign_typed_data(typed, verdict, run_id="crash-run-retry", spend_cap_atomic=1_000_000)


def authorization_used(chain: Any, nonce: str) -> bool:
    token = usdc_contract(chain.w3, chain.usdc)
    return bool(token.functions.authorizationState(AGENT_ADDR, bytes.fromhex(nonce[2:])).call())


@pytest.mark.slow
def test_crash_then_the_authorization_lands_reconcile_settles_it_once(
    tmp_path: Path, chain: Any, composition: Composition
) -> None:
    before = usdc_contract(chain.w3, chain.usdc).functions.balanceOf(AGENT_ADDR).call()
    agent, intent, signed = crash_after_signing(tmp_path, chain, composition)
    db = agent.db
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
    tmp_path: Path, chain: Any, composition: Composition
) -> None:
    before = usdc_contract(chain.w3, chain.usdc).functions.balanceOf(AGENT_ADDR).call()
    agent, intent, signed = crash_after_signing(tmp_path, chain, composition)
    db = agent.db
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
def test_reconcile_fails_an_expired_unused_authorization(
    tmp_path: Path, chain: Any, composition: Composition
) -> None:
    agent, intent, signed = crash_after_signing(tmp_path, chain, composition)
    db = agent.db
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


# ------------------------------------------------------------ the wallet service killed
#
# The same crash, one process over: the agent lives and the wallet service dies (SIGKILL)
# at a crash point inside a call, then `nib services up` starts a new one on the same
# database. Only the services composition has a wallet service to kill; in-process the
# signer dies with the agent, which the tests above (crash_child.py) cover.

SERVICES = pytest.mark.parametrize("composition", ["services"], indirect=True)
SELLER_URL = "http://127.0.0.1:8402"
RESOURCE = SELLER_URL + "/analytics/gas"
RUN = "crash-run"


def approved(agent: Agent, chain: Any, kind: str) -> tuple[dict[str, Any], Verdict]:
    """A payment of ``kind`` (an x402 authorization or a USDC transfer) to the seller,
    and the judge service's approval of it for the registered task RUN."""
    assert agent.services is not None
    if kind == "transfer":  # a direct transfer no text orders: registered by its limits
        agent.services.register_by_limits(RUN, f"Buy the gas stats; pay {SELLER_ADDR}.", agent.deps)
    else:
        agent.services.register(RUN, f"Buy the gas stats; pay {SELLER_ADDR}.", agent.deps)
    if kind == "transfer":
        nonce = agent.wallet.nonces.allocate()
        payload, request = lying_transfer(chain.w3, chain.usdc, chain.chain_id, SELLER_ADDR,
                                          PRICE, nonce, task_id=RUN)
    else:
        now = agent.client.block_timestamp("latest")
        payload = eip3009_typed_data(
            name=USDC_NAME, version=USDC_VERSION, chain_id=31337, verifying_contract=chain.usdc,
            sender=AGENT_ADDR, recipient=SELLER_ADDR, value=PRICE, valid_after=now - 600,
            valid_before=now + 300, nonce=os.urandom(32),
        )
        args = {"url": RESOURCE}
        request = PaidCallRequest(
            tool="pay_http", args=args, call_fingerprint=call_fingerprint("pay_http", args),
            payload_fingerprint=typed_data_fingerprint(payload), price=PRICE, asset=chain.usdc,
            recipient=SELLER_ADDR, chain_id=31337, remaining_budget=10**15, balance=10**15,
            per_call_cap_atomic=10**15, spend_cap_atomic=10**15, missing=("gas_stats",),
            tool_facts=("gas_stats",), task_id=RUN, payload=payload,
        )
    verdict = agent.deps.judge.decide(request)
    assert verdict.decision == "approve", verdict.reason
    return payload, verdict


def sign(agent: Agent, kind: str, payload: dict[str, Any], verdict: Verdict, run_id: str) -> Any:
    if kind == "transfer":
        return agent.wallet.sign_transaction(payload, verdict, run_id=run_id, spend_cap_atomic=1_000_000)
    return agent.wallet.sign_typed_data(payload, verdict, run_id=run_id, spend_cap_atomic=1_000_000,
                                        resource=RESOURCE)


def killed_mid_call(composition: Composition, call: Callable[[], Any]) -> None:
    """Make ``call`` on the wallet service; once the service stops at its hang point,
    SIGKILL it: the call fails as WalletUnreachable, saying the outcome is unknown (the
    service had read the request), and nothing after that point ran."""
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(call)
        composition.hung()
        composition.kill_wallet()
        with pytest.raises(WalletUnreachable, match="its answer is unknown"):
            pending.result(timeout=60)


def service_agent(tmp_path: Path, chain: Any, composition: Composition, event: str,
                  kind: str) -> Agent:
    return build_agent(tmp_path / "nib.db", chain.rpc_url, chain.usdc, ScriptedModel({}),
                       allowlist=(SELLER_URL,), composition=composition,
                       hang_on={"event": event, "kind": kind})


@SERVICES
@pytest.mark.parametrize("kind", ["x402", "transfer"])
def test_wallet_service_killed_after_signing_before_answering_pays_nothing_twice(
    kind: str, tmp_path: Path, chain: Any, composition: Composition
) -> None:
    agent = service_agent(tmp_path, chain, composition, "wallet.signed", kind)
    before = agent.balance(AGENT_ADDR), agent.balance(SELLER_ADDR)
    payload, verdict = approved(agent, chain, kind)
    killed_mid_call(composition, lambda: sign(agent, kind, payload, verdict, RUN))
    [row] = agent.ledger()  # written 'signed' before the signature existed
    assert (row.status, row.verdict_id, row.amount) == ("signed", verdict.id, PRICE)

    composition.restart_wallet()
    # The same payment under its verdict, to the new service: refused, for this run or
    # any other (the verdict was consumed at the judge before the signature was made;
    # an authorization for the same resource is still live in the ledger).
    with pytest.raises(AuthorizationOutstanding if kind == "x402" else VerdictReplayed):
        sign(agent, kind, payload, verdict, RUN)
    with pytest.raises(TaskMismatch):  # nor under another run: the verdict names its task
        sign(agent, kind, payload, verdict, "crash-run-retry")
    if kind == "x402":  # and the verdict itself is spent, whatever the resource
        with pytest.raises(VerdictReplayed):
            agent.wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=1_000_000)
    assert len(agent.ledger()) == 1 and agent.transfers_from_agent() == []
    holder = agent.wallet.holder  # type: ignore[union-attr]
    recovery = agent.wallet.recover_run(RUN, holder, "wallet service killed")
    if kind == "transfer":
        # The signed bytes died with the service: the row fails, its nonce comes back,
        # and the payment, approved again, goes out once under the same number.
        assert recovery.failed == (row.id,) and recovery.nonces == (payload["nonce"],)
        again, verdict2 = approved(agent, chain, kind)
        assert again["nonce"] == payload["nonce"]
        agent.wallet.send_transaction(sign(agent, kind, again, verdict2, RUN))
        assert sorted(r.status for r in agent.ledger()) == ["failed", "settled"]
        assert [(t.recipient, t.value) for t in agent.transfers_from_agent()] == [
            (SELLER_ADDR, PRICE)]
        paid = PRICE
    else:
        # An authorization may still move while it is valid: it stays pending until the
        # chain's clock passes validBefore, then reconcile fails it. It never moved.
        assert recovery.pending == (row.id,)
        chain.rpc("evm_increaseTime", [3_600])
        chain.rpc("evm_mine")
        later = time.time() + 3_600
        nonce = payload["message"]["nonce"]
        assert not authorization_used(chain, nonce if isinstance(nonce, str) else "0x" + nonce.hex())
        reconcile(agent.db, agent.client, chain.usdc, AGENT_ADDR, agent.start_block,
                  clock=lambda: later)
        assert [r.status for r in agent.ledger()] == ["failed"]
        assert agent.transfers_from_agent() == []
        paid = 0
    assert agent.balance(AGENT_ADDR) == before[0] - paid
    assert agent.balance(SELLER_ADDR) == before[1] + paid
    assert reconcile(agent.db, agent.client, chain.usdc, AGENT_ADDR, agent.start_block).clean


@SERVICES
def test_wallet_service_killed_after_broadcast_before_recording_pays_once(
    tmp_path: Path, chain: Any, composition: Composition
) -> None:
    agent = service_agent(tmp_path, chain, composition, "wallet.broadcast", "transfer")
    before = agent.balance(AGENT_ADDR), agent.balance(SELLER_ADDR)
    payload, verdict = approved(agent, chain, "transfer")
    signed = sign(agent, "transfer", payload, verdict, RUN)
    killed_mid_call(composition, lambda: agent.wallet.send_transaction(signed))
    # The node took the transaction before the kill; the ledger did not record it.
    [row] = agent.ledger()
    assert (row.status, row.tx_hash) == ("signed", signed.tx_hash)
    assert [(t.recipient, t.value, t.tx_hash.lower()) for t in agent.transfers_from_agent()] == [
        (SELLER_ADDR, PRICE, signed.tx_hash.lower())]

    composition.restart_wallet()
    with pytest.raises(VerdictReplayed):
        sign(agent, "transfer", payload, verdict, RUN)
    with pytest.raises(TaskMismatch):
        sign(agent, "transfer", payload, verdict, "crash-run-retry")
    holder = agent.wallet.holder  # type: ignore[union-attr]
    recovery = agent.wallet.recover_run(RUN, holder, "wallet service killed")
    assert recovery.pending == (row.id,) and recovery.failed == ()  # the node knows it
    report = reconcile(agent.db, agent.client, chain.usdc, AGENT_ADDR, agent.start_block)
    assert report.clean and report.resolved == (row.id,)
    [row] = agent.ledger()
    assert row.status == "settled" and "settled by reconcile" in row.note
    # The number is used: the next payment takes the one after it.
    assert agent.wallet.nonces.allocate() == payload["nonce"] + 1
    assert len(agent.transfers_from_agent()) == 1
    assert agent.balance(AGENT_ADDR) == before[0] - PRICE
    assert agent.balance(SELLER_ADDR) == before[1] + PRICE
