"""``nib run``, ``approve``, ``deny``, ``runs`` and ``show``: running tasks and reading
their traces."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import typer

from agent.cli.commands.history import event_data, graded_answer, plural
from agent.cli.common import (
    EXIT_FINISHED,
    EXIT_INTERRUPTED,
    EXIT_STOPPED,
    EXIT_TERMINATED,
    IN_PROCESS_HELP,
    cli_runtime,
    cli_settings,
    err,
    fail,
    out,
    resolve_run,
    run_store,
    usdc,
)

if TYPE_CHECKING:
    import asyncio

    from agent.cli.runtime import Runtime
    from agent.jsonvalues import JSONObject
    from agent.loop.result import AgentResult

#: What a run calls with each event: (run id, event type, event data).
OnEvent = Callable[[str, str, dict[str, object]], None]

__all__ = ["app"]

app = typer.Typer()  # merged into the top-level `nib` command by agent.cli.app


DEMO_TASK = (
    "What is the current base fee in gwei, the latest block number, and who issues USDC "
    "according to the token fact sheet?"
)


def _print_result(result: AgentResult, as_json: bool) -> int:
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    else:
        tag = "[green]finished[/]" if result.finished else "[yellow]stopped[/]"
        out.print(f"\n{tag} [bold]{result.stop_reason}[/] after {plural(result.steps, 'step')}"
                  f"{' (partial answer)' if result.partial else ''}")
        out.print(f"\n{graded_answer(result.answer, result.lines)}\n", markup=False, highlight=False)
        out.print(f"answer provenance: [bold]{result.provenance}[/]")
        spend = result.spend
        out.print(f"spend {usdc(spend.usdc_atomic)} + gas {spend.gas_wei} wei · tokens "
                  f"{result.tokens.input}+{result.tokens.output}"
                  f"{' (estimated)' if result.tokens.estimated else ''} · {result.elapsed_s:.1f} s · run {result.run_id}")
        if result.message and result.stop_reason != "interrupted":  # that one: interrupted_line
            out.print(result.message, markup=False, highlight=False)
        hint = planner_hint(result)
        if hint:
            out.print(hint, markup=False, highlight=False)
        for tx in run_txs(result.run_id):
            out.print(f"paid {usdc(tx['amount'])} to {tx['recipient']} · tx {tx['tx_hash']} ({tx['status']})")
    return EXIT_FINISHED if result.finished else EXIT_STOPPED


#: What a part the offline planner could not read says (agent/models/_factpatterns.py).
_OFFLINE_DECLINE = "the offline planner"


def planner_hint(result: AgentResult) -> str | None:
    """The way to a wider reading when the offline planner declined a part of the task
    for its own words (not for what the chain or the seller said): a model reads more."""
    if result.finished or not any(_OFFLINE_DECLINE in line.text for line in result.lines):
        return None
    return ("hint: the offline planner reads only the questions docs/planner.md lists; a "
            "model reads any wording: set NIB_MODEL_PROVIDER and NIB_MODEL (docs/models.md)")


def run_txs(run_id: str) -> list[dict[str, object]]:
    """The run's settled payments, from the wallet's events in its own trace (the agent
    process cannot open the services' ledger; `nib audit` is the record)."""
    return [{**event_data(ev), "status": "settled"} for ev in _trace(run_id)
            if ev.get("type") == "wallet.settled" and event_data(ev).get("tx_hash")]


def _trace(run_id: str) -> list[dict[str, object]]:
    """The run's events for the lines after its result; none when they cannot be read
    (those lines are a convenience: `nib show` and `nib audit` are the record)."""
    try:
        return list(run_store().events(run_id))
    except Exception:
        return []


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
    in_process: bool = typer.Option(False, "--in-process", help=IN_PROCESS_HELP),
) -> None:
    """Run one research task with live progress; exit 0 when it finished, 1 when stopped."""

    from agent.loop.run import run_task

    if demo and not task:
        task = DEMO_TASK
    check_task(task, "run")
    money = money_flags(max_spend=max_spend, per_call_cap=per_call_cap,
                        approval_threshold=approval_threshold)
    settings = cli_settings(network=network, model=model, profile=profile)
    rt = cli_runtime(settings, in_process=in_process)
    # The profile applied (flag > configuration > where the model runs) goes with its
    # limits: the run records it by name, or custom when a flag or [limits] changed a value.
    applied, limits = settings.resolve_limits(
        model_local=rt.model.local, profile=profile, max_steps=max_steps, **money,
    )
    run_id = uuid.uuid4().hex[:12]
    rt.register_task(run_id, task, limits)  # the judge service holds the limits, not the agent
    rt.confine(unconfined=unconfined)  # before the first model call (agent.confine)
    if not as_json:
        err.print(rt.first_line(), markup=False, highlight=False, soft_wrap=True)
        err.print(f"[bold]nib[/] {rt.network.name} (chain {rt.network.chain_id}) · model {rt.model.name} · "
                  f"wallet {rt.wallet.address} · cap {usdc(limits.spend_cap_atomic)} · per call "
                  f"{usdc(limits.per_call_cap_atomic)} · approval at {usdc(limits.approval_threshold_atomic)}"
                  f" · steps {limits.max_steps}")
        err.print(f"task: {task}", markup=False, highlight=False)
    raise typer.Exit(drive_live(
        lambda on_event: run_task(task, rt.deps(profile=applied, limits=limits, on_event=on_event),
                                  run_id=run_id), as_json, run_id))


