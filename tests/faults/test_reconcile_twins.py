"""Two ledger rows for one byte-identical transaction (what concurrent runs produce when
their transfer quotes pin the same nonce): the chain moved the money once, so after
reconciliation the ledger must still say it moved once."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fault_support import AGENT_ADDR, SELLER_ADDR, build_agent

from agent.models.scripted import ScriptedModel
from chain.devkeys import JUDGE, dev_account
from chain.usdc import usdc_contract
from judge.fingerprint import transaction_fingerprint
from judge.verdict import VerdictSigner
from wallet.errors import SendFailed
from wallet.reconcile import reconcile

TIP = 10_000


def test_identical_transactions_are_counted_once_after_reconcile(
    tmp_path: Any, chain: Any
) -> None:
    agent = build_agent(tmp_path / "nib.db", chain.rpc_url, chain.usdc, ScriptedModel({}))
    w3 = chain.w3
    data = usdc_contract(w3, chain.usdc).encode_abi("transfer", [SELLER_ADDR, TIP])
    base = int(w3.eth.get_block("latest")["baseFeePerGas"])
    tx = {"type": 2, "chainId": chain.chain_id, "from": AGENT_ADDR, "to": chain.usdc,
          "value": 0, "data": data, "nonce": w3.eth.get_transaction_count(AGENT_ADDR, "pending"),
          "gas": 100_000, "maxFeePerGas": 2 * base + 10**9, "maxPriorityFeePerGas": 10**9}
    signer = VerdictSigner(dev_account(JUDGE))

    def verdict() -> Any:  # two runs, two verdicts the judge issued for the same bytes
        issued = signer.issue(decision="approve", call_fingerprint="0x" + "11" * 32,
                            payload_fingerprint=transaction_fingerprint(tx), amount=TIP,
                            asset=chain.usdc, recipient=SELLER_ADDR, chain_id=chain.chain_id,
                            p="0.5", ev="0.1", reason="test", now=time.time())
        agent.deps.judge.records.issued(issued, subject="transfer_usdc")
        return issued

    first = agent.wallet.sign_transaction(tx, verdict(), run_id="run-b", cap=10**6)
    second = agent.wallet.sign_transaction(tx, verdict(), run_id="run-a", cap=10**6)
    assert first.tx_hash == second.tx_hash
    agent.wallet.send_transaction(second)
    with pytest.raises(SendFailed):
        agent.wallet.send_transaction(first)
    logs = agent.transfers_from_agent()
    assert [t.value for t in logs] == [TIP]
    statuses = sorted(r.status for r in agent.ledger())
    assert statuses == ["failed", "settled"]  # exact before reconciliation

    report = reconcile(agent.db, agent.client, chain.usdc, AGENT_ADDR, agent.start_block + 1)
    settled = [r for r in agent.ledger() if r.status == "settled"]
    assert sum(r.amount for r in settled) == TIP, [(r.run_id, r.status) for r in agent.ledger()]
    assert report.clean
