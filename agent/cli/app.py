"""The ``nib`` command line: devnet, wallet, judge, run, runs, show, audit, approve, report, eval.

Exit codes: 0 finished, 1 stopped without finishing, 2 bad input. A user's mistake
prints one line naming the problem and the fix, never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console

from chain import devnet as _devnet
from chain.errors import ChainError
from chain.money import ATOMIC_PER_USDC

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="nib: a research agent that spends testnet USDC safely.",
)
devnet_app = typer.Typer(
    no_args_is_help=True, help="Start, inspect and stop the local chain, x402 paywall and x402 market."
)
wallet_app = typer.Typer(no_args_is_help=True, help="The agent's keystore and balances.")
judge_app = typer.Typer(
    no_args_is_help=True, help="The JEV judge: calibration and the judge service."
)
audit_app = typer.Typer(
    invoke_without_command=True, help="Spend events, and reconciliation with the chain."
)
app.add_typer(devnet_app, name="devnet")
app.add_typer(wallet_app, name="wallet")
app.add_typer(judge_app, name="judge")
app.add_typer(audit_app, name="audit")

out = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 140)

EXIT_FINISHED, EXIT_STOPPED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    """A user mistake the CLI reports in one line with exit code 2."""


def fail(message: str) -> NoReturn:
    raise BadInput(message)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


# ---------------------------------------------------------------- devnet


@devnet_app.command("up")
def devnet_up(
    as_json: bool = typer.Option(False, "--json", help="Print the devnet facts as JSON."),
    port: int = typer.Option(0, help="Anvil port; 0 picks a free one."),
) -> None:
    """Start the local devnet (Anvil + TestUSDC + x402 paywall), or report the running one."""
    from agent.cli.runtime import ensure_devnet_wallet

    info = _devnet.up(port=port)
    ensure_devnet_wallet(info)
    _print_devnet(info, as_json)


@devnet_app.command("status")
def devnet_status(as_json: bool = typer.Option(False, "--json")) -> None:
    """Show the recorded devnet and whether it is running."""
    info = _devnet.status()
    if info is None:
        fail(
            "no devnet recorded under NIB_HOME; expected one started by `nib devnet up`. Fix: run `nib devnet up`."
        )
    _print_devnet(info, as_json)


@devnet_app.command("down")
def devnet_down(as_json: bool = typer.Option(False, "--json")) -> None:
    """Stop the devnet's Anvil and paywall; the chain state is kept for the next `up`."""
    info = _devnet.down()
    if as_json:
        emit_json({"stopped": info is not None})
    else:
        out.print("devnet stopped" if info else "no devnet was recorded; nothing to stop")


def _print_devnet(info: _devnet.DevnetInfo, as_json: bool) -> None:
    if as_json:
        emit_json(info.to_json())
        return
    state = "[green]running[/]" if info.running else "[red]stopped[/]"
    out.print(f"devnet {state}")
    for key in (
        "rpc_url",
        "chain_id",
        "usdc",
        "wallet",
        "seller",
        "paywall_url",
        "pid",
        "paywall_pid",
        "facilitator_url",
    ):
        out.print(f"  {key:12} {getattr(info, key)}")
    for seller in info.market:
        out.print(f"  market       {seller['name']:9} {seller['url']}  (pid {seller['pid']})")


# ---------------------------------------------------------------- run / resume

DEMO_TASK = (
    "What is the current base fee in gwei, the latest block number, and who issues USDC "
    "according to the token fact sheet?"
)


def _settings(**explicit: Any) -> Any:
    from agent.config import load_settings

    return load_settings(**explicit)


def _runtime(settings: Any) -> Any:
    from agent.cli.runtime import build_runtime

    return build_runtime(settings)


