"""A nonce number given back below transfers waiting their turn is filled, on a real Anvil:
the waiting transfers go through in order instead of being refused.

The four-worker flake (tests/faults/test_workers.py, about one task in a hundred under
load): a task quoted nonce n, another quoted n+1 and was approved, then the first task's
quote was refused by the judge (the treasury cap bound) and gave n back. The transfer at
n+1, waiting its turn, found n free, and the wallet refilled only numbers given back by
*another* confined task: n was given back by a task of the same worker process (a worker
acts for every task it ran), or by an unconfined process, so the transfer was discarded
("... has nonce n+1, but the chain's next number for 0x.. is n and no send under way
holds n"). Now the wallet fills the lowest number not sent below a waiting transfer
whoever gave it back (a 0-ETH transaction to itself: gas only), so every transfer goes
through in order or fails for a real reason.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from _wallet_support import AGENT_ADDRESS, DIME, ONE_USDC, SELLER_ADDRESS, approve, transfer_tx

import wallet.broadcast as broadcast
from chain.client import ChainClient
from chain.money import gas_to_usdc
from chain.usdc import usdc_contract
from judge.verdict import VerdictSigner
from wallet.errors import SendFailed
from wallet.nonces import bounded_by
from wallet.signer import SignedTx, Wallet


def usdc_of(chain: Any, address: str) -> int:
    return int(usdc_contract(chain.w3, chain.usdc).functions.balanceOf(address).call())


def sign(chain: Any, wallet: Wallet, judge_signer: VerdictSigner, run: str, nonce: int,
         cap: int = ONE_USDC) -> SignedTx:
    """A transfer of 0.1 USDC to the seller pinned to ``nonce`` (as the tool quotes it)."""
    tx = {**transfer_tx(chain), "nonce": nonce}
    return wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=run, spend_cap_atomic=cap)


def seen_waiting(wallet: Wallet, monkeypatch: pytest.MonkeyPatch, count: int) -> threading.Event:
    """Set once ``count`` different sends have looked below their nonce and found a lower
    number handed out and not yet sent (so they are waiting their turn)."""
    seen, real, waited = threading.Event(), wallet.nonces.unsent_below, set()

    def looked(n: int) -> tuple[list[int], list[int]]:
        gap, waiting = real(n)
        if waiting:
            waited.add(n)
            if len(waited) >= count:
                seen.set()
        return gap, waiting

    monkeypatch.setattr(wallet.nonces, "unsent_below", looked)
    return seen


def sent_ok(chain: Any, wallet: Wallet, signed: SignedTx) -> int:
    """The transfer's gas (wei) once it is mined with status 1 and its spend settled."""
    receipt = chain.w3.eth.get_transaction_receipt(signed.tx_hash)
    assert receipt["status"] == 1
    assert wallet.meter.ledger.get(signed.ledger_id).status == "settled"
    return int(receipt["gasUsed"]) * int(receipt["effectiveGasPrice"])


def filler_of(chain: Any, data: dict[str, Any], nonce: int) -> int:
    """The filler event's transaction, checked on the chain: the wallet to itself, nonce
    ``nonce``, no ETH, no calldata, mined; its gas (wei)."""
    assert data["nonce"] == nonce
    tx = chain.w3.eth.get_transaction(data["tx_hash"])
    assert (tx["from"], tx["to"], tx["value"], tx["nonce"]) == (AGENT_ADDRESS, AGENT_ADDRESS, 0, nonce)
    assert bytes(tx["input"]) == b""
    receipt = chain.w3.eth.get_transaction_receipt(data["tx_hash"])
    assert receipt["status"] == 1 and receipt["logs"] == []  # no token moved
    gas = int(receipt["gasUsed"]) * int(receipt["effectiveGasPrice"])
    assert data["gas_wei"] == gas
    return gas


