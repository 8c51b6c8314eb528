"""A worker process for the multi-worker tests: a real agent (loop, judge, wallet, tools)
on the shared database, running queued tasks with ``agent.worker.Worker`` until the
queue is drained. Prints its summary as JSON.

Usage: python worker_child.py LOCATION RPC_URL USDC PAYWALL_URL TREASURY_CAP CONCURRENCY
       LEASE_S [HANG_MARKER|- [JUDGE_URL TOKEN WALLET_SOCKET]]

With HANG_MARKER, the worker hangs the moment its wallet signs a direct transfer (after
the signature, before the broadcast) and writes the run id to that file: the test then
SIGKILLs it "during a payment". Everything else is real.

With JUDGE_URL, TOKEN and WALLET_SOCKET, the worker is an agent process of the services
composition: it holds only a client of the judge service (the agent's token) and of the
wallet service (the one signer, with the treasury cap); the test registered every queued
task with the judge, as the user does. TREASURY_CAP is then the service's, not the worker's.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any


def main(location: str, rpc_url: str, usdc: str, paywall_url: str, treasury: str,
         concurrency: str, lease_s: str, hang_marker: str = "-", judge_url: str = "",
         token: str = "", socket: str = "") -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from fault_support import CAP_PER_TASK, GAS, RECEIPT, build_agent, buyer_model

    from agent.loop.limits import Limits
    from agent.loop.run import run_task
    from agent.queue import QueuedTask, TaskQueue
    from agent.worker import Worker

    services: dict[str, Any] = {}
    claims: Any = None
    if socket:
        from judge.service import JudgeClient
        from wallet.service import WalletClient

        # ``token`` is a worker token: it only claims each queued task's own token, as
        # `nib worker` does; each task then acts with its own.
        claims = JudgeClient(judge_url, token=token)
        services = {"judge": claims, "wallet_client": WalletClient(socket)}

    def task_judge(task_id: str) -> Any:
        if claims is None:
            return agent.deps.judge
        from chain.devkeys import JUDGE, dev_account
        from judge.service import JudgeClient

        return JudgeClient(judge_url, trusted_judge=dev_account(JUDGE).address,
                           token=claims.claim(task_id)[0])

    agent = build_agent(
        location, rpc_url, usdc, buyer_model(paywall_url, (GAS, RECEIPT)),
        allowlist=(paywall_url,), paywall_url=paywall_url, treasury_cap=int(treasury),
        **services,
    )
    if hang_marker != "-":
        emit = agent.wallet.emit

        def hang_after_signing(name: str, data: dict[str, Any]) -> None:
            if emit is not None:
                emit(name, data)
            if name == "wallet.signed" and data.get("kind") == "transfer":
                Path(hang_marker).write_text(str(data["run_id"]))
                threading.Event().wait()  # until the parent's SIGKILL

        agent.wallet.emit = hang_after_signing

    async def execute(task: QueuedTask) -> Any:
        limits = Limits(spend_cap_atomic=task.max_spend or CAP_PER_TASK, max_steps=8,
                        max_consecutive_failures=8)
        deps = replace(agent.deps, limits=limits, judge=task_judge(task.id))
        return await run_task(task.task, deps, run_id=task.id)

    worker = Worker(
        TaskQueue(location, lease_s=float(lease_s)), execute,
        lambda t: agent.wallet.recover_run(t.id, t.worker or "", "worker died"),
        store=agent.store, concurrency=int(concurrency), poll_s=0.1,
    )
    summary = asyncio.run(worker.run(drain=True))
    print(json.dumps(asdict(summary)))


if __name__ == "__main__":
    main(*sys.argv[1:])
