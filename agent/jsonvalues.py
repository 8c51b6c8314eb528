"""Reading stored JSON (a run's result, a trace event, a tool's data) without ``Any``.

One home for the type of a decoded JSON object and for the few readers that narrow a
value of unknown shape: what a store or a model returned is ``object`` until read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TypeAlias

__all__ = ["JSONObject", "as_float", "as_int", "as_list", "as_object"]

JSONObject: TypeAlias = dict[str, object]
"""A decoded JSON object: string keys, values of any JSON type (read them with the helpers)."""


def as_object(value: object) -> JSONObject:
    """A JSON object's copy; an empty dict for anything else (absent, null, a list)."""
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else {}


def as_list(value: object) -> list[object]:
    """A JSON array's items (nothing for anything else)."""
    return list(value) if isinstance(value, list | tuple) else []


def as_int(value: object) -> int:
    """A JSON number (or numeric text) as an int; anything else is refused, as int() does."""
    if isinstance(value, int | float | str | Decimal):
        return int(value)
    raise TypeError(f"expected a number, found {type(value).__name__} {value!r}")


def as_float(value: object) -> float:
    """A JSON number (or numeric text) as a float; anything else is refused, as float() does."""
    if isinstance(value, int | float | str | Decimal):
        return float(value)
    raise TypeError(f"expected a number, found {type(value).__name__} {value!r}")
