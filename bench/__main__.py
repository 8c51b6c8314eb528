"""``python -m bench``: run every benchmark and write bench/RESULTS.md.

Runs the loop-overhead and judge benchmarks (their own modules), then starts one private
devnet (Anvil + TestUSDC + the x402 paywall + the JEV judge) for the x402 round trip,
context-token and throughput benchmarks. Every row is ours / peer measured side by side
in this run, on this machine (noted in the file). A benchmark that fails is written as a
failed row with its error, and the command exits 1.

``python -m bench [--quick] [--only NAME,...] [--out PATH]``
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib
import inspect
import io
import math
import os
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, TypedDict

from agent.jsonvalues import as_float, as_list
from bench._util import BenchEnv, LoadWindow, fmt_ratio, machine

__all__ = ["BENCHMARKS", "collect", "main", "render"]

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = Path(__file__).resolve().parent / "RESULTS.md"

#: Run order: the devnet-free benchmarks first, then the ones sharing the devnet.
BENCHMARKS = (
    "loop_overhead",
    "judge",
    "scale",
    "anatomy",
    "roundtrip",
    "context_tokens",
    "throughput",
    "workers",
)
#: Table order: like-for-like comparisons with a real peer first, then ratios against a
#: physical limit of this machine, then our own before/after figures, failures last.
KINDS = ("peer", "limit", "budget", "own", "failed")
_NEEDS_DEVNET = frozenset({"anatomy", "roundtrip", "context_tokens", "throughput", "workers"})
#: Command-line flags for modules that are run as scripts (no ``run()`` to import).
_SCRIPT_ARGS: dict[str, dict[bool, list[str]]] = {
    "loop_overhead": {True: ["--runs", "3"], False: []},
}
_SCRIPT_TIMEOUT_S = 1800


# ------------------------------------------------------------------------- adapters


class ResultRow(TypedDict, total=False):
    """One row of RESULTS.md (a failed module's row has ``failed``)."""

    kind: str
    goal: str
    met: bool | None
    benchmark: str
    ours: str
    peer: str
    ratio: float
    notes: str
    details: list[str]
    module: str
    load: dict[str, object] | None
    counted: bool
    seconds: float
    failed: bool


class _Run(Protocol):
    """A benchmark module's ``run`` (it takes ``quick`` and ``env`` when it names them)."""

    def __call__(self, **kwargs: object) -> object: ...


def _call_run(fn: _Run, quick: bool, env: BenchEnv | None) -> object:
    params = inspect.signature(fn).parameters
    kwargs: dict[str, object] = {}
    if "quick" in params:
        kwargs["quick"] = quick
    if "env" in params and env is not None:
        kwargs["env"] = env
    result = fn(**kwargs)
    if inspect.iscoroutine(result):
        import asyncio

        result = asyncio.run(result)
    return result


def _first(data: Mapping[str, object], *keys: str) -> object:
    for key in keys:
        if key in data and data[key] is not None:
            return data[key]
    return None


def _normalise(name: str, data: Mapping[str, object], printed: str) -> ResultRow:
    """A row from whatever dict a benchmark's ``run()`` returned (others' modules too)."""
    given = _first(data, "ratio", "ratio_median", "median_ratio")
    try:
        ratio = as_float(given) if given is not None else _ratio_from_text(printed)
    except (TypeError, ValueError):
        ratio = _ratio_from_text(printed)
    details = as_list(data.get("details"))
    if not details:
        details = [line for line in printed.splitlines() if line.strip()]
    met = data.get("met")
    load = data.get("load")
    return {
        "kind": str(data.get("kind") or "peer"),
        "goal": str(data.get("goal") or "-"),
        "met": None if met is None else bool(met),
        "benchmark": str(_first(data, "benchmark", "name", "title") or name),
        "ours": _cell(_first(data, "ours", "nib", "ours_label", "ours_value")),
        "peer": _cell(_first(data, "peer", "peer_label", "peer_value", "baseline")),
        "ratio": ratio,
        "notes": _cell(_first(data, "notes", "note", "description") or ""),
        "details": [str(d) for d in details],
        "module": name,
        # The row's own load sample (taken around its measurement, not the module's) and
        # whether it was counted rather than timed: both decide how the row is judged.
        "load": load if isinstance(load, dict) else None,
        "counted": bool(data.get("counted")),
    }


def _cell(value: object) -> str:
    if value is None:
        return "?"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_cell(v)}" for k, v in value.items())
    return str(value)


