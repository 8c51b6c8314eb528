"""``nib submit`` and ``nib worker``: the work queue (on PostgreSQL when NIB_DATABASE_URL
is set; see agent.queue and agent.worker)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from agent.cli.commands.history import plural
from agent.cli.common import (
    EXIT_INTERRUPTED,
    IN_PROCESS_HELP,
    cli_runtime,
    cli_settings,
    emit_json,
    err,
    out,
    short,
    usdc,
)

if TYPE_CHECKING:
    from agent.loop.result import AgentResult
    from agent.queue import QueuedTask

__all__ = ["app"]

app = typer.Typer()  # merged into the top-level `nib` command by agent.cli.app


@app.command("submit")
def submit_cmd(
    task: str = typer.Argument(..., help="The research question."),
    max_spend: str | None = typer.Option(None, "--max-spend", help="Spend cap for this task in USDC, e.g. 0.50"),
    as_json: bool = typer.Option(False, "--json", help="Print {task_id} as JSON."),
) -> None:
    """Queue a research task for `nib worker` (on PostgreSQL when NIB_DATABASE_URL is set).

    With the judge and wallet services running, the task's limits are registered with the
    judge here, as the user: the worker that runs it never holds the judge's admin token.
    """
    from agent.cli.commands.runs import check_task, parse_usdc
    from agent.cli.services import running
    from agent.queue import TaskQueue

    check_task(task, "submit")
    cap = parse_usdc(max_spend) if max_spend else None
    settings = cli_settings()
    queue = TaskQueue(settings.database)
    task_id = queue.submit(task, max_spend=cap)
    if running(settings.home) is not None:
        from agent.cli.services import register_task, task_limits

        rt = cli_runtime(settings)
        assert rt.services is not None
        register_task(settings, rt.services,
                      task_limits(rt, task_id, task, rt.queued_limits(cap)[1]), queued=True)
    else:
        err.print(f"task {task_id} is queued but not registered with the judge (the services "
                  "are not running): a worker's payments for it will be refused. Fix: `nib "
                  "services up`, then `nib submit` it again.", highlight=False)
    if as_json:
        emit_json({"task_id": task_id})
    else:
        out.print(task_id)


def _task_line(task: QueuedTask, result: AgentResult) -> None:
    """One line per task a worker ran: how it ended, its steps, spend and time."""
    tag = "finished" if result.finished else "stopped"
    out.print(f"{task.id} {tag} {result.stop_reason} · {plural(result.steps, 'step')} · "
              f"{usdc(result.spend.usdc_atomic)} · {result.elapsed_s:.1f} s · {short(task.task, 60)}",
              markup=False, highlight=False)


def _not_run_line(task: QueuedTask, exc: Exception) -> None:
    """One line for a task the worker took but could not run (or whose run raised): the
    reason in full, since it names the fix; `nib runs` keeps it as the task's note."""
    from agent.worker import STOP_WORKER_ERROR

    out.print(f"{task.id} not run {STOP_WORKER_ERROR} · {short(task.task, 60)}: {exc}",
              markup=False, highlight=False, soft_wrap=True)


@app.command("worker")
def worker_cmd(
    concurrency: int = typer.Option(1, "--concurrency", min=1, help="Tasks run at once."),
    drain: bool = typer.Option(False, "--drain", help="Exit once no task is queued or running."),
    lease_s: float = typer.Option(30.0, "--lease", min=1.0, help="Seconds a task stays ours without a heartbeat."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON on exit."),
    unconfined: bool = typer.Option(
        False, "--unconfined",
        help="Run even where the agent process cannot be confined (no Landlock; off the devnet).",
    ),
    in_process: bool = typer.Option(False, "--in-process", help=IN_PROCESS_HELP),
) -> None:
    """Run queued tasks, N at a time, and recover the tasks of workers that died."""
    import asyncio
    from dataclasses import asdict

    from agent.cli.services import worker_token

    rt = cli_runtime(cli_settings(), in_process=in_process)
    # Never registers what it finds in the queue (the agents' database, which an agent may
    # write): `nib submit` registered each task. A worker token (taken here, as the user,
    # in a child, before confining) claims only the tokens of tasks registered as queued.
    token = worker_token(rt.settings, rt.services) if rt.services is not None else None
    rt.confine(unconfined=unconfined)  # before the first task's first model call
    worker = rt.worker(concurrency=concurrency, lease_s=lease_s, worker_token=token,
                       on_result=None if as_json else _task_line,
                       on_error=None if as_json else _not_run_line)
    if not as_json:
        err.print(rt.first_line(), markup=False, highlight=False, soft_wrap=True)
        err.print(f"[bold]nib worker[/] {worker.name} · concurrency {concurrency} · "
                  f"wallet {rt.wallet.address} · {'drain' if drain else 'until interrupted'}")
    try:
        summary = asyncio.run(worker.run(drain=drain))
    except KeyboardInterrupt:  # the tasks it ran were cancelled: each run ends interrupted
        err.print(f"interrupted (Ctrl-C): the tasks this worker was running end `interrupted`; "
                  f"their queue leases run out within {lease_s:.0f} s, then the next `nib worker` "
                  "recovers them (queued again when nothing of them was paid). Fix: `nib runs` "
                  "shows each one.", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if as_json:
        emit_json(asdict(summary))
    else:
        out.print(f"finished {len(summary.finished)} · stopped {len(summary.stopped)} · "
                  f"recovered {len(summary.recovered)}")
