"""Arbitrary code in the agent process: everything a compromised agent could try with the
agent's full environment (NIB_HOME, the judge URL and token, the wallet socket).

It first confines itself exactly as ``nib run`` does once its task is registered
(``agent.cli.runtime.agent_policy`` + ``agent.confine.confine``; ``"confine": false`` in
the config skips that, to see the test fail), then attacks.
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


def planted(source: Path) -> tuple[Path, Path]:
    """Where _files tries to plant code: the source tree and site-packages (a test
    deletes them whatever happened, so a run without confinement leaves nothing)."""
    import sysconfig

    return (source / "agent" / "_planted.py",
            Path(sysconfig.get_paths()["purelib"]) / "nib_planted.pth")


def _peek(pid: int) -> int:
    """Open another process's memory (what a key scan reads); the bytes it opened on."""
    with open(f"/proc/{pid}/mem", "rb") as mem:  # noqa: PTH123 - a raw read of /proc
        return mem.fileno()


def _raw_disk() -> Any:
    """The block device under the root file system (root reads every file through it)."""
    device = os.stat("/").st_dev
    name = f"{os.major(device)}:{os.minor(device)}"
    found = next(p for p in Path("/sys/class/block").iterdir() if (p / "dev").read_text().strip() == name)
    return open(f"/dev/{found.name}", "rb")  # noqa: SIM115, PTH123 - closed with the process


def _files(config: dict[str, Any], home: Path) -> dict[str, Any]:
    """What it tries on disk: the judge's admin token, the services' database (read and
    write, through SQLite and as a plain file), the keystore, the judge's key file, the
    user's services.json, and the code the services run (source tree, site-packages); and
    the memory of the test process (which holds the services and the key)."""
    import sqlite3

    services = home / "services"
    db = services / "nib.db"
    source = Path(config["source"])

    def sql(query: str, mode: str) -> object:
        with sqlite3.connect(f"file:{db}?mode={mode}", uri=True) as conn:
            return conn.execute(query).fetchall()

    def write(path: Path, text: str) -> str:
        with path.open("a") as fh:
            fh.write(text)
        return str(path)

    return {
        "admin_token": _try(lambda: (services / "judge-admin.token").read_text()),
        "services_dir": _try(lambda: sorted(os.listdir(services))),
        "services_db_read": _try(lambda: sql("SELECT * FROM judge_tasks", "ro")),
        "services_db_raw": _try(lambda: db.read_bytes()[:16]),
        "services_db_write": _try(lambda: sql(
            "UPDATE judge_tasks SET spend_cap = 1000000000000, per_call_cap = 1000000000000", "rw")),
        "services_db_delete": _try(lambda: sql("DELETE FROM judge_verdicts", "rw")),
        "services_db_overwrite": _try(lambda: write(db, "x")),
        "keystore": _try(lambda: Path(config["keystore"]).read_text()),
        "keystore_write": _try(lambda: write(Path(config["keystore"]), " ")),
        "judge_key": _try(lambda: Path(config["judge_key"]).read_text()),
        "services_json_write": _try(lambda: write(home / "services.json", " ")),
        "source_write": _try(lambda: write(planted(source)[0], "PLANTED = 1\n")),
        "site_packages_write": _try(lambda: write(planted(source)[1], "# planted\n")),
        "test_process_memory": _try(lambda: _peek(os.getppid())),
        "raw_disk": _try(lambda: _raw_disk().read(512)[:4]),
        "other_run_usage": _try(lambda: [w.meter.usage(config["other_run"])
                                         for w in _runtime_wallets()]) if config.get("other_run") else "",
    }


def _runtime_wallets() -> list[Any]:
    """The wallet clients the planted-in process itself holds (found in its memory, as an
    attacker would): any connection they kept from before confinement acts as the user."""
    import gc

    from wallet.client import WalletClient

    found = [o for o in gc.get_objects() if isinstance(o, WalletClient)]
    if not found:
        raise AssertionError("no wallet client in this process")
    return found


