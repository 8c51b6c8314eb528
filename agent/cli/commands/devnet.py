"""``nib devnet``: start, inspect and stop the local chain, x402 paywall and market."""

from __future__ import annotations

import typer

from agent.cli.common import emit_json, fail, out
from chain import devnet as _devnet

__all__ = ["devnet_app"]

devnet_app = typer.Typer(
    no_args_is_help=True, help="Start, inspect and stop the local chain, x402 paywall and x402 market."
)


@devnet_app.command("up")
def devnet_up(
    as_json: bool = typer.Option(False, "--json", help="Print the devnet facts as JSON."),
    port: int = typer.Option(0, help="Anvil port; 0 picks a free one."),
    services: bool = typer.Option(True, "--services/--no-services",
                                  help="Also start the judge and the wallet as their own processes."),
) -> None:
    """Start the local devnet (Anvil + TestUSDC + x402 paywall) and the judge and wallet
    services, or report the running ones."""
    from agent.cli.common import cli_settings
    from agent.cli.runtime import ensure_devnet_wallet
    from agent.cli.services import up as services_up

    info = _devnet.up(port=port)
    ensure_devnet_wallet(info)
    started = services_up(cli_settings()) if services else None
    if as_json:
        emit_json({**info.to_json(), "services": started.public() if started else None})
        return
    _print_devnet(info, as_json)
    if started is not None:
        out.print(f"  services     {started.describe()}", highlight=False)


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
    """Stop the judge and wallet services, then the devnet's Anvil and paywall; the chain
    state is kept for the next `up`."""
    from agent.cli.common import cli_settings
    from agent.cli.services import down as services_down

    services_down(cli_settings().home)
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

