"""The wallet service as the one signer for many workers: it keeps its ledger in the
workers' database, holds each worker's nonces under that worker's name, and recovers a
dead worker's run. A real wallet service (HTTP over its Unix socket) on a real Anvil, on
SQLite and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _wallet_support import ONE_USDC, approve, transfer_tx

from judge.verdict import VerdictSigner
from wallet.ledger import Ledger
from wallet.service import WalletClient, WalletServer, database_identity

DEAD = "worker-host:4242"  # the worker process that dies holding a signed transfer


def test_the_service_recovers_a_dead_workers_run_and_gives_back_its_nonces(
    chain: Any, make_wallet: Any, judge_signer: VerdictSigner, store_location: str | Path,
    tmp_path: Path,
) -> None:
    server = WalletServer(make_wallet(db_path=store_location), tmp_path / "home").start()
    try:
        dead, alive = WalletClient(server.socket_path), WalletClient(server.socket_path)
        dead.holder = DEAD
        assert alive.database == database_identity(store_location)  # the workers' database
        n, spare = dead.nonces.allocate(), dead.nonces.allocate()  # one signed, one quoted
        tx = {**transfer_tx(chain), "nonce": n}
        signed = dead.sign_transaction(tx, approve(judge_signer, tx), run_id="run-1", cap=ONE_USDC)
        alive.nonces.release(n)  # another worker cannot give back the dead one's number
        assert alive.nonces.allocate() == spare + 1
        # The worker dies before broadcasting; once its lease ran out, another worker asks
        # the service to recover the run.
        got = alive.recover_run("run-1", DEAD, f"worker {DEAD} died")
        assert (got.failed, got.nonces) == ((signed.ledger_id,), (n, spare))
        assert not got.money_moved_or_may_move  # nothing was paid: the task may run again
        row = Ledger(store_location).get(signed.ledger_id)
        assert row.status == "failed" and "never broadcast" in row.note
        assert alive.meter.usage("run-1").reserved == 0
        # No gap for the node to wait on: the next transfers take the numbers back.
        assert [alive.nonces.allocate(), alive.nonces.allocate()] == [n, spare]
    finally:
        server.stop()
