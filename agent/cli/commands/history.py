"""``nib runs`` and ``nib show``: reading runs and their traces, in the status words of
agent.store.RunStatus (the same in the report and in every ``--json``)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import typer

from agent.cli.common import cli_settings, emit_json, fail, out, resolve_run, run_store, short, usdc
from agent.jsonvalues import JSONObject, as_float, as_int, as_list, as_object

if TYPE_CHECKING:
    from agent.queue import QueuedTask
    from agent.report.spend import SpendOf
    from agent.store import RunStore

__all__ = ["app", "event_data", "graded_answer", "plural", "result_of", "run_rows"]

app = typer.Typer()  # merged into the top-level `nib` command by agent.cli.app


def result_of(row: Mapping[str, object]) -> JSONObject:
    raw = row.get("result")
    if isinstance(raw, str) and raw:
        try:
            return as_object(json.loads(raw))
        except ValueError:
            return {}
    return as_object(raw)


def event_data(ev: Mapping[str, object]) -> JSONObject:
    data = ev.get("data")
    return as_object(json.loads(data) if isinstance(data, str) else data)


def progress_of(store: RunStore, row: Mapping[str, object]) -> tuple[int, float, str]:
    """A running (or paused) run's current step, elapsed seconds and last event, read from
    its trace: a run that has not stopped has no result to read them from yet."""
    step, last = 0, ""
    for ev in store.events(str(row["run_id"])):
        data = event_data(ev)
        if isinstance(data.get("step"), int):
            step = max(step, as_int(data["step"]))
        last = str(ev.get("type") or "")
    started = as_float(row.get("started_at") or time.time())
    return step, max(0.0, time.time() - started), last


def _row(
    store: RunStore, row: JSONObject | None, task: QueuedTask | None, spend_of: SpendOf
) -> JSONObject:
    """One line of ``nib runs``: a run row (with its queue row, if a worker ran it), or a
    queue row whose run has not started. Its spend is the ledger's (agent.report.spend)."""
    from agent.report.spend import reported_spend
    from agent.store import run_status

    res = result_of(row) if row else {}
    spend = reported_spend(as_object(res.get("spend")), spend_of(str(row["run_id"]))) if row else {}
    tokens = as_object(res.get("tokens"))
    status = run_status(row, task.status if task else None)
    steps, elapsed = res.get("steps"), res.get("elapsed_s")
    current: str | None = None
    if row is not None and status in ("running", "paused"):
        steps, elapsed, current = progress_of(store, row)
    first = (as_list(res.get("lines")) or [None])[0]
    answer = str(first.get("text")) if isinstance(first, dict) else \
        str(res.get("answer") or "").split("\n")[0]
    return {
        "run_id": row["run_id"] if row else (task.id if task else None),
        "task": (row or {}).get("task") or (task.task if task else None),
        "status": status, "worker": task.worker if task else None,
        # The profile the run applied, by name (custom: a flag or [limits] changed a value).
        "profile": (row or {}).get("profile"),
        "stop_reason": res.get("stop_reason") or (row or {}).get("stop_reason")
        or (task.stop_reason if task else None),
        "steps": steps or 0, "current": current,
        "spend_usdc_atomic": as_int(spend.get("usdc_atomic", 0) or 0),
        "gas_wei": as_int(spend.get("gas_wei", 0) or 0), "spend_source": spend.get("source"),
        "tokens": as_int(tokens.get("input", 0) or 0) + as_int(tokens.get("output", 0) or 0),
        "elapsed_s": round(as_float(elapsed or 0.0), 1), "answer": answer or None,
        # Why the queue closed a task (a worker's error, a refused claim and its fix).
        "note": (task.note or None) if task else None,
        "started_at": (row or {}).get("started_at") or (task.started_at or task.created_at
                                                         if task else None),
    }


def run_rows(store: RunStore, limit: int, spend_of: SpendOf | None = None) -> list[JSONObject]:
    """The ``limit`` newest runs and queued tasks, one row each, with the same figures
    whatever the limit: a task a worker ran is read from its run row even when that row
    is not among the newest ``limit`` runs. ``spend_of``: each run's spend from the ledger
    (default: this home's, agent.report.spend)."""
    from agent.queue import TaskQueue
    from agent.report.spend import ledger_spend

    spend_of = spend_of or ledger_spend(cli_settings())

    runs = {str(r["run_id"]): r for r in store.runs(limit=limit)}
    tasks = {t.id: t for t in TaskQueue(store.db).tasks(limit=limit)}
    for task_id in tasks.keys() - runs.keys():
        found = store.run(task_id)
        if found is not None:
            runs[task_id] = found
    rows = [_row(store, runs.get(i), tasks.get(i), spend_of) for i in runs.keys() | tasks.keys()]
    rows.sort(key=lambda r: (as_float(r["started_at"] or 0), str(r["run_id"])), reverse=True)
    return rows[:limit]


@app.command("runs")
def runs_cmd(as_json: bool = typer.Option(False, "--json"),
             limit: int = typer.Option(50, "--limit", min=1, help="Rows to show, newest first.")) -> None:
    """One row per run or queued task: status, stop reason, steps, spend, answer."""
    from rich.table import Table

    rows = run_rows(run_store(), limit)
    if as_json:
        emit_json(rows)
        return
    table = Table("run", "task", "status", "stop", "steps", "spend", "elapsed", "answer", "worker")
    for r in rows:
        steps = f"{r['steps']} (now: {r['current']})" if r["current"] else str(r["steps"])
        table.add_row(str(r["run_id"]), short(r["task"], 32), str(r["status"]), str(r["stop_reason"] or "-"),
                      steps, usdc(r["spend_usdc_atomic"]), f"{r['elapsed_s']:.1f} s",
                      short(r["answer"] or "-", 36), str(r["worker"] or "-"))
    out.print(table)