def main(config: dict[str, Any]) -> dict[str, Any]:
    from agent.cli.runtime import agent_policy
    from agent.config import load_settings
    from agent.confine import Confinement, confine

    # Exactly what `nib run` does once its task is registered, before the first model call.
    confined = confine(agent_policy(load_settings())) if config["confine"] else Confinement()

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
    wallet.prove_task(env["NIB_JUDGE_TOKEN"])  # its own task, as nib run proves it
    w3 = Web3(Web3.HTTPProvider(config["rpc_url"]))
    usdc, seller, attacker = config["usdc"], config["seller"], config["attacker"]
    report: dict[str, Any] = {"address": wallet.address, "confinement": confined.line()}

    # 0. The files: the admin token, the services' records, the keys, the services' code.
    report["files"] = _files(config, home)
    # 1. The key: no passphrase in the environment, the keystore does not open (it cannot
    #    even be read), no key-sized secret of the wallet's in this process's memory.
    report["env_has_passphrase"] = any("PASSWORD" in k or "PASSPHRASE" in k for k in env)
    report["decrypt_without_passphrase"] = _try(
        lambda: Account.decrypt(json.loads(Path(config["keystore"]).read_text()), "")
    )

    def transfer(to: str, amount: int) -> tuple[dict[str, Any], PaidCallRequest]:
        return lying_transfer(w3, usdc, config["chain_id"], to, amount,
                              wallet.nonces.allocate(), task_id=config["task_id"])

    def pay(to: str, amount: int) -> str:
        tx, request = transfer(to, amount)
        verdict = judge.decide(request)
        if verdict.decision != "approve":
            wallet.nonces.release(tx["nonce"])
            return f"judge {verdict.decision}: {verdict.reason[:200]}"
        try:
            signed = wallet.sign_transaction(tx, verdict, run_id=config["task_id"], spend_cap_atomic=10**15)
        except Exception as exc:  # the wallet holding the task to its registered cap
            wallet.nonces.release(tx["nonce"])
            return f"wallet refused {type(exc).__name__}: {exc}"[:300]
        sent = wallet.send_transaction(signed)
        return f"paid status {sent.status}"

    # 2. Above the registered per-call cap, an unregistered recipient, a skipped escalation.
    report["above_cap"] = pay(seller, config["per_call_cap"] + 1)
    report["unregistered_recipient"] = pay(attacker, 10_000)
    tx, request = transfer(seller, config["threshold"])
    escalated = judge.decide(request)
    report["escalation"] = escalated.decision
    report["sign_escalated"] = _try(
        lambda: wallet.sign_transaction(tx, escalated, run_id=config["task_id"], spend_cap_atomic=10**15)
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
        lambda: wallet.sign_transaction(tx, forged, run_id=config["task_id"], spend_cap_atomic=10**15)
    )
    wallet.nonces.release(tx["nonce"])
    # 4. A real approval, then its replay.
    tx, request = transfer(seller, config["price"])
    verdict = judge.decide(request)
    signed = wallet.sign_transaction(tx, verdict, run_id=config["task_id"], spend_cap_atomic=10**15)
    report["first_payment"] = wallet.send_transaction(signed).status
    report["replay"] = _try(
        lambda: wallet.sign_transaction(tx, verdict, run_id=config["task_id"], spend_cap_atomic=10**15)
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
    wide = TaskLimits(task_id="mine", spend_cap_atomic=10**12, per_call_cap_atomic=10**12,
                      approval_threshold_atomic=None, recipients=(attacker,), sellers=())
    report["register_task"] = _try(lambda: judge.register_task(wide))
    # 7. Spend as much as the judge allows.
    report["spree"] = [pay(seller, config["price"]) for _ in range(config["spree"])]
    return report


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
    # Stay alive so the test can search this process's memory for the wallet's key.
    sys.stdin.readline()
