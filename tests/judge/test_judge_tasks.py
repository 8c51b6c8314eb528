"""The judge owns a task's limits: registered once, applied whatever the request says,
on the payload itself, with its own spend count and its own balance reading."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from judge.errors import GrantRefused, JudgeConfigError, TaskRegistrationConflict, VerdictUnknown
from judge.fingerprint import call_fingerprint, transaction_fingerprint, typed_data_fingerprint
from judge.jev import Judge, PaidCallRequest
from judge.request import WIRE_NAMES
from judge.service import JudgeClient, JudgeServer
from judge.tasks import TaskLimits, TaskRegistry
from judge.verdict import VerdictSigner

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
WALLET = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
SELLER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
ATTACKER = "0x000000000000000000000000000000000000dEaD"
PAYWALL = "http://127.0.0.1:8402"
TASK = TaskLimits(
    task_id="task-1",
    spend_cap_atomic=1_000_000,
    per_call_cap_atomic=500_000,
    approval_threshold_atomic=400_000,
    recipients=(SELLER,),
    sellers=(PAYWALL,),
)


def transfer(to: str, amount: int, nonce: int = 0) -> dict[str, Any]:
    data = "0xa9059cbb" + to.lower()[2:].rjust(64, "0") + hex(amount)[2:].rjust(64, "0")
    return {"chainId": 31337, "to": USDC, "data": data, "value": 0, "nonce": nonce,
            "gas": 60_000, "maxFeePerGas": 2 * 10**9, "maxPriorityFeePerGas": 10**8}


def authorization(to: str, amount: int, nonce: int = 1) -> dict[str, Any]:
    return {
        "types": {
            "EIP712Domain": [{"name": "name", "type": "string"},
                             {"name": "version", "type": "string"},
                             {"name": "chainId", "type": "uint256"},
                             {"name": "verifyingContract", "type": "address"}],
            "TransferWithAuthorization": [{"name": "from", "type": "address"},
                                          {"name": "to", "type": "address"},
                                          {"name": "value", "type": "uint256"},
                                          {"name": "validAfter", "type": "uint256"},
                                          {"name": "validBefore", "type": "uint256"},
                                          {"name": "nonce", "type": "bytes32"}],
        },
        "primaryType": "TransferWithAuthorization",
        "domain": {"name": "USDC", "version": "2", "chainId": 31337, "verifyingContract": USDC},
        "message": {"from": WALLET, "to": to, "value": amount, "validAfter": 0,
                    "validBefore": 2_000_000_000, "nonce": "0x" + f"{nonce:064x}"},
    }


def request(payload: dict[str, Any] | None, **over: Any) -> PaidCallRequest:
    typed = payload is not None and "primaryType" in payload
    tool, args = ("pay_http", {"url": PAYWALL + "/analytics/gas"}) if typed else (
        "transfer_usdc", {"to": SELLER, "amount": "0.1"})
    amount = 0
    recipient = SELLER
    if payload is not None:
        if typed:
            amount, recipient = payload["message"]["value"], payload["message"]["to"]
        else:
            amount, recipient = int(payload["data"][-64:], 16), "0x" + payload["data"][34:74]
    fields: dict[str, Any] = {
        "tool": tool, "args": args, "call_fingerprint": call_fingerprint(tool, args),
        "payload_fingerprint": (typed_data_fingerprint(payload) if typed else
                                transaction_fingerprint(payload or transfer(SELLER, 0))),
        "price": amount, "asset": USDC, "recipient": recipient, "chain_id": 31337,
        # What a compromised agent claims: huge budgets, no threshold, no recipient list.
        "remaining_budget": 10**12, "balance": 10**12, "per_call_cap_atomic": 10**12,
        "spend_cap_atomic": 10**12, "approval_threshold_atomic": None,
        "missing": ("gas_stats",), "tool_facts": ("gas_stats",), "task_id": TASK.task_id,
        "payload": payload,
    }
    fields.update(over)
    return PaidCallRequest(**fields)


@pytest.fixture
def judge(signer: VerdictSigner) -> Judge:
    j = Judge(signer, allowed_assets={31337: [USDC]}, balance_of=lambda asset: 5_000_000,
              require_task=True)
    j.register_task(TASK)
    return j


def test_the_registered_cap_threshold_and_recipients_win_over_the_request(judge: Judge) -> None:
    above = judge.decide(request(transfer(SELLER, 600_000)))
    assert above.decision == "refuse" and "exceeds the per-call cap 0.50 USDC" in above.reason
    stranger = judge.decide(request(transfer(ATTACKER, 100_000)))
    assert stranger.decision == "refuse"
    assert f"recipient {ATTACKER.lower()} is not registered for task task-1" in stranger.reason
    assert "to NIB_SELLER_ALLOWLIST, before the run" in stranger.reason  # names the setting
    escalated = judge.decide(request(transfer(SELLER, 450_000)))
    assert escalated.decision == "escalate"  # the request's approval_threshold_atomic=None is ignored
    assert judge.decide(request(transfer(SELLER, 100_000))).decision == "approve"


def test_the_judge_rules_on_the_payload_itself(judge: Judge) -> None:
    missing = judge.decide(request(None))
    assert missing.decision == "refuse" and "carries no payload" in missing.reason
    lying = judge.decide(request(transfer(ATTACKER, 100_000), recipient=SELLER))
    assert lying.decision == "refuse" and "the payload pays" in lying.reason
    swapped = request(transfer(SELLER, 100_000))
    object.__setattr__(swapped, "payload", transfer(SELLER, 100_000, nonce=9))
    refused = judge.decide(swapped)
    assert refused.decision == "refuse" and "payload's fingerprint is" in refused.reason
    other_seller = judge.decide(request(authorization(SELLER, 100_000),
                                        seller="http://127.0.0.1:9999"))
    assert other_seller.decision == "refuse" and "is not registered for task" in other_seller.reason
    assert "add its origin to NIB_SELLER_ALLOWLIST" in other_seller.reason
    assert judge.decide(request(authorization(SELLER, 100_000))).decision == "approve"


def test_the_judge_counts_the_task_budget_itself(judge: Judge) -> None:
    approvals = []
    for nonce in range(4):
        v = judge.decide(request(transfer(SELLER, 300_000, nonce=nonce)))
        approvals.append(v.decision)
        if v.decision == "approve":
            judge.recheck(v)  # a wallet consumed it: the money may have moved
    assert approvals == ["approve", "approve", "approve", "refuse"]  # 0.9 of 1.0; 1.2 > 1.0


def test_the_judge_reads_the_balance_itself(signer: VerdictSigner) -> None:
    poor = Judge(signer, allowed_assets={31337: [USDC]}, balance_of=lambda asset: 50_000,
                 require_task=True)
    poor.register_task(TASK)
    v = poor.decide(request(transfer(SELLER, 100_000)))  # the request claims 10**12
    assert v.decision == "refuse" and "exceeds wallet balance 0.05 USDC" in v.reason


def test_unregistered_tasks_are_refused_and_registration_is_once(judge: Judge) -> None:
    v = judge.decide(request(transfer(SELLER, 100_000), task_id="made-up"))
    assert v.decision == "refuse" and "task 'made-up' is not registered" in v.reason
    assert judge.register_task(TASK) == TASK  # the same limits again: a no-op
    wider = replace(TASK, spend_cap_atomic=10**12)
    with pytest.raises(TaskRegistrationConflict, match="already registered"):
        judge.register_task(wider)


def test_only_the_admin_token_registers_tasks_over_the_wire(judge: Judge) -> None:
    with JudgeServer(judge, token="services-token", admin_token="admin-token") as server:
        admin = JudgeClient(server.url, token="admin-token")
        agent = JudgeClient(server.url, token=admin.task_token(TASK.task_id))
        other = replace(TASK, task_id="task-2")
        for token in ("services-token", admin.task_token(TASK.task_id)):
            with pytest.raises(JudgeConfigError, match="without the judge's admin token"):
                JudgeClient(server.url, token=token).register_task(other)
        assert agent.decide(request(transfer(SELLER, 100_000))).decision == "approve"
        assert admin.decide(request(transfer(SELLER, 100_000), task_id="task-2")).decision == (
            "refuse")
        assert admin.register_task(other) == other
        theirs = JudgeClient(server.url, token=admin.task_token("task-2"))
        assert theirs.decide(request(transfer(SELLER, 100_000, nonce=5), task_id="task-2")
                             ).decision == "approve"


def test_the_services_token_only_rechecks_once_agents_hold_task_tokens(judge: Judge) -> None:
    """NIB_JUDGE_TOKEN is the wallet service's, for its re-check before it signs: with an
    admin token set (agents get task tokens) it decides, revokes, reports and asks for
    nothing else, for any task."""
    from judge.errors import TaskScopeRefused

    # Which token may ask what, not how fast: a slow answer on a loaded machine (a 1 s
    # read timeout, exceeded at load 7 in one CI run) is no answer to this test.
    slow_ok = 10.0
    with JudgeServer(judge, token="services-token", admin_token="admin-token") as server:
        admin = JudgeClient(server.url, token="admin-token", timeout_s=slow_ok)
        agent = JudgeClient(server.url, token=admin.task_token(TASK.task_id), timeout_s=slow_ok)
        services = JudgeClient(server.url, token="services-token", timeout_s=slow_ok)
        verdict = agent.decide(request(transfer(SELLER, 100_000)))
        assert verdict.decision == "approve"
        for call in (lambda: services.decide(request(transfer(SELLER, 100_000, nonce=2))),
                     lambda: services.decide_free("web_search", 0),
                     lambda: services.revoke(verdict.id),
                     lambda: services.record_outcome(verdict.id, "price", True),
                     lambda: services.verdict_standing(verdict.id, None),
                     lambda: services.calibration()):
            with pytest.raises(TaskScopeRefused, match="found the judge service's own token"):
                call()
        services.recheck(verdict)  # the wallet's re-check: consumes the approval
        assert services.address == judge.address  # /health takes no token
    with JudgeServer(judge, token="services-token") as server:  # a bare `nib judge serve`:
        bare = JudgeClient(server.url, token="services-token", timeout_s=slow_ok)  # one token
        assert bare.decide(request(transfer(SELLER, 100_000, nonce=3))).decision == "approve"


def test_a_human_grant_lets_the_judge_approve_exactly_the_escalated_payload_once(
    judge: Judge,
) -> None:
    payload = transfer(SELLER, 450_000, nonce=7)
    escalated = judge.decide(request(payload))
    assert escalated.decision == "escalate"
    with pytest.raises(GrantRefused, match="not an escalation"):
        judge.grant(judge.decide(request(transfer(SELLER, 100_000))).id)
    with pytest.raises(GrantRefused, match="expected a verdict of task 'task-2'"):
        judge.grant(escalated.id, task_id="task-2")
    grant = judge.grant(escalated.id, by="alice", task_id=TASK.task_id)
    assert judge.grant(escalated.id) == grant  # granted again before use: the same grant
    assert (grant.amount, grant.recipient, grant.task_id) == (450_000, SELLER.lower(), "task-1")
    # Another payload of the same task (even the same amount) is not covered.
    assert judge.decide(request(transfer(SELLER, 450_000, nonce=8))).decision == "escalate"
    approved = judge.decide(request(payload))
    assert approved.decision == "approve" and "granted by alice" in approved.reason
    judge.recheck(approved)
    # The grant paid once: the same payload escalates again, and it cannot be re-granted.
    assert judge.decide(request(payload)).decision == "escalate"
    with pytest.raises(GrantRefused, match="already used by verdict"):
        judge.grant(escalated.id)


def test_an_approval_above_the_threshold_without_a_grant_is_refused_at_the_recheck(
    judge: Judge, signer: VerdictSigner
) -> None:
    """The gate the wallet goes through refuses an above-threshold approval that no human
    granted, even one signed by the judge's own key and in its record."""
    payload = transfer(SELLER, 450_000, nonce=3)
    req = request(payload)
    forged = signer.issue(decision="approve", call_fingerprint=req.call_fingerprint,
                          payload_fingerprint=req.payload_fingerprint, amount=450_000,
                          asset=USDC, recipient=SELLER, chain_id=31337, p=Decimal("0.9"),
                          ev=Decimal(1), reason="no grant", ttl_s=60)
    judge.records.issued(forged, subject="transfer_usdc", task_id=TASK.task_id)
    with pytest.raises(VerdictUnknown, match="no human grant was recorded"):
        judge.recheck(forged)


