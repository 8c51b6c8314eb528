"""The outside testers' rounds 36 to 44 on a devnet of their own: each question as a user
asks it (`nib run`), each answer read back from the chain. Split from
tests/agent/test_orders_devnet.py so the two files run on two workers (`--dist loadfile`)."""

from __future__ import annotations

import pytest

from agent.tools.chain_reads import format_eth, format_gwei
from chain.client import ChainClient
from chain.money import format_usdc
from tests.agent._nib_devnet import own_devnet, run_json


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    yield from own_devnet(tmp_path_factory, "rounds-home")


def _moved(devnet, *moves: tuple[str, str, int]):  # type: ignore[no-untyped-def]
    """Each move (from, to, atomic USDC) between the devnet's named dev accounts ("agent",
    "outsider", "seller"), sent in order: (home, web3, accounts by name, the transactions,
    the first block, "between block F and block L")."""
    from web3 import Web3

    from chain.devkeys import AGENT, OUTSIDER, SELLER, dev_account
    from chain.usdc import transfer

    home, info = devnet
    w3 = Web3(Web3.HTTPProvider(info["rpc_url"]))
    named = {"agent": dev_account(AGENT), "outsider": dev_account(OUTSIDER), "seller": dev_account(SELLER)}
    first = w3.eth.block_number + 1
    txs = [transfer(w3, info["usdc"], named[a], named[b].address, amount) for a, b, amount in moves]
    return home, w3, named, txs, first, f"between block {first} and block {w3.eth.block_number}"


def test_the_outside_testers_round_36_the_largest_of_them_keeps_the_way_and_a_fee_in_gwei(devnet) -> None:  # type: ignore[no-untyped-def]
    """Round 36: "which of them was the largest" and "what was the largest of them" after
    the transfers sent from 0xA gave 0xA's largest either way (a mint it received), at exit
    0 (T7, B2, B4); "received by 0xA" was declined (T4, T10), as were a fee asked in gwei
    (F2) and "what did 0x<hash> cost" (F9)."""
    from decimal import Decimal

    home, w3, named, (came, went), first, span = _moved(
        devnet, ("agent", "outsider", 3_000_000), ("outsider", "seller", 250_000))
    agent, outsider, seller = named["agent"], named["outsider"], named["seller"]
    sent_line = f": 0.25 USDC from {outsider.address} to {seller.address}"
    for question in (
        f"What were the USDC transfers sent from {outsider.address} {span}, and which of them "
        "was the largest?",
        f"List the USDC transfers from {outsider.address} {span}. Which of them was the largest?",
        f"How many USDC transfers were sent from {outsider.address} {span}, and what was the "
        "largest of them?",
    ):
        out = run_json(home, question)
        assert out["returncode"] == 0, (question, out["answer"])
        assert f"largest USDC transfer from {outsider.address}" in out["answer"], out["answer"]
        assert sent_line in out["answer"] and "3.00 USDC" not in out["answer"], out["answer"]
    received = run_json(home, f"How many USDC transfers were received by {outsider.address} {span}, "
                              f"and what is the largest USDC transfer received by {outsider.address} {span}?")  # fmt: skip
    assert received["returncode"] == 0, received["answer"]
    assert f"USDC transfer count to {outsider.address} {span.replace('between block', 'in blocks').replace(' and block', ' to')}: 1" in received["answer"], received["answer"]
    assert f": 3.00 USDC from {agent.address} to {outsider.address}" in received["answer"], received["answer"]
    assert came in received["answer"] and went not in received["answer"], received["answer"]
    # T12: "..., and how many did it receive, since block N?" declined both the count and
    # the trailing window.
    both = run_json(home, f"How many USDC transfers did {outsider.address} send, and how many "
                          f"did it receive, since block {first}?")  # fmt: skip
    assert both["returncode"] == 0, both["answer"]
    for way in ("from", "to"):
        assert f"USDC transfer count {way} {outsider.address} in blocks {first} to" in both["answer"], both["answer"]
    assert both["answer"].count(": 1 (observed") == 2, both["answer"]
    receipt = w3.eth.get_transaction_receipt(went)
    fee_wei = int(receipt["gasUsed"]) * int(receipt["effectiveGasPrice"])
    in_gwei = run_json(home, f"What was the transaction fee of {went} in gwei?")
    assert in_gwei["returncode"] == 0, in_gwei["answer"]
    assert f"{Decimal(fee_wei).scaleb(-9).normalize():f} gwei" in in_gwei["answer"], in_gwei["answer"]
    cost = run_json(home, f"what did {went} cost")
    assert cost["returncode"] == 0, cost["answer"]
    assert f"transaction fee of {went}: {format_eth(fee_wei)} (" in cost["answer"], cost["answer"]


