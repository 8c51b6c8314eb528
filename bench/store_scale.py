"""Store at scale: the read commands' CPU and memory with 1k, 10k and 100k runs stored.

For each size a fresh NIB_HOME gets a SQLite store with that many finished runs (20
audit events each: 2M events at 100k runs), spend-ledger rows (one per 10 runs: 10k at
100k) and judge calibration outcomes, written through the real schema (each package's
own migrations) with bulk inserts. Then each command runs as its own process, the way
a user runs it, and its CPU seconds (user + system, from the kernel's rusage of the
child) and peak memory (max RSS) are read:

- ``nib runs --json`` (newest 50), ``nib show RUN --json`` (one run's timeline),
- ``nib audit --json`` (every ledger row), ``nib report`` (newest 100 runs, HTML),
- ``nib audit reconcile``'s work, ``wallet.reconcile.reconcile`` on a real Anvil: the
  ledger rows (settled direct transfers) against the chain's Transfer logs. The
  synthetic rows have no logs on chain, so every row is read, looked up and reported
  unmatched: the ledger side's cost. (A settled x402 row whose authorization is not
  used in the range costs one ``authorizationState`` call each, not measured here.)

The goal (issue 17) is under 1 s of CPU per 10k rows at every size, with memory flat:
a command that reads a bounded page must not grow with the store. A Python process
that only imports the CLI is measured too (the floor every command pays).

``python -m bench.store_scale [--quick]``
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._util import Figure, bench_main

__all__ = ["fill", "main", "run"]

EVENTS_PER_RUN = 20
RUNS_PER_SPEND = 10
COMMANDS = ("import floor", "runs", "show", "audit", "report", "reconcile")
_USDC = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
_SELLER = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"


def fill(db_path: Path, runs: int) -> dict[str, int]:
    """Write ``runs`` finished runs, their events, ledger rows and outcomes to ``db_path``."""
    from agent.store import ensure_tables as agent_tables
    from judge.calibration import BetaCalibrator
    from judge.storage import open_database
    from wallet._store import Store

    db = open_database(db_path, durable=False)
    agent_tables(db)
    db.close()
    Store(db_path).close()  # the wallet's migrations
    BetaCalibrator(db_path)  # the judge's calibration table

    import sqlite3

    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA synchronous=OFF")
    now = time.time() - runs
    event_data = json.dumps(
        {"step": 3, "tool": "pay_http", "decision": "approve", "reason": "EV 0.12 USDC > 0: "
         "p 0.80 x value 0.40 USDC (2 missing items x 0.20 USDC) - price 0.02 USDC",
         "amount": 20000, "summary": "bought /datasets/token/USDC"},
        separators=(",", ":"),
    )  # fmt: skip
    types = ("run.start", "model.call", "proposal", "gate", "quote", "verdict", "tool.call")
    batch = 5000
    for start in range(0, runs, batch):
        chunk = range(start, min(runs, start + batch))
        conn.executemany(
            "INSERT INTO agent_runs (run_id, task, status, profile, stop_reason, finished, "
            "started_at, ended_at, result) VALUES (?,?,?,?,?,?,?,?,?)",
            [
                (
                    f"run-{i:07d}",
                    f"what is the USDC issuer and the base fee? (#{i})",
                    "stopped",
                    "cheap",
                    "answered",
                    1,
                    now + i,
                    now + i + 2.5,
                    json.dumps(
                        {
                            "run_id": f"run-{i:07d}",
                            "stop_reason": "answered",
                            "finished": True,
                            "steps": 7,
                            "answer": "Circle; 1.2 gwei",
                            "elapsed_s": 2.5,
                            "spend": {"usdc_atomic": 20000, "gas_wei": 0},
                            "tokens": {"input": 2100, "output": 300},
                        }
                    ),
                )  # fmt: skip
                for i in chunk
            ],
        )
        conn.executemany(
            "INSERT INTO agent_events (run_id, seq, type, data, ts) VALUES (?,?,?,?,?)",
            [
                (f"run-{i:07d}", seq, types[seq % len(types)], event_data, now + i)
                for i in chunk
                for seq in range(1, EVENTS_PER_RUN + 1)
            ],
        )
        conn.executemany(
            "INSERT INTO wallet_spends (id, run_id, verdict_id, payload_fingerprint, kind, "
            "asset, amount, recipient, chain_id, status, tx_hash, auth_nonce, created_at, "
            "updated_at, note, valid_before, gas_hold) VALUES "
            "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    f"spend-{i:07d}",
                    f"run-{i:07d}",
                    f"{i:032x}",
                    "0x" + f"{i:064x}",
                    "transfer",
                    _USDC,
                    20000,
                    _SELLER,
                    31337,
                    "settled",
                    "0x" + f"{i + 1:064x}",
                    None,
                    now + i,
                    now + i,
                    "",
                    None,
                    0,
                )  # fmt: skip
                for i in chunk
                if i % RUNS_PER_SPEND == 0
            ],
        )
        conn.executemany(
            "INSERT INTO judge_outcomes (ts, tool, fact_kind, p_used, covered) VALUES (?,?,?,?,?)",
            [(int(now + i), "pay_http", "issuer", "0.8", i % 3 != 0) for i in chunk],
        )
        conn.commit()
    conn.close()
    return {
        "runs": runs,
        "events": runs * EVENTS_PER_RUN,
        "spends": len(range(0, runs, RUNS_PER_SPEND)),
    }


def _child(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run ``argv``; CPU seconds and peak RSS (MiB) from the kernel's rusage of it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 3):  # reconcile's "stopped" exit is not a crash
        raise RuntimeError(
            f"benchmark: `{' '.join(argv[1:])}` exited {proc.returncode}: "
            f"{(proc.stderr or proc.stdout)[-400:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: run the probe in a
    # wrapper that reports its own peak instead.
    return cpu, _peak_of(proc.stderr)


_PROBE = """
import resource, runpy, sys
args = sys.argv[1:]
try:
    if args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        exec(compile(args[1], "<probe>", "exec"), {"__name__": "__main__"})
    else:
        sys.argv = args
        runpy.run_module(args[0], run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
else:
    code = 0
sys.stderr.write("\\nPEAK_RSS_KB=%d\\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
sys.exit(code)
"""


def _peak_of(stderr: str) -> float:
    for line in reversed(stderr.splitlines()):
        if line.startswith("PEAK_RSS_KB="):
            return int(line.split("=", 1)[1]) / 1024
    return float("nan")


def _reconcile_probe(db: Path, rpc_url: str, usdc: str) -> list[str]:
    code = (
        "from chain.client import ChainClient\n"
        "from chain.devkeys import AGENT, dev_account\n"
        "from wallet.reconcile import reconcile\n"
        f"chain = ChainClient({rpc_url!r}, 31337)\n"
        f"r = reconcile({str(db)!r}, chain, {usdc!r}, dev_account(AGENT).address, 0,"
        " clock=lambda: 0.0)\n"
        "print(len(r.matched), len(r.unmatched_ledger))\n"
    )
    return ["-c", code]


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Fill a store at each size, run every command against it; one row per command."""
    from chain.devkeys import DEPLOYER, dev_account
    from chain.devnet import AnvilProcess
    from chain.usdc import deploy_test_usdc

    sizes = (200, 1000) if quick else (1_000, 10_000, 100_000)
    repo = Path(__file__).resolve().parent.parent
    results: dict[str, dict[int, tuple[float, float]]] = {c: {} for c in COMMANDS}
    counts: dict[int, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="nib-store-scale-") as tmp:
        anvil = AnvilProcess(port=0, log=Path(tmp) / "anvil.log")
        try:
            from chain.client import ChainClient

            usdc = deploy_test_usdc(ChainClient(anvil.rpc_url, 31337).w3, dev_account(DEPLOYER))
            for size in sizes:
                home = Path(tmp) / f"home-{size}"
                home.mkdir()
                db = home / "nib.db"
                counts[size] = fill(db, size)
                env = {
                    **os.environ,
                    "NIB_HOME": str(home),
                    "PYTHONPATH": str(repo),
                    "NIB_NETWORK": "anvil",
                }
                probe = [sys.executable, "-c", _PROBE]
                cli = [*probe, "agent.cli"]
                plans = {
                    "import floor": [*probe, "agent.cli", "--help"],
                    "runs": [*cli, "runs", "--json"],
                    "show": [*cli, "show", f"run-{size // 2:07d}", "--json"],
                    "audit": [*cli, "audit", "--json"],
                    "report": [*cli, "report", "--out", str(home / "report.html")],
                    "reconcile": [*probe, *_reconcile_probe(db, anvil.rpc_url, usdc)],
                }
                for name in COMMANDS:
                    results[name][size] = _child(plans[name], env)
        finally:
            anvil.stop()
    return _rows(results, counts, sizes)


def _rows(
    results: dict[str, dict[int, tuple[float, float]]],
    counts: dict[int, dict[str, int]],
    sizes: tuple[int, ...],
) -> list[dict[str, Any]]:
    floor = results["import floor"]
    details = [
        "sizes: "
        + ", ".join(
            f"{s:,} runs ({counts[s]['events']:,} events, {counts[s]['spends']:,} ledger rows)"
            for s in sizes
        ),
        "command      " + "".join(f"{s:>16,} runs" for s in sizes) + "   (CPU s / peak MiB)",
    ]
    for name in COMMANDS:
        details.append(
            f"{name:<13}"
            + "".join(f"{results[name][s][0]:>12.2f} / {results[name][s][1]:>6.0f}" for s in sizes)
        )
    rows_read = {
        "runs": lambda s: counts[s]["runs"],
        "show": lambda s: counts[s]["runs"],
        "audit": lambda s: counts[s]["spends"],
        "report": lambda s: counts[s]["runs"],
        "reconcile": lambda s: counts[s]["spends"],
    }
    out = []
    big = sizes[-1]
    for name in COMMANDS[1:]:
        cpu, rss = results[name][big]
        above = max(cpu - floor[big][0], 0.0)
        per_10k = above / max(rows_read[name](big), 1) * 10_000
        rss_growth = rss / results[name][sizes[0]][1]
        out.append(
            Figure(
                benchmark=f"store at scale: nib {'audit reconcile' if name == 'reconcile' else name}",
                ours=f"{cpu:.2f} CPU s, {rss:.0f} MiB at {big:,} runs",
                peer=f"budget 1 CPU s per 10k rows; import floor {floor[big][0]:.2f} s",
                ratio=per_10k,
                notes=(
                    f"CPU above the CLI's import floor per 10k rows in the store "
                    f"({rows_read[name](big):,} {'ledger rows' if name in ('audit', 'reconcile') else 'runs'}"
                    f"); peak memory {rss:.0f} MiB at {big:,} runs vs "
                    f"{results[name][sizes[0]][1]:.0f} MiB at {sizes[0]:,} ({rss_growth:.2f}x)."
                ),
                details=tuple(details),
                raw={
                    "kind": "budget",
                    "goal": "< 1 CPU s per 10k rows, memory flat",
                    "met": per_10k < 1.0 and rss_growth < 1.5,
                },
            ).as_dict()
        )
    return out


def report(rows: list[dict[str, Any]]) -> str:
    return "\n".join(rows[0]["details"])


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.store_scale", __doc__, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
