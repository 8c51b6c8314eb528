"""A transfer that does not get mined, on a real Anvil: its spend ends released, or stays
pending only while the chain could still mine it, so the run's spend equals what moved.

The eval found the class: the devnet reverted to a snapshot, the nonce manager still
counted the reverted transfer's number, the next transfer was signed one above the
chain's count, waited in the pool unmined, and its 0.1 USDC stayed counted as spend.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from _wallet_support import AGENT_ADDRESS, DIME, ONE_USDC, SELLER_ADDRESS, approve, transfer_tx

from chain.client import ChainClient
from chain.devkeys import AGENT, dev_account
from chain.usdc import usdc_contract
from judge.verdict import VerdictSigner
from wallet.errors import SendFailed
from wallet.reconcile import reconcile
from wallet.signer import SignedTx, Wallet


def usdc_of(chain: Any, address: str) -> int:
    return int(usdc_contract(chain.w3, chain.usdc).functions.balanceOf(address).call())


def sign(chain: Any, wallet: Wallet, judge_signer: VerdictSigner, run: str, nonce: int) -> SignedTx:
    """A transfer of 0.1 USDC to the seller pinned to ``nonce`` (as the tool quotes it)."""
    tx = {**transfer_tx(chain), "nonce": nonce}
    return wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=run, spend_cap_atomic=ONE_USDC)


def assert_spend_is_what_moved(
    chain: Any, wallet: Wallet, client: ChainClient, run: str, start: int, moved: int
) -> None:
    """Meter == ledger == chain for ``run``: nothing counted that the chain did not move."""
    usage = wallet.meter.usage(run)
    measured = wallet.meter.measured_spend(run, client, chain.usdc, AGENT_ADDRESS, start)
    assert (usage.settled, usage.reserved) == (moved, 0)
    assert measured.ledger == measured.onchain == moved and measured.agrees


def test_a_chain_moved_back_does_not_strand_the_next_transfer(
    chain: Any, wallet: Wallet, client: ChainClient, judge_signer: VerdictSigner
) -> None:
    """The eval's case: a snapshot revert forgets a mined transfer; the manager hands its
    number out again instead of signing above a gap."""
    snap = chain.rpc("evm_snapshot")
    first = sign(chain, wallet, judge_signer, "run-before", wallet.nonces.allocate())
    wallet.send_transaction(first)
    chain.rpc("evm_revert", [snap])  # the devnet forgets the transfer (and its nonce)

    start, before = chain.w3.eth.block_number, usdc_of(chain, SELLER_ADDRESS)
    second = sign(chain, wallet, judge_signer, "run-after", wallet.nonces.allocate())
    assert second.nonce == first.nonce
    sent = wallet.send_transaction(second)
    assert sent.status == 1
    assert usdc_of(chain, SELLER_ADDRESS) == before + DIME
    assert_spend_is_what_moved(chain, wallet, client, "run-after", start, DIME)


def test_a_transaction_above_a_gap_is_sent_once_the_wallet_fills_the_gap(
    chain: Any, wallet: Wallet, client: ChainClient, judge_signer: VerdictSigner, events: Any
) -> None:
    """A lower number given back before the send: nothing is broadcast above it; the
    wallet fills it first (a 0-ETH transaction to itself, wallet.gaps), then the transfer
    is mined. It used to be discarded (tests/wallet/test_nonce_refill.py has the race)."""
    start, before = chain.w3.eth.block_number, usdc_of(chain, SELLER_ADDRESS)
    low, high = wallet.nonces.allocate(), wallet.nonces.allocate()
    signed = sign(chain, wallet, judge_signer, "run-gap", high)
    wallet.nonces.release(low)  # the send that held the lower number gave it back
    sent = wallet.send_transaction(signed)
    [filled] = events.named("wallet.nonce_filled")
    filler = chain.w3.eth.get_transaction(filled["tx_hash"])
    assert (filler["nonce"], filler["to"], filler["value"]) == (low, AGENT_ADDRESS, 0)
    assert chain.w3.eth.get_transaction_receipt(filled["tx_hash"])["blockNumber"] <= sent.block_number
    assert sent.status == 1 and usdc_of(chain, SELLER_ADDRESS) == before + DIME
    assert chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending") == high + 1
    assert_spend_is_what_moved(chain, wallet, client, "run-gap", start, DIME)


def seen_waiting(wallet: Wallet, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once the wallet has looked below a nonce and found a lower number still unsent."""
    seen, real = threading.Event(), wallet.nonces.unsent_below

    def looked(n: int) -> tuple[list[int], list[int]]:
        gap, waiting = real(n)
        if waiting:
            seen.set()
        return gap, waiting

    monkeypatch.setattr(wallet.nonces, "unsent_below", looked)
    return seen


