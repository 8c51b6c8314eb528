"""Exports a package imports on first use (PEP 562): ``agent`` and ``chain`` name their
public API in ``__init__`` without loading it, so importing one sub-package (the CLI, a
service) does not load web3, pydantic-settings and the loop (`nib --help` stays fast)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

__all__ = ["exports"]


def exports(package: str, homes: Mapping[str, str], namespace: dict[str, object]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: each name in ``homes`` is imported from
    the module named there when first asked for, then kept in ``namespace``."""

    def __getattr__(name: str) -> object:  # noqa: N807 - the module hook's own name
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    return __getattr__