def test_only_the_admin_token_grants_over_the_wire(judge: Judge) -> None:
    with JudgeServer(judge, token="services-token", admin_token="admin-token") as server:
        admin = JudgeClient(server.url, token="admin-token")
        agent = JudgeClient(server.url, token=admin.task_token(TASK.task_id))
        escalated = agent.decide(request(transfer(SELLER, 450_000, nonce=11)))
        assert escalated.decision == "escalate"
        with pytest.raises(JudgeConfigError, match="a grant of an escalation without"):
            agent.grant(escalated.id)
        assert agent.decide(request(transfer(SELLER, 450_000, nonce=11))).decision == "escalate"
        assert admin.grant(escalated.id, task_id="task-1").verdict_id == escalated.id
        assert agent.decide(request(transfer(SELLER, 450_000, nonce=11))).decision == "approve"


def test_a_task_token_acts_for_its_own_task_only_and_outlasts_a_restart(
    signer: VerdictSigner, tmp_path: Any
) -> None:
    """Registration returns a token bound to the task (the judge keeps its hash): with it
    an agent decides, revokes, reports (or holds a report) and asks for its own task's
    verdicts only; a worker token claims only tasks registered as queued."""
    from judge.errors import TaskScopeRefused
    from judge.records import VerdictRecords
    from judge.tasks import TaskRegistry

    db = tmp_path / "judge.db"

    def started() -> JudgeServer:
        judge = Judge(signer, allowed_assets={31337: [USDC]}, balance_of=lambda asset: 5_000_000,
                      require_task=True, records=VerdictRecords(db), tasks=TaskRegistry(db))
        return JudgeServer(judge, token="services-token", admin_token="admin-token")

    other = replace(TASK, task_id="task-2")
    queued = replace(TASK, task_id="task-3")
    with started() as server:
        admin = JudgeClient(server.url, token="admin-token")
        mine = admin.register_task_for_token(TASK)
        admin.register_task(other)
        agent = JudgeClient(server.url, token=mine)
        assert agent.decide(request(transfer(SELLER, 100_000))).decision == "approve"
        theirs = admin.decide(
            request(transfer(SELLER, 100_000, nonce=3), task_id="task-2"))
        with pytest.raises(TaskScopeRefused, match="task 'task-2' with the token of task 'task-1'"):
            agent.decide(request(transfer(SELLER, 100_000, nonce=4), task_id="task-2"))
        for call in (lambda: agent.revoke(theirs.id), lambda: agent.recheck(theirs),
                     lambda: agent.record_outcome(theirs.id, "price", True),
                     lambda: agent.hold_outcome(theirs.id, "price", "f" * 32),
                     lambda: agent.verdict_standing(theirs.id, None)):
            with pytest.raises(TaskScopeRefused, match="expected a task token to act for its own"):
                call()
        worker = JudgeClient(server.url, token=admin.worker_token())
        with pytest.raises(TaskScopeRefused, match="not registered as queued"):
            worker.claim("task-2")
        with pytest.raises(TaskScopeRefused, match="expected a worker token only on"):
            worker.decide(request(transfer(SELLER, 100_000, nonce=5), task_id="task-2"))
        admin.register_task_for_token(queued, queued=True)
        claimed = JudgeClient(server.url, token=worker.claim("task-3")[0])
        assert claimed.decide(request(transfer(SELLER, 100_000, nonce=6), task_id="task-3")
                              ).decision == "approve"
    with started() as server:  # a restarted judge knows the token by its hash
        again = JudgeClient(server.url, token=mine)
        assert again.decide(request(transfer(SELLER, 100_000, nonce=7))).decision == "approve"
        with pytest.raises(TaskScopeRefused):
            again.decide(request(transfer(SELLER, 100_000, nonce=8), task_id="task-2"))
    assert mine not in db.read_bytes().decode(errors="replace")