def _progress(run_id: str, type_: str, data: dict[str, Any]) -> None:
    """Live per-step progress: one line per proposal, verdict, call, spend and stop."""
    if type_ == "proposal":
        what = data.get("tool") or data.get("action") or "?"
        err.print(f"[dim]step {data.get('step', '?')}[/] propose [bold]{what}[/] {_short(data.get('args'))}")
    elif type_ == "gate.skip":
        err.print(f"  [yellow]skipped[/] {_short(data.get('why') or data.get('reason'))}")
    elif type_ == "verdict":
        colour = {"approve": "green", "refuse": "red", "escalate": "magenta", "answer": "cyan"}.get(
            str(data.get("decision")), "white")
        price = data.get("amount")
        price_s = f" price {_usdc(price)}" if price else ""
        err.print(f"  judge [{colour}]{data.get('decision')}[/]{price_s}  {_short(data.get('reason'), 90)}")
    elif type_ == "tool.call":
        ok = "[green]ok[/]" if data.get("ok") else "[red]failed[/]"
        cost = data.get("cost_usdc") or 0
        err.print(f"  {data.get('tool')} {ok}{' cost ' + _usdc(cost) if cost else ''}  {_short(data.get('summary'), 90)}")
    elif type_ == "spend":
        gas = f" + gas {data['gas_wei']} wei" if data.get("gas_wei") else ""
        total = f"  (run total {_usdc(data['total_usdc'])})" if "total_usdc" in data else ""
        tx = f"  tx {data['tx_hash']}" if data.get("tx_hash") else ""
        err.print(f"  [bold]spent[/] {_usdc(data.get('usdc') or 0)}{gas}{total}{tx}")
    elif type_ == "stop":
        err.print(f"[bold]stop[/] {data.get('reason')}")


def _short(value: Any, n: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str) if value else ""
    return text if len(text) <= n else text[: n - 1] + "…"


def _usdc(atomic: Any) -> str:
    from chain.money import format_usdc

    try:
        return format_usdc(int(atomic))
    except (TypeError, ValueError):
        return str(atomic)


def _print_result(result: Any, as_json: bool) -> int:
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    else:
        tag = "[green]finished[/]" if result.finished else "[yellow]stopped[/]"
        out.print(f"\n{tag} [bold]{result.stop_reason}[/] after {result.steps} steps"
                  f"{' (partial answer)' if result.partial else ''}")
        out.print(f"\n{result.answer}\n", markup=False, highlight=False)
        spend = result.spend
        out.print(f"spend {_usdc(spend.usdc_atomic)} + gas {spend.gas_wei} wei · tokens "
                  f"{result.tokens.input}+{result.tokens.output}"
                  f"{' (estimated)' if result.tokens.estimated else ''} · {result.elapsed_s:.1f} s · run {result.run_id}")
        if result.message:
            out.print(result.message, markup=False, highlight=False)
        for tx in _run_txs(result.run_id):
            out.print(f"paid {_usdc(tx['amount'])} to {tx['recipient']} · tx {tx['tx_hash']} ({tx['status']})")
    return EXIT_FINISHED if result.finished else EXIT_STOPPED


def _run_txs(run_id: str) -> list[dict[str, Any]]:
    try:
        from wallet.ledger import Ledger

        settings = _settings()
        return [r.to_dict() for r in Ledger(settings.database).rows(run_id) if r.tx_hash]
    except Exception:  # the summary line is a convenience; the audit command is the record
        return []


