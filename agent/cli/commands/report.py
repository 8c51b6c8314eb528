"""``nib report`` and ``nib eval``: the HTML report and the task suites."""

from __future__ import annotations

from typing import Any

import typer

from agent.cli.common import cli_settings, emit_json, err, fail, out, run_store, usdc

__all__ = ["app"]

app = typer.Typer()  # merged into the top-level `nib` command by agent.cli.app


@app.command("report")
def report_cmd(out_path: str = typer.Option(..., "--out", help="Where to write the HTML file."),
               limit: int = typer.Option(100)) -> None:
    """Write a self-contained HTML report: how runs ended, spend, steps, judge reliability."""
    from pathlib import Path

    from agent.report.page import ReportData, run_from_store, write_report
    from judge.calibration import BetaCalibrator

    settings = cli_settings()
    store = run_store()
    _, limits = settings.resolve_limits(model_local=False)
    runs = [run_from_store(r, store.events(r["run_id"])) for r in store.runs(limit=limit)]
    data = ReportData(runs=runs, spend_cap_atomic=limits.spend_cap_usdc,
                      calibration=dict(BetaCalibrator(settings.database).report()),
                      network=settings.network, max_steps=limits.max_steps)
    path = write_report(Path(out_path), data)
    out.print(f"wrote {path} ({len(runs)} runs)")


@app.command("eval")
def eval_cmd(suite: str = typer.Option("builtin", "--suite"), as_json: bool = typer.Option(False, "--json"),
             only: list[str] = typer.Option([], "--only", help="Run only these task ids.")) -> None:
    """Run the built-in task suite on a private devnet and count how runs end."""
    from agent.eval.suite import run_suite

    if suite != "builtin":
        fail(f"unknown suite {suite!r}; expected 'builtin'. Fix: --suite builtin")

    def line(t: Any) -> None:
        if not as_json:
            mark = "[green]✓[/]" if t.correct else "[red]✗[/]"
            err.print(f"{mark} {t.id:<26} {t.stop_reason:<18} spend {usdc(t.spend_usdc):>12} steps {t.steps} tokens {t.tokens}")

    report = run_suite(suite, only=only or None, on_task=line)
    if as_json:
        emit_json(report.to_json())
    else:
        s = report.summary()
        out.print(f"accuracy {s['correct']}/{s['tasks']} ({s['accuracy']:.0%}) · spend {usdc(s['total_spend_usdc'])} · "
                  f"spent without cover {s['spent_without_cover']}")
        out.print("stop reasons: " + ", ".join(f"{k} {v}" for k, v in s["stop_reasons"].items()))

