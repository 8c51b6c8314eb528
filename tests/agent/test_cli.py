"""The nib command as a user drives it: the real entry point in a subprocess, on a real devnet."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from _chain_free import SERVER_CODE, run_reporting_chain_code

from chain import devnet
from chain.client import ChainClient

NIB = [sys.executable, "-m", "agent.cli"]


def nib(home: Path, *args: str, stdin: str | None = None, timeout: float = 120,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NIB_HOME": str(home), "NIB_WALLET_PASSWORD": "nib-devnet", **(env or {})}
    env.pop("NIB_CONFIG", None)
    return subprocess.run(NIB + list(args), env=env, capture_output=True, text=True, timeout=timeout, input=stdin)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory):
    h = tmp_path_factory.mktemp("cli-home")
    yield h
    nib(h, "devnet", "down")


def test_reconcile_names_a_row_it_cannot_ask_the_chain_about_and_goes_on(tmp_path):
    """A ledger row whose authorization nonce is not the token's bytes32 (a ledger from
    before the judge refused such nonces) is an alarm with its fix, not a traceback that
    stops reconcile for every other row and task."""
    from agent.cli.common import EXIT_STOPPED
    from wallet._store import Store
    from wallet.ledger import Ledger

    home = tmp_path / "home"
    try:
        assert nib(home, "devnet", "up").returncode == 0
        runs = [json.loads(nib(home, "run", "--demo", "--json").stdout) for _ in range(2)]
        rows = [json.loads(nib(home, "audit", "--run", r["run_id"], "--json").stdout)[0]
                for r in runs]
        ledger = Ledger(Store(home / "services" / "nib.db"))
        ledger.transition(rows[0]["id"], "settled", auth_nonce="0x" + "zz" * 32)
        ledger.store.close()
        for args in (("--full",), ()):
            r = nib(home, "audit", "reconcile", *args)
            assert r.returncode == EXIT_STOPPED and "Traceback" not in r.stderr, r.stderr
            assert f"ALARM ledger row {rows[0]['id']} (settled, run {runs[0]['run_id']})" in r.stdout
            assert "is not the 32-byte hex" in r.stdout and "Fix:" in r.stdout
            data = json.loads(nib(home, "audit", "reconcile", "--json", *args).stdout)
            assert [u["ledger_id"] for u in data["unreadable"]] == [rows[0]["id"]]
            assert rows[1]["tx_hash"] in {m["tx_hash"] for m in data["matched"]}
            assert data["clean"] is False
    finally:
        nib(home, "devnet", "down")


def test_devnet_up_json_funds_the_wallet(home):
    r = nib(home, "devnet", "up", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert set(info) >= {"rpc_url", "chain_id", "usdc", "wallet", "paywall_url", "pid"}
    assert info["chain_id"] == 31337
    assert ChainClient(info["rpc_url"], 31337).token_balance(info["usdc"], info["wallet"]) == 100_000_000
    again = json.loads(nib(home, "devnet", "up", "--json").stdout)
    assert again["pid"] == info["pid"], "a second `up` must report the running devnet"
    status = json.loads(nib(home, "devnet", "status", "--json").stdout)
    assert status["running"] is True


def test_run_demo_pays_once_and_reconciles(home):
    r = nib(home, "run", "--demo", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["finished"] and not result["partial"]
    assert result["stop_reason"] in {"evidence-covered", "finish-tool", "done-signal"}
    assert 0 < result["spend"]["usdc_atomic"] <= 1_000_000
    audit = json.loads(nib(home, "audit", "--run", result["run_id"], "--json").stdout)
    assert len(audit) == 1 and audit[0]["status"] == "settled" and audit[0]["tx_hash"].startswith("0x")
    rec = nib(home, "audit", "reconcile", "--json")
    assert rec.returncode == 0, rec.stderr
    data = json.loads(rec.stdout)
    assert audit[0]["tx_hash"] in {m["tx_hash"] for m in data["matched"]}
    assert data["unmatched_onchain"] == [] and data["unmatched_ledger"] == []
    verified = nib(home, "audit", "verify", "--json")
    assert verified.returncode == 0 and json.loads(verified.stdout)["ok"], verified.stdout
    runs = json.loads(nib(home, "runs", "--json").stdout)
    assert result["run_id"] in {row["run_id"] for row in runs}
    shown = json.loads(nib(home, "show", result["run_id"], "--json").stdout)
    types = {e["type"] for e in shown["events"]}
    assert {"proposal", "verdict", "tool.call", "stop"} <= types
    human = nib(home, "run", "--demo")
    assert human.returncode == 0
    assert "paid 0.02 USDC" in human.stdout and "tx 0x" in human.stdout
    assert "step 1" in human.stderr and "judge approve" in human.stderr


MARKET_TASK = "Who issues USDC? Buy its token fact sheet from a seller in the market."


def test_a_question_naming_two_facts_answers_both_or_exits_1(home):
    """ "the number and the timestamp of the latest block": both values, read back from the
    chain, appear in the answer; a part dropped with exit 0 is the failure this guards."""
    info = json.loads(nib(home, "devnet", "up", "--json").stdout)
    r = nib(home, "run", "Give me the number and the timestamp of the latest block.", "--json")
    result = json.loads(r.stdout)
    chain = ChainClient(info["rpc_url"], 31337)
    head = chain.block_number()
    assert r.returncode == 0, result
    assert f"block number: {head} " in result["answer"], result["answer"]
    assert f"block timestamp: {chain.block_timestamp(head)} " in result["answer"], result["answer"]


def test_a_part_the_offline_planner_cannot_read_ends_with_the_way_to_a_model(home):
    """A decline for the task's own words names how to read more (a model, docs/models.md);
    one the chain contradicts does not: no model would change it."""
    nib(home, "devnet", "up")
    words = nib(home, "run", "What is the average gas price over the past week?")
    assert words.returncode == 1, words.stdout
    assert "hint: the offline planner reads only the questions docs/planner.md lists" in words.stdout
    assert "NIB_MODEL_PROVIDER" in words.stdout and "docs/models.md" in words.stdout
    chain = nib(home, "run", "What was the base fee 99999 blocks ago?")
    assert chain.returncode == 1 and "before the first block" in chain.stdout, chain.stdout
    assert "hint:" not in chain.stdout, chain.stdout


def test_a_decline_for_what_the_chain_shows_claims_nothing(home):
    """The outside tester's Q21 and Q23 (round 19): a block past the head and a hash no
    node knows were declined honestly, but their lines were graded `asserted` (the head,
    10, and the chain id, 31337, counted as values no evidence held), so the whole answer
    read `answer provenance: asserted`; the hash was also looked up twice. Now each line is
    `not-answered`, the answer's provenance `none`, and the hash is looked up once."""
    nib(home, "devnet", "up")
    for task in ("What is the gas used by block 50000?",
                 "Did transaction 0x" + "ab" * 32 + " succeed?"):
        r = nib(home, "run", task, "--json")
        result = json.loads(r.stdout)
        assert r.returncode == 1, result
        assert result["provenance"] == "none", result["lines"]
        assert {line["grade"] for line in result["lines"]} == {"not-answered"}, result["lines"]
    assert result["stop_reason"] == "cannot-plan" and result["steps"] == 2, result
    assert "no transaction 0x" + "ab" * 32 in result["answer"], result["answer"]


