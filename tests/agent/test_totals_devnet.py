"""A total sent or received (issue 23): "How much USDC has 0x.. sent (to 0x..) in total?",
"... received altogether?". The outside writer's T9, R25, N9 and N10 were answered with
balances at exit 0, then declined. Through the real nib command on its own devnet: the
answer is the exact atomic sum of the token's Transfer logs over the block range it
states, read here from the chain apart from nib (raw eth_getLogs), and differs from the
balance (money went both ways)."""

from __future__ import annotations

import re

import pytest
from web3 import Web3

from chain.client import ChainClient
from chain.devkeys import AGENT, OUTSIDER, SELLER, dev_account
from chain.money import format_usdc
from chain.usdc import transfer
from tests.agent._nib_devnet import own_devnet, run_json

WALLET = dev_account(AGENT).address
OUT = dev_account(OUTSIDER).address
PAYTO = dev_account(SELLER).address
_TRANSFER = "0x" + Web3.keccak(text="Transfer(address,address,uint256)").hex().removeprefix("0x")


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    yield from own_devnet(tmp_path_factory, "totals-home")


def _word(address: str) -> str:
    return "0x" + address.lower().removeprefix("0x").rjust(64, "0")


def _sum(w3: Web3, usdc: str, last: int, sender: str | None, recipient: str | None) -> int:
    """Atomic USDC moved from ``sender`` to ``recipient`` (None: anyone) in blocks 0..last."""
    topics = [_TRANSFER, _word(sender) if sender else None, _word(recipient) if recipient else None]
    logs = w3.eth.get_logs({"address": Web3.to_checksum_address(usdc), "fromBlock": 0,
                            "toBlock": last, "topics": topics})  # type: ignore[typeddict-item]
    return sum(int(bytes(log["data"]).hex() or "0", 16) for log in logs)


def _range_stated(answer: str) -> int:
    """The last block of the range the answer states ("blocks 0..H")."""
    m = re.search(r"blocks 0\.\.(\d+)", answer)
    assert m, answer
    return int(m.group(1))


def test_totals_sent_and_received_are_the_transfer_logs_summed_over_the_stated_range(devnet) -> None:  # type: ignore[no-untyped-def]
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    usdc, w3 = info["usdc"], chain.w3
    assert info["wallet"] == WALLET
    # Money both ways: the wallet pays two addresses, one of them pays some back.
    transfer(w3, usdc, dev_account(AGENT), OUT, 300_000)
    transfer(w3, usdc, dev_account(AGENT), PAYTO, 50_000)
    transfer(w3, usdc, dev_account(OUTSIDER), WALLET, 100_000)

    asked = {
        f"How much USDC has {WALLET} sent in total?": (WALLET, None),  # T9
        f"How much USDC has {WALLET} sent to {OUT} in total?": (WALLET, OUT),  # R25
        f"What is the total amount of USDC that {WALLET} has transferred out so far?": (WALLET, None),  # N9
        "How much USDC have I spent altogether?": (WALLET, None),
    }
    for task, (sender, recipient) in asked.items():
        result = run_json(home, task)
        assert result["returncode"] == 0 and result["finished"], result["answer"]
        last = _range_stated(result["answer"])
        atomic = _sum(w3, usdc, last, sender, recipient)
        assert f": {format_usdc(atomic)} ({atomic} atomic) sent by {sender}" in result["answer"], result["answer"]
        assert result["spend"]["usdc_atomic"] == 0

    received = run_json(home, f"How much USDC has {WALLET} received altogether?")  # N10
    assert received["returncode"] == 0 and received["finished"], received["answer"]
    last = _range_stated(received["answer"])
    atomic = _sum(w3, usdc, last, None, WALLET)
    assert f": {format_usdc(atomic)} ({atomic} atomic) received by {WALLET}" in received["answer"]
    # The total is no balance: money left and came back, so the two differ.
    balance = chain.token_balance(usdc, WALLET)
    assert atomic != balance and format_usdc(balance) not in received["answer"], received["answer"]

    back = run_json(home, f"How much USDC did {WALLET} receive from {OUT}?")
    assert back["returncode"] == 0, back["answer"]
    assert "0.10 USDC (100000 atomic) received by" in back["answer"], back["answer"]
    assert f"from {OUT} in 1 transfer" in back["answer"], back["answer"]


def test_a_plain_question_never_buys_what_a_free_read_answers(devnet) -> None:  # type: ignore[no-untyped-def]
    """The outside writer's R6, "Who issues USDC?", bought the token fact sheet (0.02 USDC)
    though the task asked to buy nothing: the chain says who controls the run's USDC (its
    contract's owner()). Nothing leaves the wallet; asking for the sheet still buys it."""
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    usdc = info["usdc"]
    owner = Web3.to_checksum_address(bytes(chain.w3.eth.call({"to": usdc, "data": "0x8da5cb5b"}))[-20:])
    before = chain.token_balance(usdc, WALLET)
    plain = run_json(home, "Who issues USDC?")
    assert plain["returncode"] == 0 and plain["finished"], plain["answer"]
    assert plain["spend"]["usdc_atomic"] == 0 and chain.token_balance(usdc, WALLET) == before
    assert f"issuer (owner) of USDC on this chain: {owner}" in plain["answer"], plain["answer"]

    asked = run_json(home, "Who issues USDC? Buy the token fact sheet.")
    assert asked["returncode"] == 0 and "Circle" in asked["answer"], asked["answer"]
    assert before - chain.token_balance(usdc, WALLET) == asked["spend"]["usdc_atomic"] > 0
