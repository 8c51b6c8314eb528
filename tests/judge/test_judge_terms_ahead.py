"""The judge's read of a seller's 402 is made as the agent quotes
(judge.seller_terms.TermsAhead, Judge.read_ahead): the decision that follows takes it
once, while it is answered or when its answer came at most AHEAD_FRESH_S before; any
other decision reads again. The
agent only names the resource: a task's token starts reads for its own task only, and
only of sellers that task may pay."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from chain.devkeys import JUDGE, dev_account
from judge.errors import TaskScopeRefused
from judge.jev import Judge
from judge.mcp_terms import OfferedTerms
from judge.seller_terms import AHEAD_FRESH_S, AHEAD_PER_TASK, TermsAhead
from judge.service import JudgeClient, JudgeServer
from judge.tasks import TaskLimits
from judge.verdict import VerdictSigner

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
SELLER = "http://127.0.0.1:9"
OFFER = OfferedTerms("0x" + "ab" * 20, 10_000, USDC.lower(), 31337)


class _Seller:
    """A reader that counts the reads each URL got; its answer changes with ``version``."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        self.reads: list[str] = []
        self.version = 0
        self.hold = hold

    def __call__(self, url: str, method: str, body: object) -> tuple[OfferedTerms, ...]:
        self.reads.append(url)
        if self.hold is not None:
            self.hold.wait(10)
        return (OfferedTerms(OFFER.pay_to, OFFER.amount + self.version, OFFER.asset,
                             OFFER.chain_id),)


def _ahead_of(ahead: TermsAhead, task: str, url: str, method: str = "GET",
              body: object = None) -> threading.Thread:
    """The agent's quote asking ``ahead`` for a read, on a thread of its own (it waits for
    the seller's answer); joined when the seller answers."""
    quote = threading.Thread(target=ahead.read, args=(task, url, method, body), daemon=True)
    quote.start()
    return quote


def _started(seller: _Seller, reads: int) -> None:
    """Wait until the seller has been asked ``reads`` times."""
    deadline = time.monotonic() + 5
    while len(seller.reads) < reads and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(seller.reads) == reads


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_read_started_ahead_serves_one_decision_and_the_next_reads_again() -> None:
    seller = _Seller()
    ahead = TermsAhead(seller)
    assert ahead.read("task-a", SELLER + "/gas", "GET", None).started
    first = ahead.reader("task-a")(SELLER + "/gas", "GET", None)
    assert len(seller.reads) == 1  # the decision took the read started ahead
    seller.version = 1
    second = ahead.reader("task-a")(SELLER + "/gas", "GET", None)
    assert len(seller.reads) == 2 and second != first  # taken once: read again, anew


def test_a_read_started_too_long_before_its_decision_is_not_used() -> None:
    seller, clock = _Seller(), _Clock()
    ahead = TermsAhead(seller, clock=clock)
    assert ahead.read("task-a", SELLER + "/gas", "GET", None).started  # answered (version 0)
    seller.version = 1
    clock.now += AHEAD_FRESH_S + 0.5
    found = ahead.reader("task-a")(SELLER + "/gas", "GET", None)
    assert len(seller.reads) == 2 and found[0].amount == OFFER.amount + 1


def test_another_tasks_read_another_resource_or_body_is_never_taken() -> None:
    seller = _Seller()
    ahead = TermsAhead(seller)
    assert ahead.read("task-a", SELLER + "/gas", "POST", {"q": 1}).started
    for task, url, body in (("task-b", SELLER + "/gas", {"q": 1}),
                            ("task-a", SELLER + "/other", {"q": 1}),
                            ("task-a", SELLER + "/gas", {"q": 2})):
        ahead.reader(task)(url, "POST", body)
    assert len(seller.reads) == 4  # the one ahead, and one of each decision's own
    ahead.reader("task-a")(SELLER + "/gas", "POST", {"q": 1})
    assert len(seller.reads) == 4  # the read ahead served its own decision


