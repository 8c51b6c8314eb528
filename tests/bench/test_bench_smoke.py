"""Smoke test of the benchmarks: each runs with tiny iteration counts and yields a ratio.

No timing is asserted (timings belong in bench/RESULTS.md, not in pass/fail); only that
every benchmark runs end to end on a real Anvil, returns ours, peer and a finite
ratio, and that ``python -m bench`` writes the results file with the machine noted.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
# bench/ is a top-level folder, not an installed package: import it from the checkout.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import anatomy, context_tokens, roundtrip, throughput  # noqa: E402
from bench._util import BenchEnv, machine, median, percentile, ratio  # noqa: E402


@pytest.fixture(scope="module")
def env() -> Iterator[BenchEnv]:
    with BenchEnv() as bench_env:
        yield bench_env


def test_percentiles_interpolate_between_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert median(values) == 2.5
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 4.0
    assert percentile(list(range(1, 101)), 95) == pytest.approx(95.05)
    assert math.isnan(ratio(1.0, 0.0))
    with pytest.raises(ValueError, match="expected at least one measurement"):
        percentile([], 50)


def test_machine_notes_cpu_cores_ram_python_and_anvil() -> None:
    info = machine()
    assert set(info) >= {"cpu", "cores", "ram", "python", "anvil"}
    assert info["anvil"] and not info["anvil"].startswith("unknown")


@pytest.mark.parametrize(
    "module",
    [roundtrip, context_tokens, throughput, anatomy],
    ids=lambda m: m.__name__.rsplit(".", 1)[-1],
)
def test_benchmark_runs_quick_and_prints_a_ratio(
    module: Any, env: BenchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    result = module.run(quick=True, env=env)
    for row in result if isinstance(result, list) else [result]:
        assert row["ours"] and row["peer"] and row["kind"] in ("peer", "limit", "own")
        assert module is anatomy or (math.isfinite(row["ratio"]) and row["ratio"] > 0)
    print(module.report(result))
    assert capsys.readouterr().out.strip()


def test_roundtrip_and_throughput_measure_both_compositions_with_their_load(
    env: BenchEnv,
) -> None:
    """The default composition (services, records on) is measured beside the in-process one,
    against the same peer in one interleaved run, each row with the load it ran under."""
    rows = roundtrip.run(quick=True, env=env)
    assert [r["benchmark"] for r in rows] == [
        "x402 round trip, in-process (records on) vs the x402 client",
        "x402 round trip, services (nib run's default) vs the x402 client",
    ]
    assert all(r["load"]["text"] and "per core" in r["load"]["text"] for r in rows)
    # Each side's CPU by role, read from the kernel for every process on the path.
    for r in rows:
        for cpu in (r["cpu_ms"], r["peer_cpu_ms"]):
            assert set(cpu) == {"buyer", "seller", "chain"} and all(ms > 0 for ms in cpu.values())
    rates = throughput.run(quick=True, env=env)
    assert [r["kind"] for r in rates] == ["peer", "peer", "limit"]
    assert "pre-signed" in rates[2]["peer"]


def test_the_anatomy_counts_the_buyers_operations_only(env: BenchEnv) -> None:
    counts = anatomy.run(quick=True, env=env)["counts"]
    # The tool's one request is the paid one: it quotes from the judge's own read of the
    # seller's 402, which runs on the judge's thread and is one of the purchase's requests
    # all the same (two in all, as the x402 client's: the unpaid read and the paid one).
    assert counts["http GET"] == 1 and counts["sql commits, synced"] >= 1
    assert counts["http GET (judge's 402 read)"] == 1
    assert not any(k in counts for k in ("rpc eth_sendRawTransaction", "rpc eth_gasPrice"))
    # The wallet reads the head's time and its balance in one batch, one exchange.
    assert counts["rpc batch (eth_getBlockByNumber + balanceOf)"] == 1
    assert counts["rpc eth_getBlockByNumber"] == 1  # the quote's window, beside the 402


def test_judge_rows_compare_with_the_signing_and_recovery_limits() -> None:
    from bench import judge

    rows = judge.run(quick=True)
    assert [r["kind"] for r in rows] == ["limit", "limit"]
    assert "canonical form + EIP-191 sign + record" in rows[0]["peer"]
    assert "canonical form + EIP-191 recover" in rows[1]["peer"]
    assert all(math.isfinite(r["ratio"]) and r["ratio"] > 0 for r in rows)


def test_context_tokens_count_both_whole_requests(env: BenchEnv) -> None:
    peer, own = context_tokens.run(quick=True, env=env)
    assert peer["kind"] == "peer" and "PydanticAI" in peer["peer"]
    series = peer["peer_series"]
    assert len(series) == 11 and series == sorted(series)  # grows with every step's return
    ours = int(peer["ours"].split()[0])
    assert ours > 2 * own["series"][-1]["shaped"]  # the whole request, not the history alone
    assert [r["step"] for r in own["series"]] == list(range(1, 11))


def test_python_m_bench_writes_results_with_the_machine(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only",
         "loop_overhead,judge,context_tokens", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = out.read_text()
    assert "| kind | benchmark | ours | peer or limit | ratio | goal | met | load | notes |" in text
    for needle in ("| cpu |", "| cores |", "| ram |", "| python |", "| anvil |"):
        assert needle in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "x |" in line]
    assert len(rows) == 5, text  # loop overhead, judge sign and verify, context x2
    assert all("per core" in row for row in rows), rows
    assert "failed" not in "\n".join(rows)
    kinds = [row.split("|")[1].strip() for row in rows]
    assert kinds == sorted(kinds, key=["peer", "limit", "own"].index), kinds


def test_scale_stores_hold_the_rows_with_their_running_totals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk-built store reads back through the real schema, its running totals and
    calibration counts rebuilt in SQL: the wallet's verify finds no drifted total and p
    reads the stored outcomes; a reservation on it is refused by the treasury as usual."""
    from bench import scale
    from judge.calibration import BetaCalibrator
    from wallet import totals
    from wallet._store import Store

    monkeypatch.setattr(scale, "CACHE", tmp_path)
    path = scale.build(300, log=lambda _: None)
    assert scale.build(300, log=lambda _: None) == path  # kept, not rebuilt
    store = Store(path)
    with store.transaction() as tx:
        assert totals.check(tx) == [] and totals.committed(tx) == 300 * 20_000
    hits, total = BetaCalibrator(path).counts(scale.SUBJECT, scale.FACT)
    assert (hits, total) == (200, 300)
    assert len(scale._reserve_ms(path, 3)) == 3


