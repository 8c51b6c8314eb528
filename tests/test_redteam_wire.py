"""Red team: the wallet service's wire (length-prefixed JSON on its Unix socket) against
what an agent process can send it: a huge declared length, JSON nested past the parser's
recursion limit, frames that are not requests, and hundreds of connections held open.
Each is refused or outlasted; the service then still answers and signs nothing."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time
from pathlib import Path
from typing import Any

from chain import devnet
from tests._services import Composition


def _exchange(path: str, payload: bytes, declared: int | None = None) -> bytes:
    """Send one frame (``declared`` overrides its length) and read what comes back
    until the service closes or answers one frame."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(struct.pack(">I", len(payload) if declared is None else declared) + payload)
        if declared is not None:
            s.shutdown(socket.SHUT_WR)
        data = b""
        with contextlib.suppress(OSError):
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                if len(data) >= 4 and len(data) >= 4 + struct.unpack(">I", data[:4])[0]:
                    break
        return data


def test_the_wallet_service_outlasts_malformed_frames_and_held_connections(
    chain: Any, service_forks: Any, tmp_path: Path
) -> None:
    comp = Composition("services", chain, forks=service_forks)
    try:
        services = comp.start(tmp_path / "nib.db")
        path = str(services.wallet.socket_path)
        huge = _exchange(path, b"", declared=0xFFFFFFFF)
        assert b"expected at most" in huge, huge[:300]
        nested = _exchange(path, b"[" * 200_000 + b"]" * 200_000)
        assert b"JSON arrays and objects in one request" in nested, nested[:300]
        not_request = _exchange(path, json.dumps([1, 2]).encode())
        assert b'"status":422' in not_request, not_request[:300]
        no_route = _exchange(path, json.dumps({"route": "/v1/../health", "body": {}}).encode())
        assert b'"status":404' in no_route, no_route[:300]
        held = []
        for _ in range(300):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            s.sendall(struct.pack(">I", 1000) + b"{")  # a frame begun, never finished
            held.append(s)
        started = time.monotonic()
        address = services.wallet.address
        answered_in = time.monotonic() - started
        for s in held:
            s.close()
        alive = devnet.pid_alive(services.pids[1])
    finally:
        comp.close()
    assert alive
    assert address.startswith("0x") and answered_in < 5, answered_in


def test_the_judge_service_outlasts_deeply_nested_bodies(
    chain: Any, service_forks: Any, tmp_path: Path
) -> None:
    """The judge's body limit (64 KiB) bounds nesting to ~32000; each route parses and
    walks such a body without dying."""
    import http.client
    from urllib.parse import urlsplit

    from judge.tasks import TaskLimits

    comp = Composition("services", chain, forks=service_forks)
    try:
        services = comp.start(tmp_path / "nib.db")
        services.register_limits(TaskLimits(task_id="task-nested", spend_cap_atomic=1, per_call_cap_atomic=1,
                                            approval_threshold_atomic=1, recipients=(), sellers=()))
        url = urlsplit(services.judge.url)
        depth = 32_000 - 100
        nested = "[" * depth + "]" * depth
        answers = {}
        for route, body in (
            ("/v1/decide", '{"tool": "x", "args": {"a": ' + nested + '}, "payload": ' + nested + "}"),
            ("/v1/decide", '{"payload": {"a": ' + nested + "}}"),
            ("/v1/recheck", '{"id": ' + nested + "}"),
            ("/v1/outcomes", '{"verdict_id": ' + nested + ', "fact_kind": "x", "covered": true}'),
            ("/v1/free", '{"tool": ' + nested + ', "calls_so_far": 0}'),
        ):
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
            try:
                conn.request("POST", route, body=body, headers={
                    "Authorization": f"Bearer {services.agent_token}",
                    "Content-Type": "application/json"})
                answers[route] = conn.getresponse().status
            except OSError as exc:
                answers[route] = str(exc)
            finally:
                conn.close()
        alive = devnet.pid_alive(services.pids[0])
        address = services.judge.address if alive else ""
    finally:
        comp.close()
    assert alive and address.startswith("0x"), answers