# -- ordered payments (mandates, judge/mandates.py) ---------------------------------------

ORDER = f"If the base fee is under 50 gwei, send 0.25 USDC to {SELLER}. Then send 0.45 USDC to {SELLER}."


def _ordering_judge(signer: VerdictSigner, base_fee: str = "0.68") -> Judge:
    from judge.mandates import mandates_in

    j = Judge(signer, allowed_assets={31337: [USDC]}, balance_of=lambda asset: 5_000_000,
              require_task=True, fact_of=lambda fact: Decimal(base_fee))
    j.register_task(replace(TASK, mandates=mandates_in(ORDER)))
    return j


def _ordered(amount: int, nonce: int = 0, to: str = SELLER) -> PaidCallRequest:
    # The issue's case: one missing item of three, p 0.5 -> EV 0.5 x 0.33 - 0.25 < 0.
    return request(transfer(to, amount, nonce=nonce), missing=("transfer_receipt",),
                   tool_facts=("transfer_receipt",), checklist_size=3)


def test_mandates_are_read_from_the_task_text() -> None:
    from judge.mandates import mandates_in

    first, second = mandates_in(ORDER)
    assert (first.recipient, first.amount) == (SELLER.lower(), 250_000)
    assert first.condition is not None
    assert (first.condition.fact, first.condition.op, first.condition.threshold) == (
        "base_fee_gwei", "<", Decimal(50))
    assert (second.amount, second.condition) == (450_000, None)
    unreadable = mandates_in(f"if it rains, send 1 USDC to {SELLER}")[0]
    assert unreadable.condition is not None and unreadable.condition.fact == "unreadable"
    assert mandates_in("what is the base fee?") == ()


