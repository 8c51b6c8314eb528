"""The live view of a run on stderr: one line per proposal, verdict, call, spend and stop,
and, while nothing happens for over a second, what the run is waiting on and for how long.

On a terminal the wait is a spinner with an elapsed timer, redrawn in place and cleared
before the next line; anywhere else (a pipe, a log, CI) a plain ``still waiting`` line
every WAIT_LINE_S seconds, so a log shows a slow step is alive without control codes.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO

from agent.cli.common import err, short, usdc

__all__ = ["Progress"]

#: Quiet this long (seconds) before the spinner shows: most steps take less.
SPINNER_AFTER_S = 1.0
#: Off a terminal, one plain line per this many seconds of waiting.
WAIT_LINE_S = 15.0
_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_VERDICT_COLOURS = {"approve": "green", "refuse": "red", "escalate": "magenta", "answer": "cyan"}


def _waiting_after(type_: str, data: dict[str, object]) -> str | None:
    """What a run does next after an event of ``type_`` (None: keep the current words)."""
    if type_ == "proposal":
        return "checking the proposal (judge)"
    if type_ == "verdict":
        approved = data.get("decision") == "approve"
        return f"calling {data.get('tool') or 'the tool'}" if approved else "asking the model"
    if type_ in ("tool.call", "gate.skip", "spend", "replan", "coverage"):
        return "asking the model"
    if type_ == "quote":
        return "waiting for the judge's ruling"
    if type_ in ("wallet.signed", "wallet.broadcast"):
        return "waiting for the chain"
    return None


class Progress:
    """``on_event`` for a run's deps: prints each event, and shows the wait between them."""

    def __init__(self, stream: IO[str] | None = None, *, tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.step = 1  # the step under way (the first proposal is step 1)
        self.waiting = "asking the model"
        self.since = time.monotonic()
        self._drawn = False
        self._said = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="nib-live", daemon=True)

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        with self._lock:
            self._clear()

    def __call__(self, run_id: str, type_: str, data: dict[str, object]) -> None:
        with self._lock:
            self._clear()
            self._print(type_, data)
            step = data.get("step")
            if isinstance(step, int):
                self.step = step
            self.waiting = _waiting_after(type_, data) or self.waiting
            self.since, self._said = time.monotonic(), 0.0

    def _tick(self) -> None:
        frame = 0
        while not self._stop.wait(0.1):
            with self._lock:
                quiet = time.monotonic() - self.since
                if self.tty and quiet >= SPINNER_AFTER_S:
                    spin = _FRAMES[frame % len(_FRAMES)]
                    self.stream.write(f"\r\x1b[2K{spin} step {self.step} · {self.waiting} · "
                                      f"{quiet:.0f} s")
                    self.stream.flush()
                    self._drawn, frame = True, frame + 1
                elif not self.tty and quiet - self._said >= WAIT_LINE_S:
                    self._said = quiet
                    self.stream.write(f"  still {self.waiting} ({quiet:.0f} s)\n")
                    self.stream.flush()

    def _clear(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False

    def _print(self, type_: str, data: dict[str, object]) -> None:
        if type_ == "proposal":
            what = data.get("tool") or data.get("action") or "?"
            err.print(f"[dim]step {data.get('step', '?')}[/] propose [bold]{what}[/] "
                      f"{short(data.get('args'))}")
        elif type_ == "gate.skip":
            err.print(f"  [yellow]skipped[/] {short(data.get('why') or data.get('reason'))}")
        elif type_ == "verdict":
            colour = _VERDICT_COLOURS.get(str(data.get("decision")), "white")
            price = f" price {usdc(data['amount'])}" if data.get("amount") else ""
            err.print(f"  judge [{colour}]{data.get('decision')}[/]{price}  "
                      f"{short(data.get('reason'), 90)}")
        elif type_ == "tool.call":
            ok = "[green]ok[/]" if data.get("ok") else "[red]failed[/]"
            cost = data.get("cost_usdc") or 0
            err.print(f"  {data.get('tool')} {ok}{' cost ' + usdc(cost) if cost else ''}  "
                      f"{short(data.get('summary'), 90)}")
        elif type_ == "spend":
            gas = f" + gas {data['gas_wei']} wei" if data.get("gas_wei") else ""
            total = f"  (run total {usdc(data['total_usdc'])})" if "total_usdc" in data else ""
            tx = f"  tx {data['tx_hash']}" if data.get("tx_hash") else ""
            err.print(f"  [bold]spent[/] {usdc(data.get('usdc') or 0)}{gas}{total}{tx}")
        elif type_ == "stop":
            err.print(f"[bold]stop[/] {data.get('reason')}")
