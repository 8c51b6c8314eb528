"""Code planted in a confined agent process, holding its own task's judge token, against
the judge and the wallet ``nib devnet up`` started: each case tries to act for another
task, hold shared state, or write what happened instead of letting the services decide.

It confines itself exactly as ``nib run`` does (``agent.cli.runtime.agent_policy`` +
``agent.confine.confine``), runs the case named in its config and prints one JSON report.
Run by tests/test_redteam_isolation.py. Usage: python isolation_attacker.py CONFIG_JSON
"""

from __future__ import annotations

import json
import resource
import socket
import struct
import sys
import time
from typing import Any

from tests.agent_attacker import _try  # one way to report a refusal


def main(config: dict[str, Any]) -> dict[str, Any]:
    from agent.cli.runtime import agent_policy
    from agent.config import load_settings
    from agent.confine import confine

    confined = confine(agent_policy(load_settings()))
    report: dict[str, Any] = {"confinement": confined.line()}
    if config["case"] == "queue":
        report["rewrite"] = _try(lambda: _rewrite_queued(config))
        return report

    from web3 import Web3

    from judge.service import JudgeClient
    from wallet.service import WalletClient

    judge = JudgeClient(config["judge_url"], token=config["token"], timeout_s=30)
    wallet = WalletClient(config["wallet_socket"], timeout_s=60)
    # As `nib run` does: the wallet learns this process's task from its token.
    report["proved"] = _try(lambda: wallet.prove_task(config["token"]))
    w3 = Web3(Web3.HTTPProvider(config["rpc_url"]))
    report.update(CASES[config["case"]](config, judge, wallet, w3))
    return report


def _transfer(config: dict[str, Any], judge: Any, wallet: Any, w3: Any, amount: int) -> Any:
    from tests._support import lying_transfer

    tx, request = lying_transfer(w3, config["usdc"], config["chain_id"], config["seller"],
                                 amount, wallet.nonces.allocate(), task_id=config["task_id"])
    return tx, judge.decide(request)


def _lying_authorization(config: dict[str, Any], w3: Any, amount: int,
                         **domain: str) -> tuple[dict[str, Any], Any]:
    from tests._support import lying_authorization

    return lying_authorization(
        w3, config["usdc"], config["chain_id"], config["wallet"], config["seller"], amount,
        task_id=config["task_id"], url=config["seller_resource"], **domain)


def _authorization(config: dict[str, Any], judge: Any, w3: Any, amount: int,
                   **domain: str) -> tuple[dict[str, Any], Any]:
    payload, request = _lying_authorization(config, w3, amount, **domain)
    return payload, judge.decide(request)


