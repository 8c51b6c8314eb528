"""What every ``nib`` command shares: the consoles, exit codes, the one-line error for a
user's mistake, JSON output, settings, the runtime and the run store.

Exit codes: 0 finished, 1 stopped without finishing (a dependency failure included, its
fix named), 2 bad input only.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn

from rich.console import Console

if TYPE_CHECKING:
    from agent.cli.runtime import Runtime
    from agent.config import NibSettings
    from agent.store import RunStore

__all__ = [
    "BadInput",
    "EXIT_BAD_INPUT",
    "EXIT_FINISHED",
    "EXIT_STOPPED",
    "cli_runtime",
    "cli_settings",
    "emit_json",
    "emit_json_list",
    "err",
    "fail",
    "out",
    "run_store",
    "short",
    "usdc",
]

out = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 140)

EXIT_FINISHED, EXIT_STOPPED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    """A user mistake the CLI reports in one line with exit code 2."""


def fail(message: str) -> NoReturn:
    raise BadInput(message)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def emit_json_list(items: Iterable[Any]) -> None:
    """A JSON list written one element at a time, as emit_json would lay it out: the
    output of a large table (the ledger) without holding it in memory."""
    first = True
    for item in items:
        body = json.dumps(item, indent=2, default=str).replace("\n", "\n  ")
        sys.stdout.write(("[\n  " if first else ",\n  ") + body)
        first = False
    sys.stdout.write("[]\n" if first else "\n]\n")


_warned: list[str] = []


def cli_settings(**explicit: Any) -> NibSettings:
    """The settings, after a warning (once per process) for each NIB_* variable nib does
    not read, naming the nearest one it does (a typo is otherwise ignored silently)."""
    from agent.config import load_settings, unknown_variables

    for name, nearest in unknown_variables():
        if name not in _warned:
            _warned.append(name)
            fix = f"did you mean {nearest}? Fix: rename it" if nearest else "Fix: unset it"
            err.print(f"warning: {name} is not a nib setting and is ignored; {fix} "
                      "(`nib --help` and README.md list the settings).",
                      markup=False, highlight=False, soft_wrap=True)
    return load_settings(**explicit)


def cli_runtime(settings: NibSettings) -> Runtime:
    from agent.cli.runtime import build_runtime

    return build_runtime(settings)


def run_store() -> RunStore:
    """The run store; a run it finds dead is closed with the ledger's spend for it."""
    from agent.cli.runtime import running_services, spend_reader
    from agent.cli.services import records_database
    from agent.store import RunStore

    settings = cli_settings()
    store = RunStore(settings.database)
    services = running_services(settings.home)
    if services is not None:  # the wallet service holds the ledger
        from wallet.service import WalletClient

        store.spend_of = spend_reader(WalletClient(services.wallet_socket).meter)
    else:  # the ledger is where this home's records are (agent.cli.services)
        from wallet.meter import SpendMeter

        store.spend_of = spend_reader(SpendMeter(records_database(settings)))
    return store


def short(value: Any, n: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str) if value else ""
    return text if len(text) <= n else text[: n - 1] + "…"


def usdc(atomic: Any) -> str:
    from chain.money import format_usdc

    try:
        return format_usdc(int(atomic))
    except (TypeError, ValueError):
        return str(atomic)

