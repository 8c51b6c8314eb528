"""Abandoning an x402 authorization: the wallet ends it from what the chain shows, and
cancels an open one on chain (EIP-3009 ``cancelAuthorization``), on a real Anvil."""

from __future__ import annotations

import time
from typing import Any

import pytest
from _wallet_support import (
    AGENT_ADDRESS,
    DIME,
    ONE_USDC,
    Events,
    approve,
    chain_time,
    quote,
    submit_authorization,
)
from web3 import Web3

from chain.client import ChainClient
from chain.usdc import usdc_contract
from judge.verdict import VerdictSigner
from wallet.errors import LedgerError
from wallet.journal import verify_ledger
from wallet.reconcile import reconcile
from wallet.signer import SignedTypedData, Wallet

RUN = "run-cancel"


def sign(chain: Any, wallet: Wallet, judge_signer: VerdictSigner, valid_s: int = 600) -> SignedTypedData:
    payload = quote(chain, valid_before=chain_time(chain) + valid_s)
    return wallet.sign_typed_data(payload, approve(judge_signer, payload), run_id=RUN, spend_cap_atomic=ONE_USDC)


def state(chain: Any, signed: SignedTypedData) -> bool:
    token = usdc_contract(chain.w3, chain.usdc)
    return bool(token.functions.authorizationState(AGENT_ADDRESS, bytes.fromhex(signed.auth_nonce[2:])).call())


def test_an_open_authorization_is_cancelled_on_chain_and_the_seller_cannot_settle_it(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, client: ChainClient,
    db_path: Any, events: Events,
) -> None:
    start = chain.w3.eth.block_number + 1
    before = client.token_balance(chain.usdc, AGENT_ADDRESS)
    signed = sign(chain, wallet, judge_signer)
    assert wallet.meter.usage(RUN).committed == DIME

    row = wallet.abandon_authorization(signed.ledger_id, "seller answered 500")

    assert row.status == "cancelled" and row.tx_hash
    assert "seller answered 500" in row.note and row.tx_hash in row.note
    assert state(chain, signed)  # the token refuses the nonce from now on
    receipt = chain.w3.eth.get_transaction_receipt(row.tx_hash)
    assert receipt["from"] == AGENT_ADDRESS and receipt["status"] == 1
    token = usdc_contract(chain.w3, chain.usdc)
    [log] = token.events.AuthorizationCanceled().process_receipt(receipt)
    assert "0x" + bytes(log.args.nonce).hex() == signed.auth_nonce
    with pytest.raises(Exception, match="used or canceled"):
        submit_authorization(chain, signed)
    # Nothing moved; the cap share is free; the cancel's gas is metered to the run.
    assert client.token_balance(chain.usdc, AGENT_ADDRESS) == before
    usage = wallet.meter.usage(RUN)
    assert (usage.settled, usage.reserved) == (0, 0)
    assert usage.gas_wei == int(receipt["gasUsed"]) * int(receipt["effectiveGasPrice"]) > 0
    [event] = events.named("wallet.cancelled")
    assert event["tx_hash"] == row.tx_hash and event["spend_id"] == row.id
    # Reconcile: closed, nothing moved; the ledger's hash chain holds.
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert report.clean and report.matched == () and report.resolved == ()
    assert [(r.id, r.status) for r in report.unmatched_ledger] == [(row.id, "cancelled")]
    assert verify_ledger(db_path).ok
    # Abandoning it again changes nothing and sends nothing.
    again = wallet.abandon_authorization(signed.ledger_id, "again")
    assert again == row and len(events.named("wallet.cancelled")) == 1


def test_a_settlement_that_won_the_race_settles_the_row_as_paid_for_nothing(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, client: ChainClient, db_path: Any
) -> None:
    start = chain.w3.eth.block_number + 1
    signed = sign(chain, wallet, judge_signer)
    tx = submit_authorization(chain, signed)  # the seller got there first

    row = wallet.abandon_authorization(signed.ledger_id, "seller answered 402")

    assert (row.status, row.tx_hash) == ("settled", tx)
    assert "paid for nothing" in row.note and "seller answered 402" in row.note
    assert wallet.meter.usage(RUN).settled == DIME
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert report.clean and [m.ledger_id for m in report.matched] == [row.id]