def test_market_run_discovers_compares_offers_and_buys_the_best(home):
    info = json.loads(nib(home, "devnet", "up", "--json").stdout)
    market = {s["name"]: s["url"] for s in info["market"]}
    first = json.loads(nib(home, "run", MARKET_TASK, "--json").stdout)
    # The first run pays bargain, which delivers no fact. It then buys from the next market
    # seller discovery listed (whatever order the MCP seller is listed in); it never falls
    # back to the devnet's own paywall (issue 26).
    paid_first = json.loads(nib(home, "audit", "--run", first["run_id"], "--json").stdout)
    from chain.paywall.market import MARKET as SELLERS

    sellers = {s.pay_to.lower() for s in SELLERS}
    assert paid_first and all(row["recipient"].lower() in sellers for row in paid_first)
    assert first["finished"], nib(home, "show", first["run_id"]).stdout[-3000:]
    second = json.loads(nib(home, "run", MARKET_TASK, "--json").stdout)
    assert second["finished"]
    assert "issuer from the token fact sheet of USDC: Circle (observed" in second["answer"]
    shown = nib(home, "show", second["run_id"]).stdout
    assert f"offer GET {market['bargain']}/tokens 0.005 USDC [token_factsheet]" in shown
    assert f"quoted 0.01 USDC from {market['atlas']}" in shown
    assert "reason: best of " in shown  # bargain, meridian and the MCP tool were quoted too
    assert f"offers is {market['atlas']} at 0.01 USDC" in shown
    # bargain took the first run's payment and delivered no fact: its p fell (by one
    # outcome: a single task's report moves a shared p only so far), and it loses on EV.
    assert f"{market['bargain']} at 0.005 USDC lost on EV" in shown
    assert "excerpt: symbol=USDC; name=USD Coin; issuer=Circle" in shown
    audit = json.loads(nib(home, "audit", "--run", second["run_id"], "--json").stdout)
    assert [row["status"] for row in audit] == ["settled"]


def test_a_task_naming_a_seller_pays_that_seller_or_stops_saying_why(home):
    info = json.loads(nib(home, "devnet", "up", "--json").stdout)
    meridian = next(s["url"] for s in info["market"] if s["name"] == "meridian")
    named = f"Who issues USDC? Buy the token fact sheet at {meridian}/tokens?symbol=USDC"
    r = json.loads(nib(home, "run", named, "--json").stdout)
    assert r["finished"] and "issuer from the token fact sheet of USDC: Circle (observed" in r["answer"]
    audit = json.loads(nib(home, "audit", "--run", r["run_id"], "--json").stdout)
    assert [(row["amount"], row["status"]) for row in audit] == [(40_000, "settled")]
    stranger = "Who issues USDC? Buy the token fact sheet at http://127.0.0.1:9/tokens?symbol=USDC"
    out = nib(home, "run", stranger, "--json")
    stopped = json.loads(out.stdout)
    assert out.returncode == 1 and not stopped["finished"]
    # It stops saying why (the named seller is not allowlisted, and no other is swapped in):
    # the stop names the part not answered, the answer's line for it the reason.
    assert stopped["stop_reason"] == "cannot-plan", stopped["message"]
    why = stopped["message"] + "\n" + stopped["answer"]
    assert "http://127.0.0.1:9" in why, why
    assert "not on the allowlist" in why or "never swaps" in why, why
    assert json.loads(nib(home, "audit", "--run", stopped["run_id"], "--json").stdout) == []