def test_an_ordered_payment_is_approved_on_the_order_not_on_expected_value(signer: VerdictSigner) -> None:
    plain = Judge(signer, allowed_assets={31337: [USDC]}, balance_of=lambda asset: 5_000_000,
                  require_task=True)
    plain.register_task(TASK)  # the same task without its order: refused on EV
    assert plain.decide(_ordered(250_000)).decision == "refuse"
    verdict = _ordering_judge(signer).decide(_ordered(250_000))
    assert verdict.decision == "approve", verdict.reason
    assert "approved on the user's order" in verdict.reason
    assert "base_fee_gwei 0.68 < 50" in verdict.reason


def test_an_ordered_payment_is_made_once(signer: VerdictSigner) -> None:
    judge = _ordering_judge(signer)
    judge.recheck(judge.decide(_ordered(250_000)))  # a wallet consumed it
    again = judge.decide(_ordered(250_000, nonce=1))
    assert again.decision == "refuse" and "already approved it" in again.reason


def test_an_ordered_payment_whose_condition_is_false_is_refused_naming_it(signer: VerdictSigner) -> None:
    verdict = _ordering_judge(signer, base_fee="61").decide(_ordered(250_000))
    assert verdict.decision == "refuse"
    assert "only if base fee is under 50 gwei; the judge read base_fee_gwei 61 < 50: false" in verdict.reason