def _ratio_from_text(text: str) -> float:
    match = re.search(r"ratio[^\n]*?([0-9]+(?:\.[0-9]+)?)\s*x", text, re.IGNORECASE)
    return float(match.group(1)) if match else math.nan


def _from_script(name: str, quick: bool) -> ResultRow:
    """Run ``python -m bench.NAME`` and read its printed figures."""
    args = _SCRIPT_ARGS.get(name, {}).get(quick, ["--quick"] if quick else [])
    cmd = [sys.executable, "-m", f"bench.{name}", *args]
    proc = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=_SCRIPT_TIMEOUT_S, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(cmd[1:])}` exited {proc.returncode}: "
            f"{(proc.stderr or proc.stdout).strip()[-600:]}"
        )
    out = proc.stdout
    row = _normalise(name, {}, out)
    if name == "loop_overhead":
        nib = re.search(r"nib loop\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)", out)
        pai = re.search(r"pydantic-ai\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)", out)
        row["benchmark"] = "loop overhead per step (median)"
        row["ours"] = f"{nib.group(1)} ms/step (p95 {nib.group(2)}, best {nib.group(3)})" if nib else "?"
        row["peer"] = (f"{pai.group(1)} ms/step (p95 {pai.group(2)}, best {pai.group(3)}) "
                       "(PydanticAI)" if pai else "?")
        row["notes"] = (
            "nib loop / PydanticAI Agent loop on the same scripted 6-step task, zero-latency "
            "model and tool doubles; see details."
        )
    return row


def _run_one(name: str, quick: bool, env: BenchEnv | None) -> list[ResultRow]:
    try:
        module = importlib.import_module(f"bench.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"bench.{name}":
            raise RuntimeError(f"bench/{name}.py does not exist yet") from exc
        raise
    run = getattr(module, "run", None)
    if not callable(run):
        return [_from_script(name, quick)]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        data = _call_run(run, quick, env)
    text = printed.getvalue()
    report = getattr(module, "report", None)
    if isinstance(data, list):  # a module measuring several goals returns one row each
        rows = [_normalise(name, d, text) for d in data]
        if callable(report) and not any(d.get("details") for d in data):
            with contextlib.suppress(Exception):
                for row in rows:
                    row["details"] = str(report(data)).splitlines()
        return rows
    if not isinstance(data, dict):
        return [_normalise(name, {}, text)]
    row = _normalise(name, data, text)
    if callable(report) and not data.get("details"):
        with contextlib.suppress(Exception):
            row["details"] = str(report(data)).splitlines()
    return [row]


def collect(
    names: tuple[str, ...], quick: bool, log: Callable[[str], None] = print
) -> list[ResultRow]:
    """Run ``names`` in order; a failure becomes a row with the error, never a crash."""
    rows: list[ResultRow] = []
    env: BenchEnv | None = None
    with contextlib.ExitStack() as stack:
        for name in names:
            log(f"bench: {name} ...")
            start = time.perf_counter()
            window = LoadWindow()
            window.sample()
            try:
                if name in _NEEDS_DEVNET and env is None:
                    env = stack.enter_context(BenchEnv())
                got = _run_one(name, quick, env if name in _NEEDS_DEVNET else None)
            except Exception as exc:  # noqa: BLE001 - reported in RESULTS.md, exit 1
                got = [
                    {
                        "kind": "failed",
                        "goal": "-",
                        "met": None,
                        "benchmark": name,
                        "ours": "failed",
                        "peer": "-",
                        "ratio": math.nan,
                        "notes": f"{type(exc).__name__}: {exc}",
                        "details": traceback.format_exc().splitlines()[-8:],
                        "module": name,
                        "failed": True,
                    }
                ]
            seconds = time.perf_counter() - start
            window.sample()
            for row in got:
                row["seconds"] = seconds
                _judge_load(row, row.get("load") or window.summary())
                log(
                    f"bench: {row['benchmark']}: ours {row['ours']} | peer {row['peer']} | "
                    f"ratio {fmt_ratio(row['ratio'])} ({seconds:.1f} s)"
                )
            rows.extend(got)
    order = {kind: i for i, kind in enumerate(KINDS)}
    return sorted(rows, key=lambda r: order.get(r.get("kind", "peer"), len(KINDS)))


def _judge_load(row: ResultRow, load: dict[str, object]) -> None:
    """Note the load a row was measured under; above 1.0 per core the row is marked and
    its goal not judged (queueing waits on both sides pull any ratio toward 1)."""
    row["load"] = load
    if row.get("counted"):  # counted, not timed: no load can move it
        return
    if load.get("loaded") and row.get("met") is not None:
        row["met"] = None
        row["notes"] = (
            f"LOADED ({load['per_core']:.2f} per core > 1.0): not compared with the goal. "
            + str(row.get("notes", ""))
        )


# ------------------------------------------------------------------------- output


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _load_text(load: object) -> str:
    return str(load.get("text", "?")) if isinstance(load, dict) else str(load or "?")


def render(
    rows: list[ResultRow],
    mach: dict[str, str],
    *,
    quick: bool,
    started: dt.datetime,
    load: tuple[str, str],
    command: str,
) -> str:
    lines = [
        "# nib benchmarks",
        "",
        f"Generated by `{command}` on {started:%Y-%m-%d %H:%M UTC}"
        + (" (quick mode: tiny iteration counts, not for quoting)." if quick else "."),
        "Every ratio is **ours / peer** (or ours / limit), both measured side by side in "
        "this run on this machine: for latency and tokens below 1 means fewer ms or tokens "
        "than the peer (better); for rates it is the share of the peer's or the limit's "
        "rate reached (higher is better). Rows come in this order: **peer**, a like-for-like "
        "comparison with another real implementation doing the same job; **limit**, the "
        "physical limit of this machine for the same work (nothing can do better); "
        "**budget**, an absolute budget set by the issue where no peer exists (the ratio is "
        "ours / budget, below 1 meets it); **own**, nib against another configuration of "
        "itself. The load column is the lowest-highest 1-minute load average sampled while "
        "the row was measured (per core in brackets); a row above 1.0 per core is marked "
        "LOADED and its goal is not judged. Every figure is a median over repeated, "
        "interleaved measurements with its spread (p95 or the per-round range).",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {_md(v)} |" for k, v in mach.items()),
        f"| load average (1/5/15 min) | {load[0]} at start, {load[1]} at end |",
        "",
        "## Results",
        "",
        "| kind | benchmark | ours | peer or limit | ratio | goal | met | load | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        met = {True: "yes", False: "**no**", None: "-"}[r.get("met")]
        lines.append(
            f"| {r.get('kind', 'peer')} | {_md(r['benchmark'])} | {_md(r['ours'])} | "
            f"{_md(r['peer'])} | {fmt_ratio(r['ratio'])} | {_md(r.get('goal', '-'))} | "
            f"{met} | {_md(_load_text(r.get('load')))} | {_md(r['notes'])} |"
        )
    lines += _planner_accuracy()
    lines += ["", "## Details", ""]
    printed: set[tuple[str, ...]] = set()
    for r in rows:
        key = (r["module"], *map(str, r.get("details") or ()))
        if key in printed:
            continue  # a module measuring several rows prints its details once
        printed.add(key)
        lines += [
            f"### {r['benchmark']} (`bench/{r['module']}.py`, {r.get('seconds', 0):.1f} s)",
            "",
            "```",
            *(str(d) for d in r.get("details") or ["(no details printed)"]),
            "```",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