def test_a_transfer_waits_for_a_lower_number_and_is_sent_after_it_is_given_back_and_filled(
    chain: Any, wallet: Wallet, client: ChainClient, judge_signer: VerdictSigner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The four-worker flake: another run held the lower number (quoted, then refused by
    the judge as the cap bound) while this one was broadcast above it; the number was
    given back, nobody used it again, and this transfer waited in the pool for good with
    its spend counted. Broadcasts now go in nonce order, and the number given back is
    filled by the wallet (it was discarded above the gap until the refill)."""
    start, before = chain.w3.eth.block_number, usdc_of(chain, SELLER_ADDRESS)
    low, high = wallet.nonces.allocate(), wallet.nonces.allocate()  # low: another run's quote
    signed = sign(chain, wallet, judge_signer, "run-order", high)
    seen = seen_waiting(wallet, monkeypatch)
    with ThreadPoolExecutor(1) as pool:
        sending = pool.submit(wallet.send_transaction, signed)
        assert seen.wait(30), "the send never looked below its nonce"
        assert chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending") == low  # waiting
        wallet.nonces.release(low)  # the other run's transfer was refused: never signed
        assert sending.result(timeout=60).status == 1
    assert wallet.meter.ledger.get(signed.ledger_id).status == "settled"
    assert chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending") == high + 1
    assert usdc_of(chain, SELLER_ADDRESS) == before + DIME
    assert_spend_is_what_moved(chain, wallet, client, "run-order", start, DIME)
    assert wallet.nonces.allocate() == high + 1


def test_a_transfer_above_a_number_in_flight_is_sent_after_it(
    chain: Any, wallet: Wallet, client: ChainClient, judge_signer: VerdictSigner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    start, before = chain.w3.eth.block_number, usdc_of(chain, SELLER_ADDRESS)
    low, high = wallet.nonces.allocate(), wallet.nonces.allocate()
    later = sign(chain, wallet, judge_signer, "run-high", high)
    seen = seen_waiting(wallet, monkeypatch)
    with ThreadPoolExecutor(1) as pool:
        sending = pool.submit(wallet.send_transaction, later)
        assert seen.wait(30), "the send never looked below its nonce"
        first = wallet.send_transaction(sign(chain, wallet, judge_signer, "run-low", low))
        second = sending.result(timeout=60)
    assert (first.status, second.status) == (1, 1) and first.block_number <= second.block_number
    assert usdc_of(chain, SELLER_ADDRESS) == before + 2 * DIME
    assert_spend_is_what_moved(chain, wallet, client, "run-low", start, DIME)
    assert_spend_is_what_moved(chain, wallet, client, "run-high", start, DIME)


class ManualMining:
    """Anvil with automine off for one test: transactions wait in the pool until mined."""

    def __init__(self, chain: Any) -> None:
        self.chain = chain

    def __enter__(self) -> ManualMining:
        self.chain.rpc("evm_setAutomine", [False])
        return self

    def __exit__(self, *exc: object) -> None:
        self.chain.rpc("evm_setAutomine", [True])


def replace_and_mine(chain: Any, nonce: int) -> None:
    """The wallet's key replaces whatever waits at ``nonce`` (a 0-value ETH self-send at a
    higher fee) and a block is mined: that nonce is used, by another transaction."""
    fee = 10 * int(chain.w3.eth.get_block("latest")["baseFeePerGas"]) + 10**10
    other = dev_account(AGENT).sign_transaction(
        {"to": AGENT_ADDRESS, "value": 0, "gas": 21_000, "nonce": nonce,
         "maxFeePerGas": fee, "maxPriorityFeePerGas": 10**10, "chainId": chain.chain_id}
    )  # fmt: skip
    chain.w3.eth.send_raw_transaction(other.raw_transaction)
    chain.rpc("evm_mine")


def test_a_transfer_whose_nonce_another_transaction_took_ends_failed(
    chain: Any, make_wallet: Any, client: ChainClient, judge_signer: VerdictSigner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No receipt in time, and the chain mined another transaction with the same nonce:
    this transfer can never land, so its spend is failed and its cap share freed."""
    wallet = make_wallet(receipt_timeout_s=1.0)
    start, before = chain.w3.eth.block_number, usdc_of(chain, SELLER_ADDRESS)
    signed = sign(chain, wallet, judge_signer, "run-replaced", wallet.nonces.allocate())
    real_wait = wallet.chain.w3.eth.wait_for_transaction_receipt

    def replace_then_wait(tx_hash: Any, **kw: Any) -> Any:
        replace_and_mine(chain, signed.nonce)  # while the transfer waits in the pool
        return real_wait(tx_hash, **kw)

    monkeypatch.setattr(wallet.chain.w3.eth, "wait_for_transaction_receipt", replace_then_wait)
    with ManualMining(chain), pytest.raises(SendFailed, match="went to another transaction"):
        wallet.send_transaction(signed)
    assert wallet.meter.ledger.get(signed.ledger_id).status == "failed"
    assert chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "latest") == signed.nonce + 1
    assert usdc_of(chain, SELLER_ADDRESS) == before
    assert_spend_is_what_moved(chain, wallet, client, "run-replaced", start, 0)


