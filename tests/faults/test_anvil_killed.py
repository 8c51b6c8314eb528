"""Anvil dies in the middle of a run (a dedicated devnet under a tmp NIB_HOME, not the
session's node): the run stops with chain-unreachable and a partial answer; once the
devnet is back on its --state file, `nib audit reconcile` agrees with the ledger.

Both compositions, as the runtime builds them: in-process, or with `nib services up`'s
judge and wallet services (their own processes, their records in their own database)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fault_support import AGENT_ADDR, GAS, GAS_PRICE, SELLER_ADDR, checklist, pay

from agent.cli import services
from agent.cli.runtime import build_runtime, ensure_devnet_wallet
from agent.config import load_settings
from agent.errors import AgentConfigError
from agent.loop.limits import Limits
from agent.loop.run import run_task
from agent.models.scripted import ScriptedModel
from chain import devnet
from chain.client import ChainClient
from chain.usdc import usdc_contract
from wallet.ledger import Ledger
from wallet.reconcile import reconcile

REPO = Path(__file__).resolve().parents[2]
NIB = REPO / ".venv" / "bin" / "nib"
ETH = {"text": "eth balance", "kind": "eth_balance"}


def service_processes(home: Path) -> list[int]:
    """Judge and wallet service processes running for NIB_HOME ``home``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        serving = b"serve" in cmd and (b"judge" in cmd or b"wallet" in cmd)
        if serving and f"NIB_HOME={home}".encode() in env:
            found.append(int(proc.name))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("composition", ["in-process", "services"])
def test_anvil_killed_mid_run_then_back_reconciles(composition: str, nib_home: Path) -> None:
    info = devnet.up(nib_home)
    try:
        assert info.paywall_url
        if composition == "services":
            # Without a keystore the wallet service cannot start: `nib services up` fails
            # with the fix and leaves no judge service behind (it did: one ran on, unrecorded).
            with pytest.raises(AgentConfigError, match="the wallet service did not start"):
                services.up(load_settings())
            assert service_processes(nib_home) == []
            ensure_devnet_wallet(info, nib_home)  # as `nib devnet up` does, then the services
            services.up(load_settings())

        def kill_anvil_then_read(_request: Any) -> dict[str, Any]:
            devnet.stop_pid(info.pid)  # SIGINT first: Anvil dumps its --state file
            assert not devnet.pid_alive(info.pid)
            return {"action": "call", "tool": "eth_balance", "args": {"address": AGENT_ADDR}}

        model = ScriptedModel({
            "checklist": [checklist(GAS, ETH)],
            "propose": [pay(info.paywall_url + "/analytics/gas"), kill_anvil_then_read],
        })
        rt = build_runtime(load_settings(), model=model, devnet_info=info,
                           in_process=composition == "in-process")
        assert (rt.services is not None) == (composition == "services")
        task, run_id, limits = "Gas stats and the agent's ETH balance?", "anvil-killed", Limits()
        rt.register_task(run_id, task, limits)  # as `nib run` does (a no-op in-process)
        result = asyncio.run(run_task(task, rt.deps(limits=limits), run_id=run_id))

        assert (result.stop_reason, result.finished, result.partial) == (
            "chain-unreachable", False, True)
        assert info.rpc_url in result.message
        assert result.answer and "[e1]" in result.answer  # the paid evidence, kept
        assert result.spend.usdc_atomic == GAS_PRICE
        [row] = Ledger(rt.records).rows(result.run_id)
        assert row.status == "settled" and row.amount == GAS_PRICE

        back = devnet.up(nib_home)  # Anvil restarts on its state; the paywall with it
        assert back.running and back.usdc == info.usdc
        client = ChainClient(back.rpc_url, 31337)
        logs = [t for t in client.transfer_logs(back.usdc, 0, "latest", AGENT_ADDR,
                                                direction="out")]
        assert [(t.recipient, t.value, t.tx_hash.lower()) for t in logs] == [
            (SELLER_ADDR, GAS_PRICE, row.tx_hash)]
        balance = usdc_contract(client.w3, back.usdc).functions.balanceOf(AGENT_ADDR).call()
        assert balance == devnet.FUND_USDC - GAS_PRICE

        report = reconcile(rt.records, client, back.usdc, AGENT_ADDR, 0)
        assert report.clean and [m.ledger_id for m in report.matched] == [row.id]

        env = {**os.environ, "NIB_HOME": str(nib_home)}
        out = subprocess.run([str(NIB), "audit", "reconcile", "--json"], env=env, cwd=REPO,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        cli = json.loads(out.stdout)
        assert len(cli["matched"]) == 1
        assert cli["unmatched_onchain"] == [] and cli["unmatched_ledger"] == []
    finally:
        services.down(nib_home)
        devnet.down(nib_home)