def book_under_another_run(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """Its own approved purchases, booked under the victim's run with a cap of 10^12."""
    booked = []
    for _ in range(4):
        tx, verdict = _transfer(config, judge, wallet, w3, config["price"])
        if verdict.decision != "approve":
            wallet.nonces.release(tx["nonce"])
            booked.append(f"judge {verdict.decision}: {verdict.reason[:200]}")
            continue

        def pay(tx: Any = tx, verdict: Any = verdict) -> object:
            # The frame itself, past any check of the client's: the victim's run, a cap of 10^12.
            answer = wallet._send("/v1/sign-transaction", {
                "payload": tx, "verdict": verdict.model_dump(), "run_id": config["victim"],
                "cap": 10**12})
            if answer.get("status") != 200:
                raise RuntimeError(str(answer.get("error", answer))[:400])
            from wallet.wire import signed_from_wire

            return wallet.send_transaction(signed_from_wire(answer["data"])).status

        outcome = _try(pay)
        if not outcome.startswith("ok"):
            _try(lambda tx=tx: wallet.nonces.release(tx["nonce"]))
        booked.append(outcome)
    return {"booked": booked}


def hold_nonces(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """Two nonce numbers taken under a made-up holder, then the process exits."""
    held = [_try(lambda: wallet._send("/v1/nonces/allocate", {"n": None, "holder": "anything"})["data"]["value"])
            for _ in range(2)]
    return {"held": held}


def poison_calibration(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """Verdicts at the seller's price signed and never submitted, each reported covered."""
    reported = []
    for _ in range(config["verdicts"]):
        payload, verdict = _authorization(config, judge, w3, config["price"])
        if verdict.decision != "approve":
            reported.append(f"judge {verdict.decision}: {verdict.reason[:200]}")
            continue
        signed = _try(lambda p=payload, v=verdict: wallet.sign_typed_data(
            p, v, run_id=config["task_id"], spend_cap_atomic=config["cap"]).verdict_id)
        outcome = _try(lambda v=verdict: judge.record_outcome(v.id, "receipt", True))
        reported.append(f"sign {signed[:80]} / outcome {outcome}")
    return {"reported": reported}


def fail_then_use(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """Its own signed authorization marked failed, then submitted on chain by the agent."""
    payload, verdict = _authorization(config, judge, w3, config["price"])
    if verdict.decision != "approve":
        return {"decision": f"judge {verdict.decision}: {verdict.reason[:200]}"}
    signed = wallet.sign_typed_data(payload, verdict, run_id=config["task_id"], spend_cap_atomic=config["cap"])
    failed = _try(lambda: wallet.fail(signed, "the seller refused the payment"))
    return {"spend_id": signed.reservation.id, "failed": failed,
            "submitted": _try(lambda: _submit_authorization(w3, config, payload, signed.signature))}


def _submit_authorization(w3: Any, config: dict[str, Any], payload: dict[str, Any], signature: str) -> int:
    """``transferWithAuthorization`` sent by the agent itself (any funded key will do: the
    signature is a bearer note); the receipt's status."""
    from chain.devkeys import OUTSIDER, dev_account
    from chain.usdc import usdc_contract

    sig = bytes.fromhex(signature.removeprefix("0x"))
    msg = payload["message"]
    relayer = dev_account(OUTSIDER)
    fn = usdc_contract(w3, config["usdc"]).functions.transferWithAuthorization(
        msg["from"], msg["to"], int(msg["value"]), int(msg["validAfter"]), int(msg["validBefore"]),
        bytes.fromhex(str(msg["nonce"]).removeprefix("0x")), sig[64], sig[:32], sig[32:64])
    tx = fn.build_transaction({"from": relayer.address,
                               "nonce": w3.eth.get_transaction_count(relayer.address)})
    raw = relayer.sign_transaction(tx).raw_transaction
    return int(w3.eth.wait_for_transaction_receipt(w3.eth.send_raw_transaction(raw))["status"])


def _purchase(config: dict[str, Any], w3: Any, to: str, amount: int, fact: str) -> tuple[dict[str, Any], Any]:
    """An x402 purchase of ``fact`` from the market seller of the config (``seller_origin``,
    ``seller_url``) paying ``amount`` to ``to``, and the judge request naming that seller."""
    from dataclasses import replace

    from judge.fingerprint import call_fingerprint
    from tests._support import lying_authorization

    payload, request = lying_authorization(
        w3, config["usdc"], config["chain_id"], config["wallet"], to, amount,
        task_id=config["task_id"], url=config["seller_url"])
    args = {"url": config["seller_url"]}
    return payload, replace(request, tool="pay_http", args=args, seller=config["seller_origin"],
                            call_fingerprint=call_fingerprint("pay_http", args),
                            missing=(fact,), tool_facts=(fact,))


def credit_a_seller_not_paid(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """x402 purchases that name a market seller but pay another address (one the task may
    pay), settled on chain by the agent, each reported covered: credit for a seller that
    was never paid."""
    return {"reported": [_bought(config, judge, wallet, w3, config["seller"], config["price"],
                                 "receipt", True) for _ in range(config["purchases"])]}


def underpay_a_seller(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """Purchases from a market seller that pay its real payTo, each settled on chain by the
    agent and reported paid but not delivered: first far less than its 402 asks (1 atomic
    unit), then what it asks, twice: the seller's calibration for every task."""
    return {"reported": [f"{amount}: " + _bought(config, judge, wallet, w3, config["pay_to"],
                                                 amount, config["fact"], False)
                         for amount in config["amounts"]]}


def _bought(config: dict[str, Any], judge: Any, wallet: Any, w3: Any, to: str, amount: int,
            fact: str, covered: bool) -> str:
    """One purchase (see _purchase): the judge's refusal, or signed, settled on chain by
    the agent itself and reported ``covered`` (else paid but not delivered)."""
    payload, request = _purchase(config, w3, to, amount, fact)
    verdict = judge.decide(request)
    if verdict.decision != "approve":
        return f"judge {verdict.decision}: {verdict.reason[:500]}"
    signed = wallet.sign_typed_data(payload, verdict, run_id=config["task_id"], spend_cap_atomic=config["cap"])
    settled = _try(lambda: _submit_authorization(w3, config, payload, signed.signature))
    delivery = "delivered" if covered else "paid-not-delivered"
    outcome = _try(lambda: judge.record_outcome(verdict.id, fact, covered, delivery=delivery))
    return f"settled {settled} / outcome {outcome}"


def wrong_domain(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """An authorization built under an EIP-712 domain that is not the token's."""
    # A verifying contract that is no token at all (the payer's own address): the judge's
    # answer, whatever it is, or the error it gave instead of one.
    foreign = _try(lambda: _authorization(config, judge, w3, config["price"],
                                          verifying_contract=config["wallet"])[1].reason)
    payload, verdict = _authorization(config, judge, w3, config["price"], name="Not USDC", version="9")
    if verdict.decision != "approve":
        return {"signed": f"judge {verdict.decision}: {verdict.reason[:300]}", "foreign": foreign}
    return {"foreign": foreign, "signed": _try(lambda: wallet.sign_typed_data(
        payload, verdict, run_id=config["task_id"], spend_cap_atomic=config["cap"]).reservation.id)}


def flood(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """3,000 idle half-frame connections and one over-claiming frame held open against the
    wallet (and a 1 MB header to the judge) until the test, another process, has paid and
    read the services' state meanwhile (a line on stdin)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held: list[socket.socket] = []
    for i in range(config["connections"]):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(config["wallet_socket"])
            # Half a length prefix; the first one claims 64 KiB and sends 10 bytes.
            conn.sendall(struct.pack(">I", 65536) + b"{" * 10 if i == 0 else b"\x00\x00")
        except OSError:
            conn.close()
            continue
        held.append(conn)
    time.sleep(1.0)  # let the service take them all in
    report: dict[str, Any] = {"opened": len(held), "judge_big_header": _try(
        lambda: _big_header(config["judge_url"]))}
    report["closed_by_service"] = sum(_closed(c) for c in held)
    print("HOLDING " + json.dumps(report), flush=True)
    sys.stdin.readline()
    for conn in held:
        conn.close()
    return report


def judge_flood(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """``procs`` forked processes, each holding ``per`` connections to the judge that send
    a request head one header line a second and never finish it, re-opening every one the
    judge closes, until the test (another process) has been served (a line on stdin)."""
    import os
    from urllib.parse import urlsplit

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    parts = urlsplit(config["judge_url"])
    stop_r, stop_w = os.pipe()
    done_r, done_w = os.pipe()
    kids = []
    for _ in range(config["procs"]):
        pid = os.fork()
        if pid == 0:
            os.close(stop_w)
            _slow_heads((parts.hostname or "", parts.port or 80), config["per"], stop_r, done_w)
        kids.append(pid)
    os.close(done_w)
    results = os.fdopen(done_r)
    ready = [json.loads(results.readline()) for _ in kids]
    print("FLOODING " + json.dumps({"opened": sum(r["opened"] for r in ready)}), flush=True)
    sys.stdin.readline()
    os.close(stop_w)
    totals = [json.loads(results.readline()) for _ in kids]
    for pid in kids:
        os.waitpid(pid, 0)
    return {"procs": config["procs"], "per": config["per"],
            "opened": sum(t["opened"] for t in totals),
            "closed_by_judge": sum(t["closed"] for t in totals)}


def _slow_heads(address: tuple[str, int], per: int, stop: int, done: int) -> None:
    """One flooding process (a forked child): never returns."""
    import os
    import select

    def head() -> socket.socket | None:
        conn = socket.create_connection(address)
        try:
            conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: judge\r\n")
        except OSError:
            conn.close()
            return None
        return conn

    held = [c for c in (head() for _ in range(per)) if c]
    opened, closed = len(held), 0
    os.write(done, (json.dumps({"opened": opened}) + "\n").encode())
    poller = select.poll()
    poller.register(stop, select.POLLIN | select.POLLHUP)
    while not poller.poll(1000):
        kept = []
        for conn in held:
            if _closed(conn):
                closed += 1
                conn.close()
                continue
            try:
                conn.sendall(b"X-Slow: y\r\n")
                kept.append(conn)
            except OSError:
                closed += 1
                conn.close()
        fresh = [c for c in (head() for _ in range(per - len(kept))) if c]
        opened, held = opened + len(fresh), kept + fresh
    os.write(done, (json.dumps({"opened": opened, "closed": closed}) + "\n").encode())
    os._exit(0)


def _closed(conn: socket.socket) -> bool:
    """Whether the service has closed (or answered and closed) this connection."""
    conn.setblocking(False)
    try:
        return conn.recv(1 << 16) is not None
    except BlockingIOError:
        return False
    except OSError:
        return True


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:  # noqa: PTH123
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise ValueError("no Threads line")


def _big_header(url: str) -> int:
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    conn.putrequest("GET", "/v1/health")
    conn.putheader("X-Padding", "a" * (1 << 20))
    conn.endheaders()
    status = conn.getresponse().status
    conn.close()
    return status


def _rewrite_queued(config: dict[str, Any]) -> int:
    """The queued task's text, rewritten in the agents' database (which an agent may write)."""
    from agent.config import load_settings
    from agent.queue import QUEUE
    from judge.storage.db import open_database

    db = open_database(load_settings().database)
    return int(db.execute(f"UPDATE {QUEUE} SET task = ? WHERE id = ?",
                          (config["text"], config["queued"])))


def rows_of_another_task(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """Every route that names a row or a run, aimed at the victim's live authorization:
    read it, overwrite its stored payment header and note, and cancel it on chain."""
    from wallet.wire import signed_from_wire

    victim = signed_from_wire(config["victim_signed"])
    spend_id, run = victim.reservation.id, config["victim"]

    def live_header() -> object:
        row = wallet.live_authorization(config["victim_resource"])
        return None if row is None else row.x402_payment

    return {
        "usage": _try(lambda: wallet.meter.usage(run).committed),
        "spend_row": _try(lambda: wallet.spend_row(spend_id).x402_payment),
        "live_authorization": _try(live_header),
        "keep_payment": _try(lambda: wallet.keep_payment(victim, ("X-PAYMENT", "garbage"))),
        "keep_signed": _try(lambda: wallet.meter.keep_signed(spend_id, "garbage")),
        "abandon": _try(lambda: wallet.abandon_authorization(spend_id, "the seller went away").status),
        # A made-up holder that is "gone": the victim's run as a dead worker's.
        "recover": _try(lambda: wallet.recover_run(run, "elsewhere:1", "its worker died")),
    }


def cancel_past_cap(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """Authorizations that fill its cap, the last one then abandoned: the wallet's cancel
    would spend gas the task has no room for."""
    for _ in range(config["purchases"]):
        payload, verdict = _authorization(config, judge, w3, config["amount"])
        if verdict.decision != "approve":
            return {"abandon": f"judge {verdict.decision}: {verdict.reason[:200]}"}
        signed = wallet.sign_typed_data(payload, verdict, run_id=config["task_id"], spend_cap_atomic=config["cap"])

    def abandon() -> object:
        row = wallet.abandon_authorization(signed.reservation.id, "the seller went away")
        return f"{row.status}: {row.note}"

    return {"nonce": payload["message"]["nonce"], "abandon": _try(abandon)}


def renew_nonces(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """A live process that takes a number and keeps allocating (five a second), to hold
    the lowest numbers for ever: every other task's transfer would sit above them."""
    first = _try(wallet.nonces.allocate)
    print("HOLDING " + json.dumps({"first": first}), flush=True)
    outcomes = []
    end = time.monotonic() + config["seconds"]
    while time.monotonic() < end:
        outcomes.append(_try(wallet.nonces.allocate)[:70])
        time.sleep(0.2)
    refused = sorted({o for o in outcomes if not o.startswith("ok")})
    return {"first": first, "ok": sum(o.startswith("ok") for o in outcomes), "refused": refused[:3]}


def reclaim_nonce(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """A live process that holds one number and, every second, gives it back and claims it
    again (an outside red team's C3r): each claim a new hold, to keep every other task's
    transfer above it for ever."""
    n = wallet.nonces.allocate()
    print("HOLDING " + json.dumps({"first": f"ok {n}"}), flush=True)
    outcomes = []
    end = time.monotonic() + config["seconds"]
    while time.monotonic() < end:
        time.sleep(1.0)
        wallet.nonces.release(n)
        got = _try(lambda n=n: wallet.nonces.claim(n))
        if got != "ok True":
            got = _try(wallet.nonces.allocate)
            if got.startswith("ok "):
                n = int(got.removeprefix("ok "))
        outcomes.append(got[:70])
    refused = sorted({o for o in outcomes if not o.startswith("ok")})
    return {"held": sum(o.startswith("ok") for o in outcomes), "refused": refused[:3]}


def _idle_connections(path: str, count: int) -> list[socket.socket]:
    """Up to ``count`` connections to the wallet socket that never send a byte."""
    held = []
    for _ in range(count):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(path)
        except OSError:
            conn.close()
            continue
        held.append(conn)
    return held


def forked_flood(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """Forked processes, each holding as many idle connections to the wallet as it may,
    together more than the service's total, until the test (another process) has been
    served meanwhile (a line on stdin)."""
    import os
    import signal

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ready_r, ready_w = os.pipe()
    children = []
    for _ in range(config["forks"]):
        pid = os.fork()
        if pid == 0:  # a child: open its connections, say how many, hold them
            held = _idle_connections(config["wallet_socket"], config["connections"])
            os.write(ready_w, f"{len(held)}\n".encode())
            time.sleep(600)
            os._exit(0)
        children.append(pid)
    opened = []
    with os.fdopen(ready_r) as ready:
        for _ in children:
            opened.append(int(ready.readline()))
    time.sleep(1.0)  # let the service take them all in
    report: dict[str, Any] = {"forks": len(children), "opened": sum(opened)}
    print("HOLDING " + json.dumps(report), flush=True)
    sys.stdin.readline()
    for pid in children:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return report


def one_connection_per_fork(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """Hundreds of forked processes holding ONE idle connection each, opened again when the
    service closes it (a share per process evicts none of them), and connections that never
    send to keep the overflow pool waiting, until the test (another process) has been served
    meanwhile (a line on stdin). ``prove``: each fork proves the task first (one identity)."""
    import os
    import select
    import signal

    from wallet.wire import frame, read_answer

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ready_r, ready_w = os.pipe()
    children = []
    for i in range(config["forks"]):
        pid = os.fork()
        if pid == 0:  # a child: hold one connection, for ever
            proving = config["prove"] and i % 2 == 0  # half prove the task, half prove nothing
            os.write(ready_w, b"1\n")
            while True:
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    conn.connect(config["wallet_socket"])
                    if proving:  # the task proven on this very connection, then idle
                        conn.sendall(frame({"route": "/v1/prove-task", "body": {"token": config["token"]}}))
                        read_answer(conn, time.monotonic() + 30)
                except (OSError, ValueError):
                    conn.close()
                    time.sleep(0.2)
                    continue
                watch = select.poll()
                watch.register(conn, select.POLLIN | select.POLLHUP)
                watch.poll()  # until the service closes it (an answer never comes unasked)
                conn.close()
        children.append(pid)
    with os.fdopen(ready_r) as ready:
        for _ in children:
            ready.readline()
    extra = _idle_connections(config["wallet_socket"], config["overflow"])
    time.sleep(3.0)  # let the service take them all in
    print("HOLDING " + json.dumps({"forks": len(children), "extra": len(extra)}), flush=True)
    sys.stdin.readline()
    for pid in children:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    for conn in extra:
        conn.close()
    return {"forks": len(children)}


def pay_once(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """Not an attack: another task's confined process, served while others flood or squat
    (its health, whether a live authorization holds ``resource``, then one approved
    payment signed, booked under ``resource`` when given)."""
    payload, verdict = _authorization(config, judge, w3, config["price"])
    resource = config.get("resource")
    return {"health": _try(lambda: wallet.health()["address"]),
            "live": _try(lambda: None if resource is None else wallet.live_authorization(resource)),
            "signed": _try(lambda: wallet.sign_typed_data(payload, verdict, run_id=config["task_id"],
                                                          spend_cap_atomic=0, resource=resource).run_id)}


def squat_resources(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """Its own approved purchases (the paywall's resource, valid ~1 h), booked under other
    sellers' resource names (an outside red team's C7): one live authorization per
    resource would make every other task's purchase of those wait for an hour."""
    from tests._support import lying_authorization

    lines = []
    for name in config["resources"]:
        payload, request = lying_authorization(
            w3, config["usdc"], config["chain_id"], config["wallet"], config["seller"],
            config["price"], task_id=config["task_id"], url=config["seller_resource"], valid_s=3500)
        verdict = judge.decide(request)
        lines.append(_try(lambda p=payload, v=verdict, r=name: wallet.sign_typed_data(
            p, v, run_id=config["task_id"], spend_cap_atomic=0, resource=r).reservation.id))
    return {"squatted": lines}


def cancel_behind_own_transfer(config: dict[str, Any], judge: Any, wallet: Any, w3: Any) -> dict[str, Any]:
    """Abandon a small authorization while its cancel must wait behind the task's own
    transfer (signed, its nonce held unsent); meanwhile fill the cap with authorizations,
    then send the transfer, and settle the fills on chain (an outside red team's C5)."""
    import threading

    from tests._support import lying_transfer
    from wallet.service import WalletClient

    h = wallet.nonces.allocate()
    tx, request = lying_transfer(w3, config["usdc"], config["chain_id"], config["seller"], 1, h,
                                 task_id=config["task_id"])
    transfer = wallet.sign_transaction(tx, judge.decide(request), run_id=config["task_id"], spend_cap_atomic=0)
    payload, verdict = _authorization(config, judge, w3, config["price"])
    small = wallet.sign_typed_data(payload, verdict, run_id=config["task_id"], spend_cap_atomic=0)
    report: dict[str, Any] = {}

    def abandon() -> None:  # its own connection: the abandon blocks while the cancel waits
        other = WalletClient(config["wallet_socket"], timeout_s=120)
        other.prove_task(config["token"])
        report["abandon"] = _try(lambda: other.abandon_authorization(small.reservation.id, "gone").status)

    waiter = threading.Thread(target=abandon)
    waiter.start()
    # The cancel holds the number after the transfer's: it is waiting. Patient (90 s): the
    # abandon's connection, proof and cancel took over 15 s at load 6-9 on PostgreSQL.
    # On a loaded machine the cancel can take longer to wait than the wallet lets a task
    # hold a number unsent (20 s over its life): the wallet then bars the task, ending the
    # race before it starts; that is reported, and the cap is checked all the same.
    from wallet.errors import NonceHoldRefused

    deadline = time.monotonic() + 90
    probe = h
    while True:
        try:
            probe = wallet.nonces.allocate()
        except NonceHoldRefused as exc:
            report["barred"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            break
        wallet.nonces.release(probe)
        if probe > h + 1 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    report["cancel_waiting"] = probe > h + 1
    fills = []
    for _ in range(40):  # the seller's price each time (its 402 asks exactly that)
        if config["cap"] - wallet.meter.usage(config["task_id"]).committed < config["price"]:
            break
        payload, verdict = _authorization(config, judge, w3, config["price"])
        try:
            fills.append((payload, wallet.sign_typed_data(payload, verdict, run_id=config["task_id"], spend_cap_atomic=0)))
        except Exception as exc:  # the room is taken: the point of the exercise
            report["fill_refused"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            break
    report["send"] = _try(lambda: wallet.send_transaction(transfer).status)
    waiter.join(150)
    report["settled"] = [_try(lambda p=p, s=s: _submit_authorization(w3, config, p, s.signature))
                         for p, s in fills]
    return report


CASES = {
    "book": book_under_another_run,
    "nonces": hold_nonces,
    "outcomes": poison_calibration,
    "fail": fail_then_use,
    "domain": wrong_domain,
    "flood": flood,
    "credit": credit_a_seller_not_paid,
    "underpay": underpay_a_seller,
    "rows": rows_of_another_task,
    "cancel": cancel_past_cap,
    "renew": renew_nonces,
    "forks": forked_flood,
    "judge_flood": judge_flood,
    "cancel_race": cancel_behind_own_transfer,
    "one_per_fork": one_connection_per_fork,
    "pay_once": pay_once,
    "reclaim": reclaim_nonce,
    "squat": squat_resources,
}

if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