def test_devnet_runs_the_judge_and_wallet_as_their_own_processes(home):
    """`nib devnet up` started both services; `nib run` says it uses them, the judge holds
    the task's registration, and a dead service is a named stop, never a quiet fallback."""
    import sqlite3

    status = json.loads(nib(home, "services", "status", "--json").stdout)
    assert status["running"] is True and "agent_token" not in status
    socket = Path(status["wallet_socket"])
    assert oct(socket.stat().st_mode & 0o777) == "0o600"
    r = nib(home, "run", "What is the current base fee in gwei?")
    assert r.returncode == 0, r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"services: judge service {status['judge_url']}"), first
    # The agent process confined itself before its first model call (agent.confine).
    assert re.search(r" · agent process confined \(Landlock ABI \d+\)", first), first
    assert "(warning: NIB_WALLET_PASSWORD in its environment" in first  # the devnet's, public
    assert f"records in {home / 'services' / 'nib.db'}" in first, first
    # The services' secrets came on their stdin: none is in their initial environment,
    # which root can read in /proc/PID/environ even from a confined process.
    admin = (home / "services" / "judge-admin.token").read_text().strip()
    for pid in (status["judge_pid"], status["wallet_pid"]):
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert admin.encode() not in environ and b"PASSWORD" not in environ, pid
    with sqlite3.connect(home / "services" / "nib.db") as db:  # the services' own records
        caps = db.execute("SELECT spend_cap, per_call_cap FROM judge_tasks").fetchall()
    assert caps and all(c == (1_000_000, 250_000) for c in caps)
    devnet.stop_pid(status["wallet_pid"])
    r = nib(home, "run", "What is the current base fee in gwei?")
    assert r.returncode == 1  # a dependency is down: the work stopped, the fix named
    assert "are not both running" in r.stderr and "`nib devnet up` restarts them" in r.stderr
    assert nib(home, "services", "up").returncode == 0
    assert json.loads(nib(home, "services", "status", "--json").stdout)["running"] is True


def test_arbitrary_code_in_a_real_nib_run_cannot_reach_the_services_files(home):
    """Code running inside a real `nib run` at its first model call (planted through
    tests/agent/attack_hook: after the run registered its task and confined itself) is
    refused the judge's admin token, the services' database (read, write, delete), the
    keystore, services.json, the source tree, site-packages, the raw disk and the memory
    of the process that started it; the judge's records are as they were."""
    import sqlite3

    from tests.agent_attacker import planted

    repo = Path(__file__).resolve().parents[2]
    assert nib(home, "devnet", "up").returncode == 0  # idempotent: the module's devnet
    other = json.loads(nib(home, "run", "--demo", "--json").stdout)["run_id"]  # another task
    config = {"source": str(repo), "keystore": str(home / "wallet.json"),
              "judge_key": str(home / "judge-key.json"), "other_run": other}
    env = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "attack_hook"), str(repo)]),
           "NIB_TEST_ATTACK": json.dumps(config), "NIB_MODEL_PROVIDER": "openai",
           "NIB_MODEL": "attack", "NIB_MODEL_BASE_URL": "http://127.0.0.1:9/v1"}
    records = home / "services" / "nib.db"

    def judge_records() -> list[Any]:
        with sqlite3.connect(records) as db:
            return [db.execute("SELECT * FROM judge_tasks ORDER BY task_id").fetchall(),
                    db.execute("SELECT COUNT(*) FROM judge_verdicts").fetchone()]

    before = judge_records()
    try:
        r = nib(home, "run", "Which block is the latest?", env=env)
    finally:  # a run that was not confined planted these: never leave them behind
        for path in planted(repo):
            path.unlink(missing_ok=True)
    attack = [line for line in r.stderr.splitlines() if line.startswith("ATTACK ")]
    assert r.returncode == 3 and attack, r.stderr[-3000:]
    files = json.loads(attack[0].removeprefix("ATTACK "))
    for attempt in ("admin_token", "services_dir", "services_db_raw", "services_db_overwrite",
                    "keystore", "keystore_write", "services_json_write", "source_write",
                    "site_packages_write", "test_process_memory", "raw_disk"):
        assert files[attempt].startswith("refused PermissionError"), (attempt, files[attempt])
    for attempt in ("services_db_read", "services_db_write", "services_db_delete"):
        assert files[attempt].startswith("refused OperationalError: unable to open"), files[attempt]
    # The run's own wallet client kept no connection from before it confined itself (an
    # outside red team read, rewrote and cancelled another task's rows through one).
    assert files["other_run_usage"].startswith("refused NotYourTask"), files["other_run_usage"]
    after = judge_records()
    assert set(before[0]) <= set(after[0]) and after[1][0] >= before[1][0]
    assert re.search(r"agent process confined \(Landlock ABI \d+\)", r.stderr.splitlines()[0])


