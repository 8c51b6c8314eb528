"""What every ``nib`` command shares: the consoles, exit codes, the one-line error for a
user's mistake, JSON output, settings, the runtime and the run store.

Exit codes: 0 finished, 1 stopped without finishing (a dependency failure included, its
fix named), 2 bad input only.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, NoReturn

from rich.console import Console

if TYPE_CHECKING:
    from agent.cli.runtime import Runtime
    from agent.config import ExplicitSettings, NibSettings
    from agent.seams import SpendView
    from agent.store import RunStore

__all__ = [
    "BadInput",
    "EXIT_BAD_INPUT",
    "EXIT_FINISHED",
    "EXIT_INTERRUPTED",
    "EXIT_STOPPED",
    "EXIT_TERMINATED",
    "IN_PROCESS_HELP",
    "cli_runtime",
    "cli_settings",
    "emit_json",
    "emit_json_list",
    "err",
    "fail",
    "out",
    "resolve_run",
    "run_store",
    "short",
    "usdc",
]

out = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 140)

EXIT_FINISHED, EXIT_STOPPED, EXIT_BAD_INPUT = 0, 1, 2
#: Ctrl-C (SIGINT): 128 + 2, as shells report a process a signal ended.
EXIT_INTERRUPTED = 130
#: SIGTERM (`kill`, a service manager): 128 + 15.
EXIT_TERMINATED = 143


class BadInput(Exception):
    """A user mistake the CLI reports in one line with exit code 2."""


def fail(message: str) -> NoReturn:
    raise BadInput(message)


def emit_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def emit_json_list(items: Iterable[object]) -> None:
    """A JSON list written one element at a time, as emit_json would lay it out: the
    output of a large table (the ledger) without holding it in memory."""
    first = True
    for item in items:
        body = json.dumps(item, indent=2, default=str).replace("\n", "\n  ")
        sys.stdout.write(("[\n  " if first else ",\n  ") + body)
        first = False
    sys.stdout.write("[]\n" if first else "\n]\n")


_warned: list[str] = []


def cli_settings(
    *, network: str | None = None, model: str | None = None, profile: str | None = None
) -> NibSettings:
    """The settings (``network``, ``model``, ``profile``: a flag's value, None when not
    given), after a warning (once per process) for each NIB_* variable nib does not read,
    naming the nearest one it does (a typo is otherwise ignored silently)."""
    from agent.config import load_settings, unknown_variables

    for name, nearest in unknown_variables():
        if name not in _warned:
            _warned.append(name)
            fix = f"did you mean {nearest}? Fix: rename it" if nearest else "Fix: unset it"
            err.print(f"warning: {name} is not a nib setting and is ignored; {fix} "
                      "(`nib --help` and README.md list the settings).",
                      markup=False, highlight=False, soft_wrap=True)
    given: ExplicitSettings = {}
    if network is not None:
        given["network"] = network
    if model is not None:
        given["model"] = model
    if profile is not None:
        given["profile"] = profile
    return load_settings(**given)


def cli_runtime(settings: NibSettings, *, in_process: bool = False) -> Runtime:
    """The runtime of a command: the running devnet and services (it starts neither), or,
    with ``in_process`` (the user's explicit --in-process), the judge and wallet here."""
    from agent.cli.runtime import build_runtime

    return build_runtime(settings, in_process=in_process)


#: The flag that composes the judge and the wallet inside the agent process.
IN_PROCESS_HELP = ("Compose the judge and the wallet in this process, unconfined, instead of "
                   "using their services (tests and benchmarks).")


def run_store() -> RunStore:
    """The run store; a run it finds dead is closed with the ledger's spend for it."""
    from agent.cli.services import records_database, status
    from agent.store import RunStore

    settings = cli_settings()
    store = RunStore(settings.database)
    services = status(settings.home)
    if services is not None and services.running:  # the wallet service holds the ledger
        socket = services.wallet_socket

        def service_meter() -> SpendView:
            from wallet.client import WalletClient

            return WalletClient(socket).meter

        store.spend_of = _spend_when_read(service_meter)
    else:  # the ledger is where this home's records are (agent.cli.services)
        records = records_database(settings)

        def ledger_meter() -> SpendView:
            from wallet.meter import SpendMeter

            return SpendMeter(records)

        store.spend_of = _spend_when_read(ledger_meter)
    return store


def _spend_when_read(meter: Callable[[], SpendView]) -> Callable[[str], dict[str, object]]:
    """A run's spend from the meter ``meter()`` gives, asked for only when a dead run is
    closed: reading runs loads no wallet client (web3, eth-account: ~1 s of CPU); a ledger
    that cannot be opened then fails that one reading (the run's closing message names it)
    instead of every command that reads runs, and a missing one is not created empty by a
    mere reader."""
    from agent.store import spend_reader

    opened: list[Callable[[str], dict[str, object]]] = []

    def spend(run_id: str) -> dict[str, object]:
        if not opened:
            opened.append(spend_reader(meter()))
        return opened[0](run_id)

    return spend


def resolve_run(store: RunStore, given: str, *, missing_ok: bool = False) -> str | None:
    """The run (or queued task) id ``given`` names: itself, or the one id it is a unique
    prefix of. An unknown id (unless ``missing_ok``: None) or an ambiguous prefix is the
    user's mistake (exit 2)."""
    from agent.store import QUEUE

    text = given.strip()
    if not text or any(c in text for c in "%_\\"):
        fail(f"no such run {given!r}; expected a run id (or a unique prefix) from `nib runs`. "
             "Fix: `nib runs` lists them.")
    found: set[str] = set()
    # The ids from ``text`` up to the next prefix: a range the primary key answers (a LIKE
    # is case-blind on SQLite, so no index serves it: it read every run, 30 ms at 10M).
    after = text[:-1] + chr(ord(text[-1]) + 1)
    for table, column in (("agent_runs", "run_id"), (QUEUE, "id")):
        rows = store.db.query(f"SELECT {column} AS id FROM {table} WHERE {column} >= ? AND "
                              f"{column} < ? AND {column} LIKE ? ORDER BY {column} LIMIT 6",
                              (text, after, text + "%"))
        found.update(str(r["id"]) for r in rows)
    if text in found:
        return text
    if len(found) == 1:
        return found.pop()
    if not found and missing_ok:
        return None
    if not found:
        from judge.storage import describe

        fail(f"no such run {given!r} in {describe(store.db.location)}; expected a run id (or a "
             "unique prefix) from `nib runs`. Fix: `nib runs` lists them.")
    fail(f"run id prefix {given!r} is ambiguous: it starts {', '.join(sorted(found)[:5])}; "
         "expected a prefix of one run only. Fix: give more of the id.")


def short(value: object, n: int = 70) -> str:
    from agent.loop.history import one_line

    text = value if isinstance(value, str) else json.dumps(value, default=str) if value else ""
    return one_line(text, n)


def usdc(atomic: object) -> str:
    from chain.money import format_usdc

    if isinstance(atomic, int | float | str | bytes | Decimal):
        try:
            return format_usdc(int(atomic))
        except (TypeError, ValueError):
            pass
    return str(atomic)

