"""``nib submit`` and ``nib worker``: the work queue (on PostgreSQL when NIB_DATABASE_URL
is set; see agent.queue and agent.worker)."""

from __future__ import annotations

import typer

from agent.cli.common import (
    EXIT_STOPPED,
    cli_runtime,
    cli_settings,
    emit_json,
    err,
    fail,
    out,
)

__all__ = ["app"]

app = typer.Typer()  # merged into the top-level `nib` command by agent.cli.app


@app.command("submit")
def submit_cmd(
    task: str = typer.Argument(..., help="The research question."),
    max_spend: str | None = typer.Option(None, "--max-spend", help="Spend cap for this task in USDC, e.g. 0.50"),
    as_json: bool = typer.Option(False, "--json", help="Print {task_id} as JSON."),
) -> None:
    """Queue a research task for `nib worker` (on PostgreSQL when NIB_DATABASE_URL is set)."""
    from agent.cli.commands.runs import parse_usdc
    from agent.queue import TaskQueue

    if not task.strip():
        fail('the task is empty; expected a research question. Fix: nib submit "What is the base fee?"')
    cap = parse_usdc(max_spend) if max_spend else None
    task_id = TaskQueue(cli_settings().database).submit(task, max_spend=cap)
    if as_json:
        emit_json({"task_id": task_id})
    else:
        out.print(task_id)


@app.command("worker")
def worker_cmd(
    concurrency: int = typer.Option(1, "--concurrency", min=1, help="Tasks run at once."),
    drain: bool = typer.Option(False, "--drain", help="Exit once no task is queued or running."),
    lease_s: float = typer.Option(30.0, "--lease", min=1.0, help="Seconds a task stays ours without a heartbeat."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON on exit."),
) -> None:
    """Run queued tasks, N at a time, and recover the tasks of workers that died."""
    import asyncio
    from dataclasses import asdict

    rt = cli_runtime(cli_settings())
    worker = rt.worker(concurrency=concurrency, lease_s=lease_s)
    if not as_json:
        err.print(f"[bold]nib worker[/] {worker.name} · concurrency {concurrency} · "
                  f"wallet {rt.wallet.address} · {'drain' if drain else 'until interrupted'}")
    try:
        summary = asyncio.run(worker.run(drain=drain))
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_STOPPED) from None
    if as_json:
        emit_json(asdict(summary))
    else:
        out.print(f"finished {len(summary.finished)} · stopped {len(summary.stopped)} · "
                  f"recovered {len(summary.recovered)}")
