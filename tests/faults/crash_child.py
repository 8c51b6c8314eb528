"""Child process for the crash test: get a judge verdict, sign an x402 payment through the
real wallet, hand the signed authorization over (a file stands in for the seller), then
hang before anything submits or settles it, waiting to be SIGKILLed.

Usage: python crash_child.py RPC_URL USDC DB_PATH OUT_DIR [JUDGE_URL TOKEN WALLET_SOCKET]

With the last three, the child is an agent process of the services composition: it holds
only a client of the judge service (the agent's token) and of the wallet service (its
socket), and its task ``crash-run`` was registered with the judge by the test.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any


def main(rpc_url: str, usdc: str, db: str, out_dir: str, judge_url: str = "", token: str = "",
         socket: str = "") -> None:
    from chain.client import ChainClient
    from chain.devkeys import AGENT, JUDGE, SELLER, dev_account
    from chain.usdc import USDC_NAME, USDC_VERSION, eip3009_typed_data
    from judge.calibration import BetaCalibrator
    from judge.fingerprint import call_fingerprint, typed_data_fingerprint
    from judge.jev import Judge, PaidCallRequest
    from judge.records import VerdictRecords
    from judge.verdict import VerdictSigner
    from wallet.keystore import KeyHandle
    from wallet.signer import Wallet

    out = Path(out_dir)
    client = ChainClient(rpc_url, 31337)
    judge: Any
    wallet: Any
    if socket:
        from judge.service import JudgeClient
        from wallet.service import WalletClient

        judge = JudgeClient(judge_url, trusted_judge=dev_account(JUDGE).address, token=token)
        wallet = WalletClient(socket)
    else:
        judge = Judge(VerdictSigner(dev_account(JUDGE)), BetaCalibrator(db),
                      allowed_assets={31337: [usdc]}, records=VerdictRecords(db))
        wallet = Wallet(KeyHandle(dev_account(AGENT)), db_path=db, chain=client, usdc=usdc,
                        trusted_judge=judge.address, recheck=judge.recheck)
    now = client.block_timestamp("latest")
    nonce = os.urandom(32)
    typed = eip3009_typed_data(
        name=USDC_NAME, version=USDC_VERSION, chain_id=31337, verifying_contract=usdc,
        sender=wallet.address, recipient=dev_account(SELLER).address, value=100_000,
        valid_after=now - 600, valid_before=now + 300, nonce=nonce,
    )
    args = {"url": "http://127.0.0.1:8402/analytics/gas"}
    verdict = judge.decide(PaidCallRequest(
        tool="pay_http", args=args, call_fingerprint=call_fingerprint("pay_http", args),
        payload_fingerprint=typed_data_fingerprint(typed), price=100_000, asset=usdc,
        recipient=dev_account(SELLER).address, chain_id=31337, remaining_budget=1_000_000,
        balance=client.token_balance(usdc, wallet.address), per_call_cap_atomic=250_000,
        spend_cap_atomic=1_000_000, missing=("gas_stats",), tool_facts=("gas_stats",),
        task_id="crash-run", payload=typed,
    ))
    assert verdict.decision == "approve", verdict.reason
    # The purchase intent survives the crash (a real agent keeps it in its run state).
    intent = {"verdict": verdict.model_dump(mode="json"), "nonce": "0x" + nonce.hex(),
              "valid_after": now - 600, "valid_before": now + 300}
    _write_whole(out / "intent.json", intent)
    signed = wallet.sign_typed_data(typed, verdict, run_id="crash-run", spend_cap_atomic=1_000_000)
    _write_whole(out / "signed.json", signed.to_x402_payload())
    threading.Event().wait()  # hang "before settlement" until the parent kills us


def _write_whole(path: Path, data: object) -> None:
    """``data`` as JSON at ``path``, appearing whole or not at all: the parent kills this
    process as soon as it sees the file (a file seen half-written failed the test once)."""
    part = path.with_suffix(".part")
    part.write_text(json.dumps(data))
    os.replace(part, path)


if __name__ == "__main__":
    main(*sys.argv[1:8])
