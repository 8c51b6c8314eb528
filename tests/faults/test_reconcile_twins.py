"""Two ledger rows for one byte-identical transaction (what concurrent runs produce when
their transfer quotes pin the same nonce): the chain moved the money once, so after
reconciliation the ledger must still say it moved once."""

from __future__ import annotations

from typing import Any

import pytest
from fault_support import AGENT_ADDR, SELLER_ADDR, build_agent

from agent.models.scripted import ScriptedModel
from tests._services import Composition
from tests._support import lying_transfer
from wallet.errors import SendFailed
from wallet.reconcile import reconcile

TIP = 10_000


def test_identical_transactions_are_counted_once_after_reconcile(
    tmp_path: Any, chain: Any, composition: Composition
) -> None:
    agent = build_agent(tmp_path / "nib.db", chain.rpc_url, chain.usdc, ScriptedModel({}),
                        composition=composition)
    nonce = agent.wallet.nonces.allocate()

    def verdict(run_id: str) -> tuple[dict[str, Any], Any]:
        """Two runs, two verdicts the judge issued for the same bytes."""
        if agent.services is not None:  # the judge service rules on registered tasks only
            agent.services.register_by_limits(run_id, f"Tip {SELLER_ADDR} 0.01 USDC.", agent.deps)
        tx, request = lying_transfer(chain.w3, chain.usdc, chain.chain_id, SELLER_ADDR, TIP,
                                     nonce, task_id=run_id)
        issued = agent.deps.judge.decide(request)
        assert issued.decision == "approve", issued.reason
        return tx, issued

    (tx, for_b), (same, for_a) = verdict("run-b"), verdict("run-a")
    assert same == tx
    first = agent.wallet.sign_transaction(tx, for_b, run_id="run-b", spend_cap_atomic=10**6)
    second = agent.wallet.sign_transaction(tx, for_a, run_id="run-a", spend_cap_atomic=10**6)
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
