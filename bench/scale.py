"""Scale curves: what one operation costs as the ledger and the outcomes grow, from 1k to
10M rows (quick mode: 1k and 10k).

For each size one SQLite store (each package's own migrations, then rows bulk-inserted
in SQL: x402 ledger rows settled in runs of ten, calibration outcomes, verdict records,
finished runs with their events; running totals and counts rebuilt in SQL) is built once
and kept in ``~/.cache/nib/bench-scale`` under a key of the schema versions and this
file's fill code, so a re-run measures rather than rebuilds. On each store:

- **reserve**: ``SpendMeter.reserve`` of a new payment (durable: a sync per commit), the
  median of many, as the wallet makes it on every purchase;
- **judge decisions/s**: the JEV judge as ``nib run`` builds it (calibration store and
  record of verdicts on the same file) deciding a purchase whose seller and fact kind own
  every stored outcome;
- **nib audit --run**, **nib report** and **reconcile** as their own processes, each
  run three times: median wall time, its range, and peak memory (the kernel's max RSS of
  the child). Reconcile runs as ``nib audit reconcile`` does, from its checkpoint: the
  bench writes the checkpoint a previous pass leaves (every stored row proven through
  the devnet's head, whose hash it keeps), then the wallet writes the rows a day of use
  adds (the reservations timed above, and ``SINCE`` x402 rows recorded settled whose
  transactions this devnet does not have: reopened, then read as pending rows, each with
  its per-row chain reads). The first pass over a store (no
  checkpoint) and ``nib audit verify`` read every row: they are not in this curve.

The goal (issue 27) is flat: at most 1.2x from the smallest to the largest size. A
command that does not finish within its time box at a size is reported as over it.

``python -m bench.scale [--quick]``
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from agent.jsonvalues import as_float
from bench._util import (
    Figure,
    LoadWindow,
    bench_main,
    fmt_ratio,
    median,
    percentile,
    report_rows,
)

if TYPE_CHECKING:
    from judge.storage.db import Database

__all__ = ["build", "main", "run"]

SIZES = (1_000, 100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (1_000, 10_000)
CACHE = Path(os.environ.get("BENCH_CACHE", Path.home() / ".cache" / "nib" / "bench-scale"))
USDC = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
SELLER_ADDR = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"
SELLER = "http://seller.bench"
SUBJECT = f"pay_http@{SELLER}"
FACT = "gas_stats"
#: One finished run per this many ledger rows; each run has two events.
ROWS_PER_RUN = 10
#: Longest a command may take at one size before it is reported as over it (and not run
#: at the larger sizes: every command here costs at least as much on a larger store).
TIME_BOX_S = 90.0
BATCH = 50_000
GOAL = 1.2
#: x402 rows the wallet records settled after the checkpoint, at every size.
SINCE = 10
#: Runs of each command per size (the median is reported, with the range).
REPEATS = 3


# ------------------------------------------------------------------------------ build


def _fill(conn: sqlite3.Connection, n: int) -> None:
    """``n`` settled x402 ledger rows and ``n`` outcomes, ``n / 10`` verdicts and runs."""
    now = 1_800_000_000.0
    for start in range(0, n, BATCH):
        chunk = range(start, min(n, start + BATCH))
        conn.executemany(
            "INSERT INTO wallet_spends (id, run_id, verdict_id, payload_fingerprint, kind, "
            "asset, amount, recipient, chain_id, status, tx_hash, auth_nonce, created_at, "
            "updated_at, note, valid_before, gas_hold, resource) "
            "VALUES (?,?,?,?,'x402',?,20000,?,31337,'settled',?,?,?,?,'',?,0,?)",
            [(f"s{i:09d}", f"run-{i // ROWS_PER_RUN:08d}", f"v{i:09d}", "0x" + f"{i:064x}",
              USDC, SELLER_ADDR, "0x" + f"{i + 1:064x}", "0x" + f"{i + 7:064x}", now + i,
              now + i, int(now) + i + 300, f"{SELLER}/datasets/token/T{i % 97}")
             for i in chunk],
        )
        conn.executemany(
            "INSERT INTO judge_outcomes (ts, tool, fact_kind, p_used, covered, weight) "
            "VALUES (?, ?, ?, ?, ?, 1000)",  # one outcome (judge.calibration.WEIGHT_SCALE)
            [(int(now) + i, SUBJECT, FACT, f"0.{(i * 7) % 90 + 10:02d}", int(i % 3 != 0))
             for i in chunk],
        )
        tenth = range(chunk.start // ROWS_PER_RUN, chunk.stop // ROWS_PER_RUN)
        conn.executemany(
            "INSERT INTO judge_verdicts (id, decision, subject, task_id, payload_fingerprint, "
            "amount, asset, recipient, chain_id, p, facts, issued_at, expires_at, consumed_at) "
            "VALUES (?, 'approve', ?, ?, ?, 20000, ?, ?, 31337, '0.8', ?, ?, ?, ?)",
            [(f"v{i:09d}", SUBJECT, f"run-{i:08d}", "0x" + f"{i:064x}", USDC, SELLER_ADDR,
              FACT, int(now) + i, int(now) + i + 120, now + i) for i in tenth],
        )
        conn.executemany(
            "INSERT INTO agent_runs (run_id, task, status, profile, stop_reason, finished, "
            "started_at, ended_at, result) VALUES (?, ?, 'stopped', 'cheap', 'evidence-covered', "
            "1, ?, ?, ?)",
            [(f"run-{i:08d}", f"gas stats, please (#{i})", now + i, now + i + 2.5,
              json.dumps({"run_id": f"run-{i:08d}", "stop_reason": "evidence-covered",
                          "finished": True, "steps": 3, "answer": "gas stats bought",
                          "spend": {"usdc_atomic": 20000, "gas_wei": 0}}))
             for i in tenth],
        )
        conn.executemany(
            "INSERT INTO agent_events (run_id, seq, type, data, ts) VALUES (?, ?, ?, ?, ?)",
            [(f"run-{i:08d}", seq, kind, '{"tool":"pay_http","amount":20000}', now + i)
             for i in tenth for seq, kind in ((1, "run.start"), (2, "tool.call"))],
        )
        conn.commit()


def _cache_key() -> str:
    """Names a store by the code that filled it; a store of an older schema is migrated
    forward when it is reused (every component's migrations are idempotent)."""
    return hashlib.sha256(inspect.getsource(_fill).encode()).hexdigest()[:12]


def _schema(db: Database) -> None:
    """Every component's tables at the newest schema version (idempotent)."""
    from agent.store import ensure_tables as agent_tables
    from judge.calibration import BetaCalibrator
    from judge.records import VerdictRecords
    from wallet._store import Store

    agent_tables(db)
    Store(db)
    BetaCalibrator(db)
    VerdictRecords(db)


def build(n: int, log: Callable[[str], None] = print) -> Path:
    """The store of size ``n`` (built once per schema and fill code, then reused)."""
    from judge.calibration import recount
    from judge.storage import open_database
    from wallet.totals import rebuild

    path = CACHE / f"scale-{n}-{_cache_key()}.db"
    if path.exists():
        db = open_database(path)
        _schema(db)
        db.close()
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".building")
    for leftover in CACHE.glob(f"{tmp.name}*"):
        leftover.unlink()
    started = time.perf_counter()
    db = open_database(tmp)
    _schema(db)
    conn = sqlite3.connect(tmp)
    conn.execute("PRAGMA synchronous=OFF")
    # Secondary indexes are made once after the load (one sort each) instead of growing
    # row by row: at 10M rows that is the difference between minutes and an hour.
    indexes = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
    ).fetchall()
    for name, _ in indexes:
        conn.execute(f"DROP INDEX {name}")
    _fill(conn, n)
    for _, sql in indexes:
        conn.execute(sql)
    conn.commit()
    conn.close()
    with db.transaction(lock="wallet") as tx:
        rebuild(tx)
        recount(tx)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    for old in CACHE.glob(f"scale-{n}-*.db"):
        old.unlink()
    tmp.rename(path)
    log(f"bench.scale: built {n:,} rows in {time.perf_counter() - started:.0f} s: {path}")
    return path


