"""Arbitrary code in the agent process: everything a compromised agent could try with the
agent's full environment (NIB_HOME, the judge URL and token, the wallet socket).

Run by tests/test_agent_process.py as its own process; prints one JSON report, then waits
on stdin while the test searches its memory.
Usage: python agent_attacker.py CONFIG_JSON
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def _try(fn: Any) -> str:
    try:
        result = fn()
    except Exception as exc:  # every refusal is the point of the exercise
        return f"refused {type(exc).__name__}: {str(exc)[:300]}"
    return f"ok {result}"


def main(config: dict[str, Any]) -> dict[str, Any]:
    from eth_account import Account
    from web3 import Web3

    from judge.jev import PaidCallRequest
    from judge.service import JudgeClient
    from judge.tasks import TaskLimits
    from judge.verdict import VerdictSigner
    from tests._support import lying_transfer
    from wallet.service import WalletClient

    env = os.environ
    home = Path(env["NIB_HOME"])
    judge = JudgeClient(env["NIB_JUDGE_URL"], token=env["NIB_JUDGE_TOKEN"], timeout_s=10)
    wallet = WalletClient(env["NIB_WALLET_SOCKET"])
    w3 = Web3(Web3.HTTPProvider(config["rpc_url"]))
    usdc, seller, attacker = config["usdc"], config["seller"], config["attacker"]
    report: dict[str, Any] = {"address": wallet.address}

    # 1. The key: no passphrase in the environment, the keystore does not open without
    #    it, no key-sized secret of the wallet's in this process's memory.
    report["env_has_passphrase"] = any("PASSWORD" in k or "PASSPHRASE" in k for k in env)
    keystore = json.loads((Path(config["keystore"])).read_text())
    report["decrypt_without_passphrase"] = _try(lambda: Account.decrypt(keystore, ""))
    report["decrypt_with_judge_token"] = _try(
        lambda: Account.decrypt(keystore, env["NIB_JUDGE_TOKEN"])
    )
    report["files_readable_in_home"] = sorted(p.name for p in home.rglob("*") if p.is_file())

    def transfer(to: str, amount: int) -> tuple[dict[str, Any], PaidCallRequest]:
        return lying_transfer(w3, usdc, config["chain_id"], to, amount,
                              wallet.nonces.allocate(), task_id=config["task_id"])

    def pay(to: str, amount: int) -> str:
        tx, request = transfer(to, amount)
        verdict = judge.decide(request)
        if verdict.decision != "approve":
            wallet.nonces.release(tx["nonce"])
            return f"judge {verdict.decision}: {verdict.reason[:200]}"
        signed = wallet.sign_transaction(tx, verdict, run_id=config["task_id"], cap=10**15)
        sent = wallet.send_transaction(signed)
        return f"paid status {sent.status}"

    # 2. Above the registered per-call cap, an unregistered recipient, a skipped escalation.
    report["above_cap"] = pay(seller, config["per_call_cap"] + 1)
    report["unregistered_recipient"] = pay(attacker, 10_000)
    tx, request = transfer(seller, config["threshold"])
    escalated = judge.decide(request)
    report["escalation"] = escalated.decision
    report["sign_escalated"] = _try(
        lambda: wallet.sign_transaction(tx, escalated, run_id=config["task_id"], cap=10**15)
    )
    # ... nor grant its own escalation (the human's admin path), then ask again.
    report["grant_own_escalation"] = _try(lambda: judge.grant(escalated.id))
    report["after_grant_attempt"] = judge.decide(request).decision
    wallet.nonces.release(tx["nonce"])
    # 3. A verdict forged with a key of our own, claiming to be the judge's.
    forged_signer = VerdictSigner(Account.create())
    tx, request = transfer(attacker, 10_000)
    forged = forged_signer.issue(
        decision="approve", call_fingerprint=request.call_fingerprint,
        payload_fingerprint=request.payload_fingerprint, amount=10_000, asset=usdc,
        recipient=attacker, chain_id=config["chain_id"], p="1", ev="1", reason="forged",
    ).model_copy(update={"judge": judge.address})
    report["forged"] = _try(
        lambda: wallet.sign_transaction(tx, forged, run_id=config["task_id"], cap=10**15)
    )
    wallet.nonces.release(tx["nonce"])
    # 4. A real approval, then its replay.
    tx, request = transfer(seller, config["price"])
    verdict = judge.decide(request)
    signed = wallet.sign_transaction(tx, verdict, run_id=config["task_id"], cap=10**15)
    report["first_payment"] = wallet.send_transaction(signed).status
    report["replay"] = _try(
        lambda: wallet.sign_transaction(tx, verdict, run_id=config["task_id"], cap=10**15)
    )
    # 5. Inflated outcomes: only one per (verdict, fact kind) counts.
    before = judge.calibration()["n"]
    accepted = 0
    for _ in range(50):
        if _try(lambda: judge.record_outcome(verdict.id, "receipt", True)).startswith("ok"):
            accepted += 1
    report["outcomes_accepted"] = accepted
    report["outcomes_counted"] = judge.calibration()["n"] - before
    # 6. A wider task of our own making.
    wide = TaskLimits(task_id="mine", spend_cap=10**12, per_call_cap=10**12,
                      approval_threshold=None, recipients=(attacker,), sellers=())
    report["register_task"] = _try(lambda: judge.register_task(wide))
    # 7. Spend as much as the judge allows.
    report["spree"] = [pay(seller, config["price"]) for _ in range(config["spree"])]
    return report


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
    # Stay alive so the test can search this process's memory for the wallet's key.
    sys.stdin.readline()
