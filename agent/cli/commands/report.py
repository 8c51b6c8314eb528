"""``nib report`` and ``nib eval``: the HTML report and the task suites."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from agent.cli.common import cli_settings, emit_json, err, fail, out, run_store, usdc

if TYPE_CHECKING:
    from agent.eval.suite import TaskOutcome

__all__ = ["app"]

app = typer.Typer()  # merged into the top-level `nib` command by agent.cli.app


@app.command("report")
def report_cmd(out_path: str = typer.Option(..., "--out", help="Where to write the HTML file."),
               limit: int = typer.Option(100)) -> None:
    """Write a self-contained HTML report: how runs ended, spend, steps, judge reliability."""
    from pathlib import Path

    from agent.cli.services import records_database
    from agent.report.page import ReportData, run_from_store, write_report
    from judge.calibration import BetaCalibrator

    settings = cli_settings()
    store = run_store()
    _, limits = settings.resolve_limits(model_local=False)
    from agent.report.spend import ledger_spend

    spend_of = ledger_spend(settings)  # each run's spend from the ledger, not its stored result
    runs = [run_from_store(r, store.events(str(r["run_id"])), spend_of(str(r["run_id"])))
            for r in store.runs(limit=limit)]
    data = ReportData(runs=runs, spend_cap_atomic=limits.spend_cap_atomic,
                      calibration=dict(BetaCalibrator(records_database(settings)).report()),
                      network=settings.network, max_steps=limits.max_steps)
    path = write_report(Path(out_path), data)
    out.print(f"wrote {path} ({len(runs)} runs)")


@app.command("eval")
def eval_cmd(suite: str = typer.Option("all", "--suite",
                                       help="builtin, heldout, paraphrase or all (builtin+heldout)."),
             as_json: bool = typer.Option(False, "--json"),
             only: list[str] = typer.Option([], "--only", help="Run only these task ids.")) -> None:
    """Run the task suites on a private devnet with the configured model (as `nib run`),
    graded by value and provenance; built-in and held-out accuracy apart."""
    from agent.eval.suite import EXTRA_SUITES, SUITES, run_suite

    if suite not in (*SUITES, *EXTRA_SUITES, "all"):
        fail(f"unknown suite {suite!r}; expected builtin, heldout, paraphrase or all. "
             "Fix: --suite all")

    def line(t: TaskOutcome) -> None:
        if not as_json:
            mark = "[green]✓[/]" if t.correct else "[red]✗[/]"
            miss = f" · miss: {t.miss}" if t.miss else ""
            err.print(f"{mark} {t.suite:<7} {t.id:<26} {t.stop_reason:<16} {t.provenance:<8} "
                      f"spend {usdc(t.spend_usdc):>12} steps {t.steps}{miss}")

    report = run_suite(suite, only=only or None, on_task=line, settings=cli_settings())
    if as_json:
        emit_json(report.to_json())
        return
    s = report.summary()
    out.print(f"model {s['model']} · profile {s['profile']}")
    for name, row in s["suites"].items():
        if row["tasks"]:
            out.print(f"{name}: {row['correct']}/{row['tasks']} ({row['accuracy']:.0%})")
    out.print(f"wrong-question answers {s['wrong_question_answers']} · spend "
              f"{usdc(s['total_spend_usdc'])} · spent without cover {s['spent_without_cover']}")
    out.print("answer lines: " + ", ".join(f"{k} {v}" for k, v in s["provenance"]["lines"].items()))
    out.print("stop reasons: " + ", ".join(f"{k} {v}" for k, v in s["stop_reasons"].items()))
    churn = s["churn_guard"]
    out.print(f"churn guard: threshold {churn['threshold']} · healthy streak p95 "
              f"{churn['healthy_streak_p95']} · false-stop rate {churn['false_stop_rate']:.1%}")
    if suite in EXTRA_SUITES:
        for cat, row in s["categories"].items():
            out.print(f"  {cat:<16} {row['correct']}/{row['tasks']} ({row['accuracy']:.0%}) "
                      f"wrong with exit 0: {row['wrong_exit0']}")
    for miss in s["misses"]:
        out.print(f"miss {miss['suite']}/{miss['id']}: {miss['why']}")
