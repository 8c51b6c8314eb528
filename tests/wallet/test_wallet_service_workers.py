"""The wallet service as the one signer for many workers: it keeps its ledger in the
workers' database, holds each worker's nonces under that worker's name, and recovers a
dead worker's run. A real wallet service (HTTP over its Unix socket) on a real Anvil, on
SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _wallet_support import ONE_USDC, approve, transfer_tx

from judge.verdict import VerdictSigner
from wallet.errors import LedgerError
from wallet.ledger import Ledger
from wallet.service import WalletClient, WalletServer, database_identity


def _dead_worker(socket_path: Path) -> tuple[int, int, str]:
    """A worker process that takes two numbers (one to sign, one quoted) and dies: the
    numbers and its identity (the service names it by its kernel credentials)."""
    code = (
        "import json; from judge.storage import process_identity; "
        "from wallet.service import WalletClient; "
        f"c = WalletClient({str(socket_path)!r}); "
        "print(json.dumps([c.nonces.allocate(), c.nonces.allocate(), process_identity()]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    n, spare, holder = json.loads(done.stdout.splitlines()[-1])
    return int(n), int(spare), str(holder)


def test_the_service_recovers_a_dead_workers_run_and_gives_back_its_nonces(
    chain: Any, make_wallet: Any, judge_signer: VerdictSigner, store_location: str | Path,
    tmp_path: Path,
) -> None:
    server = WalletServer(make_wallet(db_path=store_location), tmp_path / "home").start()
    try:
        alive = WalletClient(server.socket_path)
        assert alive.database == database_identity(store_location)  # the workers' database
        n, spare, dead = _dead_worker(server.socket_path)
        tx = {**transfer_tx(chain), "nonce": n}
        verdict = approve(judge_signer, tx, task_id="run-1", task_cap=ONE_USDC)
        signed = alive.sign_transaction(tx, verdict, run_id="run-1", spend_cap_atomic=ONE_USDC)
        # The dead worker's numbers are free again (its process is gone): no gap for the
        # node to wait on, whoever asks next.
        assert alive.nonces.allocate() == n
        alive.nonces.release(n)
        # Once its lease in the queue ran out, another worker asks the service to recover
        # the run: the transfer it signed and never broadcast is failed.
        got = alive.recover_run("run-1", dead, f"worker {dead} died")
        assert got.failed == (signed.ledger_id,) and got.nonces == ()
        assert not got.money_moved_or_may_move  # nothing was paid: the task may run again
        row = Ledger(store_location).get(signed.ledger_id)
        assert row.status == "failed" and "never broadcast" in row.note
        assert alive.meter.usage("run-1").reserved == 0
        assert [alive.nonces.allocate(), alive.nonces.allocate()] == [n, spare]
    finally:
        server.stop()


def test_a_live_process_cannot_recover_another_live_workers_run(
    make_wallet: Any, store_location: str | Path, tmp_path: Path
) -> None:
    """recover-run frees a holder's numbers and fails its run's unsent transfers: only for
    a holder that is gone, or the caller itself."""
    server = WalletServer(make_wallet(db_path=store_location), tmp_path / "home").start()
    try:
        caller = WalletClient(server.socket_path)
        live = f"{socket.gethostname()}:1"  # init: a running process that is not the caller
        with pytest.raises(LedgerError, match="a running process that is not the caller"):
            caller.recover_run("run-1", live, "not dead")
        caller.recover_run("run-1", caller.holder, "my own wallet service died")  # itself: fine
    finally:
        server.stop()
