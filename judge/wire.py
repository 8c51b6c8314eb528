"""Reading JSON that crossed a process boundary (the judge's and the wallet's services).

A request or answer body is a JSON object of ``object`` values; these narrow one value
at a time, so mypy checks what each side does with it, and raise TypeError or
ValueError naming what was found (the services answer those 422: a malformed body).
Records (the wallet's signed and sent transactions, a run's spend) are rebuilt with
every field checked against the dataclass, not splatted in unchecked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar, cast

from pydantic import TypeAdapter

from judge.policy import FreeDecision

__all__ = [
    "check_handlers",
    "free_from_wire",
    "free_to_wire",
    "from_wire",
    "wire_int",
    "wire_list",
    "wire_object",
    "wire_str",
]

_T = TypeVar("_T")


def wire_object(name: str, value: object) -> Mapping[str, object]:
    """``value`` when it is a JSON object; TypeError naming ``name`` otherwise."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be an object, found {type(value).__name__}")
    return value


def wire_list(name: str, value: object) -> tuple[object, ...]:
    """``value`` as a tuple when it is a JSON array; TypeError naming ``name`` otherwise."""
    if not isinstance(value, list | tuple):
        raise TypeError(f"{name} must be a list, found {type(value).__name__}")
    return tuple(value)


def wire_int(value: object) -> int:
    """An integer sent as a JSON number or a numeric string (``int()`` of it)."""
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"expected an integer, found {type(value).__name__}")


def wire_str(value: object) -> str | None:
    """An optional string field: None stays None, anything else is its text."""
    return None if value is None else str(value)


def from_wire(cls: type[_T], data: object) -> _T:
    """``data`` rebuilt as the dataclass ``cls``, each field validated against its type
    (pydantic); a missing or mistyped field raises ValueError naming it."""
    return cast(_T, _adapter(cls).validate_python(data))


_ADAPTERS: dict[type, TypeAdapter[object]] = {}


def _adapter(cls: type) -> TypeAdapter[object]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:  # built once per class (a benign race builds it twice)
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


def free_to_wire(d: FreeDecision) -> dict[str, object]:
    row = None
    if d.row is not None:
        row = {
            "tool": d.row.tool,
            "allowed": d.row.allowed,
            "max_calls_per_run": d.row.max_calls_per_run,
            "max_result_bytes": d.row.max_result_bytes,
            "timeout_s": d.row.timeout_s,
        }
    return {"outcome": d.outcome, "tool": d.tool, "reason": d.reason, "row": row}


def free_from_wire(data: Mapping[str, object]) -> FreeDecision:
    return from_wire(FreeDecision, data)


def check_handlers(handlers: type, operations: Iterable[str], table: str) -> None:
    """Refuse a server whose handler class (one public method per operation) and its
    operation table (the handlers' names) disagree: raises TypeError naming both sides."""
    served = {name for name in vars(handlers) if not name.startswith("_")}
    listed = set(operations)
    if served != listed:
        raise TypeError(
            f"found handlers {sorted(served - listed)} without an operation and operations "
            f"{sorted(listed - served)} without a handler; expected one handler per entry "
            f"of {table}; fix: add the missing one."
        )
