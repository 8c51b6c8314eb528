"""Paid tasks/s from N worker processes on PostgreSQL vs one process on SQLite.

Ours: 1, 2 and 4 ``nib worker`` processes (the real composition: offline planner,
in-process judge, verdict-gated wallet, x402 buyer; bench/_worker.py) draining one queue
of paid research tasks (the demo task, asking in turn about each token the paywall has a
fact sheet for: one x402 purchase each) on a throwaway PostgreSQL cluster. The tokens
vary because the wallet keeps one live authorization per resource across every worker:
tasks that all bought one resource would take turns whatever the number of workers.
Durability is the same on both sides: PostgreSQL flushes its WAL on every commit
(fsync=on, synchronous_commit=on, full_page_writes=on), as the SQLite file syncs every
commit (WAL, synchronous=FULL). Peer: the embedded default, one worker process on a SQLite file, same tasks,
same devnet. Each side starts from the same chain baseline. Throughput is tasks / (last
task's end - first task's start), read from the queue's own timestamps, so process
start-up (imports, keystore unlock) is not counted. Every task must have paid exactly
once, or the benchmark fails.

``python -m bench.workers [--quick]``
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from agent.jsonvalues import as_list
from bench._util import BenchEnv, LoadWindow, bench_main, fmt_ratio, median

__all__ = ["main", "report", "run"]

NAME = "paid tasks/s (worker processes)"
REPO = Path(__file__).resolve().parent.parent
_TIMEOUT_S = 900


def _tasks(n: int) -> list[str]:
    """``n`` demo tasks, each about the next token with a fact sheet (DAI, LINK, ...)."""
    from agent.cli.commands.runs import DEMO_TASK
    from chain.paywall.datasets import tokens

    symbols = sorted(tokens())
    return [DEMO_TASK.replace("USDC", symbols[i % len(symbols)]) for i in range(n)]


def _side(env: BenchEnv, location: str | Path, workers: int, tasks: int, label: str) -> float:
    from agent.queue import TaskQueue
    from wallet.keystore import DEVNET_PASSPHRASE, ensure_devnet_wallet
    from wallet.ledger import Ledger

    env.reset_chain()
    home = env.tmp / f"home-{label}"
    # One keystore, made before the workers share it (they unlock it with the default).
    ensure_devnet_wallet(home, DEVNET_PASSPHRASE)
    queue = TaskQueue(location)
    ids = [queue.submit(task) for task in _tasks(tasks)]
    child_env = {k: v for k, v in os.environ.items()
                 if not k.startswith(("NIB_MODEL", "NIB_DATABASE", "NIB_WALLET", "NIB_JUDGE"))}
    child_env["PYTHONPATH"] = str(REPO)
    args = [str(location), env.rpc_url, env.usdc, env.paywall_url, str(home)]
    procs = [subprocess.Popen([sys.executable, "-m", "bench._worker", *args], cwd=REPO,
                              env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(workers)]
    deadline = time.monotonic() + _TIMEOUT_S
    for p in procs:
        _, stderr = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        if p.returncode != 0:
            raise RuntimeError(f"{label}: a worker exited {p.returncode}: {stderr[-800:]}")
    done = [queue.get(i) for i in ids]
    unfinished = [(t.id, t.status, t.stop_reason) for t in done if t.status != "finished"]
    settled = [r for r in Ledger(location).rows() if r.status == "settled"]
    if unfinished or len(settled) != tasks or len({r.run_id for r in settled}) != tasks:
        raise RuntimeError(
            f"{label}: expected {tasks} tasks each paid once; unfinished {unfinished[:3]}, "
            f"{len(settled)} settled payments"
        )
    start = min(t.started_at or 0.0 for t in done)
    end = max(t.ended_at or 0.0 for t in done)
    return tasks / (end - start)


def run(quick: bool = False, env: BenchEnv | None = None) -> dict[str, object]:
    from judge.storage.cluster import TempCluster

    if env is None:
        with BenchEnv() as own:
            return run(quick, own)
    tasks, rounds = (4, 1) if quick else (24, 3)
    load = LoadWindow()
    rates: dict[str, list[float]] = {}
    with TempCluster(durable=True) as cluster:
        for r in range(rounds):  # the sides in turn, so drift hits every side alike
            load.sample()
            rates.setdefault("sqlite x1", []).append(
                _side(env, env.tmp / f"workers-{r}.db", 1, tasks, f"sqlite-1-{r}"))
            for n in (1, 2, 4):
                url = cluster.create_database(f"bench_workers_{n}_{r}")
                rates.setdefault(f"postgres x{n}", []).append(
                    _side(env, url, n, tasks, f"postgres-{n}-{r}"))
        load.sample()
    med = {label: median(v) for label, v in rates.items()}
    peer = med["sqlite x1"]
    details = [f"{label:<12} {med[label]:6.2f} paid tasks/s  (ratio {fmt_ratio(med[label] / peer)} "
               f"vs SQLite x1; rounds: {', '.join(f'{x:.2f}' for x in v)})"
               for label, v in rates.items()]
    spread = {label: f"{min(v):.2f}-{max(v):.2f}" for label, v in rates.items()}
    return {
        "benchmark": NAME,
        "kind": "own",
        "ours": f"{med['postgres x4']:.2f} tasks/s (4 workers, PostgreSQL; rounds "
                f"{spread['postgres x4']})",
        "peer": f"{peer:.2f} tasks/s (1 process, SQLite; rounds {spread['sqlite x1']})",
        "ratio": med["postgres x4"] / peer,
        "notes": (f"median of {rounds} rounds; {tasks} demo tasks (one x402 purchase each, token "
                  "fact sheets in turn) per side per round on one devnet; workers x1/x2/x4 on "
                  "PostgreSQL vs one SQLite process; both durable (PostgreSQL fsync=on, "
                  "synchronous_commit=on; SQLite WAL, synchronous=FULL); see details."),
        "details": details,
        "rates": rates,
        "load": load.summary(),
    }


def report(result: dict[str, object]) -> str:
    return "\n".join([f"{NAME}: {result['notes']}", *map(str, as_list(result["details"]))])


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.workers", __doc__, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
