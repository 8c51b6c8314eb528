"""The judge's record shared by several judge processes (connections) on one database:
a verdict is consumed once, and task limits are registered once. On SQLite and
PostgreSQL."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from chain.devkeys import JUDGE, dev_account
from judge.errors import OutcomeRefused, VerdictConsumed
from judge.fingerprint import call_fingerprint
from judge.records import VerdictRecords
from judge.verdict import VerdictSigner

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
SELLER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"


def test_a_verdict_is_consumed_once_across_connections(store_location: str | Path) -> None:
    verdict = VerdictSigner(dev_account(JUDGE)).issue(
        decision="approve", call_fingerprint=call_fingerprint("pay_http", {"url": "u"}),
        payload_fingerprint="0x" + "ab" * 32, amount=100_000, recipient=SELLER, asset=USDC,
        chain_id=31337, p="0.8", ev="0.05", reason="test", ttl_s=120, now=time.time(),
    )
    judges = [VerdictRecords(store_location) for _ in range(3)]
    judges[0].issued(verdict, subject="pay_http", facts=("gas_stats",), task_id="t1")
    barrier = threading.Barrier(9)
    outcomes: list[str] = []

    def consume(i: int) -> None:
        barrier.wait()
        try:
            judges[i % 3].consume(verdict)
            outcomes.append("consumed")
        except VerdictConsumed:
            outcomes.append("refused")

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["consumed"] + ["refused"] * 8
    assert judges[2].standing(verdict.id, verdict.payload_fingerprint) == "consumed"
    assert judges[1].committed("t1", time.time()) == 100_000
    judges[1].take_outcome(verdict.id, "gas_stats")
    with pytest.raises(Exception, match="already recorded"):
        judges[2].take_outcome(verdict.id, "gas_stats")


def test_an_outcome_counts_only_once_paid_and_once_per_task_seller_and_fact(
    store_location: str | Path,
) -> None:
    """With the judge reading the chain (``paid``), an outcome counts only for an approval
    whose authorization settled, and once per (task, subject, fact kind) (issue 22)."""
    signer = VerdictSigner(dev_account(JUDGE))
    records = VerdictRecords(store_location)
    paid: set[str] = set()

    def approved(task: str) -> str:
        verdict = signer.issue(
            decision="approve", call_fingerprint=call_fingerprint("pay_http", {"url": task}),
            payload_fingerprint="0x" + "cd" * 32, amount=1, recipient=SELLER, asset=USDC,
            chain_id=31337, p="0.4", ev="0.01", reason="test", ttl_s=120, now=time.time())
        records.issued(verdict, subject="pay_http@s", facts=("gas_stats",), task_id=task,
                       authorization=f"0xagent:0x{verdict.id}")
        records.consume(verdict)
        return verdict.id

    def settled(rec: object) -> bool:
        return getattr(rec, "id", "") in paid

    unpaid = approved("t1")
    with pytest.raises(OutcomeRefused, match="not settled on chain"):
        records.take_outcome(unpaid, "gas_stats", paid=settled)
    first, second = approved("t1"), approved("t1")
    paid.update({first, second})
    records.take_outcome(first, "gas_stats", paid=settled)
    with pytest.raises(OutcomeRefused, match="one per task, seller and fact kind"):
        records.take_outcome(second, "gas_stats", paid=settled)
    other = approved("t2")
    paid.add(other)
    records.take_outcome(other, "gas_stats", paid=settled)  # another task: counts