def test_a_number_given_back_below_two_waiting_transfers_is_filled_and_both_go_through(
    chain: Any, wallet: Wallet, client: ChainClient, judge_signer: VerdictSigner, events: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three transfers get n, n+1, n+2; the one with n is given back (never signed) while
    n+1 and n+2 wait for it. The wallet fills n with a 0-ETH transaction to itself; both
    waiting transfers are mined in order; the USDC and ETH moved are read back from the
    chain. On the code before this fix the transfer at n+1 was discarded above a gap."""
    start = chain.w3.eth.block_number
    usdc_before = usdc_of(chain, AGENT_ADDRESS), usdc_of(chain, SELLER_ADDRESS)
    eth_before = chain.w3.eth.get_balance(AGENT_ADDRESS)
    n = wallet.nonces.allocate()
    assert (wallet.nonces.allocate(), wallet.nonces.allocate()) == (n + 1, n + 2)
    second = sign(chain, wallet, judge_signer, "run-b", n + 1)
    third = sign(chain, wallet, judge_signer, "run-c", n + 2)
    seen = seen_waiting(wallet, monkeypatch, count=2)
    with ThreadPoolExecutor(2) as pool:
        sending = [pool.submit(wallet.send_transaction, s) for s in (second, third)]
        assert seen.wait(30), "the sends never looked below their nonces"
        assert chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending") == n  # both wait
        wallet.nonces.release(n)  # the first task's quote was refused: never signed
        results = [f.result(timeout=90) for f in sending]
    assert [r.status for r in results] == [1, 1]
    assert results[0].block_number <= results[1].block_number
    [filled] = events.named("wallet.nonce_filled")
    assert filled["for_run"] in ("run-b", "run-c")
    gas = [filler_of(chain, filled, n), sent_ok(chain, wallet, second), sent_ok(chain, wallet, third)]
    # Every number used once, none left open: the chain's count is past all three.
    assert chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "latest") == n + 3
    assert chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending") == n + 3
    assert wallet.nonces.snapshot()["in_flight"] == [] and wallet.nonces.allocate() == n + 3
    # Money: the seller got two transfers, the filler moved nothing but its gas.
    assert usdc_of(chain, AGENT_ADDRESS) == usdc_before[0] - 2 * DIME
    assert usdc_of(chain, SELLER_ADDRESS) == usdc_before[1] + 2 * DIME
    assert eth_before - chain.w3.eth.get_balance(AGENT_ADDRESS) == sum(gas)
    # The filler's gas is metered (to the task whose transfer needed it: no confined task
    # gave the number back); meter == ledger == chain for both runs.
    price = wallet.meter.eth_price_usdc
    usage = {run: wallet.meter.usage(run) for run in ("run-b", "run-c")}
    assert sum(u.gas_wei for u in usage.values()) == sum(gas)
    assert usage[filled["for_run"]].gas_usdc == gas_to_usdc(gas[0], price) + gas_to_usdc(
        gas[1 if filled["for_run"] == "run-b" else 2], price)
    for run in ("run-b", "run-c"):
        measured = wallet.meter.measured_spend(run, client, chain.usdc, AGENT_ADDRESS, start)
        assert usage[run].settled == measured.ledger == measured.onchain == DIME
        assert usage[run].reserved == usage[run].gas_held == 0


def test_a_number_a_sibling_task_of_the_same_worker_gave_back_is_filled(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, events: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker process acts for every task it ran, so a number it holds is held for all
    of them: the wallet used to fill a number given back only when the waiting transfer's
    task was not among them, and discarded the sibling task's transfer. The filler's gas
    is the sibling's (the other task the worker held the number for)."""
    before = usdc_of(chain, SELLER_ADDRESS)
    with bounded_by(("task-a", "task-b")):  # one worker, two tasks: as the wallet service
        n, above = wallet.nonces.allocate(), wallet.nonces.allocate()
    signed = sign(chain, wallet, judge_signer, "task-b", above)
    seen = seen_waiting(wallet, monkeypatch, count=1)
    with ThreadPoolExecutor(1) as pool:
        sending = pool.submit(wallet.send_transaction, signed)
        assert seen.wait(30), "the send never looked below its nonce"
        wallet.nonces.release(n)  # task-a's quote, refused by the judge
        assert sending.result(timeout=90).status == 1
    [filled] = events.named("wallet.nonce_filled")
    assert (filled["run_id"], filled["for_run"]) == ("task-a", "task-b")
    gas = filler_of(chain, filled, n)
    assert wallet.meter.usage("task-a").gas_wei == gas
    assert usdc_of(chain, SELLER_ADDRESS) == before + DIME
    assert chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending") == above + 1


def tight(chain: Any, wallet: Wallet, nonce: int) -> tuple[dict[str, Any], int]:
    """A transfer pinned to ``nonce`` and the most its gas can cost (atomic USDC)."""
    tx = {**transfer_tx(chain), "nonce": nonce}
    return tx, gas_to_usdc(int(tx["gas"]) * int(tx["maxFeePerGas"]), wallet.meter.eth_price_usdc)


def test_a_filler_whose_gas_does_not_fit_the_cap_is_not_sent_and_the_transfer_is_refused(
    chain: Any, wallet: Wallet, client: ChainClient, judge_signer: VerdictSigner, events: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The filler's most gas is held against the waiting transfer's cap before it is sent
    (its fee lowered to fit the room, down to the next base fee and a 1-wei tip): with no
    room for it (tried again for ORDER_WAIT_S, shortened here for time only),
    nothing is broadcast, the transfer is refused (spend failed, its share freed, its
    nonce given back) and the lower number stays free for the next one."""
    monkeypatch.setattr(broadcast, "ORDER_WAIT_S", 1.0)
    start, before = chain.w3.eth.block_number, usdc_of(chain, AGENT_ADDRESS)
    low, high = wallet.nonces.allocate(), wallet.nonces.allocate()
    tx, own = tight(chain, wallet, high)
    cap = DIME + own  # room for the transfer, none for a filler's gas
    signed = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id="run-tight",
                                     spend_cap_atomic=cap)
    wallet.nonces.release(low)
    with pytest.raises(SendFailed, match=f"nonce {high}, but .* is {low} and the wallet could not "
                       f"fill {low}: its gas .* does not fit run run-tight.s cap"):
        wallet.send_transaction(signed)
    assert events.named("wallet.nonce_filled") == []
    row = wallet.meter.ledger.get(signed.ledger_id)
    assert row.status == "failed" and "above a gap" in row.note and "does not fit" in row.note
    usage = wallet.meter.usage("run-tight")
    assert (usage.reserved, usage.gas_held, usage.gas_wei, usage.settled) == (0, 0, 0, 0)
    assert chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending") == low  # nothing sent
    assert usdc_of(chain, AGENT_ADDRESS) == before
    measured = wallet.meter.measured_spend("run-tight", client, chain.usdc, AGENT_ADDRESS, start)
    assert measured.ledger == measured.onchain == 0
    assert wallet.nonces.allocate() == low


def test_a_fill_without_room_is_tried_again_and_sent_once_room_comes_back(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, events: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No room under the cap for the filler's gas at first (another transfer of the run
    holds it); once that transfer is given up, the fill tried again goes out and the
    waiting transfer is mined, within the cap."""
    before = usdc_of(chain, SELLER_ADDRESS)
    low, high, other = (wallet.nonces.allocate() for _ in range(3))
    tx, own = tight(chain, wallet, high)
    tx2 = {**tx, "nonce": other}
    cap = 2 * (DIME + own)  # two transfers fit, a filler's gas does not
    signed = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id="run-room",
                                     spend_cap_atomic=cap)
    second = wallet.sign_transaction(tx2, approve(judge_signer, tx2), run_id="run-room",
                                     spend_cap_atomic=cap)
    refused, real = threading.Event(), broadcast.fill_lowest

    def watched(*args: Any, **kw: Any) -> bool:
        try:
            return real(*args, **kw)
        except Exception:
            refused.set()
            raise

    monkeypatch.setattr(broadcast, "fill_lowest", watched)
    wallet.nonces.release(low)
    with ThreadPoolExecutor(1) as pool:
        sending = pool.submit(wallet.send_transaction, signed)
        assert refused.wait(30), "the fill never ran out of room"
        wallet.discard(second, "given up")  # its share of the cap (and its nonce) back
        assert sending.result(timeout=90).status == 1
    [filled] = events.named("wallet.nonce_filled")
    filler_of(chain, filled, low)
    assert usdc_of(chain, SELLER_ADDRESS) == before + DIME
    usage = wallet.meter.usage("run-room")
    assert usage.committed <= cap and (usage.reserved, usage.gas_held) == (0, 0)
    assert wallet.meter.ledger.get(second.ledger_id).status == "failed"


def test_a_transfer_above_a_number_its_holder_keeps_unsent_is_refused_after_the_wait(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, events: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lower number still held (not given back) by this process after the wait is not
    taken from its holder: the transfer is refused, nothing broadcast, its spend failed.
    (ORDER_WAIT_S is shortened for time only.)"""
    monkeypatch.setattr(broadcast, "ORDER_WAIT_S", 0.5)
    before = usdc_of(chain, AGENT_ADDRESS)
    low, high = wallet.nonces.allocate(), wallet.nonces.allocate()
    signed = sign(chain, wallet, judge_signer, "run-held", high)
    with pytest.raises(SendFailed, match=f"nonce {high}, but .* is {low} and {low} were handed out"):
        wallet.send_transaction(signed)
    assert events.named("wallet.nonce_filled") == []
    assert wallet.meter.ledger.get(signed.ledger_id).status == "failed"
    assert wallet.meter.usage("run-held").committed == 0
    assert chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending") == low
    assert usdc_of(chain, AGENT_ADDRESS) == before
    assert wallet.nonces.snapshot()["in_flight"] == [low]  # still its holder's