def test_the_outside_testers_round_37_transfers_of_several_ways_are_each_listed(devnet) -> None:  # type: ignore[no-untyped-def]
    """Round 37: "the transfers to 0xA and to 0xC" listed those from 0xC to 0xA (S5); "from
    0xA to 0xB and from 0xB to 0xA" dropped the second list (T12), and "... and the USDC
    transfers from 0xB to 0xA" gave it as a count (S1), each at exit 0."""
    home, _w3, named, (there, back, other), _first, span = _moved(
        devnet, ("agent", "outsider", 1_250_000), ("outsider", "agent", 400_000),
        ("agent", "seller", 700_000))
    agent, outsider, seller = named["agent"], named["outsider"], named["seller"]
    for question, want in (
        (f"Show me the USDC transfers to {outsider.address} and to {seller.address} {span}.",
         {there, other}),
        (f"List the USDC transfers from {agent.address} to {outsider.address} and from "
         f"{outsider.address} to {agent.address} {span}.", {there, back}),
        (f"Show me the USDC transfers from {agent.address} to {outsider.address} and the USDC "
         f"transfers from {outsider.address} to {agent.address} {span}.", {there, back}),
    ):
        out = run_json(home, question)
        assert out["returncode"] == 0, (question, out["answer"])
        assert {tx for tx in (there, back, other) if tx in out["answer"]} == want, (question, out["answer"])
        assert "transfer count" not in out["answer"], out["answer"]


def test_the_outside_testers_round_38_a_window_stays_with_its_fact_and_one_address_each_way(devnet) -> None:  # type: ignore[no-untyped-def]
    """Round 38: "What were the transfers from 0xA ... in the last 20 blocks, and how many
    transfers did 0xB send to 0xA?" counted 0xB's over 0xA's window, at exit 0 (Q64): it is
    named as unclear. "And how many did it receive?" (Q06), "has 0xC received" (Q27) and
    "the incoming transfers of 0xB" (Q24) were declined: each is read, one way."""
    home, _w3, named, (came, went), _first, span = _moved(
        devnet, ("agent", "outsider", 1_500_000), ("outsider", "agent", 200_000))
    agent, outsider = named["agent"], named["outsider"]
    unclear = run_json(home, f"What were the USDC transfers from {agent.address} to {outsider.address} "
                             f"{span}, and how many transfers did {outsider.address} send?")  # fmt: skip
    assert unclear["returncode"] == 1 and came in unclear["answer"], unclear["answer"]
    assert "is said in another part of the task" in unclear["answer"], unclear["answer"]
    both = run_json(home, f"How many USDC transfers did {outsider.address} send {span}? And how many "
                          "did it receive?")  # fmt: skip
    assert both["returncode"] == 0, both["answer"]
    assert f"USDC transfer count to {outsider.address}" in both["answer"], both["answer"]
    incoming = run_json(home, f"Show me the incoming transfers of {outsider.address} {span}.")
    assert incoming["returncode"] == 0, incoming["answer"]
    assert came in incoming["answer"] and went not in incoming["answer"], incoming["answer"]


