"""Each package's public API is its __init__ __all__: sorted, and every name resolves."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["agent", "agent.models", "agent.tools", "wallet", "judge", "chain"]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_resolves(name):
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names {attr!r}, which it does not define"
