"""Fixtures for the wallet tests: the judge's signer, the agent's key, a wallet on Anvil.

Tests import from ``wallet.<module>``, not ``wallet``: with ``tests/`` on sys.path (the root
conftest puts it there) ``import wallet`` can resolve to the ``tests/wallet`` directory as a
namespace package. test_wallet_exports checks the real package in a clean interpreter.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _wallet_support import FAST_SCRYPT_N, Events

from chain.client import ChainClient
from chain.devkeys import AGENT, JUDGE, dev_account
from judge.verdict import VerdictSigner
from wallet.keystore import KeyHandle, Keystore
from wallet.signer import Wallet


@pytest.fixture(scope="session")
def judge_signer() -> VerdictSigner:
    return VerdictSigner(dev_account(JUDGE))


@pytest.fixture(scope="session")
def agent_key(tmp_path_factory: pytest.TempPathFactory) -> KeyHandle:
    path = tmp_path_factory.mktemp("keystore") / "wallet.json"
    store = Keystore(path, scrypt_n=FAST_SCRYPT_N)
    store.import_key(dev_account(AGENT).key.hex(), "pw")
    return store.unlock("pw")


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "nib.db"


@pytest.fixture
def client(chain: Any) -> ChainClient:
    return ChainClient(chain.rpc_url, chain.chain_id)


@pytest.fixture
def make_wallet(
    chain: Any,
    agent_key: KeyHandle,
    judge_signer: VerdictSigner,
    db_path: Path,
    events: Events,
    client: ChainClient,
) -> Callable[..., Wallet]:
    def build(**overrides: Any) -> Wallet:
        kwargs: dict[str, Any] = {
            "db_path": db_path,
            "chain": client,
            "usdc": chain.usdc,
            "trusted_judge": judge_signer.address,
            "emit": events,
        }
        kwargs.update(overrides)
        return Wallet(agent_key, **kwargs)

    return build


@pytest.fixture
def wallet(make_wallet: Callable[..., Wallet]) -> Wallet:
    return make_wallet()