def test_a_human_grants_an_escalated_payment_at_the_judge_and_only_then_it_is_paid(home):
    """Above the registered approval threshold the judge service escalates; the agent's
    token cannot grant it; `nib approve RUN` grants it as the user (admin token) and the
    wallet service signs the one approval issued under that grant. Chain read back."""
    import sqlite3

    from chain.devkeys import SELLER, dev_account

    info = json.loads(nib(home, "devnet", "up", "--json").stdout)
    services = json.loads((home / "services.json").read_text())
    chain = ChainClient(info["rpc_url"], 31337)
    seller = dev_account(SELLER).address
    before = chain.token_balance(info["usdc"], seller)
    low = {"NIB_LIMITS__APPROVAL_THRESHOLD_ATOMIC": "10000"}  # 0.01 USDC: the 0.02 call escalates
    paused = nib(home, "run", "--demo", "--json", env=low)
    result = json.loads(paused.stdout)
    assert paused.returncode == 1 and result["stop_reason"] == "awaiting-approval", paused.stderr
    run_id = result["run_id"]
    with sqlite3.connect(home / "services" / "nib.db") as db:
        (escalated,) = db.execute(
            "SELECT id FROM judge_verdicts WHERE task_id = ? AND decision = 'escalate'", (run_id,)
        ).fetchone()
    # services.json (which the agent reads) holds no judge token at all; the agent's own
    # task token (the one nib run hands it) cannot grant its own escalation.
    assert "agent_token" not in services and "token" not in json.dumps(services)
    agent_token = _task_token(home, services, run_id)
    forged = httpx.post(services["judge_url"] + "/v1/grants", json={"verdict_id": escalated},
                        headers={"Authorization": f"Bearer {agent_token}"},
                        trust_env=False, timeout=10)
    assert forged.status_code == 403 and "admin token" in forged.text
    assert json.loads(nib(home, "audit", "--run", run_id, "--json").stdout) == []
    assert chain.token_balance(info["usdc"], seller) == before
    # `nib judge approve RUN` grants only (the run stays paused); `nib approve` then finds
    # the same grant and resumes.
    granted, loaded = run_reporting_chain_code(home, "judge", "approve", run_id, "--json")
    assert granted.returncode == 0, granted.stderr
    assert not loaded, f"the grant (asked in a forked child) imported {sorted(loaded)[:6]}"
    grant = json.loads(granted.stdout)
    assert (grant["verdict_id"], grant["task_id"], grant["amount"]) == (escalated, run_id, 20_000)
    assert grant["used_by"] is None
    assert json.loads(nib(home, "audit", "--run", run_id, "--json").stdout) == []
    approved = nib(home, "approve", run_id, "--json")
    assert approved.returncode == 0, approved.stderr
    assert (f"grant recorded at the judge: 0.02 USDC to {seller.lower()} for task {run_id}"
            in approved.stderr)
    assert "approval not carried out" not in approved.stderr + approved.stdout
    assert json.loads(approved.stdout)["finished"]
    audit = json.loads(nib(home, "audit", "--run", run_id, "--json").stdout)
    assert [(row["amount"], row["status"]) for row in audit] == [(20_000, "settled")]
    with sqlite3.connect(home / "services" / "nib.db") as db:
        granted = db.execute(
            "SELECT v.id, v.consumed_at IS NOT NULL, g.verdict_id FROM judge_verdicts v JOIN "
            "judge_grants g ON g.used_by = v.id WHERE v.task_id = ?", (run_id,)
        ).fetchall()
    assert [(v, consumed, g) for v, consumed, g in granted] == [(audit[0]["verdict_id"], 1, escalated)]
    assert chain.token_balance(info["usdc"], seller) == before + 20_000
    # What the wallet service did is in the run's trace, as `nib show` reads it.
    shown = json.loads(nib(home, "show", run_id, "--json").stdout)["events"]
    by_wallet = [(e["type"], e["data"]["by"]) for e in shown if e["type"].startswith("wallet.")]
    served = f"wallet service pid {services['wallet_pid']}"
    assert by_wallet == [("wallet.signed", served), ("wallet.settled", served)], by_wallet
    assert "wallet.signed" in nib(home, "show", run_id).stdout


def test_the_commands_that_read_records_load_no_chain_code_with_the_services_up(home, tmp_path):
    """On a devnet with paid, escalated and granted runs, and the services' own records:
    reading them loads no web3 or eth-account (tests/agent/test_cli_usage.py pins every
    such command on a home without services)."""
    run_id = json.loads(nib(home, "runs", "--json").stdout)[0]["run_id"]
    for args in (("runs",), ("show", run_id), ("audit",), ("audit", "--run", run_id),
                 ("audit", "verify"), ("wallet", "address"), ("judge", "calibration"),
                 ("report", "--out", str(tmp_path / "report.html"))):
        r, loaded = run_reporting_chain_code(home, *args)
        assert r.returncode == 0, (args, r.stderr)
        assert not loaded, f"`nib {' '.join(args)}` imported {sorted(loaded)[:6]}"


