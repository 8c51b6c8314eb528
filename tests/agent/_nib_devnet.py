"""The real nib command in a subprocess, and a devnet of its own for one test module
(shared by the devnet tests of requests to buy and of ordered payments)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

NIB = [sys.executable, "-m", "agent.cli"]


def nib(home: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NIB_HOME": str(home), "NIB_WALLET_PASSWORD": "nib-devnet"}
    env.pop("NIB_CONFIG", None)
    return subprocess.run(NIB + list(args), env=env, capture_output=True, text=True, timeout=timeout)


def own_devnet(factory: pytest.TempPathFactory, name: str) -> Iterator[tuple[Path, dict[str, Any]]]:
    """``nib devnet up`` in a fresh home: (home, what `up --json` reported); down after."""
    home = factory.mktemp(name)
    up = nib(home, "devnet", "up", "--json")
    assert up.returncode == 0, up.stderr
    try:
        yield home, json.loads(up.stdout)
    finally:
        nib(home, "devnet", "down")


def run_json(home: Path, task: str) -> dict[str, Any]:
    """``nib run TASK --json``: its JSON result, with its exit code as ``returncode``."""
    out = nib(home, "run", task, "--json")
    result: dict[str, Any] = json.loads(out.stdout)
    result["returncode"] = out.returncode
    return result


def settled_rows(home: Path, run_id: str) -> list[tuple[int, str]]:
    """(amount, status) of each ledger row of ``run_id`` (`nib audit --run`)."""
    rows = json.loads(nib(home, "audit", "--run", run_id, "--json").stdout)
    return [(r["amount"], r["status"]) for r in rows]


def run_paying(home: Path, info: dict[str, Any], task: str) -> tuple[dict[str, Any], list[tuple[str, int]]]:
    """One ``nib run TASK``: its JSON result and the (recipient, atomic) USDC transfers out
    of the wallet it made, read from the chain's Transfer logs."""
    from chain.client import ChainClient

    chain = ChainClient(info["rpc_url"], info["chain_id"])
    first = chain.block_number() + 1
    result = run_json(home, task)
    if chain.block_number() < first:
        return result, []
    wallet = info["wallet"].lower()
    logs = chain.transfer_logs(info["usdc"], first, "latest", wallet)
    return result, [(t.recipient.lower(), t.value) for t in logs if t.sender.lower() == wallet]