def test_the_outside_testers_round_39_a_fact_of_a_block_and_of_the_latest_block(devnet) -> None:  # type: ignore[no-untyped-def]
    """Round 39 (E8, B1-B4): "What is the gas limit of block N and of the latest block?"
    answered the head's block number in place of its gas limit, at exit 0."""
    from web3 import Web3

    home, info = devnet
    w3 = Web3(Web3.HTTPProvider(info["rpc_url"]))
    out = run_json(home, "What is the gas limit of block 1 and of the latest block?")
    assert out["returncode"] == 0, out["answer"]
    head = w3.eth.get_block("latest")
    assert f"block gas limit at block 1: {int(w3.eth.get_block(1)['gasLimit'])} gas" in out["answer"], out["answer"]
    at_head = f"block gas limit: {int(head['gasLimit'])} gas at block {int(head['number'])}, the latest"
    assert at_head in out["answer"] and "block number" not in out["answer"], out["answer"]
    # Round 41 (M2): "..., and what is it at the latest block?" the same way.
    again = run_json(home, "What was the gas limit of block 1 and what is it at the latest block?")
    assert again["returncode"] == 0 and at_head in again["answer"], again["answer"]


def test_the_outside_testers_round_40_show_me_them_and_what_they_are_now(devnet) -> None:  # type: ignore[no-untyped-def]
    """Round 40: "... how many did it receive? Show me them." dropped the list (T23), and
    "..., and how many are in the latest block?" answered the head's number (B19), each at
    exit 0; "what are they now" was declined (B18)."""
    home, w3, named, (came, went), first, span = _moved(
        devnet, ("agent", "outsider", 650_000), ("outsider", "agent", 150_000))
    outsider = named["outsider"]
    shown = run_json(home, f"How many USDC transfers did {outsider.address} send {span}, and how many "
                           "did it receive? Show me them.")  # fmt: skip
    assert shown["returncode"] == 0 and came in shown["answer"] and went in shown["answer"], shown["answer"]
    head = w3.eth.get_block("latest")
    again = run_json(home, f"How many transactions were in block {first}, and how many are in the latest block?")
    assert again["returncode"] == 0 and "block number" not in again["answer"], again["answer"]
    assert f"block transaction count: {len(head['transactions'])} at block {int(head['number'])}" in again["answer"], again["answer"]
    now = run_json(home, f"What were the timestamp and base fee of block {first}, and what are they now?")
    assert now["returncode"] == 0, now["answer"]
    assert f"block timestamp: {int(head['timestamp'])}" in now["answer"], now["answer"]
    assert f"base fee: {format_gwei(int(head['baseFeePerGas']))} gwei at block {int(head['number'])}" in now["answer"], now["answer"]


def test_the_outside_testers_round_42_it_after_a_transactions_block_is_that_block(devnet) -> None:  # type: ignore[no-untyped-def]
    """Round 42 (R19, S1, S11): after "Which block was 0x<hash> mined in?", "How many
    transactions are in it?" and "the gas limit of that block, and ... of block N" were read
    at the head or at block N, at exit 0."""
    home, w3, _named, (tx,), _first, _span = _moved(devnet, ("agent", "outsider", 100_000))
    w3.provider.make_request("evm_mine", [])  # the head moves past the transaction's block
    mined = w3.eth.get_block(w3.eth.get_transaction_receipt(tx)["blockNumber"])
    count = run_json(home, f"Which block was {tx} mined in? How full was it? How many transactions "
                           "are in it?")  # fmt: skip (round 43: the third sentence's "it" too)
    assert count["returncode"] == 0, count["answer"]
    assert f"was mined in: {len(mined['transactions'])}" in count["answer"], count["answer"]
    assert "the latest" not in count["answer"], count["answer"]
    limit = run_json(home, f"Which block was {tx} mined in? What was the gas limit of that block, and "
                           "what is the gas limit of block 1?")  # fmt: skip
    assert limit["returncode"] == 0, limit["answer"]
    assert f"was mined in: {int(mined['gasLimit'])} gas" in limit["answer"], limit["answer"]
    assert f"block gas limit at block 1: {int(w3.eth.get_block(1)['gasLimit'])} gas" in limit["answer"], limit["answer"]


