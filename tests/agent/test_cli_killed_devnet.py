"""A devnet whose Anvil is killed with a payment after its last state dump, driven as a user
drives it: `nib devnet up` (judge and wallet as services), a paid `nib run --demo`, kill -9
of Anvil, `nib devnet up` again. The chain comes back from its last dump on the same RPC
URL, the services keep working on it, and `nib audit reconcile` (through the wallet
service's cancel path) finds the lost row and closes it at once: no stored signature
stays usable. Balances are read back from the chain."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from chain.client import ChainClient

NIB = [sys.executable, "-m", "agent.cli"]


def nib(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NIB_HOME": str(home), "NIB_WALLET_PASSWORD": "nib-devnet"}
    env.pop("NIB_CONFIG", None)
    return subprocess.run(NIB + list(args), env=env, capture_output=True, text=True, timeout=240)


def _run_demo(home: Path) -> dict[str, object]:
    r = nib(home, "run", "--demo", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["finished"], result
    return dict(result)


def test_a_killed_devnet_comes_back_and_reconcile_closes_what_it_lost(tmp_path: Path) -> None:
    home = tmp_path / "home"
    up = nib(home, "devnet", "up", "--json")
    assert up.returncode == 0, up.stderr
    info = json.loads(up.stdout)
    try:
        chain = ChainClient(info["rpc_url"], info["chain_id"])
        wallet, usdc = info["wallet"], info["usdc"]
        state = home / "devnet" / "anvil-state.json"
        deadline = time.monotonic() + 30
        while not state.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2)  # a dump of the funded devnet, before any payment
        kept = shutil.copy(state, tmp_path / "dump.json")
        before = chain.token_balance(usdc, wallet)

        lost_run = _run_demo(home)  # settled on the chain, not in the kept dump
        assert chain.token_balance(usdc, wallet) < before
        os.kill(int(info["pid"]), signal.SIGKILL)
        shutil.copy(kept, state)  # what Anvil finds on restart: its last dump before the payment
        again = nib(home, "devnet", "up", "--json")
        assert again.returncode == 0, again.stderr
        back = json.loads(again.stdout)
        assert back["rpc_url"] == info["rpc_url"] and back["usdc"] == usdc
        assert chain.token_balance(usdc, wallet) == before  # the payment is gone

        rec = nib(home, "audit", "reconcile", "--json")
        data = json.loads(rec.stdout)
        assert rec.returncode == 0 and data["clean"], rec.stdout + rec.stderr
        audit = json.loads(nib(home, "audit", "--run", str(lost_run["run_id"]), "--json").stdout)
        assert [row["id"] for row in audit] == list(data["rolled_back"])
        assert [row["status"] for row in audit] == ["cancelled"], audit
        assert chain.authorization_state(usdc, wallet, str(audit[0]["auth_nonce"]))

        # The services (started by the first `up`) work on the restarted chain.
        status = json.loads(nib(home, "services", "status", "--json").stdout)
        assert status["running"] is True, status
        paid = _run_demo(home)
        spent = paid["spend"]
        assert isinstance(spent, dict) and spent["usdc_atomic"] > 0
        assert chain.token_balance(usdc, wallet) == before - spent["usdc_atomic"]
        done = json.loads(nib(home, "audit", "reconcile", "--json").stdout)
        assert done["clean"] and not done["rolled_back"], done
    finally:
        nib(home, "services", "down")
        nib(home, "devnet", "down")
