"""The ``nib`` command line: devnet, wallet, judge, run, runs, show, audit, approve, report,
eval, submit, worker.

Each command group lives in its own module under ``agent/cli/commands/``; this module
assembles them into one ``nib`` and maps errors to exit codes: 0 finished, 1 stopped
without finishing (a dependency failure included, its fix named), 2 bad input only. A
user's mistake prints one line naming the problem and the fix, never a traceback.
"""

from __future__ import annotations

import sys

import typer

from agent.cli.commands import audit, devnet, judge, queue, report, runs, wallet
from agent.cli.common import EXIT_BAD_INPUT, EXIT_FINISHED, EXIT_STOPPED, BadInput, err
from agent.cli.services import services_app

__all__ = ["app", "entry", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="nib: a research agent that spends testnet USDC safely.",
)
app.add_typer(runs.app)
app.add_typer(report.app)
app.add_typer(queue.app)
app.add_typer(devnet.devnet_app, name="devnet")
app.add_typer(wallet.wallet_app, name="wallet")
app.add_typer(judge.judge_app, name="judge")
app.add_typer(audit.audit_app, name="audit")
app.add_typer(services_app, name="services")


def _bad_input() -> tuple[type[BaseException], ...]:
    """The user's mistakes: exit 2. Everything else a command raises from our packages is
    a dependency or a refusal that stopped the work: exit 1, its fix named."""
    from agent.errors import AgentConfigError
    from chain.errors import UnknownNetwork, WrongChain
    from judge.errors import JudgeConfigError
    from wallet.errors import KeystoreError

    return (BadInput, AgentConfigError, JudgeConfigError, KeystoreError, UnknownNetwork, WrongChain)


def _stopped() -> tuple[type[BaseException], ...]:
    from agent.errors import AgentError
    from chain.errors import ChainError
    from judge.errors import JudgeError
    from wallet.errors import WalletError

    return (AgentError, ChainError, JudgeError, WalletError)


def _with_fix(exc: BaseException) -> str:
    """The error's one line; a dependency error that names no fix gets the generic one."""
    text = str(exc)
    if "Fix" in text or "fix:" in text:
        return text
    return (
        f"{text} Fix: check that the devnet (`nib devnet status`), the judge "
        "(NIB_JUDGE_URL) and the RPC (NIB_RPC_URL) are up, then run the command again."
    )


def main(argv: list[str] | None = None) -> int:
    """Run the CLI: exit 0 finished, 1 stopped (dependency failures included), 2 bad input."""
    try:
        # Without standalone mode click hands back a command's typer.Exit code as the return value.
        rc = app(args=argv, standalone_mode=False)
        if isinstance(rc, int):
            return rc
    except _bad_input() as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_BAD_INPUT
    except _stopped() as exc:
        err.print(f"stopped: {_with_fix(exc)}", markup=False, highlight=False)
        return EXIT_STOPPED
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
