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

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="nib: a research agent that spends testnet USDC safely.",
)
devnet_app = typer.Typer(
    no_args_is_help=True, help="Start, inspect and stop the local chain + x402 paywall."
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

out = Console()
err = Console(stderr=True)

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
    from agent.runtime import ensure_devnet_wallet

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
    ):
        out.print(f"  {key:12} {getattr(info, key)}")


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
        app(args=argv, standalone_mode=False)
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
