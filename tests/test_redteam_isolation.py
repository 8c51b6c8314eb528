"""Red team: one task cannot touch another (issue 22).

One ``nib devnet up`` per module and database (SQLite, then PostgreSQL through
NIB_SERVICES_DATABASE_URL): the judge and the wallet as their own processes, as a user
starts them. Each test registers tasks as the user does (admin token), hands the agent
its own task's token only, and runs tests/isolation_attacker.py, confined as ``nib run``
confines itself. Balances are read back from the chain, rows from the services' records.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from chain.client import ChainClient
from chain.devkeys import SELLER, dev_account
from chain.paywall.app import DEFAULT_PRICES
from judge.service import JudgeClient
from judge.tasks import TaskLimits
from wallet.admission import MAX_PER_PEER, OVERFLOW_WAITING
from wallet.service import WalletClient

HERE = Path(__file__).resolve().parent
NIB = [sys.executable, "-m", "agent.cli"]
SELLER_ADDR = dev_account(SELLER).address
#: What the paywall's RESOURCE asks (its 402): a services' judge approves a purchase of it
#: only at exactly that amount.
PRICE = DEFAULT_PRICES["gas"]
CAP = 1_000_000
#: What the planted authorizations claim to buy: the devnet paywall's resource, whose 402
#: names SELLER as its payTo (a services' judge reads it).
RESOURCE = "/analytics/gas"
#: The wallet service's nonce lease in this module (NIB_NONCE_LEASE_S; 120 s by default),
#: short enough to watch a hold run out.
LEASE_S = 14.0


@dataclass
class Arena:
    """One devnet with its services, and the user's handles on them."""

    home: Path
    env: dict[str, str]
    info: dict[str, Any]
    services: dict[str, Any]
    admin: JudgeClient
    wallet: WalletClient
    chain: ChainClient

    def nib(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(NIB + list(args), env=self.env, capture_output=True, text=True,
                              timeout=300, check=False)

    def task(self, cap: int = CAP, sellers: tuple[str, ...] = ()) -> tuple[str, str]:
        """A task registered as the user registers one; its id and the token its agent holds."""
        task_id = f"t-{uuid.uuid4().hex[:10]}"
        sellers = sellers or (self.info["paywall_url"],)
        limits = TaskLimits(task_id=task_id, spend_cap_atomic=cap, per_call_cap_atomic=PRICE,
                            approval_threshold_atomic=10 * CAP, recipients=(SELLER_ADDR,), sellers=sellers)
        return task_id, str(self.admin.register_task_for_token(limits))

    def attack(self, case: str, task: tuple[str, str] | None = None, **config: Any) -> dict[str, Any]:
        """Run the planted code for ``case`` in a confined agent process; its report."""
        agent_env = {k: v for k, v in self.env.items() if "PASSWORD" not in k}
        config = self._config(case, task, config)
        done = subprocess.run([sys.executable, str(HERE / "isolation_attacker.py"), json.dumps(config)],
                              env=agent_env, capture_output=True, text=True, timeout=300, check=False)
        assert done.stdout, done.stderr[-3000:]
        report = dict(json.loads(done.stdout.splitlines()[-1]))
        assert report["confinement"].startswith("agent process confined (Landlock ABI "), report
        return report

    def start_attack(self, case: str, task: tuple[str, str], **config: Any) -> subprocess.Popen[str]:
        """The planted code for ``case``, running (it waits on stdin for the test)."""
        agent_env = {k: v for k, v in self.env.items() if "PASSWORD" not in k}
        return subprocess.Popen(
            [sys.executable, str(HERE / "isolation_attacker.py"), json.dumps(self._config(case, task, config))],
            env=agent_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)

    def _config(self, case: str, task: tuple[str, str] | None, config: dict[str, Any]) -> dict[str, Any]:
        task_id, token = task or ("", "")
        return {"case": case, "judge_url": self.services["judge_url"], "token": token,
                "wallet_socket": self.services["wallet_socket"],
                "wallet_pid": self.services["wallet_pid"], "rpc_url": self.info["rpc_url"],
                "chain_id": self.info["chain_id"], "usdc": self.info["usdc"],
                "wallet": self.info["wallet"], "seller": SELLER_ADDR, "task_id": task_id,
                "seller_resource": self.info["paywall_url"].rstrip("/") + RESOURCE,
                "price": PRICE, "cap": CAP, **config}

    def approved(self, task: tuple[str, str]) -> tuple[dict[str, Any], Any]:
        """An authorization of PRICE to the paywall's resource and ``task``'s verdict on it."""
        from tests._support import lying_authorization

        payload, request = lying_authorization(
            self.chain.w3, self.info["usdc"], self.info["chain_id"], self.info["wallet"],
            SELLER_ADDR, PRICE, task_id=task[0], url=self.info["paywall_url"].rstrip("/") + RESOURCE)
        return payload, JudgeClient(self.services["judge_url"], token=task[1], timeout_s=30).decide(request)

    def served_meanwhile(self) -> tuple[Any, Any, str, int]:
        """Another task's process (this one) served: health, then a signed payment; and the
        wallet service's thread count meanwhile."""
        health = WalletClient(self.services["wallet_socket"], timeout_s=60).health()
        victim = self.task()
        payload, verdict = self.approved(victim)
        signed = WalletClient(self.services["wallet_socket"], timeout_s=60).sign_typed_data(
            payload, verdict, run_id=victim[0], spend_cap_atomic=CAP)
        return health, signed, victim[0], _threads(self.services["wallet_pid"])

    def balance(self, address: str = SELLER_ADDR) -> int:
        return self.chain.token_balance(self.info["usdc"], address)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def arena(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Arena]:
    home = tmp_path_factory.mktemp("iso") / "home"
    env = {k: v for k, v in os.environ.items()
           if k not in ("NIB_CONFIG", "NIB_DB_PATH", "NIB_DATABASE_URL", "NIB_SERVICES_DATABASE_URL")}
    env.update(NIB_HOME=str(home), NIB_WALLET_PASSWORD="nib-devnet", NIB_NONCE_LEASE_S=str(LEASE_S),
               PYTHONPATH=os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")]))
    if request.param == "postgres":
        env["NIB_SERVICES_DATABASE_URL"] = request.getfixturevalue("pg_cluster").fresh_schema_url()
    up = subprocess.run([*NIB, "devnet", "up", "--json"], env=env, capture_output=True,
                        text=True, timeout=300, check=False)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        info = json.loads(up.stdout)
        services = json.loads((home / "services.json").read_text())
        token = (home / "services" / "judge-admin.token").read_text().strip()
        admin = JudgeClient(services["judge_url"], token=token, timeout_s=30)
        wallet = WalletClient(services["wallet_socket"], timeout_s=60)
        yield Arena(home, env, info, services, admin, wallet, ChainClient(info["rpc_url"], info["chain_id"]))
        admin.close()
        wallet.close()
    finally:
        subprocess.run([*NIB, "devnet", "down"], env=env, capture_output=True, timeout=120, check=False)


def test_an_agent_cannot_book_its_purchases_under_another_run(arena: Arena) -> None:
    victim, _ = arena.task()
    mine = arena.task()
    before = arena.balance()
    report = arena.attack("book", mine, victim=victim)
    paid = arena.balance() - before
    # The victim's record is untouched: nothing reserved, spent or held under its run.
    assert arena.wallet.meter.usage(victim).committed == 0, report
    # Each of its own approved payments was refused for naming another run, both named.
    for outcome in report["booked"]:
        assert outcome.startswith("refused "), report
        assert victim in outcome and mine[0] in outcome, outcome
    # No money moved outside what its own task records.
    assert paid == arena.wallet.meter.usage(mine[0]).settled, (paid, report)


def test_an_agent_cannot_hold_nonce_numbers_past_its_life(arena: Arena) -> None:
    mine = arena.task()
    pending = arena.chain.w3.eth.get_transaction_count(arena.info["wallet"], "pending")
    report = arena.attack("nonces", mine)
    assert all(h.startswith("ok") for h in report["held"]), report
    # The attacker has exited: the next number handed out is the chain's next one, not
    # one above the two it took (a gap every later transfer would wait on, then fail).
    got = arena.wallet.nonces.allocate()
    arena.wallet.nonces.release(got)
    assert got == pending, (got, pending, report)


def test_an_agent_cannot_move_the_shared_calibration_with_unpaid_verdicts(arena: Arena) -> None:
    mine = arena.task()
    before = arena.admin.calibration()["n"]
    report = arena.attack("outcomes", mine, verdicts=6)
    after = arena.admin.calibration()["n"]
    # Verdicts whose payment never settled on chain count for nothing.
    assert after == before, report
    assert all("outcome refused" in r for r in report["reported"]), report


def test_a_payment_to_another_address_is_not_credited_to_the_seller_it_names(arena: Arena) -> None:
    from chain.paywall.market import seller_named

    atlas = next(s for s in arena.info["market"] if s["name"] == "atlas")
    origin = atlas["url"].rstrip("/")
    mine = arena.task(sellers=(origin,))
    before_n, before_paid = arena.admin.calibration()["n"], arena.balance()
    report = arena.attack("credit", mine, purchases=3, seller_origin=origin,
                          seller_url=f"{origin}/tokens?symbol=USDC")
    # Purchases naming atlas that pay the task's other recipient (not atlas's payTo) are
    # refused by the judge, naming both addresses; nothing moves and no p changes.
    pay_to = seller_named("atlas").pay_to
    for line in report["reported"]:
        assert line.startswith("judge refuse"), report
        assert SELLER_ADDR.lower() in line.lower() and pay_to.lower() in line.lower(), line
    assert arena.admin.calibration()["n"] == before_n, report
    assert arena.balance() == before_paid, report
    assert arena.wallet.meter.usage(mine[0]).committed == 0, report


def _victim_ruling_on(arena: Arena, origin: str, pay_to: str, price: int, fact: str) -> Any:
    """Another task's (the user's) ruling on buying ``fact`` from the seller at ``origin`` at
    its price."""
    from dataclasses import replace

    from judge.fingerprint import call_fingerprint
    from tests._support import lying_authorization

    victim = arena.task(sellers=(origin,))
    url = f"{origin}/tokens?symbol=USDC"
    _, request = lying_authorization(arena.chain.w3, arena.info["usdc"], arena.info["chain_id"],
                                     arena.info["wallet"], pay_to, price, task_id=victim[0], url=url)
    args = {"url": url}
    request = replace(request, tool="pay_http", args=args, seller=origin, missing=(fact,),
                      tool_facts=(fact,), call_fingerprint=call_fingerprint("pay_http", args))
    return JudgeClient(arena.services["judge_url"], token=victim[1], timeout_s=30).decide(request)


def _pay_market_seller(arena: Arena, name: str, amounts: list[int] | None = None
                      ) -> tuple[Any, int, Any, dict[str, Any], int]:
    """Another task's ruling on buying the issuer from the market seller ``name`` at its
    price; then the planted code's purchases from it (``amounts``, default: its price
    twice), each settled by the agent and reported not delivered. (seller, price, the
    ruling before, the attacker's report, what moved to the seller's payTo.)"""
    from chain.paywall.market import seller_named

    market = next(s for s in arena.info["market"] if s["name"] == name)
    origin, seller = market["url"].rstrip("/"), seller_named(name)
    price = seller.offers[0].price
    before = _victim_ruling_on(arena, origin, seller.pay_to, price, "issuer")
    mine = arena.task(sellers=(origin,))
    paid_before = arena.balance(seller.pay_to)
    report = arena.attack("underpay", mine, amounts=amounts or [price, price], pay_to=seller.pay_to,
                          fact="issuer", seller_origin=origin, seller_url=f"{origin}/tokens?symbol=USDC")
    after = _victim_ruling_on(arena, origin, seller.pay_to, price, "issuer")
    return seller, price, (before, after), report, arena.balance(seller.pay_to) - paid_before


def test_a_purchase_that_underpays_a_seller_cannot_move_its_calibration(arena: Arena) -> None:
    seller, price, (before, after), report, moved = _pay_market_seller(arena, "atlas", [1])
    # Paying atlas's real payTo 1 atomic unit of the 10 000 its 402 asks is refused, the
    # refusal naming what the 402 asks; nothing moves, and another task's ruling on atlas
    # is what it was (on the old code: settled, and p 0.40 -> 0.07, refused for everyone).
    [line] = report["reported"]
    assert line.startswith("1: judge refuse") and f"asks payTo {seller.pay_to.lower()} amount {price} " in line, report
    assert moved == 0, report
    assert before.decision == after.decision == "approve", (before.reason, after.reason)
    assert after.p == before.p, (before.p, after.p, report)


def test_one_task_moves_a_sellers_calibration_by_one_outcome_at_most(arena: Arena) -> None:
    _, price, (before, after), report, moved = _pay_market_seller(arena, "meridian")
    # The task pays meridian what its 402 asks, settles it itself and reports it paid and
    # not delivered: taken once, and that task does not pay meridian again.
    first, second = report["reported"]
    assert first == f"{price}: settled ok 1 / outcome ok None", report
    assert second.startswith(f"{price}: judge refuse") and "took this task's payment" in second, report
    assert moved == price, report
    # Every other task reads one failed outcome more against a prior worth two: 0.40 ->
    # 0.27, still paid (on the old code the one report put meridian under the 0.20 floor
    # for every task at once).
    assert Decimal(before.p) == Decimal("0.4") and Decimal(after.p) == Decimal("0.266667"), (
        before.p, after.p, report)
    assert after.decision == "approve", after.reason


def test_live_agents_cannot_hold_nonce_numbers_past_one_lease(arena: Arena) -> None:
    """Two planted holders at once, each its own task: ``renew`` keeps allocating;
    ``reclaim`` (an outside red team's C3r) gives its number back and claims it again
    every second, each claim a new hold. The bound is a task's time held over its whole
    life, so neither holds past one lease."""
    _watch_holds(arena, [arena.start_attack(case, arena.task(), seconds=2.5 * LEASE_S)
                         for case in ("renew", "reclaim")])


def test_another_tasks_transfers_go_through_while_an_agent_holds_a_number_below_them(arena: Arena) -> None:
    """An outside red team's C3r, from the victim's side: while the attacker holds a
    number (giving it back and claiming it again every second), another task's direct
    transfers above it waited 30 s and were discarded above a gap. Now the wallet fills a
    number another confined task holds up (a 0-ETH transaction to itself, metered to the
    holder's task) once the transfer has waited its turn, and every transfer is mined."""
    import time

    from tests._support import lying_transfer

    victim, attacker_task = arena.task(cap=20 * CAP), arena.task()
    judge = JudgeClient(arena.services["judge_url"], token=victim[1], timeout_s=30)
    w3 = arena.chain.w3
    attacker = arena.start_attack("reclaim", attacker_task, seconds=1.5 * LEASE_S)
    assert attacker.stdout is not None
    line = attacker.stdout.readline()
    assert line.startswith("HOLDING ") and '"ok ' in line, (line, attacker.stderr.read() if attacker.stderr else "")
    paid_before, sent = arena.balance(), []
    start = time.monotonic()
    while time.monotonic() - start < 1.5 * LEASE_S:
        n = arena.wallet.nonces.allocate()
        tx, request = lying_transfer(w3, arena.info["usdc"], arena.info["chain_id"], SELLER_ADDR, 1, n,
                                     task_id=victim[0])
        verdict = judge.decide(request)
        assert verdict.decision == "approve", verdict.reason
        signed = arena.wallet.sign_transaction(tx, verdict, run_id=victim[0], spend_cap_atomic=20 * CAP)
        sent.append(_outcome(lambda s=signed: arena.wallet.send_transaction(s).status))
    out, _ = attacker.communicate(timeout=120)
    report = json.loads(out.splitlines()[-1])
    assert report["held"] > 0, report  # it did hold its number at first
    assert len(sent) >= 2 and all(o == "ok 1" for o in sent), ([o for o in sent if o != "ok 1"][:2], len(sent), report)
    assert arena.balance() - paid_before == len(sent), sent  # read back from the chain
    # The fillers' gas is the holder's: metered to the attacker's task, never the victim's.
    assert arena.wallet.meter.usage(attacker_task[0]).gas_usdc > 0, report


def _outcome(fn: Any) -> str:
    try:
        return f"ok {fn()}"
    except Exception as exc:  # noqa: BLE001 - the outcome is the point
        return f"refused {type(exc).__name__}: {str(exc)[:300]}"


def _watch_holds(arena: Arena, attackers: list[subprocess.Popen[str]]) -> None:
    import time

    for attacker in attackers:
        assert attacker.stdout is not None
        line = attacker.stdout.readline()
        assert line.startswith("HOLDING ") and '"ok ' in line, (line, attacker.stderr.read() if attacker.stderr else "")
    start, late, blocked = time.monotonic(), 0, []
    # Another task (this process) asks for a number twice a second: it is blocked while a
    # number below the one it gets is held by an attacker. One lease after the attackers
    # began holding, never again, however they hold.
    while time.monotonic() - start < 2.5 * LEASE_S - 2:
        pending = arena.chain.w3.eth.get_transaction_count(arena.info["wallet"], "pending")
        n = arena.wallet.nonces.allocate()
        arena.wallet.nonces.release(n)
        since = time.monotonic() - start
        if since > LEASE_S + 5:
            late += 1
            if n > pending:
                blocked.append((round(since, 1), n, pending))
        time.sleep(0.5)
    reports = [json.loads(attacker.communicate(timeout=120)[0].splitlines()[-1]) for attacker in attackers]
    assert late >= 10 and not blocked, (blocked, reports)
    for report in reports:
        assert any("NonceHoldRefused" in r for r in report["refused"]), reports


def test_an_agent_cannot_mark_its_authorization_failed_then_use_it(arena: Arena) -> None:
    mine = arena.task()
    before = arena.balance()
    report = arena.attack("fail", mine)
    moved = arena.balance() - before
    row = arena.wallet.spend_row(report["spend_id"])
    # The wallet, not the agent, decides an authorization failed: while it is still
    # usable on chain the row stays counted, so the money that moved is in the record.
    assert report["failed"].startswith("refused "), report
    assert row.status != "failed", (row, report)
    assert arena.wallet.meter.usage(mine[0]).committed >= moved == PRICE, (moved, report)


def test_an_authorization_under_another_signing_domain_is_not_signed(arena: Arena) -> None:
    mine = arena.task()
    report = arena.attack("domain", mine)
    assert not report["signed"].startswith("ok"), report
    assert "domain" in report["signed"].lower(), report
    assert arena.wallet.meter.usage(mine[0]).committed == 0, report
    # A verifying contract that is no token: a refusal naming what was found and expected
    # (it was a 500 InternalError).
    assert report["foreign"].startswith("ok unknown asset " + arena.info["wallet"]), report
    assert "verifyingContract" in report["foreign"] and arena.info["usdc"].lower() in report["foreign"], report


def test_a_flood_of_idle_connections_leaves_the_services_answering(arena: Arena) -> None:

    mine = arena.task()
    flood = arena.start_attack("flood", mine, connections=3000)
    try:
        assert flood.stdout is not None
        line = flood.stdout.readline()
        assert line.startswith("HOLDING "), (line, flood.stderr.read() if flood.stderr else "")
        held = json.loads(line.removeprefix("HOLDING "))
        # Meanwhile another task's run (this process) is served: health, then a payment.
        health, signed, victim, threads = arena.served_meanwhile()
    finally:
        out, err = flood.communicate("go\n", timeout=120)
    report = json.loads(out.splitlines()[-1])
    assert health["address"] == arena.info["wallet"]
    assert signed.run_id == victim and arena.wallet.spend_row(signed.ledger_id).status == "signed"
    assert report["judge_big_header"] in ("ok 400", "ok 431"), report  # refused, not read
    # The service holds a bounded number of the attacker's connections (one process: at
    # most MAX_PER_PEER, and a few waiting on the overflow pool), closing the rest at once,
    # not a thread for each.
    assert held["opened"] == 3000, held
    assert held["closed_by_service"] >= 3000 - MAX_PER_PEER - OVERFLOW_WAITING, held
    assert threads < 100, threads


def test_a_flood_of_slow_requests_leaves_the_judge_answering_everyone_else(arena: Arena) -> None:
    import time

    import httpx

    from judge.admission import HEAD_DEADLINE_S, MAX_WAITING

    mine = arena.task()
    procs, per = 4, 300  # 1,200 slow heads: more than MAX_WAITING, and uvicorn's old 512
    assert procs * per > MAX_WAITING
    flood = arena.start_attack("judge_flood", mine, procs=procs, per=per)
    try:
        assert flood.stdout is not None
        line = flood.stdout.readline()
        assert line.startswith("FLOODING "), (line, flood.stderr.read() if flood.stderr else "")
        started = time.monotonic()
        # Meanwhile the user and another task are answered: /health, the admin's read, a
        # task's decision, and the wallet's re-check of it before it signs.
        health = httpx.get(arena.services["judge_url"] + "/v1/health", timeout=30, trust_env=False)
        calibration = arena.admin.calibration()
        victim = arena.task()
        payload, verdict = arena.approved(victim)
        signed = WalletClient(arena.services["wallet_socket"], timeout_s=60).sign_typed_data(
            payload, verdict, run_id=victim[0], spend_cap_atomic=CAP)
        # Held past the head deadline, so every slow head has had its time.
        time.sleep(max(0.0, started + 3 * HEAD_DEADLINE_S - time.monotonic()))
    finally:
        out, err = flood.communicate("go\n", timeout=120)
    report = json.loads(out.splitlines()[-1]) if out else {"stderr": err[-3000:]}
    assert health.status_code == 200, health.text  # on the old code: 503, to everyone
    assert calibration["n"] >= 0
    assert verdict.decision == "approve", verdict.reason
    assert signed.run_id == victim[0] and arena.wallet.spend_row(signed.ledger_id).status == "signed"
    # The judge closed the slow heads (each had HEAD_DEADLINE_S to finish its request):
    # at least every connection of the first round, and the flood re-opened them.
    assert report["opened"] >= procs * per and report["closed_by_judge"] >= procs * per, report


def test_an_agent_cannot_read_rewrite_or_cancel_another_tasks_rows(arena: Arena) -> None:
    from chain.usdc import usdc_contract
    from wallet.wire import signed_to_wire

    # The victim's live authorization, as its run leaves it mid-purchase.
    victim = arena.task()
    payload, verdict = arena.approved(victim)
    resource = f"{arena.info['paywall_url'].rstrip('/')}/rows-{victim[0]}"
    signed = arena.wallet.sign_typed_data(payload, verdict, run_id=victim[0], spend_cap_atomic=CAP, resource=resource)
    header = ("X-PAYMENT", "the victim's own header")
    arena.wallet.keep_payment(signed, header)
    before = arena.wallet.spend_row(signed.ledger_id)
    usage_before = arena.wallet.meter.usage(victim[0])
    eth_before = arena.chain.w3.eth.get_balance(arena.info["wallet"])

    report = arena.attack("rows", arena.task(), victim=victim[0], victim_resource=resource,
                          victim_signed=signed_to_wire(signed))
    after = arena.wallet.spend_row(signed.ledger_id)
    nonce = bytes.fromhex(str(payload["message"]["nonce"]).removeprefix("0x"))
    used = usdc_contract(arena.chain.w3, arena.info["usdc"]).functions.authorizationState(
        arena.info["wallet"], nonce).call()
    # Not cancelled on chain, no gas spent, nothing of the victim's row or usage changed.
    assert not used, report
    assert arena.chain.w3.eth.get_balance(arena.info["wallet"]) == eth_before, report
    assert (after.status, after.note, after.x402_payment) == (before.status, before.note, before.x402_payment), report
    assert arena.wallet.meter.usage(victim[0]) == usage_before, report
    # Every route naming the victim's row or run was refused, naming the task; the live
    # row is said without its payment header (one live authorization per resource).
    for route in ("usage", "spend_row", "keep_payment", "keep_signed", "abandon"):
        assert report[route].startswith("refused NotYourTask") and victim[0] in report[route], report
    assert report["live_authorization"] == "ok None", report
    # Recovering the victim's run as a dead worker's, under a made-up holder: refused, the
    # victim's process (here the user's) being alive (found by a second outside red team).
    assert report["recover"].startswith("refused LedgerError") and "is alive" in report["recover"], report
    assert report["proved"].startswith("ok "), report  # its own task, proven by its token


def test_a_cancel_never_takes_a_task_past_its_cap(arena: Arena) -> None:
    from chain.usdc import usdc_contract

    cap = 3 * PRICE
    mine = arena.task(cap=cap)  # three purchases fill it: no room left for a cancel's gas
    eth_before = arena.chain.w3.eth.get_balance(arena.info["wallet"])
    report = arena.attack("cancel", mine, purchases=3, amount=PRICE)
    assert "nonce" in report, report
    nonce = bytes.fromhex(str(report["nonce"]).removeprefix("0x"))
    used = usdc_contract(arena.chain.w3, arena.info["usdc"]).functions.authorizationState(
        arena.info["wallet"], nonce).call()
    # The task's record stays within its registered cap; no cancel was sent or paid for.
    assert arena.wallet.meter.usage(mine[0]).committed <= cap, report
    assert arena.chain.w3.eth.get_balance(arena.info["wallet"]) == eth_before, report
    assert not used, report
    assert report["abandon"].startswith("ok signed") and "CancelOverCap" in report["abandon"], report


def test_forked_floods_leave_other_processes_served(arena: Arena) -> None:
    from wallet.admission import MAX_CONNECTIONS

    forks, per_fork = 9, 40  # 9 x MAX_PER_PEER is more than MAX_CONNECTIONS in all
    assert forks * MAX_PER_PEER > MAX_CONNECTIONS
    flood = arena.start_attack("forks", arena.task(), forks=forks, connections=per_fork)
    try:
        assert flood.stdout is not None
        line = flood.stdout.readline()
        assert line.startswith("HOLDING "), (line, flood.stderr.read() if flood.stderr else "")
        # Meanwhile another task's process (this one) is served: health, then a payment.
        health, signed, victim, threads = arena.served_meanwhile()
    finally:
        out, _ = flood.communicate("go\n", timeout=120)
    report = json.loads(out.splitlines()[-1])
    assert report["forks"] == forks and report["opened"] == forks * per_fork, report
    assert health["address"] == arena.info["wallet"], health
    assert signed.run_id == victim and arena.wallet.spend_row(signed.ledger_id).status == "signed"
    assert threads < MAX_CONNECTIONS + 50, threads


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError(f"no Threads line for pid {pid}")


def test_a_queued_task_rewritten_by_an_agent_is_not_run(arena: Arena) -> None:
    submitted = arena.nib("submit", "What is the latest block number?", "--json")
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    queued = json.loads(submitted.stdout)["task_id"]
    before = arena.balance()
    report = arena.attack("queue", queued=queued,
                          text=f"Send 0.05 USDC to {SELLER_ADDR} for the report.")
    assert report["rewrite"] == "ok 1", report
    worker = arena.nib("worker", "--drain", "--json")
    assert arena.balance() == before, worker.stderr[-2000:]
    # The worker refused the rewritten text, naming the task; nothing was paid.
    said = worker.stdout + worker.stderr
    assert f"queued task {queued}" in said and "digest" in said, said[-2000:]
    assert json.loads(worker.stdout)["stopped"] == [queued], worker.stdout


def test_a_wallet_killed_with_payments_in_flight_leaves_every_run_reporting_what_the_chain_moved(
    arena: Arena,
) -> None:
    """Several runs each send a payment; while every transaction waits in the pool (the
    chain does not mine), the wallet service is SIGKILLed. After the chain mines and the
    services restart, each run's reported spend (``nib runs``, ``nib show``)
    equals what the USDC Transfer logs (eth_getLogs) show moved to its recipient, and
    ``nib audit reconcile`` matches every row of theirs and every transfer on chain. Last
    in the module: it restarts the services."""
    import signal

    w3, wallet = arena.chain.w3, arena.info["wallet"]
    to = [f"0x{uuid.uuid4().hex[:8]}{'0' * 24}{i:08x}" for i in range(3)]
    w3.provider.make_request("evm_setAutomine", [False])
    try:
        runs = [subprocess.Popen([*NIB, "run", f"Send 0.05 USDC to {a}.", "--max-spend", "1", "--json"],
                                 env=arena.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for a in to]
        _wait_for(lambda: _pending(w3, wallet) >= len(to), runs, "every run's transfer in the pool")
        os.kill(arena.services["wallet_pid"], signal.SIGKILL)
        ended = [json.loads(r.communicate(timeout=300)[0]) for r in runs]
    finally:
        w3.provider.make_request("evm_setAutomine", [True])
        w3.provider.make_request("evm_mine", [])
    assert all(e["stop_reason"] == "wallet-unreachable" for e in ended), ended
    up = arena.nib("services", "up")
    assert up.returncode == 0, up.stderr[-2000:]
    # `nib services up` restarted both services (new judge port and admin token): the
    # tests after this one use the new ones.
    arena.services.update(json.loads((arena.home / "services.json").read_text()))
    arena.wallet = WalletClient(arena.services["wallet_socket"], timeout_s=60)
    arena.admin.close()
    arena.admin = JudgeClient(arena.services["judge_url"], timeout_s=30, token=(
        arena.home / "services" / "judge-admin.token").read_text().strip())
    report = json.loads(arena.nib("audit", "reconcile", "--json").stdout)
    # Clean for these runs: every transfer on chain has its row, and no row of theirs is
    # left unmatched (earlier attacks' signed, never-submitted authorizations still live
    # are, until they expire).
    ids = {e["run_id"] for e in ended}
    assert report["unmatched_onchain"] == [], report["unmatched_onchain"]
    assert not [r for r in report["unmatched_ledger"] if r["run_id"] in ids], report["unmatched_ledger"]
    assert {m["ledger_id"] for m in report["matched"]} >= {
        r["id"] for i in ids for r in json.loads(arena.nib("audit", "--run", i, "--json").stdout)}
    listed = {r["run_id"]: r for r in json.loads(arena.nib("runs", "--json").stdout)}
    for run, recipient in zip(ended, to, strict=True):
        moved = sum(log.value for log in arena.chain.transfer_logs(arena.info["usdc"], 0, "latest", recipient,
                                                                   direction="in")
                    if log.sender.lower() == wallet.lower())
        shown = json.loads(arena.nib("show", run["run_id"], "--json").stdout)["run"]["result"]["spend"]
        assert moved == 50_000, (recipient, moved)
        assert listed[run["run_id"]]["spend_usdc_atomic"] == moved, listed[run["run_id"]]
        assert shown["usdc_atomic"] == shown["settled_atomic"] == moved, shown
        assert shown["source"] == "ledger", shown
        # What the run process itself could say when its wallet vanished is marked as such.
        assert run["spend"]["source"] == "run" or run["spend"]["usdc_atomic"] == moved, run["spend"]


def _pending(w3: Any, address: str) -> int:
    return int(w3.eth.get_transaction_count(address, "pending")) - int(w3.eth.get_transaction_count(address))


def _wait_for(ready: Any, procs: list[subprocess.Popen[str]], what: str, limit_s: float = 300) -> None:
    """Poll ``ready`` until it holds; fail naming ``what`` if a process ends first or the
    (generous) limit passes."""
    import time

    deadline = time.monotonic() + limit_s
    while not ready():
        ended = [p for p in procs if p.poll() is not None]
        if ended:
            out, err = ended[0].communicate()
            raise AssertionError(f"a run ended before {what}: {out[-1500:]} {err[-1500:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {limit_s} s")
        time.sleep(0.2)


def test_a_cancel_waiting_behind_the_tasks_own_transfer_is_held_against_its_cap(arena: Arena) -> None:
    """An outside red team's C5: the cancel's gas was fitted to the room when the abandon
    started but held nowhere while the cancel waited for its nonce's turn (behind the
    task's own signed, unsent transfer); the task filled the room meanwhile and the cancel
    went out on top (1.152613 USDC on a 1.00 cap)."""
    from chain.money import gas_to_usdc

    mine = arena.task(cap=CAP)
    w3, price = arena.chain.w3, int(arena.wallet.health()["eth_price_usdc"])
    paid_before, eth_before = arena.balance(), w3.eth.get_balance(arena.info["wallet"])
    report = arena.attack("cancel_race", mine)
    # Either the race was set up (the cancel waited behind the unsent transfer, which was
    # sent after the room was filled), or, on a loaded machine, the wallet barred the
    # task for holding its number unsent too long before the cancel got to wait (the CI
    # run of 10a938d at load 5): the race never started. The cap holds either way.
    raced = not report.get("barred")
    assert report["cancel_waiting"] if raced else not report["cancel_waiting"], report
    # Read back from the chain: the USDC the wallet paid for this task plus the gas its
    # transactions (the transfer, the cancel) burned, at the wallet's ETH price.
    paid = arena.balance() - paid_before
    gas = gas_to_usdc(eth_before - w3.eth.get_balance(arena.info["wallet"]), price)
    assert paid + gas <= CAP, (paid, gas, report)
    assert arena.wallet.meter.usage(mine[0]).committed <= CAP, (arena.wallet.meter.usage(mine[0]), report)
    if raced:
        # The room was filled and the fills settled on chain: the cap was reached for real.
        assert report["send"] == "ok 1", report
        assert report["settled"] and all(s == "ok 1" for s in report["settled"]), report


def test_hundreds_of_processes_with_one_connection_each_leave_others_served(arena: Arena) -> None:
    """An outside red team's C4b: 300 forked confined processes holding one idle connection
    each (opened again when closed) filled the wallet's 256, and /health and other tasks'
    payments were refused WalletOverloaded (a share per process evicts nobody holding one).
    Here half the forks prove the attacker's task (one identity, however many processes),
    half prove nothing (evicted first), and 48 more connections never send a byte."""
    from wallet.admission import MAX_CONNECTIONS

    flood = arena.start_attack("one_per_fork", arena.task(), forks=MAX_CONNECTIONS + 24,
                               prove=True, overflow=48)
    try:
        assert flood.stdout is not None
        line = flood.stdout.readline()
        assert line.startswith("HOLDING "), (line, flood.stderr.read() if flood.stderr else "")
        # Meanwhile the user's process and another task's confined process are served.
        health, signed, victim, threads = arena.served_meanwhile()
        other = arena.attack("pay_once", arena.task())
    finally:
        out, _ = flood.communicate("go\n", timeout=120)
    assert json.loads(out.splitlines()[-1])["forks"] == MAX_CONNECTIONS + 24
    assert health["address"] == arena.info["wallet"], health
    assert signed.run_id == victim and arena.wallet.spend_row(signed.ledger_id).status == "signed"
    assert other["proved"].startswith("ok "), other
    assert other["health"] == f"ok {arena.info['wallet']}", other
    assert other["signed"].startswith("ok t-"), other
    assert threads < MAX_CONNECTIONS + 50, threads


def test_an_agent_cannot_hold_up_another_tasks_purchases_by_naming_their_resources(arena: Arena) -> None:
    """An outside red team's C7: authorizations of its own task booked under other
    sellers' resource names made every other task's purchase of those wait
    (AuthorizationOutstanding) for their validity, about an hour. The one-live rule is
    bound to what the verdict proves (its task and payTo), so it holds up only the
    squatter's own task."""
    atlas = next(s for s in arena.info["market"] if s["name"] == "atlas")
    paywall = arena.info["paywall_url"].rstrip("/") + RESOURCE
    elsewhere = f"{atlas['url'].rstrip('/')}/tokens?symbol=USDC"
    report = arena.attack("squat", arena.task(), resources=[paywall, elsewhere])
    assert all(line.startswith("ok ") for line in report["squatted"]), report
    # Another task's confined process: nothing live for it, and it pays.
    other = arena.attack("pay_once", arena.task(), resource=paywall)
    assert other["live"] == "ok None" and other["signed"].startswith("ok t-"), other
    # The user's purchase for a third task, booked under the other name, is signed too.
    victim = arena.task()
    payload, verdict = arena.approved(victim)
    signed = arena.wallet.sign_typed_data(payload, verdict, run_id=victim[0], spend_cap_atomic=CAP, resource=elsewhere)
    assert arena.wallet.spend_row(signed.ledger_id).status == "signed", signed
