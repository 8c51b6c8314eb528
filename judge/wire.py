"""Reading JSON that crossed a process boundary (the judge's and the wallet's services).

A request or answer body is a JSON object of ``object`` values; these narrow one value
at a time, so mypy checks what each side does with it, and raise TypeError or
ValueError naming what was found (the services answer those 422: a malformed body).
Records (the wallet's signed and sent transactions, a run's spend) are rebuilt with
every field checked against the dataclass, not splatted in unchecked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar, cast

from pydantic import TypeAdapter

__all__ = ["from_wire", "wire_int", "wire_list", "wire_object", "wire_str"]

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