def test_a_late_transfer_stays_pending_and_reconcile_settles_it(
    chain: Any, make_wallet: Any, client: ChainClient, judge_signer: VerdictSigner, db_path: Any
) -> None:
    """No receipt in time but nothing took the nonce: it may still be mined, so the spend
    stays 'signed' with its cap share held; once mined, reconcile settles it."""
    wallet = make_wallet(receipt_timeout_s=1.0)
    start, before = chain.w3.eth.block_number, usdc_of(chain, SELLER_ADDRESS)
    signed = sign(chain, wallet, judge_signer, "run-late", wallet.nonces.allocate())
    with ManualMining(chain):
        with pytest.raises(SendFailed, match="may still be mined"):
            wallet.send_transaction(signed)
        assert chain.rpc("eth_getTransactionByHash", [signed.tx_hash]) is not None  # pooled
        row = wallet.meter.ledger.get(signed.ledger_id)
        assert row.status == "signed" and wallet.meter.usage("run-late").committed >= DIME
        chain.rpc("evm_mine")
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert report.resolved == (signed.ledger_id,)
    assert usdc_of(chain, SELLER_ADDRESS) == before + DIME
    assert_spend_is_what_moved(chain, wallet, client, "run-late", start, DIME)


def test_reconcile_fails_a_pending_transfer_once_another_transaction_took_its_nonce(
    chain: Any, make_wallet: Any, client: ChainClient, judge_signer: VerdictSigner, db_path: Any
) -> None:
    """The late transfer is then replaced in the pool: it can never land, and reconcile,
    reading the nonce the ledger recorded, fails it and frees its cap share."""
    wallet = make_wallet(receipt_timeout_s=1.0)
    start, before = chain.w3.eth.block_number, usdc_of(chain, SELLER_ADDRESS)
    signed = sign(chain, wallet, judge_signer, "run-dead", wallet.nonces.allocate())
    assert wallet.meter.ledger.get(signed.ledger_id).tx_nonce == signed.nonce
    with ManualMining(chain):
        with pytest.raises(SendFailed, match="may still be mined"):
            wallet.send_transaction(signed)
        assert reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start).resolved == ()
        replace_and_mine(chain, signed.nonce)
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert report.resolved == (signed.ledger_id,) and report.ledger_check.ok  # type: ignore[union-attr]
    row = wallet.meter.ledger.get(signed.ledger_id)
    assert row.status == "failed" and f"nonce {signed.nonce} was used" in row.note
    assert usdc_of(chain, SELLER_ADDRESS) == before
    assert_spend_is_what_moved(chain, wallet, client, "run-dead", start, 0)


def test_a_receipt_read_without_an_answer_decides_nothing(
    chain: Any, make_wallet: Any, client: ChainClient, judge_signer: VerdictSigner, db_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The node stops answering receipt reads: even with the nonce passed, the wallet
    cannot tell whether this transaction is the one mined, so the spend stays pending
    (its cap share held) and reconcile decides once the node answers."""
    wallet = make_wallet(receipt_timeout_s=1.0)
    start = chain.w3.eth.block_number
    signed = sign(chain, wallet, judge_signer, "run-mute", wallet.nonces.allocate())
    eth = wallet.chain.w3.eth
    real_wait = eth.wait_for_transaction_receipt

    def replace_then_wait(tx_hash: Any, **kw: Any) -> Any:
        replace_and_mine(chain, signed.nonce)
        return real_wait(tx_hash, **kw)

    def no_answer(tx_hash: Any) -> Any:
        raise ConnectionError("read timed out")

    monkeypatch.setattr(eth, "wait_for_transaction_receipt", replace_then_wait)
    monkeypatch.setattr(eth, "get_transaction_receipt", no_answer)
    with ManualMining(chain), pytest.raises(SendFailed, match="may still be mined"):
        wallet.send_transaction(signed)
    assert wallet.meter.ledger.get(signed.ledger_id).status == "signed"
    assert wallet.meter.usage("run-mute").committed >= DIME
    monkeypatch.undo()
    assert reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start).resolved == (
        signed.ledger_id,
    )
    assert_spend_is_what_moved(chain, wallet, client, "run-mute", start, 0)
