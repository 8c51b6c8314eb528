"""``nib run``, ``approve``, ``deny``, ``runs`` and ``show``: running tasks and reading
their traces."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import typer

from agent.cli.common import (
    EXIT_FINISHED,
    EXIT_STOPPED,
    cli_runtime,
    cli_settings,
    emit_json,
    err,
    fail,
    out,
    run_store,
    short,
    usdc,
)
from chain.money import ATOMIC_PER_USDC

if TYPE_CHECKING:
    from agent.loop.result import AgentResult

__all__ = ["app"]

app = typer.Typer()  # merged into the top-level `nib` command by agent.cli.app


DEMO_TASK = (
    "What is the current base fee in gwei, the latest block number, and who issues USDC "
    "according to the token fact sheet?"
)


def _progress(run_id: str, type_: str, data: dict[str, Any]) -> None:
    """Live per-step progress: one line per proposal, verdict, call, spend and stop."""
    if type_ == "proposal":
        what = data.get("tool") or data.get("action") or "?"
        err.print(f"[dim]step {data.get('step', '?')}[/] propose [bold]{what}[/] {short(data.get('args'))}")
    elif type_ == "gate.skip":
        err.print(f"  [yellow]skipped[/] {short(data.get('why') or data.get('reason'))}")
    elif type_ == "verdict":
        colour = {"approve": "green", "refuse": "red", "escalate": "magenta", "answer": "cyan"}.get(
            str(data.get("decision")), "white")
        price = data.get("amount")
        price_s = f" price {usdc(price)}" if price else ""
        err.print(f"  judge [{colour}]{data.get('decision')}[/]{price_s}  {short(data.get('reason'), 90)}")
    elif type_ == "tool.call":
        ok = "[green]ok[/]" if data.get("ok") else "[red]failed[/]"
        cost = data.get("cost_usdc") or 0
        err.print(f"  {data.get('tool')} {ok}{' cost ' + usdc(cost) if cost else ''}  {short(data.get('summary'), 90)}")
    elif type_ == "spend":
        gas = f" + gas {data['gas_wei']} wei" if data.get("gas_wei") else ""
        total = f"  (run total {usdc(data['total_usdc'])})" if "total_usdc" in data else ""
        tx = f"  tx {data['tx_hash']}" if data.get("tx_hash") else ""
        err.print(f"  [bold]spent[/] {usdc(data.get('usdc') or 0)}{gas}{total}{tx}")
    elif type_ == "stop":
        err.print(f"[bold]stop[/] {data.get('reason')}")


def _print_result(result: Any, as_json: bool) -> int:
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    else:
        tag = "[green]finished[/]" if result.finished else "[yellow]stopped[/]"
        out.print(f"\n{tag} [bold]{result.stop_reason}[/] after {result.steps} steps"
                  f"{' (partial answer)' if result.partial else ''}")
        out.print(f"\n{graded_answer(result.answer, result.lines)}\n", markup=False, highlight=False)
        out.print(f"answer provenance: [bold]{result.provenance}[/]")
        spend = result.spend
        out.print(f"spend {usdc(spend.usdc_atomic)} + gas {spend.gas_wei} wei · tokens "
                  f"{result.tokens.input}+{result.tokens.output}"
                  f"{' (estimated)' if result.tokens.estimated else ''} · {result.elapsed_s:.1f} s · run {result.run_id}")
        if result.message:
            out.print(result.message, markup=False, highlight=False)
        for tx in run_txs(result.run_id):
            out.print(f"paid {usdc(tx['amount'])} to {tx['recipient']} · tx {tx['tx_hash']} ({tx['status']})")
    return EXIT_FINISHED if result.finished else EXIT_STOPPED


def run_txs(run_id: str) -> list[dict[str, Any]]:
    """The run's settled payments, from the wallet's events in its own trace (the agent
    process cannot open the services' ledger; `nib audit` is the record)."""
    try:
        events = run_store().events(run_id)
    except Exception:  # the summary line is a convenience; the audit command is the record
        return []
    return [{**_event_data(ev), "status": "settled"} for ev in events
            if ev.get("type") == "wallet.settled" and _event_data(ev).get("tx_hash")]


@app.command("run")
def run_cmd(
    task: str = typer.Argument("", help="The research question."),
    as_json: bool = typer.Option(False, "--json", help="Print the AgentResult as JSON."),
    profile: str | None = typer.Option(None, help="cost-optimized | quality-first | local-guarded"),
    model: str | None = typer.Option(None, help="Model name (with NIB_MODEL_PROVIDER)."),
    network: str | None = typer.Option(None, help="anvil | base-sepolia | custom"),
    max_spend: str | None = typer.Option(None, "--max-spend", help="Spend cap per task in USDC, e.g. 0.50"),
    per_call_cap: str | None = typer.Option(
        None, "--per-call-cap", help="Most one call may cost, in USDC (default: a quarter of the cap)."),
    approval_threshold: str | None = typer.Option(
        None, "--approval-threshold",
        help="A human approves calls at or above this, in USDC (default: half of the cap)."),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Step cap."),
    demo: bool = typer.Option(False, "--demo", help="Run the built-in demo task."),
    unconfined: bool = typer.Option(
        False, "--unconfined",
        help="Run even where the agent process cannot be confined (no Landlock; off the devnet).",
    ),
) -> None:
    """Run one research task with live progress; exit 0 when it finished, 1 when stopped."""
    import asyncio

    from agent.loop.run import run_task

    if demo and not task:
        task = DEMO_TASK
    check_task(task, "run")
    money = money_flags(max_spend=max_spend, per_call_cap=per_call_cap,
                        approval_threshold=approval_threshold)
    settings = cli_settings(network=network, model=model, profile=profile)
    rt = cli_runtime(settings)
    _, limits = settings.resolve_limits(
        model_local=rt.model.local, profile=profile, max_steps=max_steps, **money,
    )
    run_id = uuid.uuid4().hex[:12]
    rt.register_task(run_id, task, limits)  # the judge service holds the limits, not the agent
    rt.confine(unconfined=unconfined)  # before the first model call (agent.confine)
    if not as_json:
        err.print(rt.first_line(), markup=False, highlight=False, soft_wrap=True)
        err.print(f"[bold]nib[/] {rt.network.name} (chain {rt.network.chain_id}) · model {rt.model.name} · "
                  f"wallet {rt.wallet.address} · cap {usdc(limits.spend_cap_usdc)} · steps {limits.max_steps}")
        err.print(f"task: {task}", markup=False, highlight=False)
    deps = rt.deps(profile=profile, limits=limits, on_event=None if as_json else _progress)
    result = asyncio.run(_terminable(run_task(task, deps, run_id=run_id)))
    raise typer.Exit(_print_result(result, as_json))


async def _terminable(run: Awaitable[AgentResult]) -> AgentResult:
    """Await a run with SIGTERM handled as Ctrl-C is (the run is cancelled, so it ends
    ``interrupted`` with its row closed); only SIGKILL leaves a row for a reader to close."""
    import asyncio
    import contextlib
    import signal

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
    return await run


#: The longest task text nib accepts (characters): a research question, not a document.
#: Longer text would be echoed whole and its tail turned into checklist items.
MAX_TASK_CHARS = 4_000


def check_task(task: str, command: str) -> None:
    """Refuse an empty task, or one over MAX_TASK_CHARS, with the limit and the fix."""
    if not task.strip():
        fail(f'the task is empty; expected a research question. Fix: nib {command} "What is the base fee?"')
    if len(task) > MAX_TASK_CHARS:
        fail(f"the task is {len(task):,} characters; expected at most {MAX_TASK_CHARS:,} (a "
             "research question, not a document). Fix: shorten it to the question itself.")


def money_flags(**flags: str | None) -> dict[str, int]:
    """The money flags given (``--max-spend``, ``--per-call-cap``, ``--approval-threshold``)
    as the limits they set, in atomic USDC; flags not given are left to the configuration."""
    names = {"max_spend": "spend_cap_usdc", "per_call_cap": "per_call_cap_usdc",
             "approval_threshold": "approval_threshold_usdc"}
    return {names[k]: parse_usdc(v, "--" + k.replace("_", "-"))
            for k, v in flags.items() if v is not None}


def parse_usdc(text: str, flag: str = "--max-spend") -> int:
    from decimal import Decimal, InvalidOperation

    try:
        value = Decimal(text.removesuffix("USDC").strip())
    except InvalidOperation:
        fail(f"{flag} {text!r} is not an amount; expected USDC like 0.50. Fix: pass a number.")
    atomic = value * ATOMIC_PER_USDC
    if atomic <= 0 or atomic != atomic.to_integral_value():
        fail(f"{flag} {text!r} must be positive with at most 6 decimals. Fix: e.g. {flag} 0.25")
    return int(atomic)


def _decide(run_id: str, decision: str, as_json: bool, unconfined: bool) -> None:
    import asyncio

    from agent.loop.run import resume

    settings = cli_settings()
    rt = cli_runtime(settings)
    if decision == "approve":
        _grant_at_the_judge(rt, run_id)
    rt.resume_task(run_id)  # the resumed run acts with its own task's token
    rt.confine(unconfined=unconfined)  # the resumed run is the agent's: confined as `nib run`
    if not as_json:
        err.print(rt.first_line(), markup=False, highlight=False, soft_wrap=True)
    result = asyncio.run(_terminable(resume(run_id, decision, rt.deps(on_event=None if as_json else _progress))))  # type: ignore[arg-type]
    raise typer.Exit(_print_result(result, as_json))


def _grant_at_the_judge(rt: Any, run_id: str) -> None:
    """With the judge as its own service, the human's approval is a grant there (admin
    token): the judge then approves exactly the held payload once, and the wallet signs
    an approval above the threshold only with that grant. In-process: nothing to do."""
    from agent.cli.runtime import running_services
    from agent.cli.services import grant_escalation, held_verdict

    services = running_services(rt.settings.home)
    if services is None:
        return
    grant = grant_escalation(
        rt.settings, services, held_verdict(rt.store, run_id), task_id=run_id
    )
    err.print(
        f"granted at the judge: {usdc(grant.amount)} to {grant.recipient} for task "
        f"{grant.task_id} ({grant.id})",
        highlight=False,
    )


@app.command("approve")
def approve_cmd(
    run_id: str, as_json: bool = typer.Option(False, "--json"),
    unconfined: bool = typer.Option(
        False, "--unconfined",
        help="Run even where the agent process cannot be confined (no Landlock; off the devnet).",
    ),
) -> None:
    """Approve the paid call a paused run is waiting on, and resume it."""
    _decide(run_id, "approve", as_json, unconfined)


@app.command("deny")
def deny_cmd(
    run_id: str, as_json: bool = typer.Option(False, "--json"),
    unconfined: bool = typer.Option(
        False, "--unconfined",
        help="Run even where the agent process cannot be confined (no Landlock; off the devnet).",
    ),
) -> None:
    """Deny the paid call a paused run is waiting on; it stops with a partial answer."""
    _decide(run_id, "deny", as_json, unconfined)


def _result_of(row: dict[str, Any]) -> dict[str, Any]:
    raw = row.get("result")
    if isinstance(raw, str) and raw:
        try:
            return dict(json.loads(raw))
        except ValueError:
            return {}
    return dict(raw) if isinstance(raw, dict) else {}


@app.command("runs")
def runs_cmd(as_json: bool = typer.Option(False, "--json"), limit: int = typer.Option(50)) -> None:
    """One row per run or queued task: id, task, status, worker, stop reason, steps, spend."""
    from rich.table import Table

    from agent.queue import TaskQueue

    store = run_store()
    queued = {t.id: t for t in TaskQueue(store.db).tasks(limit=limit)}
    rows = []
    for row in store.runs(limit=limit):
        res = _result_of(row)
        spend = res.get("spend") or {}
        tokens = res.get("tokens") or {}
        task = queued.pop(row["run_id"], None)
        rows.append({
            "run_id": row["run_id"], "task": row.get("task"),
            # A dead process shows as died even while its queue lease has not run out.
            "status": task.status if task and row.get("status") != "died" else row.get("status"),
            "worker": task.worker if task else None,
            "stop_reason": res.get("stop_reason") or row.get("stop_reason")
            or (task.stop_reason if task else None),
            "steps": res.get("steps"), "spend_usdc_atomic": spend.get("usdc_atomic", 0),
            "gas_wei": spend.get("gas_wei", 0),
            "tokens": int(tokens.get("input", 0) or 0) + int(tokens.get("output", 0) or 0),
            "elapsed_s": res.get("elapsed_s"), "started_at": row.get("started_at"),
        })
    for task in queued.values():  # not started yet, or closed before its run began
        rows.append({
            "run_id": task.id, "task": task.task, "status": task.status, "worker": task.worker,
            "stop_reason": task.stop_reason, "steps": None, "spend_usdc_atomic": 0,
            "gas_wei": 0, "tokens": 0, "elapsed_s": None, "started_at": task.started_at,
        })
    if as_json:
        emit_json(rows)
        return
    table = Table("run", "task", "status", "worker", "stop", "steps", "spend", "tokens", "elapsed")
    for r in rows:
        table.add_row(r["run_id"], short(r["task"], 40), str(r["status"]), str(r["worker"] or "-"),
                      str(r["stop_reason"] or "-"), str(r["steps"] or 0),
                      usdc(r["spend_usdc_atomic"]), str(r["tokens"]), f"{r['elapsed_s'] or 0:.1f}s")
    out.print(table)


@app.command("show")
def show_cmd(run_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """One run's trace as a timeline: proposals, gates, verdicts, calls, observations, spend."""
    from judge.storage import describe

    store = run_store()
    row = store.run(run_id)
    if row is None:
        fail(f"no run {run_id!r} in {describe(cli_settings().database)}; expected an id from `nib runs`. Fix: run `nib runs`.")
    events = store.events(run_id)
    if as_json:
        emit_json({"run": {**row, "result": _result_of(row)}, "events": events})
        return
    res = _result_of(row)
    out.print(f"[bold]{run_id}[/] {row.get('task')}", highlight=False)
    for ev in events:
        data = _event_data(ev)
        out.print(f"  {ev.get('seq'):>3} [cyan]{ev.get('type'):<16}[/] {short(_event_line(data), 110)}",
                  highlight=False)
        for line in _market_lines(ev.get("type"), data):
            out.print(f"        {line}", highlight=False, markup=False, soft_wrap=True)
    protocols = [_event_data(ev).get("protocol") for ev in events if ev.get("type") == "model.protocol"]
    if protocols:
        fallback = " (fallback: the server rejected native tools)" if protocols[-1] == "json-text" else ""
        out.print(f"tools: [bold]{protocols[-1]}[/]{fallback}", highlight=False)
    if res:
        out.print(f"stop [bold]{res.get('stop_reason')}[/] · answer provenance: "
                  f"{res.get('provenance', 'none')}", highlight=False)
        out.print(graded_answer(str(res.get("answer") or ""), res.get("lines") or []),
                  highlight=False, markup=False)
        if res.get("message"):
            out.print(str(res["message"]), highlight=False, markup=False)


def graded_answer(answer: str, lines: list[Any]) -> str:
    """The answer one line per row, each led by its provenance grade (observed, derived,
    asserted, not-answered, note); the raw answer when the run recorded no grades."""
    rows = [(str(getattr(x, "grade", None) or x["grade"]), str(getattr(x, "text", None) or x["text"]))
            for x in lines]
    if not rows:
        return answer
    return "\n".join(f"  {grade:<12} {text}" for grade, text in rows)


def _market_lines(type_: Any, data: dict[str, Any]) -> list[str]:
    """The market details under a timeline line: offers discovered, the seller quoted, the
    full verdict reason when offers were compared, and the excerpt of what was bought."""
    lines = []
    offers = data.get("offers")
    for offer in offers if isinstance(offers, list) else ():
        price = usdc(offer.get("price")) if offer.get("price") is not None else "?"
        tool = f"#{offer['tool']}" if offer.get("tool") else ""
        allowed = "" if offer.get("allowlisted") else " (not allowlisted)"
        lines.append(f"offer {offer.get('method')} {offer.get('resource')}{tool} {price} "
                     f"[{', '.join(offer.get('kinds') or ()) or '-'}]{allowed}")
    if type_ == "quote" and data.get("seller"):
        lines.append(f"quoted {usdc(data.get('amount'))} from {data['seller']}")
    if type_ == "verdict" and str(data.get("reason", "")).startswith("best of"):
        lines.append(f"reason: {data['reason']}")
    cut = data.get("excerpt")
    if isinstance(cut, dict):
        if cut.get("type") == "json":
            fields = "; ".join(f"{k}={v}" for k, v in (cut.get("fields") or {}).items())
            lines.append(f"excerpt: {short(fields, 400)}")
        else:
            lines.append(f"excerpt: {short(cut.get('text'), 400)}")
    return lines


def _event_data(ev: dict[str, Any]) -> dict[str, Any]:
    data = ev.get("data")
    return json.loads(data) if isinstance(data, str) else data or {}


def _event_line(data: dict[str, Any]) -> str:
    keys = ("step", "tool", "action", "decision", "reason", "ok", "summary", "cost_usdc", "amount", "tx_hash",
            "protocol", "why")
    parts = [f"{k}={data[k]}" for k in keys if k in data and data[k] not in (None, "")]
    return " ".join(parts) if parts else json.dumps(data, default=str)

