"""Many worker processes on one queue, one wallet and one treasury cap: no overspend, no
nonce error, no double payment, and the ledger, the meter and the chain's Transfer logs
agree to the unit. A worker SIGKILLed during a payment is recovered with the money state
right. Each test runs on PostgreSQL and on SQLite (one host) through ``store_location``.

Four worker processes each run a real agent (loop, judge, wallet, x402 buyer, transfer
tool) against the session's Anvil and the paywall served by this process; every task
buys the paywall's gas statistics over x402 and tips the seller by direct transfer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fault_support import AGENT_ADDR, CAP_PER_TASK, GAS_PRICE, SELLER_ADDR, TIP, build_agent, poll

from agent.loop.limits import Limits
from agent.models.scripted import ScriptedModel
from agent.queue import TaskQueue
from agent.store import RunStore
from agent.worker import STOP_DIED_AFTER_PAYMENT
from chain.client import ChainClient
from chain.paywall.app import PaywallServer
from tests._services import Composition
from tests._support import ChainReadings
from wallet.meter import SpendMeter
from wallet.reconcile import reconcile

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("worker_child.py")
WORKERS, TASKS_EACH = 4, 25
#: One cap over every task, gas included: room for 80 tasks' purchases and tips, less the
#: gas they burn (metered at the meter's default rate, so it depends on the base fee):
#: it binds whatever the gas costs, and leaves room for at least ten full tasks.
TREASURY = 80 * (GAS_PRICE + TIP)
#: Short enough to keep the kill test quick, long enough that a live worker's renewals
#: (every third of it) arrive on a loaded two-core machine.
LEASE_S = 8.0


class Readings(ChainReadings):
    def __init__(self, db: Path | str, client: ChainClient, usdc: str, start: int) -> None:
        self.db, self.client, self.usdc, self.start_block = db, client, usdc, start  # type: ignore[assignment]


def with_services(composition: Composition, location: str | Path, chain: Any,
                  paywall: PaywallServer, queue: TaskQueue,
                  ids: list[str]) -> tuple[str | Path, list[str]]:
    """With services: the judge and wallet services with their records where `nib
    services up` keeps them (the treasury cap is the wallet service's), every queued task
    registered with the judge as the user does (workers never hold the admin token).
    Returns where the ledger is and what a worker needs to use the services. In-process:
    the workers' database, and nothing (each worker composes its own judge and wallet)."""
    if not composition.services:
        return location, []
    agent = build_agent(location, chain.rpc_url, chain.usdc, ScriptedModel({}),
                        allowlist=(paywall.url,), paywall_url=paywall.url,
                        treasury_cap=TREASURY, composition=composition)
    assert agent.services is not None
    for task_id in ids:
        task = queue.get(task_id)
        limits = Limits(spend_cap_atomic=task.max_spend or CAP_PER_TASK)
        agent.services.register(task_id, task.task, replace(agent.deps, limits=limits),
                                queued=True)
    socket = agent.wallet.socket_path  # type: ignore[union-attr]
    # The workers hold a worker token, which only claims the queued tasks' own tokens.
    return agent.db, [agent.services.judge.url, agent.services.admin.worker_token(), str(socket)]


def spawn(location: str | Path, chain: Any, paywall: PaywallServer, hang_marker: str = "-",
          services: list[str] | None = None, concurrency: int = 2) -> subprocess.Popen[str]:
    args = [str(location), chain.rpc_url, chain.usdc, paywall.url, str(TREASURY),
            str(concurrency), str(LEASE_S), hang_marker, *(services or [])]
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args], cwd=str(REPO), text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def wait_all(procs: list[subprocess.Popen[str]], timeout_s: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    out = []
    for p in procs:
        try:
            stdout, stderr = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"worker still running after {timeout_s:g} s") from None
        assert p.returncode == 0, stderr[-3000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def money_is_exact(location: str | Path, chain: Any, start: int, before: tuple[int, int],
                   records: str | Path) -> dict[str, Any]:
    """Ledger = meter = chain; no run over its cap, the treasury never exceeded, nothing
    paid twice; reconcile finds nothing unexplained. Returns the figures. ``records``:
    where the ledger is (the workers' database ``location``, or the services')."""
    client = ChainClient(chain.rpc_url, 31337)
    readings = Readings(records, client, chain.usdc, start)
    # What an operator runs after a batch: a transfer whose receipt wait timed out on a
    # loaded machine stays 'signed' until reconcile finds it mined and settles it.
    report = reconcile(records, client, chain.usdc, AGENT_ADDR, start + 1)
    rows = readings.ledger()
    logs = readings.transfers_from_agent()
    settled = [r for r in rows if r.status == "settled"]
    pending = [(r.run_id, r.kind, r.note, RunStore(location).events(r.run_id, "tool.call"))
               for r in rows if r.status not in ("settled", "released", "failed")]
    assert not pending, pending
    onchain = sum(t.value for t in logs)
    assert len(logs) == len(settled) and onchain == sum(r.amount for r in settled)
    assert readings.balance(AGENT_ADDR) == before[0] - onchain
    assert readings.balance(SELLER_ADDR) == before[1] + onchain
    # Nothing paid twice: each settled row has its own verdict, its own authorization (x402)
    # and its own transaction, and each Transfer log backs one row (above). A task may buy
    # again after a purchase whose data failed it; that is a new call under a new verdict.
    assert len({r.verdict_id for r in settled}) == len(settled)
    assert len({r.auth_nonce for r in settled if r.kind == "x402"}) == sum(
        1 for r in settled if r.kind == "x402")
    assert len({r.tx_hash for r in settled}) == len(settled)
    meter = SpendMeter(records, client)
    runs = {r.run_id for r in rows}
    usages = [meter.usage(run) for run in runs]
    assert sum(u.settled for u in usages) == onchain  # meter == ledger == chain
    assert all(u.committed <= CAP_PER_TASK and u.reserved == 0 for u in usages), usages
    committed = sum(u.committed for u in usages)
    assert committed <= TREASURY, (committed, TREASURY)
    report = reconcile(records, client, chain.usdc, AGENT_ADDR, start + 1)  # a second pass
    # Nothing left the wallet unaudited, nothing is still pending (failed rows moved no money).
    assert report.unmatched_onchain == () and report.pending == (), report.to_dict()
    assert all(r.status == "failed" for r in report.unmatched_ledger), report.to_dict()
    return {"onchain": onchain, "settled": len(settled), "committed": committed}


def no_nonce_errors(store: RunStore, task_ids: list[str], readings: Readings) -> None:
    """No task met a nonce error, the wallet's own refusal of a transfer above a lower
    number included: a number given back below a waiting transfer is filled by the wallet
    (wallet/gaps.py), so every transfer goes through in order or fails for a real reason.
    The one real reason a refusal above a gap may still have: the filler's gas did not fit
    a cap (the treasury binds by design near the end of the batch, when the judge's
    refusals give numbers back), which the refused row's note names."""
    for task_id in task_ids:
        for e in store.events(task_id, "tool.call"):
            if "nonce" not in str(e["data"].get("summary", "")).lower():
                continue
            notes = [r.note for r in readings.ledger(task_id) if r.status == "failed"]
            assert any("above a gap" in n and "does not fit" in n for n in notes), (e, notes)


@pytest.mark.slow
def test_four_workers_run_a_hundred_paid_tasks_on_one_wallet_and_one_cap(
    store_location: str | Path, chain: Any, paywall: PaywallServer, composition: Composition
) -> None:
    queue = TaskQueue(store_location)
    ids = [queue.submit(f"Research task {i}; send 0.01 USDC to {SELLER_ADDR}.", max_spend=CAP_PER_TASK)
           for i in range(WORKERS * TASKS_EACH)]
    records, services = with_services(composition, store_location, chain, paywall, queue, ids)
    client = ChainClient(chain.rpc_url, 31337)
    readings = Readings(records, client, chain.usdc, client.block_number())
    before = readings.balance(AGENT_ADDR), readings.balance(SELLER_ADDR)
    started = time.monotonic()
    summaries = wait_all([spawn(store_location, chain, paywall, services=services)
                          for _ in range(WORKERS)], 600)
    elapsed = time.monotonic() - started
    tasks = [queue.get(i) for i in ids]
    assert {t.status for t in tasks} <= {"finished", "stopped"}, queue.counts()
    assert len({t.worker for t in tasks}) == WORKERS  # every worker took a share
    assert sorted(i for s in summaries for i in s["finished"] + s["stopped"]) == sorted(ids)
    paid = sum(1 for t in tasks if t.status == "finished")
    print(f"{paid} tasks paid in full in {elapsed:.1f} s; {queue.counts()}")
    no_nonce_errors(RunStore(store_location), ids, readings)
    figures = money_is_exact(store_location, chain, readings.start_block, before, records)
    print(figures)
    assert paid >= 10  # the treasury stopped the rest (below); gas per task varies with load
    refused = [t for t in tasks if t.status == "stopped"]
    assert refused, "the treasury cap never bound; lower TREASURY"


@pytest.mark.slow
def test_a_worker_killed_during_a_payment_is_recovered_with_the_money_right(
    store_location: str | Path, chain: Any, paywall: PaywallServer, tmp_path: Path,
    composition: Composition,
) -> None:
    queue = TaskQueue(store_location, lease_s=LEASE_S)
    ids = [queue.submit(f"Research task {i}; send 0.01 USDC to {SELLER_ADDR}.", max_spend=CAP_PER_TASK)
           for i in range(5)]
    records, services = with_services(composition, store_location, chain, paywall, queue, ids)
    client = ChainClient(chain.rpc_url, 31337)
    start = client.block_number()
    readings = Readings(records, client, chain.usdc, start)
    before = readings.balance(AGENT_ADDR), readings.balance(SELLER_ADDR)
    marker = tmp_path / "signed-then-hung"
    doomed = spawn(store_location, chain, paywall, str(marker), services, concurrency=1)
    try:
        poll(marker.exists, timeout_s=120, what="the worker signing its transfer")
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=10)
    assert doomed.returncode == -signal.SIGKILL
    dead = marker.read_text()
    assert queue.get(dead).status == "running"  # as the dead worker left it
    assert {r.status for r in readings.ledger(dead)} == {"settled", "signed"}
    # Its lease runs out; a worker started afterwards recovers the task first, then runs
    # the rest of the queue (a worker already running would recover it the same way).
    poll(lambda: (queue.get(dead).lease_until or 0) < time.time(), timeout_s=LEASE_S + 10,
         what="the dead worker's lease running out")
    [summary] = wait_all([spawn(store_location, chain, paywall, services=services)], 300)
    assert summary["recovered"] == [dead]
    closed = queue.get(dead)
    assert (closed.status, closed.stop_reason) == ("closed", STOP_DIED_AFTER_PAYMENT)
    assert "failed 1 unbroadcast" in closed.note and "1 settled" in closed.note
    rows = {r.kind: r for r in readings.ledger(dead)}
    assert rows["x402"].status == "settled"  # bought once, never bought again
    assert rows["transfer"].status == "failed" and "never broadcast" in rows["transfer"].note
    others = [queue.get(i) for i in ids if i != dead]
    assert all(t.status == "finished" for t in others), [(t.status, t.stop_reason) for t in others]
    no_nonce_errors(RunStore(store_location), ids, readings)
    figures = money_is_exact(store_location, chain, start, before, records)
    assert figures["onchain"] == 5 * GAS_PRICE + 4 * TIP
