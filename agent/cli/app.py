"""The ``nib`` command line: devnet, wallet, judge, run, runs, show, audit, approve, report,
eval, submit, worker.

Each command group lives in its own module under ``agent/cli/commands/``; this module
assembles them into one ``nib`` and maps errors to exit codes: 0 finished, 1 stopped
without finishing (a dependency failure included, its fix named), 2 bad input only. A
user's mistake prints one line naming the problem and the fix, never a traceback.
"""

from __future__ import annotations

import sys

# Start-up cost: only typer and rich load before a command runs (`nib --help`: 0.26 s of
# CPU, was 2.5 s). `python -X importtime -c "import agent.cli.app"` found the rest: the
# agent package's eager __init__ (agent.config with pydantic-settings 0.83 s, agent.loop.run
# with web3, eth-account and the x402 tools 0.70 s, of 1.59 s) and chain.devnet (web3,
# 2.7 s under load). Those now load inside the commands that use them, and
# tests/agent/test_cli_usage.py fails if any of them is imported by `nib` itself. The
# commands that only read runs (runs, show, audit --run, report, approve/deny of an unknown
# run) load the run store and no chain, wallet, mcp or tool code: 0.36 s, was 2.1 s; the
# same test file pins that too, and that every command that neither talks to a chain nor
# signs (its CHAIN_FREE: `wallet address`, `audit verify`, `submit` without services...)
# loads no web3 or eth-account, in its process or a child it forks: 0.23-0.33 s, was up
# to 1.25 s.
import typer

from agent.cli.commands import (
    audit,
    devnet,
    history,
    judge,
    queue,
    report,
    runs,
    services,
    wallet,
)
from agent.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FINISHED,
    EXIT_INTERRUPTED,
    EXIT_STOPPED,
    BadInput,
)

__all__ = ["app", "entry", "main"]

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=False,
    help="nib: a research agent that spends testnet USDC safely.",
)
app.add_typer(runs.app)
app.add_typer(history.app)
app.add_typer(report.app)
app.add_typer(queue.app)
app.add_typer(devnet.devnet_app, name="devnet")
app.add_typer(wallet.wallet_app, name="wallet")
app.add_typer(judge.judge_app, name="judge")
app.add_typer(audit.audit_app, name="audit")
app.add_typer(services.services_app, name="services")


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


def _usage_line(exc: BaseException) -> str | None:
    """One line for a parser error of the installed typer/click (an unknown command or
    flag, a bad value, a missing argument, no command at all), or None when ``exc`` is
    not one. Typer 0.29 raises the exceptions of the click it bundles (typer._click),
    older typers those of click itself: both are recognised by their shape (a usage
    error is a ClickException with exit code 2 and a context), not by their module."""
    message = getattr(exc, "format_message", None)
    ctx = getattr(exc, "ctx", None)
    if getattr(exc, "exit_code", None) != 2 or not callable(message):
        return None
    path = ctx.command_path if ctx is not None else "nib"
    names = sorted(getattr(ctx.command, "commands", None) or ()) if ctx is not None else []
    text = " ".join(str(message()).split())  # click wraps and indents long messages
    if names and text.startswith("Missing command"):  # `nib`, `nib devnet`: no command given
        return (f"`{path}` needs a command; expected one of: {', '.join(names)}. Fix: "
                f"`{path} --help` says what each does.")
    return f"{text if text.endswith(('.', '?')) else text + '.'} Fix: `{path} --help` shows the usage."


def main(argv: list[str] | None = None) -> int:
    """Run the CLI: exit 0 finished, 1 stopped (dependency failures included), 2 bad
    input, 130 interrupted (Ctrl-C)."""
    try:
        # Without standalone mode click hands back a command's typer.Exit code as the return
        # value, and raises its usage errors here, where they become one line.
        rc = app(args=argv, standalone_mode=False)
        if isinstance(rc, int):
            return rc
    except _bad_input() as exc:
        _line(f"error: {exc}")
        return EXIT_BAD_INPUT
    except _stopped() as exc:
        _line(f"stopped: {_with_fix(exc)}")
        return EXIT_STOPPED
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except (KeyboardInterrupt, typer.Abort):
        _line("interrupted (Ctrl-C) before any run started; nothing was signed.")
        return EXIT_INTERRUPTED
    except SystemExit as exc:
        return int(exc.code or 0)
    except Exception as exc:
        usage = _usage_line(exc)
        if usage is None:
            raise
        _line(f"error: {usage}")
        return EXIT_BAD_INPUT
    return EXIT_FINISHED


def _line(text: str) -> None:
    """One line on stderr, as given (no markup, no wrapping)."""
    sys.stderr.write(text.replace("\n", " ") + "\n")


def entry() -> None:
    sys.exit(main())



if __name__ == "__main__":
    entry()