# ------------------------------------------------------------------------------ measure


class _Verdict:
    def __init__(self, i: int) -> None:
        self.id = f"bench-reserve-{time.time_ns()}-{i}"
        self.payload_fingerprint = "0x" + "ab" * 32
        self.asset = USDC
        self.recipient = SELLER_ADDR
        self.chain_id = 31337


def _reserve_ms(path: Path, count: int) -> list[float]:
    """Milliseconds per reservation (durable), each a new payment of its own run."""
    from wallet.meter import SpendMeter

    meter = SpendMeter(path, treasury_cap_atomic=10**15)
    took = []
    for i in range(count):
        verdict = _Verdict(i)
        start, cpu = time.perf_counter(), time.thread_time()
        res = meter.reserve(f"bench-run-{verdict.id}", verdict, 20_000, 10**9, 10**15,
                            resource=f"{SELLER}/bench/{verdict.id}")
        took.append((time.perf_counter() - start) * 1000)
        _CPU_MS.append((time.thread_time() - cpu) * 1000)
        meter.release(res)
    meter.store.close()
    return took


#: CPU milliseconds of each reservation measured last (the sync's wait excluded).
_CPU_MS: list[float] = []


def _decisions_per_s(path: Path, seconds: float) -> float:
    """Decisions per second of the judge as `nib run` builds it, on ``path``."""
    from chain.devkeys import JUDGE, dev_account
    from judge.calibration import BetaCalibrator
    from judge.fingerprint import call_fingerprint, fingerprint
    from judge.jev import Judge, PaidCallRequest
    from judge.records import VerdictRecords
    from judge.verdict import VerdictSigner

    judge = Judge(VerdictSigner(dev_account(JUDGE)), BetaCalibrator(path),
                  allowed_assets={31337: [USDC]}, records=VerdictRecords(path))
    args = {"url": f"{SELLER}/analytics/gas"}
    request = PaidCallRequest(
        tool="pay_http", args=args, call_fingerprint=call_fingerprint("pay_http", args),
        payload_fingerprint=fingerprint({"x402": "bench"}), price=20_000, asset=USDC,
        recipient=SELLER_ADDR, chain_id=31337, remaining_budget=10**9, balance=10**12,
        per_call_cap_atomic=10**9, spend_cap_atomic=10**9, missing=(FACT,), tool_facts=(FACT,),
        declared_coverage=Decimal("0.8"), seller=SELLER)
    first = judge.decide(request)
    if first.decision != "approve":
        raise RuntimeError(f"bench.scale: the judge ruled {first.decision}: {first.reason}")
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        judge.decide(request)
        done += 1
    return done / (time.perf_counter() - start)


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