def test_answering_a_question_loads_no_web_server_or_mcp_code(home):
    """`nib run` of a free question with the services up (the confined agent included) loads
    no FastAPI, Starlette, uvicorn or mcp: 1.75 s a question instead of 2.3 s."""
    assert nib(home, "devnet", "up").returncode == 0  # idempotent: the module's devnet
    r, loaded = run_reporting_chain_code(home, "run", "What is the latest block number?", code=SERVER_CODE)
    assert r.returncode == 0, r.stderr
    assert not loaded, f"`nib run` imported {sorted(loaded)[:6]}"


def test_wallet_commands(home):
    addr = json.loads(nib(home, "wallet", "address", "--json").stdout)["address"]
    bal = json.loads(nib(home, "wallet", "balance", "--json").stdout)
    assert bal["address"] == addr and bal["usdc_atomic"] > 0
    cal = json.loads(nib(home, "judge", "calibration", "--json").stdout)
    assert set(cal) >= {"n", "brier", "ece", "bins"}


def test_report_writes_html(home, tmp_path):
    out = tmp_path / "report.html"
    r = nib(home, "report", "--out", str(out))
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert "chart-stop-reasons" in html
    for fetch in ('src="http', "href='http", 'href="http', "<link", "url(http"):
        assert fetch not in html, f"the report must not fetch anything: found {fetch}"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("run", ""), "the task is empty"),
        (("show", "no-such-run"), "no such run 'no-such-run'"),
        (("approve", "no-such-run"), "no such run 'no-such-run'"),
        (("deny", "no-such-run"), "no such run 'no-such-run'"),
        (("audit", "--run", "no-such-run"), "no such run 'no-such-run'"),
        (("run", "x" * 4_001), "expected at most 4,000"),
        (("run", "x", "--max-spend", "lots"), "is not an amount"),
        (("eval", "--suite", "nope"), "unknown suite"),
    ],
)
def test_bad_input_is_one_line_exit_2(home, args, needle):
    r = nib(home, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and "Fix" in r.stderr or "expected" in r.stderr


def test_a_task_naming_a_url_no_request_can_reach_is_bad_input_naming_the_port(tmp_path):
    """An outside tester's task named port 186010: the run ended ``failure-budget`` with
    "quote failed: unhandled errors in a TaskGroup (1 sub-exception)". Now `nib run` and
    `nib submit` refuse it as bad input (exit 2) before any run, naming the port and the fix."""
    named = "http://127.0.0.1:186010/tokens?symbol=USDC"
    task = f"Buy the USDC token fact sheet from {named} and tell me who the issuer is"
    for command in ("run", "submit"):
        r = nib(tmp_path, command, task, "--json", env={"NIB_SELLER_ALLOWLIST": "http://127.0.0.1:186010"})
        assert r.returncode == 2, (r.stdout, r.stderr)
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"the task names {named}, which nib cannot request: found port 186010" in r.stderr
        assert "expected a port from 1 to 65535" in r.stderr and "Fix: correct the port" in r.stderr
        assert "TaskGroup" not in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "nib.db").exists() or json.loads(nib(tmp_path, "runs", "--json").stdout) == []


@pytest.mark.parametrize(
    ("args", "entry", "needle"),
    [
        (("run", "What is the base fee?"), "http://127.0.0.1:99999",
         "found port 99999 in 'http://127.0.0.1:99999'; expected a port from 1 to 65535. Fix: "),
        (("run", "What is the base fee?"), "http://127.0.0.1:0", "found port 0 in"),
        (("services", "up"), "http://127.0.0.1:abc",
         "found 'http://127.0.0.1:abc', which is not a URL (Invalid port: 'abc'); expected "),
        (("submit", "What is the base fee?"), "ftp://127.0.0.1:21",
         "found the scheme ftp:// in 'ftp://127.0.0.1:21'; expected an absolute http:// or "),
        (("worker",), "http://", "found no host in 'http://'; expected scheme://host[:port]/path"),
        (("devnet", "up"), "0x1234", "found '0x1234'; expected a 0x-prefixed 20-byte hex address"),
    ],
    ids=["run-port-too-high", "run-port-0", "services-up-port-not-a-number", "submit-scheme",
         "worker-no-host", "devnet-up-malformed-address"],
)
def test_a_bad_allowlist_entry_is_refused_at_start_up_naming_it(tmp_path, args, entry, needle):
    """An outside tester's NIB_SELLER_ALLOWLIST=http://127.0.0.1:99999 was accepted without
    a word (and an entry that did not parse allowlisted nothing). Every command refuses it
    before doing anything, as bad input: one line naming the entry, what an entry must be
    and the fix, exit 2."""
    r = nib(tmp_path, *args, env={"NIB_SELLER_ALLOWLIST": f"http://127.0.0.1:8402,{entry}"})
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: NIB_SELLER_ALLOWLIST: ") and needle in r.stderr
    assert "Fix: " in r.stderr or "fix: " in r.stderr
    assert "or drop the entry (entries are comma-separated)" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "nib.db").exists() and not (tmp_path / "services").exists()


