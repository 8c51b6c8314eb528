"""The deterministic free-read policy: one row per read-only tool, no model involved.

A row says whether the tool may run, how often per run, how large its result may be
and how long it may take. The same question always gets the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from judge.errors import JudgeConfigError

FreeOutcome = Literal["allowed", "refused"]
"""A free-read decision.

- ``allowed``: run the tool now, within the row's result size and timeout.
- ``refused``: do not run it; the reason says why and what to do instead.
"""


@dataclass(frozen=True)
class FreePolicyRow:
    """Limits for one free tool."""

    tool: str
    allowed: bool = True
    max_calls_per_run: int = 4
    max_result_bytes: int = 16_384
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not self.tool:
            raise JudgeConfigError(
                "found a free policy row without a tool name; expected the tool's name; "
                "fix: FreePolicyRow(tool='base_fee', ...)."
            )
        for name in ("max_calls_per_run", "max_result_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise JudgeConfigError(
                    f"found {name}={value!r} for {self.tool}; expected an int >= 0; "
                    f"fix: set {name} to a whole number."
                )
        if not self.timeout_s > 0:
            raise JudgeConfigError(
                f"found timeout_s={self.timeout_s!r} for {self.tool}; expected > 0 seconds; "
                "fix: set a positive timeout."
            )


@dataclass(frozen=True)
class FreeDecision:
    """The policy's answer for one free call (``row`` is None for unknown tools)."""

    outcome: FreeOutcome
    tool: str
    reason: str
    row: FreePolicyRow | None = None

    @property
    def allowed(self) -> bool:
        return self.outcome == "allowed"


class FreeReadPolicy:
    """An immutable table of :class:`FreePolicyRow`, keyed by tool name.

    The judge knows no tool by name: each free tool carries its own row and the agent
    builds the table from the tools it registers (``ToolRegistry.free_policy``). A tool
    without a row is refused."""

    __slots__ = ("_rows",)

    def __init__(self, rows: Iterable[FreePolicyRow] = ()) -> None:
        table: dict[str, FreePolicyRow] = {}
        for row in rows:
            if not isinstance(row, FreePolicyRow):
                raise JudgeConfigError(
                    f"found a policy row of type {type(row).__name__}; expected FreePolicyRow; "
                    "fix: build rows with FreePolicyRow(tool=..., ...)."
                )
            table[row.tool] = row
        self._rows: Mapping[str, FreePolicyRow] = dict(sorted(table.items()))

    @property
    def tools(self) -> tuple[str, ...]:
        """Known tool names, sorted."""
        return tuple(self._rows)

    def rows(self) -> tuple[FreePolicyRow, ...]:
        return tuple(self._rows.values())

    def row(self, tool: str) -> FreePolicyRow | None:
        return self._rows.get(tool)

    def with_rows(self, *rows: FreePolicyRow) -> FreeReadPolicy:
        """A new policy with ``rows`` added, replacing rows for the same tools."""
        return FreeReadPolicy((*self._rows.values(), *rows))

    def without(self, *tools: str) -> FreeReadPolicy:
        """A new policy without the rows for ``tools`` (they become unknown)."""
        return FreeReadPolicy(r for r in self._rows.values() if r.tool not in tools)

    def decide_free(self, tool: str, calls_so_far: int) -> FreeDecision:
        """Decide one free call, given how many times ``tool`` already ran this run."""
        row = self._rows.get(tool)
        if row is None:
            known = ", ".join(self._rows) or "none"
            return FreeDecision(
                "refused",
                tool,
                f"unknown free tool {tool!r}; known free tools: {known}. "
                "Fix: propose one of the known tools.",
            )
        if not row.allowed:
            return FreeDecision(
                "refused",
                tool,
                f"free tool {tool!r} is disabled by policy; fix: use another tool "
                "or enable its policy row.",
                row,
            )
        if calls_so_far >= row.max_calls_per_run:
            return FreeDecision(
                "refused",
                tool,
                f"free tool {tool!r} already ran {calls_so_far} times this run; "
                f"the limit is {row.max_calls_per_run}. Fix: use the earlier results "
                "or another tool.",
                row,
            )
        return FreeDecision(
            "allowed",
            tool,
            f"call {calls_so_far + 1} of {row.max_calls_per_run} for {tool!r}; "
            f"result up to {row.max_result_bytes} bytes within {row.timeout_s:g} s",
            row,
        )

    def check_result(self, tool: str, result_bytes: int) -> FreeDecision:
        """Decide whether a result of ``result_bytes`` may enter the history."""
        row = self._rows.get(tool)
        if row is None:
            return self.decide_free(tool, 0)
        if result_bytes > row.max_result_bytes:
            return FreeDecision(
                "refused",
                tool,
                f"result of {tool!r} is {result_bytes} bytes; the limit is "
                f"{row.max_result_bytes}. Fix: narrow the query (fewer blocks, one address).",
                row,
            )
        return FreeDecision(
            "allowed", tool, f"result of {result_bytes} bytes within the limit", row
        )

    def __repr__(self) -> str:
        return f"FreeReadPolicy(tools={list(self._rows)})"