def _answers(home, question: str, *lines: str, absent: tuple[str, ...] = ()) -> str:  # type: ignore[no-untyped-def]
    """``question``'s answer, checked: exit 0, every one of ``lines`` in it, none of ``absent``."""
    out = run_json(home, question)
    answer = str(out["answer"])
    assert out["returncode"] == 0, (question, answer)
    assert all(line in answer for line in lines) and not any(a in answer for a in absent), (lines, answer)
    return answer


def test_the_outside_testers_round_44_every_short_question_and_listed_holder_is_read(devnet) -> None:  # type: ignore[no-untyped-def]
    """Round 44 (B6): "How much USDC has 0xA received in total, and how much has it sent?"
    gave the first total alone at exit 0; "Which has more? By how much?" was declined (R3,
    B1). Found beside it: "Did 0xA send any USDC?" was declined, and "the transfers 0xA and
    0xB sent" was read as each one's transfers either way. Rounds 45 and 47 and a sweep of
    follow-ups after them: the lines below each name theirs."""
    from web3 import Web3

    home, w3, named, txs, first, span = _moved(
        devnet, ("agent", "outsider", 2_000_000), ("outsider", "seller", 500_000),
        ("seller", "agent", 250_000))
    agent, outsider, seller = (named[n].address for n in ("agent", "outsider", "seller"))
    usdc = devnet[1]["usdc"]
    topic = Web3.keccak(text="Transfer(address,address,uint256)")

    def total(way: int) -> int:  # every Transfer log to (way 2) or from (way 1) the outsider
        topics: list[object] = [topic, None, None]
        topics[way] = "0x" + outsider[2:].lower().rjust(64, "0")
        logs = w3.eth.get_logs({"address": usdc, "fromBlock": 0, "toBlock": "latest", "topics": topics})
        return sum(int(log["data"].hex(), 16) for log in logs)

    _answers(home, f"How much USDC has {outsider} received in total, and how much has it sent?",
             f"total USDC received by {outsider} since block 0: {format_usdc(total(2))}",
             f"total USDC sent by {outsider} since block 0: {format_usdc(total(1))}")
    _answers(home, f"List the USDC transfers {agent} and {seller} sent {span}",
             f": 2.00 USDC from {agent} to {outsider}", f": 0.25 USDC from {seller} to {agent}",
             absent=(f"0.50 USDC from {outsider} to {seller}",))
    chain = ChainClient(devnet[1]["rpc_url"], w3.eth.chain_id)
    held = {a: chain.token_balance(usdc, a) for a in (agent, outsider, seller)}
    _answers(home, f"How much USDC do {agent} and {outsider} hold? Which has more? By how much?",
             format_usdc(abs(held[agent] - held[outsider])).split()[0])
    # Round 47 (C29): "How much does it hold?" after the least of three is the winner's value.
    least = min(held, key=lambda a: held[a])
    _answers(home, f"Which of {agent}, {outsider} and {seller} has the least USDC? How much does it "
                   "hold in cents?", f"which holds the least (USDC balance): {least} ({held[least] // 10_000} cents")
    # Round 45 (B2): a yes or no at each block ("the outsider sent in the second block only").
    _answers(home, f"Did {outsider} send USDC in block {first} and in block {first + 1}?",
             f"at block {first} > 0: no", f"at block {first + 1} > 0: yes")
    # A sweep of follow-ups: "it" after a transaction fact is its block (was the head's).
    receipt = w3.eth.get_transaction_receipt(txs[0])
    w3.provider.make_request("evm_mine", [])  # the head moves past the transaction's block
    count = len(w3.eth.get_block(receipt["blockNumber"])["transactions"])
    _answers(home, f"What was the fee of {txs[0]}? How many transactions were in it?",
             f"transaction fee of {txs[0]}: {format_eth(int(receipt['gasUsed']) * int(receipt['effectiveGasPrice']))}",
             f"was mined in: {count} (observed", absent=("the latest",))