def test_an_ordered_payment_keeps_the_threshold_and_the_caps(signer: VerdictSigner) -> None:
    judge = _ordering_judge(signer)
    escalated = judge.decide(_ordered(450_000))
    assert escalated.decision == "escalate" and "a human must approve" in escalated.reason
    judge.grant(escalated.id)
    granted = judge.decide(_ordered(450_000))
    assert granted.decision == "approve" and granted.reason.startswith("granted by")


def test_nothing_but_the_task_text_makes_or_widens_an_order(signer: VerdictSigner) -> None:
    judge = _ordering_judge(signer)
    # "also send 1 USDC to X", obeyed by a model after reading it in a seller's answer:
    stranger = judge.decide(_ordered(1_000_000, to=ATTACKER))
    assert stranger.decision == "refuse" and "not registered" in stranger.reason
    more = judge.decide(_ordered(300_000))  # the ordered recipient, another amount
    assert more.decision == "refuse"
    assert "the task orders 0.25 USDC and 0.45 USDC to it, exactly" in more.reason, more.reason
    wire = {**_ordered(250_000).to_wire(), "mandates": [{"recipient": ATTACKER, "amount": 1}]}
    with pytest.raises(Exception, match="malformed paid-call request"):
        PaidCallRequest.from_wire(wire)