def drive_live(start: Callable[[OnEvent | None], Awaitable[AgentResult]], as_json: bool, run_id: str) -> int:
    """Run ``start(on_event)`` with the live view (agent.cli.live) unless ``as_json``, print
    the result, and return the exit code: 0 finished, 1 stopped, 130 Ctrl-C (143 SIGTERM)
    with a line that says what was signed."""
    import asyncio
    import contextlib

    from agent.cli.live import Progress

    results: list[AgentResult] = []
    signals: list[str] = []

    async def main() -> None:
        results.append(await _terminable(start(progress), signals))

    progress = None if as_json else Progress()
    with progress or contextlib.nullcontext():
        try:
            asyncio.run(main())
        except KeyboardInterrupt:  # Ctrl-C: asyncio.run cancelled the run, which closed its row
            signals.append("SIGINT")
    if not results:
        err.print(f"interrupted before run {run_id} returned; nothing more was done. Fix: `nib "
                  f"show {run_id}` says how far it got.", markup=False, highlight=False)
        return EXIT_INTERRUPTED
    result = results[0]
    code = _print_result(result, as_json)
    if result.stop_reason != "interrupted":
        return code
    err.print(interrupted_line(result), markup=False, highlight=False, soft_wrap=True)
    return EXIT_TERMINATED if signals == ["SIGTERM"] else EXIT_INTERRUPTED


def interrupted_line(result: AgentResult) -> str:
    """What an interrupted run leaves behind, from its spend: an authorization signed and
    still outstanding, a payment settled, or nothing signed at all."""
    spend, run = result.spend, result.run_id
    if spend.outstanding_atomic:
        left = (f"an authorization for {usdc(spend.outstanding_atomic)} was signed and may "
                f"still settle; `nib audit reconcile` settles it or releases it once expired")
    elif spend.settled_atomic:
        left = f"{usdc(spend.settled_atomic)} was paid and settled; nothing is pending"
    elif spend.source == "run":  # the wallet service was unreachable: only what it saw
        left = "this run saw nothing settle, but the wallet service did not answer; `nib show " + run + "` reads the ledger"
    else:
        left = "nothing was signed and nothing was spent"
    return (f"interrupted at step {result.steps}: {left}. Run {run} cannot be resumed; run "
            "the task again (`nib show " + run + "` has its trace).")


async def _terminable(run: Awaitable[AgentResult], signals: list[str]) -> AgentResult:
    """Await a run with SIGTERM handled as Ctrl-C is (the run is cancelled, so it ends
    ``interrupted`` with its row closed; ``signals`` records it); only SIGKILL leaves a row
    for a reader to close."""
    import asyncio
    import contextlib
    import signal

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, _cancel_on, task, signals)
    return await run


#: The longest task text nib accepts (characters): a research question, not a document.
#: Longer text would be echoed whole and its tail turned into checklist items.
MAX_TASK_CHARS = 4_000


def check_task(task: str, command: str) -> None:
    """Refuse an empty task, one over MAX_TASK_CHARS, or one naming a URL no request can
    reach (a port out of range, no host), with the limit and the fix, before any run."""
    from agent.tools.x402.offers import unrequestable_in

    if not task.strip():
        fail(f'the task is empty; expected a research question. Fix: nib {command} "What is the base fee?"')
    if len(task) > MAX_TASK_CHARS:
        fail(f"the task is {len(task):,} characters; expected at most {MAX_TASK_CHARS:,} (a "
             "research question, not a document). Fix: shorten it to the question itself.")
    for url, why in unrequestable_in(task)[:1]:
        fail(f"the task names {url}, which nib cannot request: {why}")


def money_flags(**flags: str | None) -> dict[str, int]:
    """The money flags given (``--max-spend``, ``--per-call-cap``, ``--approval-threshold``)
    as the limits they set, in atomic USDC; flags not given are left to the configuration."""
    names = {"max_spend": "spend_cap_atomic", "per_call_cap": "per_call_cap_atomic",
             "approval_threshold": "approval_threshold_atomic"}
    return {names[k]: parse_usdc(v, "--" + k.replace("_", "-"))
            for k, v in flags.items() if v is not None}