@app.command("run")
def run_cmd(
    task: str = typer.Argument("", help="The research question."),
    as_json: bool = typer.Option(False, "--json", help="Print the AgentResult as JSON."),
    profile: str | None = typer.Option(None, help="cost-optimized | quality-first | local-guarded"),
    model: str | None = typer.Option(None, help="Model name (with NIB_MODEL_PROVIDER)."),
    network: str | None = typer.Option(None, help="anvil | base-sepolia | custom"),
    max_spend: str | None = typer.Option(None, "--max-spend", help="Spend cap per task in USDC, e.g. 0.50"),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Step cap."),
    demo: bool = typer.Option(False, "--demo", help="Run the built-in demo task."),
) -> None:
    """Run one research task with live progress; exit 0 when it finished, 1 when stopped."""
    import asyncio

    from agent.loop.run import run_task

    if demo and not task:
        task = DEMO_TASK
    if not task.strip():
        fail('the task is empty; expected a research question. Fix: nib run "What is the base fee?"')
    cap = _parse_usdc(max_spend) if max_spend else None
    settings = _settings(network=network, model=model, profile=profile)
    rt = _runtime(settings)
    _, limits = settings.resolve_limits(
        model_local=bool(getattr(rt.model, "local", False)), profile=profile,
        spend_cap_usdc=cap, max_steps=max_steps,
    )
    if not as_json:
        err.print(f"[bold]nib[/] {rt.network.name} (chain {rt.network.chain_id}) · model {rt.model.name} · "
                  f"wallet {rt.wallet.address} · cap {_usdc(limits.spend_cap_usdc)} · steps {limits.max_steps}")
        err.print(f"task: {task}", markup=False, highlight=False)
    deps = rt.deps(profile=profile, limits=limits, on_event=None if as_json else _progress)
    result = asyncio.run(run_task(task, deps))
    raise typer.Exit(_print_result(result, as_json))


def _parse_usdc(text: str) -> int:
    from decimal import Decimal, InvalidOperation

    try:
        value = Decimal(text.removesuffix("USDC").strip())
    except InvalidOperation:
        fail(f"--max-spend {text!r} is not an amount; expected USDC like 0.50. Fix: pass a number.")
    atomic = value * ATOMIC_PER_USDC
    if atomic <= 0 or atomic != atomic.to_integral_value():
        fail(f"--max-spend {text!r} must be positive with at most 6 decimals. Fix: e.g. --max-spend 0.25")
    return int(atomic)


def _decide(run_id: str, decision: str, as_json: bool) -> None:
    import asyncio

    from agent.loop.run import resume

    settings = _settings()
    rt = _runtime(settings)
    result = asyncio.run(resume(run_id, decision, rt.deps(on_event=None if as_json else _progress)))  # type: ignore[arg-type]
    raise typer.Exit(_print_result(result, as_json))


