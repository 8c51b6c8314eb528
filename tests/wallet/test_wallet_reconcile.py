"""Reconciliation of the ledger with on-chain Transfer logs, on a real Anvil."""

from __future__ import annotations

import json
from typing import Any

from _wallet_support import (
    AGENT_ADDRESS,
    DIME,
    ONE_USDC,
    Events,
    approve,
    quote,
    submit_authorization,
    transfer_tx,
)

from chain.client import ChainClient
from chain.devkeys import AGENT, OUTSIDER, dev_account
from chain.usdc import transfer
from judge.verdict import VerdictSigner
from wallet.reconcile import reconcile
from wallet.signer import Wallet

RUN = "run-rec"


def test_transfer_outside_the_wallet_is_an_unmatched_onchain_alarm(
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
    events: Events,
) -> None:
    start = chain.w3.eth.block_number + 1
    tx = transfer_tx(chain)
    sent = wallet.send_transaction(
        wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, cap=ONE_USDC)
    )
    # Same key, but not through the wallet: no verdict, no ledger row.
    rogue = transfer(
        chain.w3, chain.usdc, dev_account(AGENT), dev_account(OUTSIDER).address, ONE_USDC
    )

    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start, emit=events)
    assert [m.tx_hash for m in report.matched] == [sent.tx_hash]
    assert [(t.tx_hash, t.value, t.recipient) for t in report.unmatched_onchain] == [
        (rogue.lower(), ONE_USDC, dev_account(OUTSIDER).address)
    ]
    assert report.unmatched_ledger == () and not report.clean
    json.dumps(report.to_dict())
    assert events.named("wallet.reconciled")[0]["unmatched_onchain"][0]["value"] == ONE_USDC


def test_x402_spend_without_tx_hash_is_found_by_its_authorization_nonce(
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
) -> None:
    start = chain.w3.eth.block_number + 1
    paid, pending = quote(chain), quote(chain, value=2 * DIME)
    signed = wallet.sign_typed_data(paid, approve(judge_signer, paid), run_id=RUN, cap=ONE_USDC)
    unsent = wallet.sign_typed_data(
        pending, approve(judge_signer, pending), run_id=RUN, cap=ONE_USDC
    )
    tx_hash = submit_authorization(chain, signed)  # the seller settled; we never heard back

    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert [(m.ledger_id, m.tx_hash) for m in report.matched] == [(signed.ledger_id, tx_hash)]
    assert report.resolved == (signed.ledger_id,)
    assert [r.id for r in report.unmatched_ledger] == [unsent.ledger_id]
    assert report.unmatched_onchain == ()
    row = wallet.meter.ledger.get(signed.ledger_id)
    assert (row.status, row.tx_hash) == ("settled", tx_hash)
    assert wallet.meter.spent(RUN) == DIME and wallet.meter.reserved(RUN) == 2 * DIME

    again = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert again.resolved == () and len(again.matched) == 1