def _command(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak MiB of ``argv``; (inf, nan) past the time box."""
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], env=env,
                              capture_output=True, text=True, timeout=TIME_BOX_S, check=False)
    except subprocess.TimeoutExpired:
        return float("inf"), float("nan")
    took = time.perf_counter() - start
    if proc.returncode not in (0, 1, 3):  # a reconcile with alarms exits non-zero
        raise RuntimeError(f"bench.scale: `{' '.join(argv[:4])}` exited {proc.returncode}: "
                           f"{(proc.stderr or proc.stdout)[-400:]}")
    peak = next((int(line.split("=", 1)[1]) / 1024 for line in reversed(proc.stderr.splitlines())
                 if line.startswith("PEAK_RSS_KB=")), float("nan"))
    return took, peak


def _reconcile_code(path: Path, rpc_url: str, usdc: str) -> str:
    return (
        "from chain.client import ChainClient\n"
        "from chain.devkeys import AGENT, dev_account\n"
        "from wallet.reconcile import reconcile\n"
        f"chain = ChainClient({rpc_url!r}, 31337)\n"
        f"r = reconcile({str(path)!r}, chain, {usdc!r}, dev_account(AGENT).address, 0, "
        "checkpoint=True)\n"
        "assert r.proven_through is not None, 'a full pass: the checkpoint was not used'\n"
        "print(len(r.matched), len(r.unmatched_ledger))\n"
    )


def _commands(path: Path, n: int, rpc_url: str, usdc: str, over: set[str],
              repeats: int) -> dict[str, list[tuple[float, float]]]:
    home = path.parent / f"home-{n}"
    home.mkdir(exist_ok=True)
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "NIB_HOME": str(home), "NIB_DB_PATH": str(path),
           "PYTHONPATH": str(repo), "NIB_NETWORK": "anvil"}
    run_id = f"run-{n // ROWS_PER_RUN // 2:08d}"
    plans = {
        "audit --run": ["agent.cli", "audit", "--run", run_id, "--json"],
        "report": ["agent.cli", "report", "--out", str(home / "report.html")],
        "reconcile": ["-c", _reconcile_code(path, rpc_url, usdc)],
    }
    got: dict[str, list[tuple[float, float]]] = {}
    for name, argv in plans.items():
        got[name] = []
        for _ in range(repeats):
            took = (float("inf"), float("nan")) if name in over else _command(argv, env)
            got[name].append(took)
            if took[0] == float("inf"):
                over.add(name)
                break
    return got


def _checkpoint_at_head(path: Path, rpc_url: str, usdc: str) -> None:
    """The checkpoint a previous ``nib audit reconcile`` leaves on a store whose rows it
    proved: the devnet's head (this run's devnet: its hash is what the next pass checks)
    and the journal's head. Written here because the stored rows are made in bulk, not
    by real payments on this devnet, so no real pass could prove them."""
    from chain.client import ChainClient
    from chain.devkeys import AGENT, dev_account
    from judge.storage import cell_int, migrate, open_database
    from wallet.journal import GENESIS
    from wallet.reconcile import _MIGRATIONS, CHECKPOINTS

    chain = ChainClient(rpc_url, 31337)
    head = chain.block(chain.block_number())
    db = open_database(path)
    migrate(db, "wallet_reconcile", _MIGRATIONS)
    with db.transaction(lock="wallet") as tx:
        last = tx.one("SELECT seq, hash FROM wallet_journal "
                      "WHERE seq = (SELECT MAX(seq) FROM wallet_journal)")
        tx.execute(
            f"INSERT INTO {CHECKPOINTS} (scope, from_block, block, block_hash, journal_seq, "
            "journal_hash, open_rows, saved_at) VALUES (?, 0, ?, ?, ?, ?, '[]', ?) "
            "ON CONFLICT (scope) DO UPDATE SET block = excluded.block, "
            "block_hash = excluded.block_hash, journal_seq = excluded.journal_seq, "
            "journal_hash = excluded.journal_hash, open_rows = '[]'",
            (f"31337:{usdc.lower()}:{dev_account(AGENT).address.lower()}",
             int(head["number"]), "0x" + bytes(head["hash"]).hex(),
             cell_int(last[0]) if last else 0, str(last[1]) if last else GENESIS, time.time()),
        )
    db.close()


def _settled_since(path: Path, count: int, usdc: str) -> None:
    """``count`` x402 rows the wallet records as settled, through its own meter (so
    journalled). Neither their authorizations nor their transactions are on this devnet,
    so the first reconcile reads ``authorizationState`` and the receipt of each and
    reopens it (rolled back); every later pass reads each again as a pending row (its
    authorization's state, the chain's clock): per-row chain reads at every size."""
    from wallet.meter import SpendMeter

    meter = SpendMeter(path, treasury_cap_atomic=10**15)
    for i in range(count):
        verdict = _Verdict(i)
        verdict.asset = usdc.lower()
        res = meter.reserve(f"bench-since-{verdict.id}", verdict, 20_000, 10**9, 10**15,
                            resource=f"{SELLER}/since/{verdict.id}")
        meter.mark_signed(res, auth_nonce="0x" + f"{time.time_ns() + i:064x}",
                          valid_before=int(time.time()) + 3600)
        meter.settle(res, "0x" + f"{time.time_ns() + i:064x}")
    meter.store.close()


def run(quick: bool = False) -> list[dict[str, object]]:
    from chain.client import ChainClient
    from chain.devkeys import DEPLOYER, dev_account
    from chain.devnet import AnvilProcess
    from chain.usdc import deploy_test_usdc

    sizes = QUICK_SIZES if quick else SIZES
    load = LoadWindow()
    results: dict[int, _Measured] = {}
    paths = {n: build(n) for n in sizes}
    anvil = AnvilProcess(port=0, log=CACHE / "anvil.log")
    try:
        usdc = deploy_test_usdc(ChainClient(anvil.rpc_url, 31337).w3, dev_account(DEPLOYER))
        over: set[str] = set()
        for n in sizes:
            load.sample()
            _checkpoint_at_head(paths[n], anvil.rpc_url, usdc)
            _CPU_MS.clear()
            reserve = _reserve_ms(paths[n], 40 if quick else 200)
            reserve_cpu = list(_CPU_MS)
            _settled_since(paths[n], SINCE, usdc)
            rates = [_decisions_per_s(paths[n], 0.5 if quick else 1.0) for _ in range(3)]
            results[n] = _Measured(reserve, reserve_cpu, rates,
                                   _commands(paths[n], n, anvil.rpc_url, usdc, over,
                                             1 if quick else REPEATS))
        load.sample()
    finally:
        anvil.stop()
    return _rows(results, sizes, load.summary())


def _timed(runs: list[tuple[float, float]]) -> tuple[float, float, float, float]:
    """(median, lowest, highest seconds, highest peak MiB) of a command's runs; inf when
    one was over the box."""
    secs = [t for t, _ in runs]
    peaks = [m for _, m in runs if m == m]
    if any(t == float("inf") for t in secs):
        return float("inf"), float("inf"), float("inf"), float("nan")
    return median(secs), min(secs), max(secs), max(peaks) if peaks else float("nan")


def _cell(runs: list[tuple[float, float]]) -> str:
    med, lo, hi, peak = _timed(runs)
    if med == float("inf"):
        return f"> {TIME_BOX_S:.0f} s"
    return f"{med:.2f} s ({lo:.2f}-{hi:.2f}) / {peak:.0f} MiB"


@dataclass(frozen=True)
class _Measured:
    """One store size's samples: reserve wall and CPU ms, decisions/s, command runs."""

    reserve: list[float]
    reserve_cpu: list[float]
    decide: list[float]
    commands: dict[str, list[tuple[float, float]]]


