"""``nib judge``: the judge's calibration and the judge service."""

from __future__ import annotations

import os

import typer

from agent.cli.common import cli_settings, emit_json, err, fail, out

__all__ = ["judge_app"]

judge_app = typer.Typer(
    no_args_is_help=False, help="The JEV judge: calibration and the judge service."
)


@judge_app.command("calibration")
def judge_calibration(as_json: bool = typer.Option(False, "--json")) -> None:
    """Calibration of the JEV judge: n, Brier score, expected calibration error, bins."""
    from agent.cli.services import records_database
    from judge.calibration import BetaCalibrator

    report = BetaCalibrator(records_database(cli_settings())).report()
    if as_json:
        emit_json(report)
        return
    out.print(f"n {report['n']} · Brier {report['brier']} · ECE {report['ece']}")
    for b in report["bins"]:
        if b.get("n"):
            out.print(f"  p {b['lo']:.1f}-{b['hi']:.1f}: n {b['n']}, mean p {b['mean_p']}, observed {b['freq']}",
                      highlight=False)


@judge_app.command("serve")
def judge_serve(host: str = typer.Option("127.0.0.1"), port: int = typer.Option(8402),
                insecure: bool = typer.Option(False, "--insecure",
                                              help="Devnet only: serve without NIB_JUDGE_TOKEN.")) -> None:
    """Run the judge as its own HTTP service on loopback, holding its key."""
    from agent.cli.runtime import build_local_judge, resolve_network
    from agent.cli.services import take_secrets
    from chain import devnet as _devnet
    from judge.service import refuse_inspection, serve

    refuse_inspection()  # before the judge key is loaded: no same-user process reads our memory
    take_secrets()  # from `nib services up`, on stdin: never in /proc/PID/environ
    settings = cli_settings()
    if host not in ("127.0.0.1", "localhost", "::1"):
        fail(f"--host {host} is not loopback; the judge service binds to loopback only. Fix: --host 127.0.0.1")
    network = resolve_network(settings, _devnet.status(settings.home))
    if insecure and not network.is_devnet:
        fail(f"--insecure is for the devnet only; found network {network.name}. "
             "Fix: set NIB_JUDGE_TOKEN and drop --insecure.")
    judge = build_local_judge(settings, network, service=True)
    err.print(f"judge {judge.address} serving on http://{host}:{port}")
    if not settings.judge_token and insecure:
        err.print("warning: --insecure: any local process can ask this judge for verdicts.")
    serve(host, port, judge, token=settings.judge_token, insecure=insecure,
          admin_token=os.environ.get("NIB_JUDGE_ADMIN_TOKEN"))



@judge_app.command("approve")
def judge_approve(target: str = typer.Argument(..., help="A paused run id, or an escalate verdict id."),
                  as_json: bool = typer.Option(False, "--json")) -> None:
    """Grant an escalated payment at the judge service, as the user (its admin token).

    The run stays paused; `nib approve RUN` grants and resumes in one step.
    """
    from agent.cli.common import resolve_run, run_store
    from agent.cli.services import grant_escalation, held_verdict, running

    settings = cli_settings()
    services = running(settings.home)
    if services is None:
        fail("no judge service is running, so there is nothing to grant at; in-process runs "
             "are approved with `nib approve RUN`. Fix: `nib services up`.")
    store = run_store()
    run_id = resolve_run(store, target, missing_ok=True)  # else: a verdict id
    verdict_id = held_verdict(store, run_id) if run_id else target
    grant = grant_escalation(settings, services, verdict_id, task_id=run_id)
    if as_json:
        emit_json(grant.to_wire())
        return
    out.print(f"granted {grant.id}: verdict {grant.verdict_id}, {grant.amount} atomic USDC to "
              f"{grant.recipient}, task {grant.task_id}", highlight=False)