def test_malformed_config_is_exit_2(home, tmp_path):
    bad = tmp_path / "config.toml"
    bad.write_text("profile = [unclosed\n")
    env = {**os.environ, "NIB_HOME": str(home), "NIB_CONFIG": str(bad)}
    r = subprocess.run(NIB + ["runs"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not valid TOML" in r.stderr and "Traceback" not in r.stderr


def test_missing_passphrase_is_exit_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NIB_WALLET_PASSWORD"}
    env["NIB_HOME"] = str(tmp_path)
    r = subprocess.run(NIB + ["wallet", "new"], env=env, capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "NIB_WALLET_PASSWORD" in r.stderr and "Traceback" not in r.stderr


def test_devnet_down_leaves_no_anvil(tmp_path):
    r = nib(tmp_path, "devnet", "up", "--json")
    info = json.loads(r.stdout)
    assert devnet.pid_alive(info["pid"]) and devnet.pid_alive(info["paywall_pid"])
    assert nib(tmp_path, "devnet", "down").returncode == 0
    assert not devnet.pid_alive(info["pid"]) and not devnet.pid_alive(info["paywall_pid"])


def test_judge_as_its_own_service(home):
    """The judge runs in its own process; the agent asks it over loopback and the wallet
    verifies its verdicts against the configured address. With it gone: judge-unreachable."""
    from chain.devkeys import JUDGE, dev_account
    from chain.devnet import free_port, stop_pid

    assert nib(home, "devnet", "up", "--no-services").returncode == 0
    assert nib(home, "services", "down").returncode == 0  # this test runs its own judge
    port = free_port()
    env = {**os.environ, "NIB_HOME": str(home), "NIB_WALLET_PASSWORD": "nib-devnet",
           "NIB_JUDGE_TOKEN": "judge-secret"}
    serve = subprocess.Popen(NIB + ["judge", "serve", "--port", str(port)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while not _answers(url + "/v1/health"):
            assert time.monotonic() < deadline, "judge service did not start"
            assert serve.poll() is None, serve.stderr.read() if serve.stderr else ""
            time.sleep(0.1)
        judged = {**env, "NIB_JUDGE_URL": url, "NIB_JUDGE_ADDRESS": dev_account(JUDGE).address}
        # Without the service's token the judge refuses to rule; nothing is spent.
        no_token = {k: v for k, v in judged.items() if k != "NIB_JUDGE_TOKEN"}
        r = subprocess.run(NIB + ["run", "--demo", "--json", "--in-process"], env=no_token, capture_output=True, text=True, timeout=120)
        refused = json.loads(r.stdout)
        assert r.returncode == 1 and refused["spend"]["usdc_atomic"] == 0, r.stdout[-2000:]
        r = subprocess.run(NIB + ["run", "--demo", "--json", "--in-process"], env=judged, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        result = json.loads(r.stdout)
        assert result["finished"] and result["spend"]["usdc_atomic"] > 0
    finally:
        stop_pid(serve.pid)
    r = subprocess.run(NIB + ["run", "--demo", "--json", "--in-process"], env=judged, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout[-3000:]
    result = json.loads(r.stdout)
    assert result["stop_reason"] == "judge-unreachable" and result["spend"]["usdc_atomic"] == 0
    assert "nib judge serve" in result["message"] or "NIB_JUDGE_URL" in result["message"]


def test_stopped_run_exits_1(home):
    assert nib(home, "devnet", "up").returncode == 0  # the services again (the test above stopped them)
    r = nib(home, "run", "What is the premium report?", "--json")
    result = json.loads(r.stdout)
    assert not result["finished"] and result["partial"]
    assert r.returncode == 1


class SilentModelServer:
    """A chat-completions address that takes every request and never answers: a run
    against it sits in its model call until it is killed."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._hold, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _hold(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.held.append(self.sock.accept()[0])

    def close(self) -> None:
        for conn in [*self.held, self.sock]:
            conn.close()


@contextlib.contextmanager
def run_held_in_its_model_call(home, task):
    """A real `nib run TASK --json` on the devnet whose model never answers, yielded once
    the run sits inside its first model call; killed (if still alive) on the way out."""
    assert nib(home, "devnet", "up", "--json").returncode == 0
    silent = SilentModelServer()
    env = {**os.environ, "NIB_HOME": str(home), "NIB_WALLET_PASSWORD": "nib-devnet",
           "NIB_MODEL_PROVIDER": "openai", "NIB_MODEL": "silent", "NIB_MODEL_BASE_URL": silent.url,
           "NIB_MODEL_TIMEOUT": "600"}
    env.pop("NIB_CONFIG", None)
    child = subprocess.Popen([*NIB, "run", task, "--json"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not silent.held:  # the run is inside its first model call
            assert child.poll() is None, child.stderr.read()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the run never called its model"
            time.sleep(0.1)
        yield child
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        silent.close()


def test_a_run_whose_process_is_killed_shows_as_died(home):
    """kill -9 a real `nib run` mid-run: `nib runs`, `nib show` and the report say it died,
    with the stop reason process-died, instead of showing it running forever. While it
    sits in its model call it runs confined (no_new_privs, set just before Landlock)."""
    from agent.report.page import run_from_store

    with run_held_in_its_model_call(home, "What is the base fee?") as child:
        ours = [r for r in json.loads(nib(home, "runs", "--json").stdout) if r["task"] == "What is the base fee?"]
        assert len(ours) == 1 and (ours[0]["status"], ours[0]["stop_reason"]) == ("running", None)
        assert "NoNewPrivs:\t1" in Path(f"/proc/{child.pid}/status").read_text()
        child.kill()
        assert child.wait(timeout=30) == -9
    run_id = ours[0]["run_id"]
    # The reader that closes the run reads its spend through the wallet service's client,
    # which loads no chain code either.
    closing, loaded = run_reporting_chain_code(home, "runs", "--json")
    assert closing.returncode == 0 and not loaded, (closing.stderr, sorted(loaded)[:6])
    row = next(r for r in json.loads(closing.stdout) if r["run_id"] == run_id)
    assert (row["status"], row["stop_reason"]) == ("died", "process-died")
    shown = json.loads(nib(home, "show", run_id, "--json").stdout)
    assert shown["run"]["status"] == "died" and shown["run"]["owner"].endswith(f":{child.pid}")
    assert shown["events"][-1]["type"] == "run.died"
    assert f"process {child.pid} on {socket.gethostname()} no longer exists" in shown["run"]["result"]["message"]
    human = nib(home, "show", run_id).stdout
    assert "stop process-died" in human and "`nib audit reconcile`" in human
    reported = run_from_store({**shown["run"], "result": json.dumps(shown["run"]["result"])}, shown["events"])
    assert (reported["stop_reason"], reported["finished"], reported["partial"]) == ("process-died", False, True)


def test_a_terminated_run_ends_interrupted_with_its_row_closed(home):
    """SIGTERM (what `kill` and service managers send) ends a `nib run` as Ctrl-C does,
    with the shell's code for it (128 + 15)."""
    with run_held_in_its_model_call(home, "What is the gas price?") as child:
        child.terminate()
        stdout, _ = child.communicate(timeout=60)
    assert child.returncode == 143
    result = json.loads(stdout)
    assert (result["stop_reason"], result["finished"]) == ("interrupted", False)
    assert "CancelledError" in result["message"]
    row = next(r for r in json.loads(nib(home, "runs", "--json").stdout) if r["run_id"] == result["run_id"])
    assert (row["status"], row["stop_reason"]) == ("stopped", "interrupted")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize(
    ("raised", "code"),
    [
        ("chain", 1),  # a dependency outage stops the work: exit 1, its fix named
        ("judge", 1),
        ("config", 2),  # only the user's mistake is bad input
    ],
)
def test_exit_codes_separate_dependency_failures_from_bad_input(
    raised: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent.cli.app import app, main
    from agent.errors import AgentConfigError
    from chain.errors import RpcUnreachable
    from judge.errors import JudgeUnreachable

    errors = {
        "chain": RpcUnreachable("http://127.0.0.1:9", "ConnectionError"),
        "judge": JudgeUnreachable("the judge is unreachable", url="http://127.0.0.1:9"),
        "config": AgentConfigError("bad flag; expected a number. Fix: pass one."),
    }

    def probe() -> None:
        raise errors[raised]

    app.command("probe")(probe)
    try:
        assert main(["probe"]) == code
    finally:
        app.registered_commands.pop()
    line = capsys.readouterr().err
    assert "Fix" in line and "Traceback" not in line


def test_submit_worker_and_runs_on_postgres(home, pg_url):
    """The queue as a user drives it, with every store on PostgreSQL and the judge and
    wallet as services on the same database: two tasks submitted, one worker process
    drains them two at a time, `nib runs` names the worker and shows the spend the wallet
    service recorded, and the ledger reconciles with the chain. A wallet service on
    another database is refused."""
    from agent.cli.commands.runs import DEMO_TASK
    from agent.store import RunStore
    from wallet.ledger import Ledger

    env = {**os.environ, "NIB_HOME": str(home), "NIB_WALLET_PASSWORD": "nib-devnet",
           "NIB_DATABASE_URL": pg_url}
    env.pop("NIB_CONFIG", None)

    def run(*args: str, env: dict[str, str] = env) -> subprocess.CompletedProcess[str]:
        return subprocess.run(NIB + list(args), env=env, capture_output=True, text=True, timeout=180)

    try:
        info = json.loads(run("devnet", "up", "--no-services", "--json").stdout)
        first_block = ChainClient(info["rpc_url"], 31337).block_number() + 1
        # An earlier test of this home may have left its services (on SQLite) running.
        assert run("services", "down").returncode == 0
        # Queued while the services were down: never registered (the worker registers
        # nothing it finds in the agents' database), and `nib submit` says so.
        early = run("submit", DEMO_TASK, "--max-spend", "0.50", "--json")
        assert "not registered with the judge" in early.stderr, early.stderr
        unregistered = json.loads(early.stdout)["task_id"]
        # Without NIB_SERVICES_DATABASE_URL the services keep their records in the workers'
        # database, and say so.
        assert run("services", "up").returncode == 0
        assert "SHARED" in run("services", "status").stdout
        ids = [json.loads(run("submit", DEMO_TASK, "--max-spend", "0.50", "--json").stdout)["task_id"]
               for _ in range(2)]
        queued = {r["run_id"]: r for r in json.loads(run("runs", "--json").stdout)}
        assert {queued[i]["status"] for i in [*ids, unregistered]} == {"queued"}
        r = run("worker", "--concurrency", "2", "--drain", "--json")
        assert r.returncode == 0, r.stderr[-3000:]
        summary = json.loads(r.stdout)
        assert summary["stopped"] == [unregistered], summary
        refused = {r["run_id"]: r for r in json.loads(run("runs", "--json").stdout)}[unregistered]
        assert "nib submit" in json.dumps(refused), refused
        assert sorted(summary["finished"]) == sorted(ids), (summary, run("runs", "--json").stdout)
        rows = {r["run_id"]: r for r in json.loads(run("runs", "--json").stdout)}
        assert {rows[i]["status"] for i in ids} == {"finished"}
        assert {rows[i]["worker"] for i in ids} == {summary["worker"]}
        assert all(rows[i]["spend_usdc_atomic"] > 0 for i in ids)
        # The wallet service wrote its ledger into PostgreSQL, where the workers run.
        assert all(r.status == "settled" for i in ids for r in Ledger(pg_url).rows(i))
        assert all(Ledger(pg_url).rows(i) for i in ids)
        reconciled = run("audit", "reconcile", "--from-block", str(first_block), "--json")
        assert reconciled.stdout, reconciled.stderr[-2000:]
        rec = json.loads(reconciled.stdout)
        assert rec["unmatched_onchain"] == [] and rec["unmatched_ledger"] == [], rec
        assert len(rec["matched"]) >= 2 and rec["ledger"]["ok"], rec
        local = home / "nib.db"  # the SQLite file (if earlier tests made one) holds none of it
        assert not local.exists() or all(RunStore(local).run(i) is None for i in ids)
    finally:
        run("services", "down")  # later tests start their own


def _task_token(home: Path, services: dict[str, Any], run_id: str) -> str:
    """A token of ``run_id``'s task, issued by the admin as `nib approve` gets one."""
    from judge.service import JudgeClient

    admin = (home / "services" / "judge-admin.token").read_text().strip()
    with JudgeClient(services["judge_url"], token=admin, timeout_s=10) as client:
        return client.task_token(run_id)


def test_ordered_payments_are_mandates_approved_escalated_or_refused_by_name(home):
    """Issue 23: a payment the task orders is registered from the task text as a mandate
    and judged on it (not on expected value): 0.25 USDC under a true condition is paid,
    0.6 USDC (at the approval threshold) waits for a human and is then paid, 2 USDC (over
    the per-call cap) is refused with that reason. Balances read back from the chain."""
    info = json.loads(nib(home, "devnet", "up", "--json").stdout)
    chain = ChainClient(info["rpc_url"], 31337)
    small, mid, big = ("0x" + c * 40 for c in ("1", "2", "3"))
    # The default $1 budget: on expected value (p 0.5 x 0.33 - 0.25 < 0) the judge used to
    # refuse the user's own 0.25 order.
    limits = ("--max-spend", "1", "--per-call-cap", "1", "--approval-threshold", "0.5", "--json")

    ordered = nib(home, "run", f"If the base fee is under 50 gwei, send 0.25 USDC to {small}.",
                  *limits)
    result = json.loads(ordered.stdout)
    assert ordered.returncode == 0 and result["finished"], result["message"]
    assert chain.token_balance(info["usdc"], small) == 250_000

    # Room for the transfer's gas, which the task's cap counts too; the threshold escalates.
    wide = ("--max-spend", "3", *limits[2:])
    paused = nib(home, "run", f"Send 0.6 USDC to {mid}.", *wide)
    held = json.loads(paused.stdout)
    assert paused.returncode == 1 and held["stop_reason"] == "awaiting-approval", held["message"]
    assert chain.token_balance(info["usdc"], mid) == 0
    approved = nib(home, "approve", held["run_id"], "--json")
    assert approved.returncode == 0 and json.loads(approved.stdout)["finished"], approved.stderr
    assert chain.token_balance(info["usdc"], mid) == 600_000

    refused = nib(home, "run", f"Send 2 USDC to {big}.", *wide)  # the per-call cap refuses
    stopped = json.loads(refused.stdout)
    assert refused.returncode == 1 and not stopped["finished"]
    assert "exceeds the per-call cap 1.00 USDC" in stopped["answer"], stopped["answer"]
    assert chain.token_balance(info["usdc"], big) == 0
    # Each paid order is one settled ledger row with its transaction; the refused one none.
    for run_id, amount in ((result["run_id"], 250_000), (held["run_id"], 600_000)):
        rows = json.loads(nib(home, "audit", "--run", run_id, "--json").stdout)
        assert [(r["amount"], r["status"]) for r in rows] == [(amount, "settled")], rows
        assert rows[0]["tx_hash"].startswith("0x")
    assert json.loads(nib(home, "audit", "--run", stopped["run_id"], "--json").stdout) == []
