"""The nib command on a devnet running Circle's USDC (``nib devnet up --token circle``):
the paywall demo with reconcile and an escalated payment
granted at the judge, collected from test_cli.py and run against Circle's FiatTokenV2_2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import (  # noqa: F401 - collected here on Circle's token
    nib,
    test_a_human_grants_an_escalated_payment_at_the_judge_and_only_then_it_is_paid,
    test_run_demo_pays_once_and_reconciles,
)

from chain.client import ChainClient
from chain.fiattoken import fiat_token_abi


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    h = tmp_path_factory.mktemp("cli-circle-home")
    up = nib(h, "devnet", "up", "--token", "circle", "--json")
    assert up.returncode == 0, up.stderr
    yield h
    nib(h, "devnet", "down")


def test_devnet_up_token_circle_runs_circles_token_and_keeps_it(home: Path) -> None:
    info = json.loads(nib(home, "devnet", "up", "--json").stdout)  # no --token: keeps circle
    assert (info["token"], info["chain_id"]) == ("circle", 31337)
    w3 = ChainClient(info["rpc_url"], 31337).w3
    token = w3.eth.contract(address=info["usdc"], abi=fiat_token_abi())
    deployer = token.functions.masterMinter().call()
    assert token.functions.isMinter(deployer).call()
    assert token.functions.balanceOf(info["wallet"]).call() >= 50_000_000
    other = nib(home, "devnet", "up", "--token", "test")
    assert other.returncode != 0
    assert "runs token circle, asked for test" in other.stderr and "NIB_HOME" in other.stderr