@app.command("show")
def show_cmd(run_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """One run's trace as a timeline: proposals, gates, verdicts, calls, observations, spend."""
    from agent.store import run_status

    store = run_store()
    run_id = str(resolve_run(store, run_id))
    row = store.run(run_id)
    if row is None:  # a queued task that has not started
        fail(f"run {run_id} is queued and has not started; expected a run with a trace. "
             "Fix: `nib worker` runs it; `nib runs` shows its status.")
    events = store.events(run_id)
    status = run_status(row)
    res = result_of(row)
    from agent.report.spend import ledger_spend, reported_spend

    # The ledger's, not the run's (agent.report.spend): nothing, for a run that signed nothing.
    res["spend"] = reported_spend(as_object(res.get("spend")), ledger_spend(cli_settings())(run_id))
    if as_json:
        shown: dict[str, object] = {**row, "status": status, "result": res}
        emit_json({"run": shown, "events": events})
        return
    out.print(f"[bold]{run_id}[/] {status} · {row.get('task')}", highlight=False)
    for ev in events:
        data = event_data(ev)
        out.print(f"  {ev.get('seq'):>3} [cyan]{ev.get('type'):<16}[/] {short(_event_line(data), 110)}",
                  highlight=False)
        for line in _market_lines(ev.get("type"), data):
            out.print(f"        {line}", highlight=False, markup=False, soft_wrap=True)
    protocols = [event_data(ev).get("protocol") for ev in events if ev.get("type") == "model.protocol"]
    if protocols:
        fallback = " (fallback: the server rejected native tools)" if protocols[-1] == "json-text" else ""
        out.print(f"tools: [bold]{protocols[-1]}[/]{fallback}", highlight=False)
    if status in ("running", "paused"):
        step, elapsed, last = progress_of(store, row)
        out.print(f"{status}: step {step} · {elapsed:.1f} s since it started · last event {last or '-'}",
                  highlight=False)
    if res:
        out.print(f"{status}: stop [bold]{res.get('stop_reason')}[/] after {plural(as_int(res.get('steps') or 0), 'step')}"
                  f" · answer provenance: {res.get('provenance', 'none')}", highlight=False)
        out.print(graded_answer(str(res.get("answer") or ""), as_list(res.get("lines"))),
                  highlight=False, markup=False)
        if res.get("message"):
            out.print(str(res["message"]), highlight=False, markup=False)
    out.print(_spend_line(as_object(res["spend"])), highlight=False, markup=False, soft_wrap=True)


def _spend_line(sp: Mapping[str, object]) -> str:
    """``nib show``'s spend line, saying where it was read from (agent.report.spend)."""
    if sp.get("ledger") == "unsigned":
        return "spend: none, nothing was signed for this run (the ledger holds no payment or gas of it)"
    figures = (f"spend {usdc(sp.get('usdc_atomic') or 0)} (settled {usdc(sp.get('settled_atomic') or 0)}, "
               f"outstanding {usdc(sp.get('outstanding_atomic') or 0)}) + gas {sp.get('gas_wei') or 0} wei")
    if sp.get("source") == "ledger":
        return f"{figures}, read from the ledger"
    why = "ledger unreadable" if sp.get("ledger") == "unreadable" else "not in this ledger"
    return f"{figures}, read from the run ({why}: {sp.get('ledger_problem')})"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def graded_answer(answer: str, lines: Sequence[object]) -> str:
    """The answer one line per row, each led by its provenance grade (observed, derived,
    asserted, not-answered, note); the raw answer when the run recorded no grades. A line
    is an AnswerLine or its stored JSON object."""
    rows = [(_part(x, "grade"), _part(x, "text")) for x in lines]
    if not rows:
        return answer
    return "\n".join(f"  {grade:<12} {text}" for grade, text in rows)


def _part(line: object, name: str) -> str:
    value = getattr(line, name, None)
    if not value and isinstance(line, Mapping):
        value = line[name]
    return str(value)


def _market_lines(type_: object, data: Mapping[str, object]) -> list[str]:
    """The market details under a timeline line: offers discovered, the seller quoted, the
    full verdict reason when offers were compared, and the excerpt of what was bought."""
    lines = []
    for offer in map(as_object, as_list(data.get("offers"))):
        price = usdc(offer.get("price")) if offer.get("price") is not None else "?"
        tool = f"#{offer['tool']}" if offer.get("tool") else ""
        allowed = "" if offer.get("allowlisted") else " (not allowlisted)"
        lines.append(f"offer {offer.get('method')} {offer.get('resource')}{tool} {price} "
                     f"[{', '.join(map(str, as_list(offer.get('kinds')))) or '-'}]{allowed}")
    if type_ == "quote" and data.get("seller"):
        lines.append(f"quoted {usdc(data.get('amount'))} from {data['seller']}")
    if type_ == "verdict" and str(data.get("reason", "")).startswith("best of"):
        lines.append(f"reason: {data['reason']}")
    cut = data.get("excerpt")
    if isinstance(cut, Mapping):
        if cut.get("type") == "json":
            fields = "; ".join(f"{k}={v}" for k, v in as_object(cut.get("fields")).items())
            lines.append(f"excerpt: {short(fields, 400)}")
        else:
            lines.append(f"excerpt: {short(cut.get('text'), 400)}")
    return lines


def _event_line(data: Mapping[str, object]) -> str:
    keys = ("step", "tool", "action", "decision", "reason", "ok", "summary", "cost_usdc", "amount", "tx_hash",
            "protocol", "why")
    parts = [f"{k}={data[k]}" for k in keys if k in data and data[k] not in (None, "")]
    return " ".join(parts) if parts else json.dumps(data, default=str)