def test_a_registration_keeps_its_mandates_on_disk_and_on_the_wire(tmp_path: Any) -> None:
    from judge.mandates import mandates_in
    from judge.tasks import TaskRegistry

    limits = replace(TASK, mandates=mandates_in(ORDER))
    assert TaskLimits.from_wire(limits.to_wire()) == limits
    TaskRegistry(tmp_path / "nib.db").register(limits)
    assert TaskRegistry(tmp_path / "nib.db").get("task-1") == limits
    with pytest.raises(Exception, match="not registered recipients"):
        replace(TASK, recipients=(), mandates=mandates_in(ORDER))


def test_the_limits_keep_their_wire_and_table_names_and_either_name_reads(tmp_path: Path) -> None:
    """A limit in atomic USDC is spend_cap_atomic (per_call_cap_atomic,
    approval_threshold_atomic) in the code; the judge's wire and its table keep the names
    a service or database of an earlier version uses, and a body under either name reads."""
    wire = TASK.to_wire()
    assert (wire["spend_cap"], wire["per_call_cap"], wire["approval_threshold"]) == (
        1_000_000, 500_000, 400_000
    )
    assert not {"spend_cap_atomic", "per_call_cap_atomic", "approval_threshold_atomic"} & set(wire)
    assert TaskLimits.from_wire(wire) == TASK
    renamed = {WIRE_NAMES.get(k, k): v for k, v in wire.items()}
    assert TaskLimits.from_wire(renamed) == TASK
    paid = request(transfer(SELLER, 10_000))
    body = paid.to_wire()
    assert (body["spend_cap"], body["per_call_cap"], body["approval_threshold"]) == (
        10**12, 10**12, None
    )
    assert PaidCallRequest.from_wire(body) == paid
    assert PaidCallRequest.from_wire({WIRE_NAMES.get(k, k): v for k, v in body.items()}) == paid
    # The table keeps its columns (spend_cap, per_call_cap, approval_threshold).
    TaskRegistry(tmp_path / "nib.db").register(TASK)
    assert TaskRegistry(tmp_path / "nib.db").get(TASK.task_id) == TASK


def test_a_task_unknown_when_asked_is_found_once_another_process_registers_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The judge keeps registered limits once read (they never change), never an absence:
    # a task registered after a miss, here by another registry on the same file, is found.
    import judge.tasks as tasks_module
    from judge.tasks import TaskRegistry

    monkeypatch.setattr(tasks_module, "KNOWN_TASKS", 2)
    judge_side, other = TaskRegistry(tmp_path / "nib.db"), TaskRegistry(tmp_path / "nib.db")
    assert judge_side.get("task-1") is None
    other.register(TASK)
    assert judge_side.get("task-1") == TASK
    for n in (2, 3, 4):
        other.register(replace(TASK, task_id=f"task-{n}"))
        assert judge_side.get(f"task-{n}") == replace(TASK, task_id=f"task-{n}")
    assert len(judge_side._known) == 2 and judge_side.get("task-1") == TASK


def test_a_private_registry_keeps_an_absence_until_it_registers_the_task_itself() -> None:
    # The in-process judge's registry lives in this process's memory: nobody else can
    # register into it, so "not registered" is kept (a decision asks about six times),
    # and its own registration of the task is seen at once.
    registry = TaskRegistry()
    queries: list[str] = []
    registry._store.db.query = _counting(registry._store.db.query, queries)  # type: ignore[method-assign]
    assert registry.get("task-1") is None and registry.get("task-1") is None
    assert len(queries) == 1
    registry.register(TASK)
    assert registry.get("task-1") == TASK


def _counting(query: Any, seen: list[str]) -> Any:
    def counted(sql: str, params: tuple[object, ...] = ()) -> Any:
        seen.append(sql)
        return query(sql, params)
    return counted
