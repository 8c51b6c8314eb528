"""The agent process as an attacker: arbitrary code with the agent's full environment,
against the wallet and the judge running outside it, on a real Anvil.

The wallet service (the only holder of the key) and the judge service (the only holder
of the task's limits and of the record of verdicts) run here, in the test process, on
NIB_HOME laid out as ``nib services up`` lays it out: their database and the judge's
admin token in NIB_HOME/services, the keystore and the judge's key file in NIB_HOME. The
agent is a separate process that gets what ``nib run`` gets with services running
(NIB_HOME, the judge's URL and agent token, the wallet's socket) and confines itself as
``nib run`` does before its first model call. As root, so only the confinement stands
between it and those files. Balances are read back.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from eth_account import Account

from chain.client import ChainClient
from chain.devkeys import DEPLOYER, OUTSIDER, SELLER, dev_account
from chain.usdc import mint, usdc_contract
from judge.calibration import BetaCalibrator
from judge.jev import Judge
from judge.records import VerdictRecords
from judge.service import JudgeClient, JudgeServer
from judge.tasks import TaskLimits, TaskRegistry
from judge.verdict import VerdictSigner
from tests._keyscan import memory_holds
from tests.agent_attacker import planted
from wallet.keystore import Keystore
from wallet.service import WalletServer
from wallet.signer import Wallet

HERE = Path(__file__).resolve().parent
PASSPHRASE = "wallet-passphrase-only-the-signer-has"
SERVICES_TOKEN, ADMIN_TOKEN = "services-token-7f3a", "admin-token-only-the-user-has"
SELLER_ADDR = dev_account(SELLER).address
ATTACKER = dev_account(OUTSIDER).address
PRICE = 100_000
TASK = TaskLimits(task_id="task-untrusted", spend_cap_atomic=350_000, per_call_cap_atomic=200_000,
                  approval_threshold_atomic=150_000, recipients=(SELLER_ADDR,), sellers=())


PLANTED = planted(HERE.parent)


def test_a_compromised_agent_process_wastes_at_most_its_task_budget(
    chain: Any, tmp_path: Path
) -> None:
    try:
        _attack(chain, tmp_path)
    finally:  # a run without confinement plants these: never leave them for the next run
        for path in PLANTED:
            path.unlink(missing_ok=True)


def _attack(chain: Any, tmp_path: Path) -> None:
    client = ChainClient(chain.rpc_url, chain.chain_id)
    owner = Account.create()  # a key that exists nowhere but the keystore and the signer
    judge_key = Account.create()
    mint(chain.w3, chain.usdc, dev_account(DEPLOYER), owner.address, 10_000_000)
    chain.rpc("anvil_setBalance", [owner.address, hex(10**18)])
    token = usdc_contract(chain.w3, chain.usdc)

    def balance(address: str) -> int:
        return int(token.functions.balanceOf(address).call())

    home = tmp_path / "home"
    services = home / "services"
    services.mkdir(parents=True, mode=0o700)
    keystore = Keystore(home / "wallet.json", scrypt_n=2**10)
    keystore.import_key(owner.key.hex(), PASSPHRASE)
    judge_key_file = home / "judge-key.json"
    judge_key_file.write_text(json.dumps(Account.encrypt(judge_key.key, "judge-only", iterations=2)))
    (services / "judge-admin.token").write_text(ADMIN_TOKEN)
    (home / "services.json").write_text("{}")
    judge_db = services / "nib.db"  # the judge's and the wallet's records, as `nib services up`
    judge = Judge(
        VerdictSigner(judge_key), BetaCalibrator(judge_db), allowed_assets={31337: [chain.usdc]},
        records=VerdictRecords(judge_db), tasks=TaskRegistry(judge_db),
        balance_of=lambda asset: client.token_balance(asset, owner.address), require_task=True,
    )
    before = {a: balance(a) for a in (owner.address, SELLER_ADDR, ATTACKER)}
    with JudgeServer(judge, token=SERVICES_TOKEN, admin_token=ADMIN_TOKEN) as judge_server:
        # The user registers the task once; the agent acts with the task's token only.
        task_token = JudgeClient(judge_server.url, token=ADMIN_TOKEN).register_task_for_token(TASK)
        wallet = Wallet(
            keystore.unlock(PASSPHRASE), db_path=judge_db, chain=client,
            usdc=chain.usdc, trusted_judge=judge.address,
            recheck=JudgeClient(judge_server.url, token=SERVICES_TOKEN, timeout_s=10).recheck,
        )
        with WalletServer(wallet, home) as wallet_server:
            assert oct(wallet_server.socket_path.stat().st_mode & 0o777) == "0o600"
            env = {k: v for k, v in os.environ.items() if "PASSWORD" not in k}
            env.update(NIB_HOME=str(home), NIB_JUDGE_URL=judge_server.url,
                       NIB_JUDGE_TOKEN=task_token,
                       NIB_WALLET_SOCKET=str(wallet_server.socket_path),
                       PYTHONPATH=os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")]))
            config = {"rpc_url": chain.rpc_url, "chain_id": chain.chain_id, "usdc": chain.usdc,
                      "seller": SELLER_ADDR, "attacker": ATTACKER, "task_id": TASK.task_id,
                      "per_call_cap": TASK.per_call_cap_atomic, "threshold": TASK.approval_threshold_atomic,
                      "price": PRICE, "spree": 5, "keystore": str(keystore.path),
                      "judge_key": str(judge_key_file), "source": str(HERE.parent),
                      "confine": True}
            agent = subprocess.Popen(
                [sys.executable, str(HERE / "agent_attacker.py"), json.dumps(config)],
                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True,
            )
            try:
                line = agent.stdout.readline() if agent.stdout else ""
                assert line, agent.stderr.read() if agent.stderr else "no report"
                report = json.loads(line)
                key = bytes(owner.key)
                in_memory = memory_holds(agent.pid, [key, key.hex().encode()])
            finally:
                agent.communicate("\n", timeout=30)

    assert report["address"] == owner.address
    # No file of the services', no key file, no code the services run, no memory of the
    # process holding them: every attempt is refused by the kernel, root or not.
    files = report["files"]
    for attempt in ("admin_token", "services_dir", "services_db_raw", "services_db_overwrite",
                    "keystore", "keystore_write", "judge_key", "services_json_write",
                    "source_write", "site_packages_write", "test_process_memory", "raw_disk"):
        assert files[attempt].startswith("refused PermissionError"), (attempt, files[attempt])
    for attempt in ("services_db_read", "services_db_write", "services_db_delete"):
        assert files[attempt].startswith("refused OperationalError: unable to open"), files[attempt]
    assert not any(path.exists() for path in PLANTED)
    assert report["confinement"].startswith("agent process confined (Landlock ABI "), report
    # It cannot read the key: no passphrase, the keystore does not even open, no key in memory.
    assert report["env_has_passphrase"] is False
    assert report["decrypt_without_passphrase"].startswith("refused PermissionError")
    assert in_memory == []
    # It cannot get a verdict above the registered cap, for an unregistered recipient, or
    # skip escalation, whatever its requests claim.
    assert report["above_cap"].startswith("judge refuse: price 0.200001 USDC exceeds the per-call cap")
    assert "is not registered for task task-untrusted" in report["unregistered_recipient"]
    assert report["escalation"] == "escalate"
    assert report["sign_escalated"].startswith("refused VerdictNotApproved")
    assert report["grant_own_escalation"].startswith("refused JudgeConfigError")
    assert "without the judge's admin token" in report["grant_own_escalation"]
    assert report["after_grant_attempt"] == "escalate"
    # Forged and replayed verdicts, inflated outcomes and a self-made task change nothing.
    assert report["forged"].startswith("refused VerdictBadSignature")
    assert report["first_payment"] == 1
    assert report["replay"].startswith("refused VerdictReplayed")
    assert (report["outcomes_accepted"], report["outcomes_counted"]) == (1, 1)
    assert report["register_task"].startswith("refused JudgeConfigError")
    # Its spend stays within the registered cap, gas included: the wallet holds each
    # transfer's gas against the task's cap (read from the verdict, not the 10^15 the
    # agent names), so no more 0.10 payments go out than fit in 0.35 with their gas.
    spree = report["spree"]
    assert all(r == "paid status 1" or r.startswith((
        "wallet refused CapExceeded", "judge refuse: price 0.10 USDC exceeds remaining budget"))
        for r in spree), spree
    paid = 1 + spree.count("paid status 1")  # the first payment, and those of the spree
    assert paid * PRICE <= TASK.spend_cap_atomic and spree[-1].startswith("judge refuse"), spree
    # The judge's records are as it wrote them: the registered caps, every verdict it issued.
    with sqlite3.connect(judge_db) as db:
        assert db.execute("SELECT spend_cap, per_call_cap FROM judge_tasks").fetchall() == [
            (TASK.spend_cap_atomic, TASK.per_call_cap_atomic)]
        issued = db.execute("SELECT COUNT(*) FROM judge_verdicts").fetchone()[0]
    assert issued >= 10, issued
    assert balance(SELLER_ADDR) == before[SELLER_ADDR] + paid * PRICE
    assert balance(ATTACKER) == before[ATTACKER]
    assert balance(owner.address) == before[owner.address] - paid * PRICE
