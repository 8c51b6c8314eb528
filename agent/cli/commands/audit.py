"""``nib audit``: the spend ledger, its reconciliation with the chain, and its hash chain."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from agent.cli.common import (
    EXIT_FINISHED,
    EXIT_STOPPED,
    cli_settings,
    emit_json,
    emit_json_list,
    out,
    resolve_run,
    run_store,
    short,
    usdc,
)

if TYPE_CHECKING:
    from agent.config import NibSettings
    from wallet.reconcile import Abandon, ReconcileReport

__all__ = ["audit_app"]

audit_app = typer.Typer(
    invoke_without_command=True, help="Spend events, and reconciliation with the chain."
)


@audit_app.callback()
def audit_cmd(ctx: typer.Context, run: str | None = typer.Option(None, "--run", help="Only this run."),
              as_json: bool = typer.Option(False, "--json")) -> None:
    """Spend events: ledger rows with verdict ids and tx hashes."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Table

    from agent.cli.services import records_database
    from wallet.ledger import Ledger

    # Streamed a page at a time: memory stays flat however long the ledger grows. The
    # ledger is the services' record (NIB_HOME/services), read here as the user.
    if run is not None:
        run = resolve_run(run_store(), run)
    rows = (r.to_dict() for r in Ledger(records_database(cli_settings())).iter_rows(run))
    if as_json:
        emit_json_list(rows)
        return
    table = Table("run", "kind", "amount", "recipient", "status", "verdict", "tx")
    for r in rows:
        table.add_row(str(r.get("run_id")), str(r.get("kind")), usdc(r.get("amount")), str(r.get("recipient")),
                      str(r.get("status")), short(r.get("verdict_id"), 14), str(r.get("tx_hash") or r.get("auth_nonce") or ""))
    out.print(table)


@audit_app.command("reconcile")
def reconcile_cmd(as_json: bool = typer.Option(False, "--json"),
                  from_block: int = typer.Option(0, "--from-block"),
                  full: bool = typer.Option(False, "--full", help="read every row and log again, "
                                            "not only what changed since the last reconcile")) -> None:
    """Compare the spend ledger with the wallet's on-chain USDC Transfer logs."""
    from dataclasses import asdict

    from agent.cli.runtime import chain_view, settled_on
    from agent.cli.services import records_database
    from judge.calibration import BetaCalibrator
    from judge.outcomes import Outcomes
    from judge.records import VerdictRecords
    from wallet.reconcile import reconcile

    settings = cli_settings()
    network, chain, address = chain_view(settings)  # reads only: nothing unlocked or composed
    # The user's command reads the ledger and the judge's record itself (the services'
    # database, or this home's own where the judge and wallet ran in-process), and files
    # the non-deliveries the judge held until their payment settled, reading the chain
    # as the judge does (no judge key is needed to count an outcome).
    records = records_database(settings)
    verdicts = VerdictRecords(records)
    report = reconcile(
        records, chain, network.usdc or "", address, from_block,
        verdict_standing=verdicts.standing, abandon=_canceller(settings),
        checkpoint=not full,
        outcomes=Outcomes(verdicts, BetaCalibrator(records), paid=settled_on(chain)),
    )
    if as_json:
        emit_json(report.to_dict())
    else:
        out.print(f"matched {len(report.matched)} · unmatched on chain {len(report.unmatched_onchain)} · "
                  + _ledger_only(report)
                  + (f" · rows proven through block {report.proven_through} not read again (--full)"
                     if report.proven_through is not None else ""))
        for filed in report.outcomes_filed:
            out.print(f"paid for nothing, settled after its run: outcome {filed} counted by "
                      "the judge as paid-not-delivered", highlight=False)
        for item in report.unmatched_onchain:
            out.print(f"[red]ALARM[/] money left the wallet without an audited spend: {asdict(item)}")
        for rid in report.rolled_back:
            ended = ("its authorization was cancelled on chain" if rid in report.resolved else
                     "reopened: its authorization is live until it expires. Fix: `nib services "
                     "up`, then `nib audit reconcile` again cancels it through the wallet")
            out.print(f"[yellow]rolled back[/] {rid}: its transaction is no longer on the chain; "
                      f"{ended}", highlight=False)
        for row in report.unproven:
            out.print(f"[red]ALARM[/] settled under a tx that never used its authorization: {row.id}")
        for u in report.unbacked:
            out.print(f"[red]ALARM[/] ledger row {u.ledger_id} names verdict {u.verdict_id}, which the "
                      f"judge's record calls {u.standing!r}", highlight=False)
        for odd in report.unreadable:
            out.print(f"[red]ALARM[/] ledger row {odd.ledger_id} ({odd.status}, run {odd.run_id}): "
                      f"{odd.why}", highlight=False)
        for problem in report.ledger_check.problems if report.ledger_check else ():
            out.print(f"[red]ALARM[/] ledger: {problem}", highlight=False)
    tampered = report.ledger_check is not None and not report.ledger_check.ok
    alarm = bool(report.unmatched_onchain or report.unproven or report.unbacked
                 or report.unreadable) or tampered
    raise typer.Exit(EXIT_STOPPED if alarm else EXIT_FINISHED)


def _ledger_only(report: ReconcileReport) -> str:
    """The ledger's rows with no transfer in the blocks read, by what they mean: pending
    (money may still move: they hold cap), settled in a transaction outside these blocks,
    and closed with nothing moved (failed, cancelled on chain, expired unused), which is
    no discrepancy."""
    pending = len(report.pending)
    settled = sum(1 for r in report.unmatched_ledger if r.status == "settled")
    closed = len(report.unmatched_ledger) - pending - settled
    return (f"in ledger only: {pending} pending, {settled} settled outside these blocks, "
            f"{closed} closed with nothing moved")


def _canceller(settings: NibSettings) -> Abandon | None:
    """The running wallet service's ``abandon_authorization`` (the one cancel path; the key
    stays in the service), which reconcile uses to cancel a rolled-back authorization; None
    without services (this command unlocks no key), and the row then waits for expiry."""
    from agent.cli.services import running

    services = running(settings.home)
    if services is None:
        return None
    from wallet.service import WalletClient

    return WalletClient(services.wallet_socket).abandon_authorization


@audit_app.command("verify")
def verify_cmd(as_json: bool = typer.Option(False, "--json")) -> None:
    """Check the ledger's hash chain against its tables: edited, deleted, forged or moved rows."""
    from dataclasses import replace

    from agent.cli.services import records_database
    from judge.records import VerdictRecords
    from wallet import verify_ledger
    from wallet.backing import booked_elsewhere

    records = records_database(cli_settings())
    check = verify_ledger(records)
    # The verdict ties: a row booked under a run that is not its verdict's task.
    misbooked = booked_elsewhere(records, VerdictRecords(records).standing)
    check = replace(check, problems=(*check.problems, *misbooked))
    if as_json:
        emit_json(check.to_dict())
    else:
        out.print(f"ledger {'ok' if check.ok else 'TAMPERED'} · {check.entries} journal entries "
                  f"· head {check.head[:16]}…", highlight=False)
        for problem in check.problems:
            out.print(f"[red]PROBLEM[/] {problem}", highlight=False)
    raise typer.Exit(EXIT_FINISHED if check.ok else EXIT_STOPPED)