def test_a_task_has_at_most_a_few_reads_waiting_and_a_failed_read_is_made_again() -> None:
    hold = threading.Event()
    seller = _Seller(hold)
    ahead = TermsAhead(seller)
    quotes = [_ahead_of(ahead, "task-a", f"{SELLER}/r{i}") for i in range(AHEAD_PER_TASK)]
    _started(seller, AHEAD_PER_TASK)  # every read is waiting on the seller
    refused = [ahead.read("task-a", f"{SELLER}/r{i}", "GET", None).started
               for i in range(AHEAD_PER_TASK, 10)]
    assert refused == [False] * (10 - AHEAD_PER_TASK)  # the decisions will read themselves
    quotes.append(_ahead_of(ahead, "task-b", SELLER + "/r0"))  # another task's own share
    _started(seller, AHEAD_PER_TASK + 1)
    hold.set()
    for quote in quotes:
        quote.join(5)

    calls: list[int] = []

    def flaky(url: str, method: str, body: object) -> tuple[OfferedTerms, ...]:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("seller reset the connection")
        return (OFFER,)

    failing = TermsAhead(flaky)
    assert failing.read("task-a", SELLER + "/gas", "GET", None).started
    assert failing.reader("task-a")(SELLER + "/gas", "GET", None) == (OFFER,)
    assert len(calls) == 2


def _limits(task: str, sellers: tuple[str, ...]) -> TaskLimits:
    return TaskLimits(task_id=task, spend_cap_atomic=1_000_000, per_call_cap_atomic=100_000,
                      approval_threshold_atomic=None, recipients=(), sellers=sellers)


@pytest.fixture
def served() -> Any:
    seller = _Seller()
    judge = Judge(VerdictSigner(dev_account(JUDGE)), allowed_assets={31337: [USDC]},
                  terms_of=seller, require_task=True)
    judge.register_task(_limits("task-a", (SELLER,)))
    judge.register_task(_limits("task-b", (SELLER,)))
    with JudgeServer(judge, token="services-token") as srv:
        yield srv, judge, seller


def test_a_task_token_starts_reads_for_its_own_task_and_its_own_sellers_only(served: Any) -> None:
    srv, judge, seller = served
    token_a = judge.tasks.issue_token("task", "task-a")
    with JudgeClient(srv.url, token=token_a) as agent_a:
        assert agent_a.reads_seller_terms
        assert agent_a.read_ahead("task-a", SELLER + "/gas").started is True
        with pytest.raises(TaskScopeRefused):
            agent_a.read_ahead("task-b", SELLER + "/gas")  # another task's decision
        # Not a seller task-a may pay, not http(s), a task never registered: nothing read.
        assert agent_a.read_ahead("task-a", "http://127.0.0.1:10/gas").started is False
        assert agent_a.read_ahead("task-a", "file:///etc/passwd").started is False
    time.sleep(0.05)
    assert seller.reads == [SELLER + "/gas"]
    with JudgeClient(srv.url, token="services-token") as services:
        assert services.read_ahead("task-unregistered", SELLER + "/gas").started is False
    answer = httpx.post(f"{srv.url}/v1/terms-ahead", trust_env=False,
                        json={"task_id": "task-a", "url": SELLER + "/x", "method": "GET"})
    assert answer.status_code == 401  # no token: no read
    time.sleep(0.05)
    assert seller.reads == [SELLER + "/gas"]


def test_a_slow_answer_serves_the_decision_it_was_started_for() -> None:
    """A seller that takes longer than AHEAD_FRESH_S to answer is not read a second time:
    the decision waits for the read under way and rules on its answer, which is current."""
    hold, clock = threading.Event(), _Clock()
    seller = _Seller(hold)
    ahead = TermsAhead(seller, clock=clock)
    quote = _ahead_of(ahead, "task-a", SELLER + "/gas")
    _started(seller, 1)
    clock.now += AHEAD_FRESH_S * 3  # the seller is still answering
    hold.set()
    ahead.reader("task-a")(SELLER + "/gas", "GET", None)
    quote.join(5)
    assert len(seller.reads) == 1


def test_a_forked_child_never_takes_a_read_its_parent_was_making() -> None:
    """A read under way when the process forks is answered in the parent only: a child's
    decision reads anew instead of waiting forever on it."""
    hold = threading.Event()
    reads: list[str] = []

    def first_held(url: str, method: str, body: object) -> tuple[OfferedTerms, ...]:
        reads.append(url)
        if len(reads) == 1:
            hold.wait(10)
        return (OFFER,)

    ahead = TermsAhead(first_held)
    quote = threading.Thread(target=ahead.read, args=("task-a", SELLER + "/gas", "GET", None),
                             daemon=True)
    quote.start()
    deadline = time.monotonic() + 5
    while not reads and time.monotonic() < deadline:
        time.sleep(0.005)
    ahead._pid = -1  # as in a child forked now (the read's thread is its parent's)
    started = time.monotonic()
    assert ahead.reader("task-a")(SELLER + "/gas", "GET", None) == (OFFER,)
    assert len(reads) == 2 and time.monotonic() - started < 5
    hold.set()
    quote.join(5)
