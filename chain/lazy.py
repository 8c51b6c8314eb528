"""Exports a package imports on first use (PEP 562): ``agent``, ``chain``, ``wallet`` and
``agent.models``/``agent.tools`` name their public API in ``__init__`` without loading it,
so importing one sub-package (the CLI, a service) does not load web3, eth-account, mcp and
the loop (`nib --help` and `nib runs` stay fast)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from types import ModuleType

__all__ = ["exports"]


def exports(package: str, homes: Mapping[str, str], namespace: dict[str, object]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: each name in ``homes`` is imported from
    the module named there when first asked for, then kept in ``namespace``.

    An exported name that is also its home's module name (``wallet.reconcile``, the
    function of ``wallet/reconcile.py``) stays the export once that module is imported,
    as an eager ``from wallet.reconcile import reconcile`` in ``__init__`` kept it."""

    def __getattr__(name: str) -> object:  # noqa: N807 - the module hook's own name
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    class Package(ModuleType):
        def __setattr__(self, name: str, value: object) -> None:
            # The import system sets a package's attribute to each submodule it loads.
            if isinstance(value, ModuleType) and homes.get(name) == value.__name__:
                value = getattr(value, name)
            super().__setattr__(name, value)

    sys.modules[package].__class__ = Package
    return __getattr__