def test_one_verdict_sent_on_eight_connections_at_once_signs_once(
    chain: Any, service_forks: Any, tmp_path: Path
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from chain.devkeys import SELLER, dev_account
    from judge.tasks import TaskLimits
    from tests._support import lying_transfer
    from wallet.service import WalletClient

    seller = dev_account(SELLER).address
    # The wallet holds the task to its registered cap, gas included (a transfer's gas
    # hold is ~0.2 USDC at the devnet's fees).
    task = TaskLimits(task_id="task-race", spend_cap_atomic=1_000_000, per_call_cap_atomic=50_000,
                      approval_threshold_atomic=500_000, recipients=(seller,), sellers=())
    comp = Composition("services", chain, forks=service_forks)
    try:
        services = comp.start(tmp_path / "nib.db")
        services.register_limits(task)  # the user; the agent acts with its task token
        tx, request = lying_transfer(chain.w3, chain.usdc, chain.chain_id, seller, 50_000,
                                     services.wallet.nonces.allocate(), task_id=task.task_id)
        verdict = services.judge.decide(request)
        assert verdict.decision == "approve", verdict.reason

        def sign(_: int) -> str:
            client = WalletClient(services.wallet.socket_path)
            try:
                client.sign_transaction(tx, verdict, run_id=task.task_id, spend_cap_atomic=10**15)
            except Exception as exc:  # the refusals are the point
                return type(exc).__name__
            finally:
                client.close()
            return "signed"

        with ThreadPoolExecutor(8) as pool:
            outcomes = sorted(pool.map(sign, range(8)))
    finally:
        comp.close()
    assert outcomes.count("signed") == 1, outcomes
    assert set(outcomes) - {"signed"} <= {"VerdictReplayed", "ResourceBusy"}, outcomes


def test_a_transaction_the_agent_marked_failed_is_not_broadcast_past_the_treasury_cap(
    chain: Any, service_forks: Any, tmp_path: Path
) -> None:
    """The agent signs a transfer, tells the wallet service it failed (its spend stops
    counting), then asks it to broadcast it anyway, and signs the next. The broadcast goes
    out, but its receipt puts the spend back on the ledger, so the ledger counts every
    payment the chain shows and the treasury cap still binds: not five payments."""
    from chain.devkeys import SELLER, dev_account
    from chain.usdc import usdc_contract
    from judge.tasks import TaskLimits
    from tests._support import lying_transfer
    from wallet.errors import WalletError

    seller = dev_account(SELLER).address
    task = TaskLimits(task_id="task-failed-then-sent", spend_cap_atomic=1_000_000, per_call_cap_atomic=50_000,
                      approval_threshold_atomic=500_000, recipients=(seller,), sellers=())
    token = usdc_contract(chain.w3, chain.usdc)
    before = int(token.functions.balanceOf(seller).call())
    comp = Composition("services", chain, forks=service_forks)
    outcomes: list[str] = []
    refusals: list[str] = []
    try:
        services = comp.start(tmp_path / "nib.db", treasury_cap=300_000)
        services.register_limits(task)  # the user; the agent acts with its task token
        wallet = services.wallet
        for _ in range(5):
            tx, request = lying_transfer(chain.w3, chain.usdc, chain.chain_id, seller, 50_000,
                                         wallet.nonces.allocate(), task_id=task.task_id)
            verdict = services.judge.decide(request)
            try:
                signed = wallet.sign_transaction(tx, verdict, run_id=task.task_id, spend_cap_atomic=10**15)
            except Exception as exc:  # the treasury cap refusing is the point
                outcomes.append(f"sign refused {type(exc).__name__}: {exc}")
                wallet.nonces.release(tx["nonce"])
                continue
            try:  # the wallet decides whether it failed; it refuses while it can land
                wallet.fail(signed, "the agent says it failed")
            except WalletError as exc:
                refusals.append(exc.code)
            try:
                outcomes.append(f"sent {wallet.send_transaction(signed).status}")
            except Exception as exc:
                outcomes.append(f"send refused {type(exc).__name__}")
                wallet.nonces.release(tx["nonce"])
        counted = wallet.meter.usage(task.task_id)
    finally:
        comp.close()
    paid = int(token.functions.balanceOf(seller).call()) - before
    assert counted.settled == paid, (counted, paid, outcomes)
    assert paid + counted.gas_usdc <= 300_000, (counted, paid, outcomes)
    assert outcomes[0] == "sent 1", outcomes  # the row it called failed was broadcast
    assert refusals and set(refusals) == {"failure-unproven"}, refusals  # and never failed
