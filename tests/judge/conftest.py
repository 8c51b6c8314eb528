"""Shared fixtures for the judge tests: the devnet judge key and a signer."""

from __future__ import annotations

import pytest
from eth_account.signers.local import LocalAccount

from chain.devkeys import JUDGE, OUTSIDER, dev_account
from judge.verdict import VerdictSigner


@pytest.fixture(scope="session")
def judge_account() -> LocalAccount:
    return dev_account(JUDGE)


@pytest.fixture(scope="session")
def outsider_account() -> LocalAccount:
    return dev_account(OUTSIDER)


@pytest.fixture(scope="session")
def signer(judge_account: LocalAccount) -> VerdictSigner:
    return VerdictSigner(judge_account)
