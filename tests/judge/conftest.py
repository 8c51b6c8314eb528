"""Shared fixtures for the judge tests: the devnet judge key and a signer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# With tests/ on sys.path (pytest puts it there for tests/conftest.py), the folder
# tests/judge/ (no __init__.py) is found as a namespace package named "judge" before
# the editable install's finder runs, so `import judge` would skip judge/__init__.py.
# Put the repository first and drop a namespace stand-in. The durable fix is
# `pythonpath = ["."]` in [tool.pytest.ini_options].
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
if getattr(sys.modules.get("judge"), "__file__", "") is None:
    del sys.modules["judge"]
from eth_account.signers.local import LocalAccount  # noqa: E402

from chain.devkeys import JUDGE, OUTSIDER, dev_account  # noqa: E402
from judge.verdict import VerdictSigner  # noqa: E402


@pytest.fixture(scope="session")
def judge_account() -> LocalAccount:
    return dev_account(JUDGE)


@pytest.fixture(scope="session")
def outsider_account() -> LocalAccount:
    return dev_account(OUTSIDER)


@pytest.fixture(scope="session")
def signer(judge_account: LocalAccount) -> VerdictSigner:
    return VerdictSigner(judge_account)