def _rows(results: dict[int, _Measured], sizes: tuple[int, ...],
          load: dict[str, object]) -> list[dict[str, object]]:
    lo, hi = sizes[0], sizes[-1]
    width = 30
    lines = [
        f"store sizes: {', '.join(f'{n:,}' for n in sizes)} ledger rows and outcomes "
        f"(verdicts and runs: a tenth); load {load['text']}",
        "rows/outcomes       " + "".join(f"{n:>{width},}" for n in sizes),
        "reserve median ms   " + "".join(
            f"{median(results[n].reserve):>{width}.2f}" for n in sizes),
        "reserve p95 ms      " + "".join(
            f"{percentile(results[n].reserve, 95):>{width}.2f}" for n in sizes),
        "reserve CPU ms      " + "".join(
            f"{median(results[n].reserve_cpu):>{width}.3f}" for n in sizes),
        "judge decisions/s   " + "".join(
            f"{median(results[n].decide):>{width - 16},.0f} ({min(results[n].decide):,.0f}-"
            f"{max(results[n].decide):,.0f})".rjust(width) for n in sizes),
        *(f"{name:<20}" + "".join(f"{_cell(results[n].commands[name]):>{width}}" for n in sizes)
          for name in ("audit --run", "report", "reconcile")),
    ]
    rows = []

    def row(name: str, ours: str, peer: str, growth: float, note: str) -> None:
        rows.append(Figure(
            benchmark=f"scale: {name}, {lo:,} -> {hi:,} rows", ours=ours, peer=peer,
            ratio=growth, notes=note, details=tuple(lines),
            raw={"kind": "own", "goal": f"flat: <= {GOAL}x", "met": growth <= GOAL,
                 "load": load},
        ).as_dict())

    res = {n: results[n].reserve for n in (lo, hi)}
    row("per-payment reserve",
        f"{median(res[hi]):.2f} ms (p95 {percentile(res[hi], 95):.2f}) at {hi:,}",
        f"{median(res[lo]):.2f} ms (p95 {percentile(res[lo], 95):.2f}) at {lo:,}",
        median(res[hi]) / median(res[lo]),
        f"median of {len(res[lo])} SpendMeter.reserve calls (a sync per commit) at the "
        "largest vs the smallest store; a cost ratio, lower is better")
    dec = {n: results[n].decide for n in (lo, hi)}
    row("judge decisions/s (records on)",
        f"{median(dec[hi]):,.0f} /s ({min(dec[hi]):,.0f}-{max(dec[hi]):,.0f}) at {hi:,}",
        f"{median(dec[lo]):,.0f} /s ({min(dec[lo]):,.0f}-{max(dec[lo]):,.0f}) at {lo:,}",
        median(dec[lo]) / median(dec[hi]),
        f"median of {len(dec[lo])} one-second runs; decisions per second at the smallest / "
        "the largest store (so above 1 is slower at scale); the judge keeps its records and "
        "calibration store on the same file")
    for name in ("audit --run", "report", "reconcile"):
        s_lo, lo_min, lo_max, m_lo = _timed(results[lo].commands[name])
        s_hi, hi_min, hi_max, m_hi = _timed(results[hi].commands[name])
        over = s_hi == float("inf")
        ours = (f"> {TIME_BOX_S:.0f} s (at least) at {hi:,}" if over else
                f"{s_hi:.2f} s ({hi_min:.2f}-{hi_max:.2f}) at {hi:,}")
        # Over the box: the growth is at least the box over the smallest size's time.
        growth = (TIME_BOX_S if over else s_hi) / s_lo if s_lo else float("nan")
        row(f"nib {name}", ours, f"{s_lo:.2f} s ({lo_min:.2f}-{lo_max:.2f}) at {lo:,}", growth,
            f"median wall time of {len(results[lo].commands[name])} runs of the command as its own "
            f"process (interpreter start included); peak memory {_mib(m_hi)} at {hi:,} vs "
            f"{_mib(m_lo)} at {lo:,}"
            + ("; from its checkpoint, as `nib audit reconcile` runs (see details)"
               if name == "reconcile" else "")
            + (f"; over its {TIME_BOX_S:.0f} s box at {hi:,} (first over at "
               f"{min(n for n in sizes if _timed(results[n].commands[name])[0] == float('inf')):,}): "
               "the growth is at least this ratio" if over else ""))
    return rows


def _mib(value: float) -> str:
    return "?" if value != value else f"{value:.0f} MiB"


def report(rows: list[dict[str, object]]) -> str:
    return report_rows(rows) + "\n" + "\n".join(
        f"  {r['benchmark']}: {fmt_ratio(as_float(r['ratio']))}" for r in rows)


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.scale", __doc__, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
