"""A request to buy (issue 23) through the real nib command on its own devnet and market:
the cheapest offer discovery finds is bought once, balances read back from the chain, the
ledger reconciles, and the answer says what was bought and what it contains."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chain.client import ChainClient
from chain.paywall.market import seller_named

NIB = [sys.executable, "-m", "agent.cli"]
TASK = "Buy the cheapest fact sheet about USDC and tell me what it contains."


def nib(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NIB_HOME": str(home), "NIB_WALLET_PASSWORD": "nib-devnet"}
    env.pop("NIB_CONFIG", None)
    return subprocess.run(NIB + list(args), env=env, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    home = tmp_path_factory.mktemp("shop-home")
    up = nib(home, "devnet", "up", "--json")
    assert up.returncode == 0, up.stderr
    yield home, json.loads(up.stdout)
    nib(home, "devnet", "down")


def _bought(home: Path, info: dict[str, Any], chain: ChainClient) -> tuple[dict[str, Any], list[Any]]:
    """One run of TASK: its JSON result and the USDC transfers out of the wallet it made."""
    first = chain.block_number() + 1
    out = nib(home, "run", TASK, "--json")
    result = json.loads(out.stdout)
    result["returncode"] = out.returncode
    logs = chain.transfer_logs(info["usdc"], first, "latest", info["wallet"])
    return result, [log for log in logs if log.sender.lower() == info["wallet"].lower()]


def test_the_cheapest_offer_is_bought_once_and_the_answer_says_what_it_contains(devnet) -> None:  # type: ignore[no-untyped-def]
    home, info = devnet
    chain = ChainClient(info["rpc_url"], 31337)
    market = {s["name"]: s["url"] for s in info["market"]}
    bargain, atlas = seller_named("bargain"), seller_named("atlas")

    # Fresh market: the cheapest offer is bargain's 0.005 USDC sheet, which declares a full
    # sheet and delivers none of it. It is bought once and named; no second seller is paid.
    first, paid = _bought(home, info, chain)
    assert first["returncode"] == 1 and not first["finished"], first["answer"]
    assert [(log.recipient.lower(), log.value) for log in paid] == [(bargain.pay_to.lower(), 5_000)]
    assert f"paid 0.005 USDC for /tokens from {market['bargain']}" in first["answer"]
    assert "a request to buy buys once" in first["answer"]

    # Now the judge will not pay bargain (it took payment without delivering): the cheapest
    # offer it approves, atlas at 0.01 USDC, is bought once and its contents reported.
    before = chain.token_balance(info["usdc"], atlas.pay_to)
    second, paid = _bought(home, info, chain)
    assert second["returncode"] == 0 and second["finished"], second["answer"]
    assert [(log.recipient.lower(), log.value) for log in paid] == [(atlas.pay_to.lower(), 10_000)]
    assert chain.token_balance(info["usdc"], atlas.pay_to) - before == 10_000
    answer = second["answer"]
    assert (f"the cheapest token fact sheet of USDC on offer: bought from {market['atlas']}"
            "/tokens?symbol=USDC for 0.01 USDC, the cheapest the judge approved of ") in answer
    assert "(the cheapest listed, 0.005 USDC, was not approved)" in answer
    assert "it contains name USD Coin; issuer Circle; launched 2018; decimals 6" in answer
    assert second["provenance"] == "observed"

    for run, amount in ((first, 5_000), (second, 10_000)):
        rows = json.loads(nib(home, "audit", "--run", run["run_id"], "--json").stdout)
        assert [(r["amount"], r["status"]) for r in rows] == [(amount, "settled")], rows
    rec = nib(home, "audit", "reconcile", "--json")
    assert rec.returncode == 0, rec.stderr
    data = json.loads(rec.stdout)
    assert data["unmatched_onchain"] == [] and data["unmatched_ledger"] == [], data
