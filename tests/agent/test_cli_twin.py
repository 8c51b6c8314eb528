"""A Base Sepolia twin on Anvil, driven as a user drives the real testnet: chain id 84532,
Circle's FiatTokenV2_2 at Base Sepolia's USDC address, and nib with
``NIB_NETWORK=base-sepolia NIB_RPC_URL=<the twin>``: a fresh wallet (dev keys are refused
off the devnet), the judge and wallet as services, the agent confined, the paywall reached
by its URL and its payTo allowlisted. Balances are read back from the chain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chain.client import ChainClient
from chain.networks import NETWORKS
from chain.usdc import token_domain

NIB = [sys.executable, "-m", "agent.cli"]
SECRETS = {"NIB_WALLET_PASSWORD": "twin-wallet-pass", "NIB_JUDGE_PASSWORD": "twin-judge-pass"}


def nib(home: Path, *args: str, env: dict[str, str] | None = None,
        secrets: bool = False) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("NIB_")}
    full.update({"NIB_HOME": str(home), **(SECRETS if secrets else {}), **(env or {})})
    return subprocess.run(NIB + list(args), env=full, capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    home = tmp_path_factory.mktemp("twin-home")
    made = nib(home, "wallet", "new", "--json", secrets=True)
    assert made.returncode == 0, made.stderr
    up = nib(home, "devnet", "up", "--twin", "base-sepolia", "--json", secrets=True)
    assert up.returncode == 0, up.stderr
    info = json.loads(up.stdout)
    try:
        yield home, info
    finally:
        nib(home, "services", "down")
        nib(home, "devnet", "down")


def test_the_twin_is_base_sepolia_with_circles_token_at_its_address(twin: Any) -> None:
    home, info = twin
    sepolia = NETWORKS["base-sepolia"]
    chain = ChainClient(info["rpc_url"], sepolia.chain_id)  # raises WrongChain otherwise
    assert info["usdc"] == sepolia.usdc == "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
    assert (info["chain_id"], info["token"], info["twin"]) == (84532, "circle", "base-sepolia")
    assert token_domain(chain.w3, info["usdc"], expected=sepolia.domain) == ("USDC", "2")
    wallet = json.loads(nib(home, "wallet", "address", "--json").stdout)["address"]
    assert chain.token_balance(info["usdc"], wallet) == 100_000_000  # the user's own wallet


def test_nib_runs_on_the_twin_exactly_as_on_base_sepolia(twin: Any) -> None:
    home, info = twin
    env = {"NIB_NETWORK": "base-sepolia", "NIB_RPC_URL": info["rpc_url"]}
    started = nib(home, "services", "up", "--json", env=env, secrets=True)
    assert started.returncode == 0, started.stderr
    chain = ChainClient(info["rpc_url"], 84532)
    wallet = json.loads(nib(home, "wallet", "address", "--json").stdout)["address"]
    before = chain.token_balance(info["usdc"], wallet), chain.token_balance(info["usdc"], info["seller"])
    run_env = {**env, "NIB_PAYWALL_URL": info["paywall_url"], "NIB_SELLER_ALLOWLIST": info["seller"]}
    r = nib(home, "run", "--demo", env=run_env)  # no secrets in the agent's environment
    assert r.returncode == 0, r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith("services: judge service") and "agent process confined" in first, first
    assert "nib base-sepolia (chain 84532)" in r.stderr, r.stderr
    assert "Circle" in r.stdout, r.stdout  # the bought sheet's issuer, answered or cited
    [run] = json.loads(nib(home, "runs", "--json", env=env).stdout)
    audit = json.loads(nib(home, "audit", "--run", run["run_id"], "--json", env=env).stdout)
    assert [(row["amount"], row["status"]) for row in audit] == [(20_000, "settled")]
    assert chain.token_balance(info["usdc"], wallet) == before[0] - 20_000
    assert chain.token_balance(info["usdc"], info["seller"]) == before[1] + 20_000
    rec = nib(home, "audit", "reconcile", "--json", env=env)
    assert rec.returncode == 0, rec.stderr + rec.stdout
    data = json.loads(rec.stdout)
    assert len(data["matched"]) == 1 and data["unmatched_ledger"] == data["unmatched_onchain"] == []
