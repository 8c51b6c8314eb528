"""Each package's public API is its __init__ __all__: sorted, and every name resolves."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["agent", "agent.models", "agent.tools", "wallet", "judge", "chain"]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_resolves(name):
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names {attr!r}, which it does not define"


@pytest.mark.parametrize("name", PACKAGES)
def test_each_export_is_its_home_s_object_once_every_home_is_loaded(name):
    """The exports load on first use from the module ``_HOMES`` names; an export named as
    its own home module (``judge.fingerprint``, ``wallet.reconcile``: functions) stays the
    function after that module is imported, as an eager ``from ... import`` kept it."""
    module = importlib.import_module(name)
    assert sorted(module._HOMES) == sorted(module.__all__)
    for attr, home in module._HOMES.items():
        value = getattr(importlib.import_module(home), attr)
        assert getattr(module, attr) is value, f"{name}.{attr} is not {home}.{attr}"


def test_importing_the_packages_loads_none_of_their_children():
    """What keeps `import wallet.ledger` or `import judge.errors` (every `nib` command)
    from loading web3, eth-account and its py_ecc (~1.5 s of CPU), mcp and the tools."""
    probe = ("import sys, agent, agent.models, agent.tools, chain, judge.errors, wallet.ledger; "
             "print(*sorted(sys.modules))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.split())
    heavy = {"web3", "eth_account", "py_ecc", "mcp", "agent.tools.registry_default",
             "agent.models.offline", "judge.fingerprint", "wallet.signer", "chain.client"}
    assert not heavy & loaded, f"imported with the packages: {sorted(heavy & loaded)}"
