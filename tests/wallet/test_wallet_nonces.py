"""Nonces for concurrent sends from one key: no gaps, no collisions, all mined."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from _wallet_support import AGENT_ADDRESS, DIME, ONE_USDC, SELLER_ADDRESS, approve
from web3 import Web3
from web3.exceptions import TransactionNotFound

from chain.devkeys import OUTSIDER, SELLER, dev_account
from chain.usdc import usdc_contract
from judge.verdict import VerdictSigner
from wallet.nonces import NonceManager
from wallet.signer import SentTx, Wallet


def test_ten_threads_send_wallet_transfers_without_nonce_errors(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    token = usdc_contract(chain.w3, chain.usdc)
    start_nonce = chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending")
    seller_before = token.functions.balanceOf(SELLER_ADDRESS).call()
    base = int(chain.w3.eth.get_block("latest")["baseFeePerGas"])
    jobs = []
    for _ in range(10):
        tx = {  # pinned at quote time, the nonce from the wallet's nonce manager
            "chainId": chain.chain_id,
            "to": chain.usdc,
            "value": 0,
            "gas": 80_000,
            "maxFeePerGas": 2 * base + 10**9,
            "maxPriorityFeePerGas": 10**9,
            "nonce": wallet.nonces.allocate(),
            "data": token.encode_abi("transfer", [SELLER_ADDRESS, DIME]),
        }
        jobs.append((tx, approve(judge_signer, tx)))
    barrier = threading.Barrier(10)
    sent: list[SentTx] = []
    errors: list[BaseException] = []

    def send(tx: dict[str, Any], verdict: Any) -> None:
        barrier.wait()
        try:
            signed = wallet.sign_transaction(tx, verdict, run_id="run-n", spend_cap_atomic=10 * ONE_USDC)
            sent.append(wallet.send_transaction(signed))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=send, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(sent) == 10 and all(s.status == 1 for s in sent)
    nonces = sorted(
        chain.w3.eth.get_transaction(s.tx_hash)["nonce"]
        for s in sent  # type: ignore[arg-type]
    )
    assert nonces == list(range(start_nonce, start_nonce + 10))
    assert chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "latest") == start_nonce + 10
    assert token.functions.balanceOf(SELLER_ADDRESS).call() == seller_before + 10 * DIME
    assert {r.status for r in wallet.meter.ledger.rows("run-n")} == {"settled"}


def test_released_nonce_is_reused_before_a_new_one(chain: Any) -> None:
    outsider = dev_account(OUTSIDER)
    nonces = NonceManager(chain.w3, outsider.address)
    base = chain.w3.eth.get_transaction_count(outsider.address, "pending")
    a, b, c = nonces.allocate(), nonces.allocate(), nonces.allocate()
    assert (a, b, c) == (base, base + 1, base + 2)
    nonces.release(b)
    assert nonces.allocate() == b
    nonces.release(c)  # the top one rolls back
    assert nonces.allocate() == c


def test_raw_sends_from_ten_threads_and_resync_after_an_outside_send(chain: Any) -> None:
    sender = dev_account(SELLER)
    nonces = NonceManager(chain.w3, sender.address)
    to = Web3.to_checksum_address(dev_account(OUTSIDER).address)
    gas_price = chain.w3.eth.gas_price
    hashes: list[Any] = []
    barrier = threading.Barrier(10)

    def send(_: int) -> None:
        barrier.wait()
        with nonces.use() as n:
            tx = {
                "to": to,
                "value": 1,
                "gas": 21_000,
                "gasPrice": gas_price,
                "nonce": n,
                "chainId": chain.chain_id,
            }
            hashes.append(
                chain.w3.eth.send_raw_transaction(sender.sign_transaction(tx).raw_transaction)
            )

    run_threads(send, 10)
    receipts = [mined(chain, h) for h in hashes]
    assert all(r["status"] == 1 for r in receipts)
    # A send outside the manager: resync picks up the chain's count.
    outside = {
        "to": to,
        "value": 1,
        "gas": 21_000,
        "gasPrice": gas_price,
        "nonce": chain.w3.eth.get_transaction_count(sender.address, "pending"),
        "chainId": chain.chain_id,
    }
    chain.w3.eth.wait_for_transaction_receipt(
        chain.w3.eth.send_raw_transaction(sender.sign_transaction(outside).raw_transaction)
    )
    assert nonces.resync() == outside["nonce"] + 1
    assert nonces.allocate() == outside["nonce"] + 1


def mined(chain: Any, tx_hash: Any, within_s: float = 120.0) -> Any:
    """``tx_hash``'s receipt. A transaction still in the pool after a few seconds gets a
    block mined for it (on a loaded machine a 30 s wait once ran out with one of the ten
    unmined); one that never mines fails naming what the pool holds, so a nonce gap the
    manager left shows as such."""
    deadline, nudged = time.monotonic() + within_s, time.monotonic() + 5.0
    while True:
        with contextlib.suppress(TransactionNotFound):
            return chain.w3.eth.get_transaction_receipt(tx_hash)
        if time.monotonic() > nudged:
            chain.rpc("evm_mine")
            nudged = time.monotonic() + 5.0
        assert time.monotonic() < deadline, (
            f"{bytes(tx_hash).hex()} not mined in {within_s:g} s; the pool holds "
            f"{chain.rpc('txpool_content')}")
        time.sleep(0.1)


def run_threads(fn: Callable[[int], None], count: int) -> None:
    threads = [threading.Thread(target=fn, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