PLANNER_ACCURACY = Path(__file__).resolve().parent / "PLANNER_ACCURACY.md"


def _planner_accuracy() -> list[str]:
    """The planner accuracy section (offline planner vs the local model on the paraphrase
    suite), copied from the file its own command wrote with its date, commit and load: too
    slow for every `make bench` (the local model takes minutes per task on 2 cores)."""
    if not PLANNER_ACCURACY.exists():
        return []
    text = PLANNER_ACCURACY.read_text(encoding="utf-8").strip().splitlines()
    return ["", "## " + text[0].lstrip("# "), *text[1:]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny iteration counts")
    parser.add_argument(
        "--only", default="", help=f"comma-separated subset of: {', '.join(BENCHMARKS)}"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write")
    args = parser.parse_args(argv)
    names = tuple(n.strip() for n in args.only.split(",") if n.strip()) or BENCHMARKS
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmarks {unknown}; expected names from {list(BENCHMARKS)}")
    started = dt.datetime.now(dt.UTC)
    load_start = _loadavg()
    mach = machine()
    rows = collect(names, args.quick)
    command = "python -m bench" + (" --quick" if args.quick else "")
    if args.only:
        command += f" --only {args.only}"
    text = render(
        rows,
        mach,
        quick=args.quick,
        started=started,
        load=(load_start, _loadavg()),
        command=command,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, args.out)
    print(f"bench: wrote {args.out}")
    for r in rows:
        print(
            f"  [{r.get('kind', 'peer')}] {r['benchmark']}: {fmt_ratio(r['ratio'])} "
            f"({r['ours']} vs {r['peer']}; goal {r.get('goal', '-')})"
        )
    return 1 if any(r.get("failed") for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