def test_a_rows_own_load_and_counted_flag_reach_the_table() -> None:
    """The load a module sampled around a row (not the window around the whole module)
    is the one printed, and a counted row is never marked LOADED, however high it was."""
    from bench.__main__ import _judge_load, _normalise

    quiet = {"text": "0.10-0.20 (0.10 per core)", "per_core": 0.1, "loaded": False}
    busy = {"text": "5.00-6.00 (3.00 per core)", "per_core": 3.0, "loaded": True}
    timed = _normalise("m", {"ours": "1", "peer": "2", "ratio": 0.5, "met": True,
                             "load": quiet}, "")
    counted = _normalise("m", {"ours": "1", "peer": "2", "ratio": 0.5, "met": True,
                               "load": busy, "counted": True}, "")
    for row in (timed, counted):
        _judge_load(row, row.get("load") or busy)  # busy: the module's whole window
    assert timed["load"] == quiet and timed["met"] is True
    assert counted["load"] == busy and counted["met"] is True
    assert "LOADED" not in counted["notes"]


def test_scale_rows_carry_their_spread_and_say_at_least_only_over_the_box() -> None:
    from bench import scale

    runs = {"audit --run": [(2.0, 100.0)] * 3, "report": [(1.8, 100.0), (1.9, 101.0), (2.1, 99.0)],
            "reconcile": [(1.5, 90.0)] * 3}
    results = {n: scale._Measured(reserve=[0.4, 0.5, 0.6], reserve_cpu=[0.3],
                                  decide=[5000.0, 5100.0], commands=dict(runs))
               for n in (1_000, 10_000)}
    results[10_000].commands["reconcile"] = [(float("inf"), float("nan"))]
    rows = {r["benchmark"].split(",")[0]: r for r in scale._rows(
        results, (1_000, 10_000), {"text": "x"})}
    report = rows["scale: nib report"]
    assert "(1.80-2.10)" in report["ours"] and "(1.80-2.10)" in report["peer"]
    assert "p95" in rows["scale: per-payment reserve"]["ours"]
    reconciled = rows["scale: nib reconcile"]
    assert "at least" in reconciled["ours"] and "at least" not in reconciled["peer"]


def test_each_throughput_buyer_buys_a_resource_of_its_own() -> None:
    """nib keeps one live authorization per resource: two buyers of one resource take
    turns, which the x402 client does not. The paywall sells 7 token sheets, so at 8
    buyers two shared one (nib's throughput 12.7 against 20.3 paid req/s)."""
    from types import SimpleNamespace

    from agent.tools.x402.pay_http import resource_of

    env: Any = SimpleNamespace(paywall_url="http://127.0.0.1:8402")
    resources = {resource_of(throughput._url(env, b)) for b in range(throughput.BUYERS)}
    assert len(resources) == throughput.BUYERS, sorted(resources)
