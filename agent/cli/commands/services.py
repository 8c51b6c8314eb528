"""``nib services up/status/down``: the judge and the wallet as their own processes (see
agent.cli.services, imported only by the commands that start or inspect them)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

from agent.cli.common import EXIT_STOPPED, cli_settings, out

if TYPE_CHECKING:
    from agent.cli.services import ServicesInfo

__all__ = ["services_app"]

services_app = typer.Typer(
    no_args_is_help=False, help="The judge and the wallet as their own processes."
)


@services_app.command("up")
def services_up(as_json: bool = typer.Option(False, "--json")) -> None:
    """Start the judge and the wallet as their own processes (restarted when they run
    against another chain than this home's)."""
    from agent.cli.services import up

    _show(up(cli_settings()), [], as_json)


@services_app.command("status")
def services_status(as_json: bool = typer.Option(False, "--json")) -> None:
    """Where the services run, and whether they answer on this home's current chain."""
    from agent.cli.services import health, status

    settings = cli_settings()
    info = status(settings.home)
    if info is None:
        typer.echo("no services started; fix: `nib devnet up` (the devnet) or `nib services up`",
                   err=True)
        raise typer.Exit(EXIT_STOPPED)
    problems = health(info, settings)
    _show(info, problems, as_json)
    if problems:
        typer.echo(f"unhealthy: {'; '.join(problems)}. Fix: `nib devnet up` restarts them on "
                   "the devnet, `nib services down && nib services up` on any other network.",
                   err=True)
        raise typer.Exit(EXIT_STOPPED)


@services_app.command("down")
def services_down() -> None:
    """Stop the judge and the wallet services."""
    from agent.cli.services import down

    info = down(cli_settings().home)
    typer.echo("stopped" if info is not None else "no services were recorded", err=True)


def _show(info: ServicesInfo, problems: list[str], as_json: bool) -> None:
    data = {**info.public(), "healthy": not problems, "problems": problems}
    if as_json:
        typer.echo(json.dumps(data))
        return
    for k, v in data.items():
        if k != "problems":
            out.print(f"{k:16} {v}", markup=False, highlight=False, soft_wrap=True)
    if info.shared_database:
        typer.echo(f"SHARED: the services keep their records in the agent's own database "
                   f"({info.database}): an agent process can reach them. Fix: "
                   "NIB_SERVICES_DATABASE_URL (a database and role of their own) for "
                   "`nib services up`.")
