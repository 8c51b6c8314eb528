"""Ordered payments on a condition the chain can check (issue 23): "if 0x.. holds more than
N USDC, send M USDC to 0x..". Through the real nib command on its own devnet: the offline
planner reads the balance from the chain, the judge reads it again itself (the mandate
records the condition), the payment settles only when the condition holds, and the answer
states the balance it observed. Balances are read back from the chain."""

from __future__ import annotations

import pytest

from chain.client import ChainClient
from tests.agent._nib_devnet import own_devnet, run_json, settled_rows

HOLDER, PAID, NOT_PAID, ETH_PAID, MINE_PAID = ("0x" + c * 40 for c in "45678")


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    yield from own_devnet(tmp_path_factory, "cond-home")


def test_a_payment_ordered_on_an_address_balance_settles_only_when_the_balance_holds(devnet) -> None:  # type: ignore[no-untyped-def]
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    usdc = info["usdc"]
    funded = run_json(home, f"Send 0.2 USDC to {HOLDER}.")
    assert funded["returncode"] == 0, funded["answer"]
    assert chain.token_balance(usdc, HOLDER) == 200_000

    held = run_json(home, f"If {HOLDER} holds more than 0.15 USDC, send 0.02 USDC to {PAID}.")
    assert held["returncode"] == 0 and held["finished"], held["answer"]
    assert chain.token_balance(usdc, PAID) == 20_000
    assert settled_rows(home, held["run_id"]) == [(20_000, "settled")]
    # The answer states the balance it read, and the condition it proved with it.
    assert f"USDC balance of {HOLDER}: 0.20 USDC" in held["answer"], held["answer"]
    assert "c1 0.20 > 0.15 = true" in held["answer"], held["answer"]

    unmet = run_json(home, f"Send 0.02 USDC to {NOT_PAID} if the USDC balance of {HOLDER} is above 1 USDC.")
    assert unmet["returncode"] == 0 and unmet["finished"], unmet["answer"]
    assert chain.token_balance(usdc, NOT_PAID) == 0
    assert settled_rows(home, unmet["run_id"]) == []
    assert f"USDC balance of {HOLDER}: 0.20 USDC" in unmet["answer"], unmet["answer"]
    assert "not done: condition" in unmet["answer"] and "is false" in unmet["answer"], unmet["answer"]

    wallet = info["wallet"]
    eth = run_json(home, f"If {wallet} has at least 1 ETH, send 0.02 USDC to {ETH_PAID}.")
    assert eth["returncode"] == 0 and eth["finished"], eth["answer"]
    assert chain.token_balance(usdc, ETH_PAID) == 20_000
    assert f"ETH balance of {wallet}:" in eth["answer"], eth["answer"]

    # "my balance": the agent's own wallet; the planner and the judge both read it.
    mine = run_json(home, f"If my USDC balance is above 5 USDC, send 0.02 USDC to {MINE_PAID}.")
    assert mine["returncode"] == 0 and mine["finished"], mine["answer"]
    assert chain.token_balance(usdc, MINE_PAID) == 20_000
    assert "USDC balance of the agent's wallet:" in mine["answer"], mine["answer"]