@app.command("approve")
def approve_cmd(run_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Approve the paid call a paused run is waiting on, and resume it."""
    _decide(run_id, "approve", as_json)


@app.command("deny")
def deny_cmd(run_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Deny the paid call a paused run is waiting on; it stops with a partial answer."""
    _decide(run_id, "deny", as_json)


# ---------------------------------------------------------------- runs, show, audit


def _store() -> Any:
    from agent.store import RunStore

    return RunStore(_settings().database)


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
    """One row per run: id, task, stop reason, steps, spend, tokens, elapsed."""
    from rich.table import Table

    rows = []
    for row in _store().runs(limit=limit):
        res = _result_of(row)
        spend = res.get("spend") or {}
        tokens = res.get("tokens") or {}
        rows.append({
            "run_id": row["run_id"], "task": row.get("task"), "status": row.get("status"),
            "stop_reason": res.get("stop_reason") or row.get("stop_reason"),
            "steps": res.get("steps"), "spend_usdc_atomic": spend.get("usdc_atomic", 0),
            "gas_wei": spend.get("gas_wei", 0),
            "tokens": int(tokens.get("input", 0) or 0) + int(tokens.get("output", 0) or 0),
            "elapsed_s": res.get("elapsed_s"), "started_at": row.get("started_at"),
        })
    if as_json:
        emit_json(rows)
        return
    table = Table("run", "task", "stop", "steps", "spend", "tokens", "elapsed")
    for r in rows:
        table.add_row(r["run_id"], _short(r["task"], 48), str(r["stop_reason"] or r["status"]),
                      str(r["steps"] or 0), _usdc(r["spend_usdc_atomic"]), str(r["tokens"]),
                      f"{r['elapsed_s'] or 0:.1f}s")
    out.print(table)


@app.command("show")
def show_cmd(run_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """One run's trace as a timeline: proposals, gates, verdicts, calls, observations, spend."""
    store = _store()
    row = store.run(run_id)
    if row is None:
        fail(f"no run {run_id!r} in {_settings().database}; expected an id from `nib runs`. Fix: run `nib runs`.")
    events = store.events(run_id)
    if as_json:
        emit_json({"run": {**row, "result": _result_of(row)}, "events": events})
        return
    res = _result_of(row)
    out.print(f"[bold]{run_id}[/] {row.get('task')}", highlight=False)
    for ev in events:
        data = _event_data(ev)
        out.print(f"  {ev.get('seq'):>3} [cyan]{ev.get('type'):<16}[/] {_short(_event_line(data), 110)}",
                  highlight=False)
        for line in _market_lines(ev.get("type"), data):
            out.print(f"        {line}", highlight=False, markup=False, soft_wrap=True)
    protocols = [_event_data(ev).get("protocol") for ev in events if ev.get("type") == "model.protocol"]
    if protocols:
        fallback = " (fallback: the server rejected native tools)" if protocols[-1] == "json-text" else ""
        out.print(f"tools: [bold]{protocols[-1]}[/]{fallback}", highlight=False)
    if res:
        out.print(f"stop [bold]{res.get('stop_reason')}[/] · answer: {_short(res.get('answer'), 200)}", highlight=False)


def _market_lines(type_: Any, data: dict[str, Any]) -> list[str]:
    """The market details under a timeline line: offers discovered, the seller quoted, the
    full verdict reason when offers were compared, and the excerpt of what was bought."""
    lines = []
    offers = data.get("offers")
    for offer in offers if isinstance(offers, list) else ():
        price = _usdc(offer.get("price")) if offer.get("price") is not None else "?"
        tool = f"#{offer['tool']}" if offer.get("tool") else ""
        allowed = "" if offer.get("allowlisted") else " (not allowlisted)"
        lines.append(f"offer {offer.get('method')} {offer.get('resource')}{tool} {price} "
                     f"[{', '.join(offer.get('kinds') or ()) or '-'}]{allowed}")
    if type_ == "quote" and data.get("seller"):
        lines.append(f"quoted {_usdc(data.get('amount'))} from {data['seller']}")
    if type_ == "verdict" and str(data.get("reason", "")).startswith("best of"):
        lines.append(f"reason: {data['reason']}")
    cut = data.get("excerpt")
    if isinstance(cut, dict):
        if cut.get("type") == "json":
            fields = "; ".join(f"{k}={v}" for k, v in (cut.get("fields") or {}).items())
            lines.append(f"excerpt: {_short(fields, 400)}")
        else:
            lines.append(f"excerpt: {_short(cut.get('text'), 400)}")
    return lines


def _event_data(ev: dict[str, Any]) -> dict[str, Any]:
    data = ev.get("data")
    return json.loads(data) if isinstance(data, str) else data or {}


def _event_line(data: dict[str, Any]) -> str:
    keys = ("step", "tool", "action", "decision", "reason", "ok", "summary", "cost_usdc", "amount", "tx_hash",
            "protocol", "why")
    parts = [f"{k}={data[k]}" for k in keys if k in data and data[k] not in (None, "")]
    return " ".join(parts) if parts else json.dumps(data, default=str)


@audit_app.callback()
def audit_cmd(ctx: typer.Context, run: str | None = typer.Option(None, "--run", help="Only this run."),
              as_json: bool = typer.Option(False, "--json")) -> None:
    """Spend events: ledger rows with verdict ids and tx hashes."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Table

    from wallet.ledger import Ledger

    rows = [r.to_dict() for r in Ledger(_settings().database).rows(run)]
    if as_json:
        emit_json(rows)
        return
    table = Table("run", "kind", "amount", "recipient", "status", "verdict", "tx")
    for r in rows:
        table.add_row(str(r.get("run_id")), str(r.get("kind")), _usdc(r.get("amount")), str(r.get("recipient")),
                      str(r.get("status")), _short(r.get("verdict_id"), 14), str(r.get("tx_hash") or r.get("auth_nonce") or ""))
    out.print(table)


@audit_app.command("reconcile")
def reconcile_cmd(as_json: bool = typer.Option(False, "--json"),
                  from_block: int = typer.Option(0, "--from-block")) -> None:
    """Compare the spend ledger with the wallet's on-chain USDC Transfer logs."""
    from dataclasses import asdict

    from wallet.reconcile import reconcile

    rt = _runtime(_settings())
    report = reconcile(rt.db_path, rt.chain, rt.network.usdc, rt.wallet.address, from_block)
    if as_json:
        emit_json(report.to_dict())
    else:
        out.print(f"matched {len(report.matched)} · unmatched on chain {len(report.unmatched_onchain)} · "
                  f"unmatched in ledger {len(report.unmatched_ledger)}")
        for item in report.unmatched_onchain:
            out.print(f"[red]ALARM[/] money left the wallet without an audited spend: {asdict(item)}")
    raise typer.Exit(EXIT_FINISHED if not report.unmatched_onchain else EXIT_STOPPED)


# ---------------------------------------------------------------- wallet


@wallet_app.command("new")
def wallet_new(as_json: bool = typer.Option(False, "--json"), force: bool = typer.Option(False, "--force")) -> None:
    """Create a fresh encrypted keystore (passphrase from NIB_WALLET_PASSWORD or a prompt)."""
    from wallet.keystore import Keystore, default_keystore_path

    ks = Keystore(default_keystore_path(_settings().home))
    address = ks.new(overwrite=force)
    _facts({"address": address, "keystore": str(ks.path)}, as_json)


@wallet_app.command("import")
def wallet_import(as_json: bool = typer.Option(False, "--json"), force: bool = typer.Option(False, "--force"),
                  chain_id: int | None = typer.Option(None, "--chain-id", help="Refuse dev keys off 31337.")) -> None:
    """Import a private key read from stdin or NIB_IMPORT_KEY (never from an argument)."""
    import os

    from wallet.keystore import Keystore, default_keystore_path

    key = os.environ.get("NIB_IMPORT_KEY") or (sys.stdin.readline().strip() if not sys.stdin.isatty() else
                                               typer.prompt("Private key", hide_input=True))
    if not key:
        fail("no key given; expected it on stdin or in NIB_IMPORT_KEY. Fix: `nib wallet import < keyfile`.")
    ks = Keystore(default_keystore_path(_settings().home))
    address = ks.import_key(key, overwrite=force, chain_id=chain_id)
    _facts({"address": address, "keystore": str(ks.path)}, as_json)


@wallet_app.command("address")
def wallet_address(as_json: bool = typer.Option(False, "--json")) -> None:
    """The wallet's address (no passphrase needed)."""
    from wallet.keystore import Keystore, default_keystore_path

    ks = Keystore(default_keystore_path(_settings().home))
    if not ks.exists():
        fail(f"no keystore at {ks.path}; expected one. Fix: `nib wallet new` or `nib devnet up`.")
    _facts({"address": ks.address()}, as_json)


@wallet_app.command("balance")
def wallet_balance(as_json: bool = typer.Option(False, "--json")) -> None:
    """Live USDC and ETH balances of the wallet on the configured network."""
    rt = _runtime(_settings())
    usdc = rt.chain.token_balance(rt.network.usdc, rt.wallet.address)
    eth = rt.chain.eth_balance(rt.wallet.address)
    _facts({"address": rt.wallet.address, "network": rt.network.name, "chain_id": rt.network.chain_id,
            "usdc_atomic": usdc, "usdc": _usdc(usdc), "eth_wei": eth}, as_json)


def _facts(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(data)
    else:
        for k, v in data.items():
            out.print(f"{k:10} {v}", highlight=False)


# ---------------------------------------------------------------- judge


@judge_app.command("calibration")
def judge_calibration(as_json: bool = typer.Option(False, "--json")) -> None:
    """Calibration of the JEV judge: n, Brier score, expected calibration error, bins."""
    from judge.calibration import BetaCalibrator

    report = dict(BetaCalibrator(_settings().database).report())
    if as_json:
        emit_json(report)
        return
    out.print(f"n {report['n']} · Brier {report['brier']} · ECE {report['ece']}")
    bins: list[dict[str, Any]] = list(report.get("bins") or [])  # type: ignore[call-overload]
    for b in bins:
        if b.get("n"):
            out.print(f"  p {b['lo']:.1f}-{b['hi']:.1f}: n {b['n']}, mean p {b['mean_p']}, observed {b['freq']}",
                      highlight=False)


@judge_app.command("serve")
def judge_serve(host: str = typer.Option("127.0.0.1"), port: int = typer.Option(8402),
                insecure: bool = typer.Option(False, "--insecure",
                                              help="Devnet only: serve without NIB_JUDGE_TOKEN.")) -> None:
    """Run the judge as its own HTTP service on loopback, holding its key."""
    from agent.cli.runtime import build_local_judge, resolve_network
    from judge.service import serve

    settings = _settings()
    if host not in ("127.0.0.1", "localhost", "::1"):
        fail(f"--host {host} is not loopback; the judge service binds to loopback only. Fix: --host 127.0.0.1")
    network = resolve_network(settings, _devnet.status(settings.home))
    if insecure and not network.is_devnet:
        fail(f"--insecure is for the devnet only; found network {network.name}. "
             "Fix: set NIB_JUDGE_TOKEN and drop --insecure.")
    judge = build_local_judge(settings, network)
    err.print(f"judge {judge.address} serving on http://{host}:{port}")
    if not settings.judge_token and insecure:
        err.print("warning: --insecure: any local process can ask this judge for verdicts.")
    serve(host, port, judge, token=settings.judge_token, insecure=insecure)


# ---------------------------------------------------------------- report, eval


@app.command("report")
def report_cmd(out_path: str = typer.Option(..., "--out", help="Where to write the HTML file."),
               limit: int = typer.Option(100)) -> None:
    """Write a self-contained HTML report: how runs ended, spend, steps, judge reliability."""
    from pathlib import Path

    from agent.report.page import ReportData, run_from_store, write_report
    from judge.calibration import BetaCalibrator

    settings = _settings()
    store = _store()
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
            err.print(f"{mark} {t.id:<26} {t.stop_reason:<18} spend {_usdc(t.spend_usdc):>12} steps {t.steps} tokens {t.tokens}")

    report = run_suite(suite, only=only or None, on_task=line)
    if as_json:
        emit_json(report.to_json())
    else:
        s = report.summary()
        out.print(f"accuracy {s['correct']}/{s['tasks']} ({s['accuracy']:.0%}) · spend {_usdc(s['total_spend_usdc'])} · "
                  f"spent without cover {s['spent_without_cover']}")
        out.print("stop reasons: " + ", ".join(f"{k} {v}" for k, v in s["stop_reasons"].items()))


# ---------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; map user mistakes to one line on stderr and exit code 2."""
    from agent.errors import AgentConfigError

    known: tuple[type[BaseException], ...] = (BadInput, AgentConfigError, ChainError)
    try:
        from judge.errors import JudgeError
        from wallet.errors import WalletError

        known += (JudgeError, WalletError)
    except ImportError:  # pragma: no cover - packages always present in an install
        pass
    try:
        # Without standalone mode click hands back a command's typer.Exit code as the return value.
        rc = app(args=argv, standalone_mode=False)
        if isinstance(rc, int):
            return rc
    except known as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_BAD_INPUT
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except SystemExit as exc:  # click's own usage errors
        return int(exc.code or 0)
    except Exception as exc:  # click usage problems surface as ClickException
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return EXIT_BAD_INPUT
        if isinstance(exc, click.exceptions.Abort):
            err.print("aborted")
            return EXIT_BAD_INPUT
        raise
    return EXIT_FINISHED


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
