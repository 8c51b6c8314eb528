"""The balance a registered task's decision reads is read while the agent quotes: a read
ahead of the seller's terms (Judge.read_ahead) starts it too, and the task's next
decision takes it, once, when it is no older than CARRIED_S (judge.balances). Any other
decision reads the balance itself, as before."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_judge_payto import OUTSIDE_PAY_TO, serving_402
from test_judge_tasks import USDC, authorization, request

from judge.balances import CARRIED_S, BalanceReads, BalancesAhead
from judge.fingerprint import call_fingerprint
from judge.jev import Judge
from judge.payto import advertised_terms
from judge.tasks import TaskLimits
from judge.verdict import VerdictSigner


class _Balance:
    """The wallet's balance as the chain would answer it, counting the reads."""

    def __init__(self, atomic: int) -> None:
        self.atomic, self.reads = atomic, 0

    def __call__(self, asset: str) -> int:
        self.reads += 1
        return self.atomic


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def seller() -> Iterator[str]:
    with serving_402(OUTSIDE_PAY_TO) as url:
        yield url


def _judge(signer: VerdictSigner, seller: str, balance: _Balance) -> Judge:
    judge = Judge(signer, allowed_assets={31337: [USDC]}, balance_of=balance,
                  require_task=True, terms_of=advertised_terms)
    for task in ("task-1", "task-2"):
        judge.register_task(TaskLimits(task_id=task, spend_cap_atomic=1_000_000,
                                       per_call_cap_atomic=500_000, approval_threshold_atomic=None,
                                       recipients=(), sellers=(seller,)))
    return judge


def _buy(seller: str, task: str, nonce: int) -> Any:
    url = seller + "/data"
    return request(authorization(OUTSIDE_PAY_TO, 10_000, nonce), args={"url": url}, seller=seller,
                   call_fingerprint=call_fingerprint("pay_http", {"url": url}), task_id=task)


def test_the_balance_read_with_the_read_ahead_serves_the_tasks_next_decision_once(
    seller: str, signer: VerdictSigner
) -> None:
    balance = _Balance(0)  # the wallet is empty when the agent quotes
    judge = _judge(signer, seller, balance)
    assert judge.read_ahead("task-1", seller + "/data").stated is not None
    assert balance.reads == 1  # started with the read of the seller's 402
    balance.atomic = 5_000_000  # funded since: the decision rules on the read it carried
    refused = judge.decide(_buy(seller, "task-1", 1))
    assert refused.decision == "refuse" and "balance" in refused.reason, refused.reason
    assert balance.reads == 1
    # Taken once: the task's next decision reads the balance itself, and sees the funds.
    approved = judge.decide(_buy(seller, "task-1", 2))
    assert approved.decision == "approve", approved.reason
    assert balance.reads == 2


def test_another_tasks_decision_never_takes_a_balance_read_ahead(
    seller: str, signer: VerdictSigner
) -> None:
    balance = _Balance(0)
    judge = _judge(signer, seller, balance)
    judge.read_ahead("task-1", seller + "/data")
    balance.atomic = 5_000_000
    approved = judge.decide(_buy(seller, "task-2", 1))
    assert approved.decision == "approve", approved.reason
    assert balance.reads == 2  # its own read; task-1's stays for task-1


def test_no_balance_is_read_ahead_for_a_task_the_judge_does_not_know(
    seller: str, signer: VerdictSigner
) -> None:
    balance = _Balance(5_000_000)
    judge = _judge(signer, seller, balance)
    assert judge.read_ahead("task-unregistered", seller + "/data").started is False
    assert judge.read_ahead("task-1", "http://127.0.0.1:10/data").started is False  # not its seller
    time.sleep(0.05)
    assert balance.reads == 0


def test_a_read_ahead_older_than_carried_s_or_taken_is_not_used() -> None:
    balance, clock = _Balance(7), _Clock()
    ahead = BalancesAhead(balance, clock=clock)
    ahead.start("task-1", [USDC])
    taken = ahead.take("task-1")
    assert taken[USDC.lower()].result(5) == 7
    assert ahead.take("task-1") == {}  # once
    ahead.start("task-1", [USDC])
    clock.now += CARRIED_S + 0.1
    assert ahead.take("task-1") == {}  # too old: the decision reads anew
    assert ahead.take(None) == {}
    assert BalancesAhead(None).take("task-1") == {}


def test_reads_ahead_asked_again_and_again_start_one_balance_read_per_carried_s(
    seller: str, signer: VerdictSigner
) -> None:
    """A compromised agent repeating its read ahead (each joins the read already waiting)
    cannot queue balance reads in front of other tasks' decisions: one per CARRIED_S."""
    balance = _Balance(5_000_000)
    judge = _judge(signer, seller, balance)
    for _ in range(200):
        judge.read_ahead("task-1", seller + "/data")
    time.sleep(0.05)
    assert balance.reads == 1


def test_a_balance_read_ahead_that_failed_is_read_again_by_the_decision() -> None:
    calls: list[int] = []

    def flaky(asset: str) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("the node reset the connection")
        return 9

    ahead = BalancesAhead(flaky)
    ahead.start("task-1", [USDC])
    reads = BalanceReads(flaky, [USDC], ahead.take("task-1"))
    reads.ready()
    assert reads.of(USDC) == 9 and len(calls) == 2


def test_a_decision_waiting_on_the_node_holds_no_other_decision(
    seller: str, signer: VerdictSigner
) -> None:
    """The balance is waited for before the decision lock: one task's slow read of the node
    never holds another task's decision."""
    release, first = threading.Event(), threading.Event()

    def slow_once(asset: str) -> int:
        if not first.is_set():
            first.set()
            release.wait(10)
        return 5_000_000

    judge = _judge(signer, seller, _Balance(0))
    judge._balance_of = slow_once  # the node answers the first read late
    judge._balances_ahead = BalancesAhead(slow_once)
    verdicts: dict[str, Any] = {}
    held = threading.Thread(
        target=lambda: verdicts.setdefault("held", judge.decide(_buy(seller, "task-1", 1))))
    held.start()
    assert first.wait(10)
    started = time.monotonic()
    other = judge.decide(_buy(seller, "task-2", 2))
    assert other.decision == "approve", other.reason
    assert time.monotonic() - started < 5 and held.is_alive()
    release.set()
    held.join(10)
    assert verdicts["held"].decision == "approve"


def test_a_forked_child_never_takes_a_balance_read_its_parent_started() -> None:
    ahead = BalancesAhead(_Balance(7))
    ahead.start("task-1", [USDC])
    ahead._pid = -1  # as in a child forked now (the read's thread is its parent's)
    assert ahead.take("task-1") == {}
