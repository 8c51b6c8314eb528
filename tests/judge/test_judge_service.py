"""The judge as a loopback HTTP service: same answers, typed errors, bounded waits."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from chain.devkeys import JUDGE, dev_account
from judge.calibration import BetaCalibrator
from judge.client import DECIDE_TIMEOUT_S
from judge.errors import (
    JudgeConfigError,
    JudgeRequestInvalid,
    JudgeUnreachable,
    OutcomeRefused,
    VerdictConsumed,
    VerdictRevoked,
    VerdictSignatureInvalid,
)
from judge.fingerprint import call_fingerprint, fingerprint
from judge.jev import Judge, PaidCallRequest
from judge.service import JudgeClient, JudgeServer, serve
from judge.verdict import VerdictSigner, verify_verdict

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
SELLER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
TOKEN = "judge-test-token"


def _request(**over: Any) -> PaidCallRequest:
    args = {"symbol": "ETH"}
    fields: dict[str, Any] = {
        "tool": "price_feed",
        "args": args,
        "call_fingerprint": call_fingerprint("price_feed", args),
        "payload_fingerprint": fingerprint({"x402": "quote"}),
        "price": 100_000,
        "asset": USDC,
        "recipient": SELLER,
        "chain_id": 31337,
        "remaining_budget": 900_000,
        "balance": 10_000_000,
        "per_call_cap_atomic": 500_000,
        "spend_cap_atomic": 1_000_000,
        "missing": ("eth price usd",),
        "covered": ("gas price", "block number", "base fee"),
        "tool_facts": ("eth_price_usd",),
        "declared_coverage": Decimal("0.8"),
    }
    fields.update(over)
    return PaidCallRequest(**fields)


@pytest.fixture(scope="module")
def judge() -> Judge:
    return Judge(
        VerdictSigner(dev_account(JUDGE)), BetaCalibrator(), allowed_assets={31337: [USDC]}
    )


@pytest.fixture(scope="module")
def server(judge: Judge) -> Iterator[JudgeServer]:
    with JudgeServer(judge, token=TOKEN) as srv:
        yield srv


@pytest.fixture
def client(server: JudgeServer, judge: Judge) -> Iterator[JudgeClient]:
    with JudgeClient(server.url, trusted_judge=judge.address, token=TOKEN) as c:
        yield c


def test_service_answers_on_loopback(
    server: JudgeServer, client: JudgeClient, judge: Judge
) -> None:
    assert server.url.startswith("http://127.0.0.1:")
    assert client.address == judge.address
    verdict = client.decide(_request())
    verify_verdict(verdict, judge.address)
    assert verdict.decision == "approve"
    assert verdict.reason.startswith("EV 0.10 USDC > 0")
    client.recheck(verdict)


def test_service_rulings_match_in_process(client: JudgeClient, judge: Judge) -> None:
    for over in ({"balance": 1}, {"missing": ()}, {"approval_threshold_atomic": 1}, {"chain_id": 1}):
        remote = client.decide(_request(**over))
        local = judge.decide(_request(**over))
        assert (remote.decision, remote.reason, remote.p, remote.ev) == (
            local.decision,
            local.reason,
            local.p,
            local.ev,
        )


def test_free_policy_over_the_wire(client: JudgeClient, judge: Judge) -> None:
    assert client.decide_free("base_fee", 0) == judge.decide_free("base_fee", 0)
    assert client.decide_free("nope", 0).outcome == "refused"


def test_typed_errors_cross_the_wire(client: JudgeClient) -> None:
    verdict = client.decide(_request())
    with pytest.raises(VerdictSignatureInvalid, match="altered after signing"):
        client.recheck(verdict.model_copy(update={"amount": 1}))
    client.revoke(verdict.id)
    with pytest.raises(VerdictRevoked, match=f"verdict {verdict.id} was revoked"):
        client.recheck(verdict)
    bad = _request()
    object.__setattr__(bad, "args", {"symbol": "BTC"})
    with pytest.raises(JudgeRequestInvalid, match="for price_feed with these args"):
        client.decide(bad)


def test_malformed_bodies_are_request_errors(server: JudgeServer) -> None:
    response = httpx.post(f"{server.url}/v1/free", json={"tools": "x"}, trust_env=False, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 422
    assert response.json()["error"]["type"] == "JudgeRequestInvalid"


@pytest.mark.parametrize("route", ["/v1/held-outcomes", "/v1/outcomes", "/v1/standing"])
def test_a_nul_in_any_string_is_a_request_error_not_a_500(server: JudgeServer, route: str) -> None:
    """The outside attacker's F4 (round 17): on PostgreSQL a NUL in an id reached the
    database and came back as a 500 with a traceback in the judge's log."""
    body = {"verdict_id": "ab\u0000cd", "fact_kind": "x", "spend_id": "0" * 32,
            "covered": False, "payload_fingerprint": None}  # fmt: skip
    response = httpx.post(f"{server.url}{route}", json=body, trust_env=False,
                          headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 422, response.text
    assert "NUL" in response.json()["error"]["message"]
    # The re-run's V3: the same body in UTF-16 or UTF-32, where no "\\u0000" bytes stand.
    for encoding in ("utf-16", "utf-32"):
        response = httpx.post(f"{server.url}{route}", content=json.dumps(body).encode(encoding),
                              trust_env=False, headers={"Authorization": f"Bearer {TOKEN}",
                                                        "Content-Type": "application/json"})
        assert response.status_code == 422, response.text


def test_outcomes_and_calibration_over_the_wire(client: JudgeClient) -> None:
    before = client.calibration()["n"]
    verdict = client.decide(_request())
    with pytest.raises(OutcomeRefused, match="no wallet consumed"):
        client.record_outcome(verdict.id, "eth_price_usd", True)
    client.recheck(verdict)
    client.record_outcome(verdict.id, "eth_price_usd", True)
    with pytest.raises(OutcomeRefused, match="already recorded"):
        client.record_outcome(verdict.id, "eth_price_usd", True)
    with pytest.raises(OutcomeRefused, match="never issued it"):
        client.record_outcome("0" * 32, "eth_price_usd", True)
    assert client.calibration()["n"] == before + 1
    assert client.verdict_standing(verdict.id, verdict.payload_fingerprint) == "consumed"
    with pytest.raises(VerdictConsumed):
        client.recheck(verdict)


def test_bodies_over_64_kib_are_refused_before_they_are_read(server: JudgeServer) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    big = b'{"tool": "' + b"x" * (64 * 1024) + b'"}'
    response = httpx.post(
        f"{server.url}/v1/free", content=big, headers=headers, trust_env=False
    )
    assert response.status_code == 413
    assert response.json()["error"]["message"].startswith(
        f"found a request body of {len(big)} bytes; expected at most 65536 bytes"
    )

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(100):
            yield b"x" * 4096

    response = httpx.post(
        f"{server.url}/v1/free", content=chunks(), headers=headers, trust_env=False
    )
    assert response.status_code == 413


def test_the_service_refuses_to_start_without_a_token(judge: Judge) -> None:
    with pytest.raises(JudgeConfigError, match="found no token for the judge service"):
        JudgeServer(judge)
    with JudgeServer(judge, insecure=True) as server:  # the devnet's explicit opt-out
        assert JudgeClient(server.url).address == judge.address


def test_stopped_service_is_a_typed_error_within_two_seconds(judge: Judge) -> None:
    with JudgeServer(judge, token=TOKEN) as srv:
        url = srv.url
        JudgeClient(url, token=TOKEN).decide(_request())
    client = JudgeClient(url)  # default timeout: 2 s
    started = time.monotonic()
    with pytest.raises(JudgeUnreachable) as err:
        client.decide(_request())
    elapsed = time.monotonic() - started
    assert elapsed < 2.0, f"took {elapsed:.3f} s"
    assert err.value.url == url
    assert str(err.value).startswith(f"the judge at {url} is unreachable (ConnectError")
    assert str(err.value).endswith(
        "expected a judge service answering in time (a decision on a purchase within 12 s, "
        "anything else within 2 s). Fix: `nib services status` says "
        "whether the judge service runs; `nib devnet up` (the devnet) or `nib services up` "
        "restarts it (a judge of your own at NIB_JUDGE_URL: `nib judge serve`)."
    )


def test_silent_service_is_a_typed_error_within_two_seconds_or_a_decisions_bound(
    judge: Judge,
) -> None:
    # A socket that listens but never answers: connect succeeds, the read times out; a
    # re-check within the client's 2 s, a decision within its own bound (the judge reads
    # the seller's terms itself for it: DECIDE_TIMEOUT_S by default; 1 s here).
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        verdict = judge.decide(_request())
        for call in (lambda c: c.recheck(verdict), lambda c: c.decide(_request())):
            started = time.monotonic()
            with pytest.raises(JudgeUnreachable, match="ReadTimeout after 1 s"):
                call(JudgeClient(url, decide_timeout_s=1.0))
            elapsed = time.monotonic() - started
            assert elapsed < 2.0, f"took {elapsed:.3f} s"
    assert JudgeClient(url).decide_timeout_s == DECIDE_TIMEOUT_S == 12.0


def test_the_service_binds_only_to_loopback(judge: Judge) -> None:
    with pytest.raises(JudgeConfigError, match="expected a loopback address"):
        serve("0.0.0.0", 0, judge, TOKEN)
    with pytest.raises(JudgeConfigError, match="expected a loopback address"):
        JudgeServer(judge, host="192.168.1.10", token=TOKEN)


def test_a_service_with_a_token_answers_only_clients_that_send_it(judge: Judge) -> None:
    with JudgeServer(judge, token="s3cret-token") as server:
        # /health stays public so readiness checks need no secret.
        assert JudgeClient(server.url).address == judge.address
        outsider = JudgeClient(server.url)
        with pytest.raises(JudgeUnreachable, match="without the judge service's token"):
            outsider.decide(_request())
        with pytest.raises(JudgeUnreachable, match="NIB_JUDGE_TOKEN"):
            outsider.revoke("some-verdict")
        insider = JudgeClient(server.url, token="s3cret-token", trusted_judge=judge.address)
        verdict = insider.decide(_request())
        assert verdict.decision == "approve"
        assert "s3cret-token" not in repr(insider)


def test_free_reads_are_counted_by_the_judge_per_task_not_by_the_caller() -> None:
    """An agent that sends ``calls_so_far: 0`` every time still gets only its task's
    allowance; another task's allowance is its own."""
    from judge.policy import FreePolicyRow, FreeReadPolicy
    from judge.tasks import TaskLimits

    judge = Judge(VerdictSigner(dev_account(JUDGE)), allowed_assets={31337: [USDC]},
                  free_policy=FreeReadPolicy([FreePolicyRow("base_fee", max_calls_per_run=2)]))
    tokens = []
    for task in ("task-a", "task-b"):
        judge.register_task(TaskLimits(task_id=task, spend_cap_atomic=1_000_000, per_call_cap_atomic=100_000,
                                       approval_threshold_atomic=None, recipients=(), sellers=()))
        tokens.append(judge.tasks.issue_token("task", task))
    with JudgeServer(judge, token=TOKEN) as srv:
        def free(token: str) -> str:
            answer = httpx.post(f"{srv.url}/v1/free", json={"tool": "base_fee", "calls_so_far": 0},
                                trust_env=False, headers={"Authorization": f"Bearer {token}"})
            return str(answer.json().get("outcome", answer.text))

        assert [free(tokens[0]) for _ in range(3)] == ["allowed", "allowed", "refused"]
        assert free(tokens[1]) == "allowed"


class _Held(BetaCalibrator):
    """A calibrator whose p waits for ``gate``: each decision stays in flight until then."""

    def __init__(self, gate: Any) -> None:
        super().__init__()
        self.gate = gate

    def p(self, *args: Any, **kwargs: Any) -> Decimal:
        self.gate.wait(60)
        return super().p(*args, **kwargs)


def _held_in_flight(url: str, token: str, n: int, task_id: str | None = None) -> list[Any]:
    """``n`` decisions of ``token``'s, started in threads (they wait on the calibrator)."""
    import threading

    held = [threading.Thread(target=lambda: JudgeClient(url, token=token, timeout_s=60).decide(
        _request(task_id=task_id))) for _ in range(n)]
    for t in held:
        t.start()
    return held


def _until_overloaded(client: JudgeClient) -> Exception:
    """Ask ``client``'s judge until it refuses JudgeOverloaded (the held ones are in)."""
    from judge.errors import JudgeOverloaded

    deadline = time.monotonic() + 60
    while True:
        try:
            client.calibration()
        except JudgeOverloaded as exc:
            return exc
        assert time.monotonic() < deadline, "the judge never reported overload"
        time.sleep(0.05)


def test_an_overloaded_judge_answers_a_typed_refusal_the_loop_stops_on_by_name() -> None:
    """Past its requests in flight the judge answers JudgeOverloaded (503, JSON) to all but
    /health; the client raises it typed (a plain 503 of uvicorn's own limit too) and the
    loop stops judge-unreachable with a message naming the overload and the fix."""
    import threading

    from agent.loop.stop import dependency_stop

    gate = threading.Event()
    judge = Judge(VerdictSigner(dev_account(JUDGE)), _Held(gate), allowed_assets={31337: [USDC]})
    with JudgeServer(judge, token=TOKEN, max_in_flight=2) as srv:
        held = _held_in_flight(srv.url, TOKEN, 2)
        client = JudgeClient(srv.url, token=TOKEN, timeout_s=30)
        try:
            refused = _until_overloaded(client)  # both decisions are in flight
            raw = httpx.get(f"{srv.url}/v1/calibration", trust_env=False,
                            headers={"Authorization": f"Bearer {TOKEN}"})
            health = httpx.get(f"{srv.url}/v1/health", trust_env=False)
        finally:
            gate.set()
            for t in held:
                t.join(60)
        assert raw.status_code == 503 and raw.json()["error"]["type"] == "JudgeOverloaded", raw.text
        assert health.status_code == 200
        assert "overloaded" in str(refused) and "Fix:" in str(refused), refused
        stop = dependency_stop(refused)
        assert stop is not None and stop.reason == "judge-unreachable" and "overloaded" in stop.message
        assert client.calibration()["n"] >= 0  # answered again once the load is gone


def test_one_task_holding_its_share_in_flight_leaves_other_tasks_and_the_user_answered() -> None:
    """A task's requests in flight are bounded by its share (PER_CALLER_IN_FLIGHT), not
    first come: with one task holding all of them (past ``max_in_flight`` in all) its next
    request is refused typed, naming the task, while another task, the admin and /health
    are answered."""
    import threading

    from judge.admission import PER_CALLER_IN_FLIGHT
    from judge.tasks import TASK_TOKEN

    gate = threading.Event()
    judge = Judge(VerdictSigner(dev_account(JUDGE)), _Held(gate), allowed_assets={31337: [USDC]})
    greedy, other = (judge.tasks.issue_token(TASK_TOKEN, t) for t in ("t-greedy", "t-other"))
    admin = "judge-test-admin"
    with JudgeServer(judge, token=TOKEN, admin_token=admin, max_in_flight=PER_CALLER_IN_FLIGHT) as srv:
        held = _held_in_flight(srv.url, greedy, PER_CALLER_IN_FLIGHT, "t-greedy")
        try:
            refused = _until_overloaded(JudgeClient(srv.url, token=greedy, timeout_s=30))
            others = JudgeClient(srv.url, token=other, timeout_s=30).calibration()
            users = JudgeClient(srv.url, token=admin, timeout_s=30).calibration()
            health = httpx.get(f"{srv.url}/v1/health", trust_env=False)
        finally:
            gate.set()
            for t in held:
                t.join(60)
    assert "t-greedy" in str(refused) and f"at most {PER_CALLER_IN_FLIGHT} per task" in str(refused)
    assert others["n"] >= 0 and users["n"] >= 0 and health.status_code == 200


def test_tasks_holding_decisions_leave_the_last_decision_threads_to_tasks_using_none() -> None:
    """Two tasks each hold their 16 decisions (on a stalling seller, say): 32 of the
    judge's 40 decision threads. A third task gets one decision in and its second is
    refused typed, naming the threads; a fourth task still gets its decision in. (Before:
    the third took a thread for each of its 16, and three such tasks took all 40.)"""
    import threading

    from judge.admission import DECISION_RESERVE, DECISION_THREADS, PER_CALLER_IN_FLIGHT
    from judge.errors import JudgeOverloaded
    from judge.tasks import TASK_TOKEN

    assert 2 * PER_CALLER_IN_FLIGHT == DECISION_THREADS - DECISION_RESERVE
    gate = threading.Event()
    judge = Judge(VerdictSigner(dev_account(JUDGE)), _Held(gate), allowed_assets={31337: [USDC]})
    tokens = {t: judge.tasks.issue_token(TASK_TOKEN, t) for t in ("t-a", "t-b", "t-c", "t-d")}
    results: dict[str, list[object]] = {"t-c": [], "t-d": []}

    def decide(task: str) -> None:
        try:
            verdict = JudgeClient(srv.url, token=tokens[task], timeout_s=60).decide(_request(task_id=task))
            results[task].append(verdict.decision)
        except JudgeOverloaded as exc:
            results[task].append(exc)

    with JudgeServer(judge, token=TOKEN, admin_token="judge-test-admin") as srv:
        held = [t for task in ("t-a", "t-b")
                for t in _held_in_flight(srv.url, tokens[task], PER_CALLER_IN_FLIGHT, task)]
        try:
            for task in ("t-a", "t-b"):  # each at its share: all 32 are in flight
                _until_overloaded(JudgeClient(srv.url, token=tokens[task], timeout_s=30))
            third = [threading.Thread(target=decide, args=("t-c",)) for _ in range(2)]
            for t in third:
                t.start()
            deadline = time.monotonic() + 60
            while not any(isinstance(r, JudgeOverloaded) for r in results["t-c"]):
                assert time.monotonic() < deadline, results
                time.sleep(0.05)
            fourth = threading.Thread(target=decide, args=("t-d",))
            fourth.start()
        finally:
            gate.set()
            for t in held:
                t.join(60)
        for t in (*third, fourth):
            t.join(60)
    [refused] = [r for r in results["t-c"] if isinstance(r, JudgeOverloaded)]
    assert "decision threads" in str(refused) and "t-c" in str(refused), refused
    assert [r for r in results["t-c"] if not isinstance(r, JudgeOverloaded)] == ["approve"], results
    assert results["t-d"] == ["approve"], results