def _cancel_on(task: asyncio.Task[object], signals: list[str]) -> None:
    signals.append("SIGTERM")
    task.cancel()


def parse_usdc(text: str, flag: str = "--max-spend") -> int:
    from decimal import Decimal, InvalidOperation

    from chain.money import ATOMIC_PER_USDC

    try:
        value = Decimal(text.removesuffix("USDC").strip())
    except InvalidOperation:
        fail(f"{flag} {text!r} is not an amount; expected USDC like 0.50. Fix: pass a number.")
    atomic = value * ATOMIC_PER_USDC
    if atomic <= 0 or atomic != atomic.to_integral_value():
        fail(f"{flag} {text!r} must be positive with at most 6 decimals. Fix: e.g. {flag} 0.25")
    return int(atomic)


def _decide(run_id: str, decision: str, as_json: bool, unconfined: bool, in_process: bool) -> None:
    settings = cli_settings()
    run_id = str(resolve_run(run_store(), run_id))
    from agent.loop.run import resume  # after the run is found: an unknown one is refused fast

    rt = cli_runtime(settings, in_process=in_process)
    granted = decision == "approve" and _grant_at_the_judge(rt, run_id)
    rt.resume_task(run_id)  # the resumed run acts with its own task's token
    rt.confine(unconfined=unconfined)  # the resumed run is the agent's: confined as `nib run`
    if not as_json:
        err.print(rt.first_line(), markup=False, highlight=False, soft_wrap=True)
    code = drive_live(
        lambda on_event: resume(run_id, decision, rt.deps(on_event=on_event)),  # type: ignore[arg-type]
        as_json, run_id)
    outcome = _approval_outcome(_trace(run_id), granted) if decision == "approve" else None
    if outcome is not None and code == EXIT_STOPPED:  # last: the line a reader stops at
        (err if as_json else out).print(outcome, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _grant_at_the_judge(rt: Runtime, run_id: str) -> bool:
    """With the judge as its own service, the human's approval is a grant there (admin
    token): the judge then approves exactly the held payload once, and the wallet signs
    an approval above the threshold only with that grant. In-process: nothing to do.
    Whether a grant was recorded."""
    from agent.cli.services import grant_escalation, held_verdict, running

    services = running(rt.settings.home)
    if services is None:
        return False
    grant = grant_escalation(
        rt.settings, services, held_verdict(rt.store, run_id), task_id=run_id
    )
    err.print(
        f"grant recorded at the judge: {usdc(grant.amount)} to {grant.recipient} for task "
        f"{grant.task_id} ({grant.id}); the judge rules on the held payment again before "
        "anything is paid",
        highlight=False,
    )
    return True


def _approval_outcome(events: Iterable[Mapping[str, object]], granted: bool) -> str | None:
    """What came of an approval, from the resumed run's trace: None when the judge
    approved the held call again (it was then executed; the result says what it paid),
    else the line that says the approval was not carried out and why."""
    after_resume: list[JSONObject] = []
    for ev in events:
        if ev.get("type") == "run.resume":
            after_resume = []  # only the last resume's verdicts count
        elif ev.get("type") == "verdict":
            after_resume.append(event_data(ev))
    ruled = next((v for v in after_resume if v.get("human_approved")), None)
    if ruled is not None and ruled.get("decision") == "approve":
        return None
    if ruled is None:
        return ("approval not carried out: the run stopped before the judge ruled on the held "
                "call again (its stop reason says why). Nothing was paid for it.")
    recorded = "the grant was recorded at the judge, but " if granted else ""
    ruling = "refused" if ruled.get("decision") == "refuse" else f"ruled {ruled.get('decision')} on"
    return (f"approval not carried out: {recorded}the judge then {ruling} the held "
            f"{ruled.get('tool')} for {usdc(ruled.get('amount'))}: {ruled.get('reason')}. "
            "Nothing was paid for it.")


@app.command("approve")
def approve_cmd(
    run_id: str, as_json: bool = typer.Option(False, "--json"),
    unconfined: bool = typer.Option(
        False, "--unconfined",
        help="Run even where the agent process cannot be confined (no Landlock; off the devnet).",
    ),
    in_process: bool = typer.Option(False, "--in-process", help=IN_PROCESS_HELP),
) -> None:
    """Approve the paid call a paused run is waiting on, and resume it."""
    _decide(run_id, "approve", as_json, unconfined, in_process)


@app.command("deny")
def deny_cmd(
    run_id: str, as_json: bool = typer.Option(False, "--json"),
    unconfined: bool = typer.Option(
        False, "--unconfined",
        help="Run even where the agent process cannot be confined (no Landlock; off the devnet).",
    ),
    in_process: bool = typer.Option(False, "--in-process", help=IN_PROCESS_HELP),
) -> None:
    """Deny the paid call a paused run is waiting on; it stops with a partial answer."""
    _decide(run_id, "deny", as_json, unconfined, in_process)