def test_an_expired_authorization_is_failed_without_a_cancel(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, events: Events
) -> None:
    signed = sign(chain, wallet, judge_signer, valid_s=60)
    chain.rpc("evm_increaseTime", [3_600])
    chain.rpc("evm_mine")
    wallet.clock = lambda: time.time() + 3_600
    row = wallet.abandon_authorization(signed.ledger_id, "no answer")
    assert row.status == "failed" and "expired unused" in row.note
    assert not state(chain, signed) and events.named("wallet.cancelled") == []


def test_a_cancel_whose_record_was_lost_is_closed_by_reconcile(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, client: ChainClient, db_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The cancel is mined, then the wallet dies before writing it down: the row says
    # 'signed'; reconcile finds AuthorizationCanceled and closes it (no money can move).
    start = chain.w3.eth.block_number + 1
    signed = sign(chain, wallet, judge_signer)

    def crash(*_: Any, **__: Any) -> None:
        raise RuntimeError("killed before the write")

    monkeypatch.setattr(wallet.meter, "cancel", crash)
    with pytest.raises(RuntimeError):
        wallet.abandon_authorization(signed.ledger_id, "run stopped")
    assert wallet.meter.ledger.get(signed.ledger_id).status == "signed" and state(chain, signed)

    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    row = wallet.meter.ledger.get(signed.ledger_id)
    assert row.status == "cancelled" and report.resolved == (row.id,) and report.clean


def test_only_an_x402_row_can_be_abandoned(wallet: Wallet, chain: Any) -> None:
    with pytest.raises(LedgerError, match="No ledger row"):
        wallet.abandon_authorization("nope", "why")


def test_a_cancel_already_sent_that_loses_the_race_reverts_and_the_row_is_settled(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, client: ChainClient, db_path: Any
) -> None:
    # The seller's settlement and the wallet's cancel land in the same block, the
    # settlement first (it pays a higher tip): the cancel reverts, its gas is metered, and
    # the row is settled under the seller's transaction, paid for nothing.
    import threading

    from chain.devkeys import DEPLOYER, dev_account

    start = chain.w3.eth.block_number + 1
    signed = sign(chain, wallet, judge_signer)
    relayer = dev_account(DEPLOYER)
    fn = usdc_contract(chain.w3, chain.usdc).get_function_by_signature(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
    )(signed.signer, Web3.to_checksum_address(signed.recipient), signed.value, signed.valid_after, signed.valid_before,
      bytes.fromhex(signed.auth_nonce[2:]), signed.signature_bytes())
    # The node's suggested tip (what the wallet's cancel pays) follows the tips of recent
    # blocks, which earlier tests on the session chain set: the seller outbids it by far.
    tip = max(50 * 10**9, 20 * int(chain.w3.eth.max_priority_fee))
    tx = fn.build_transaction({
        "from": relayer.address, "chainId": chain.chain_id, "gas": 200_000,
        "nonce": chain.w3.eth.get_transaction_count(relayer.address, "pending"),
        "maxPriorityFeePerGas": tip, "maxFeePerGas": tip + 10 * 10**9,
    })
    rows: list[Any] = []
    chain.rpc("evm_setAutomine", [False])
    try:
        seller_tx = chain.w3.eth.send_raw_transaction(relayer.sign_transaction(tx).raw_transaction)
        worker = threading.Thread(
            target=lambda: rows.append(wallet.abandon_authorization(signed.ledger_id, "race"))
        )
        worker.start()
        deadline = time.monotonic() + 30
        while len(chain.rpc("txpool_content")["pending"]) < 2:  # the cancel is in the pool
            assert time.monotonic() < deadline and worker.is_alive(), "the cancel was never sent"
            time.sleep(0.05)
        chain.rpc("evm_mine")
        worker.join(timeout=60)
    finally:
        chain.rpc("evm_setAutomine", [True])
    [row] = rows
    assert row.status == "settled" and row.tx_hash == "0x" + bytes(seller_tx).hex()
    assert "paid for nothing" in row.note
    [gas] = [g for g in wallet.meter.ledger.gas_rows(RUN) if g.spend_id == row.id]
    receipt = chain.w3.eth.get_transaction_receipt(gas.tx_hash)
    assert receipt["status"] == 0 and receipt["blockNumber"] == chain.w3.eth.get_transaction_receipt(seller_tx)["blockNumber"]
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert report.clean and [m.ledger_id for m in report.matched] == [row.id]
