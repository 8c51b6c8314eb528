"""Fixtures for the tool tests: a wallet, a tool context and the local paywall on Anvil."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _tools_support import Events

from agent.tools.base import ToolContext
from chain.client import ChainClient
from chain.devkeys import AGENT, JUDGE, SELLER, dev_account
from chain.networks import get_network
from chain.paywall.app import DEFAULT_PRICES, PaywallServer
from judge.verdict import VerdictSigner
from wallet.keystore import KeyHandle
from wallet.signer import Wallet

#: Every paid test runs with the default $1 task cap.
CAP = 1_000_000


@pytest.fixture(scope="session")
def judge_signer() -> VerdictSigner:
    return VerdictSigner(dev_account(JUDGE))


@pytest.fixture
def client(anvil: Any) -> ChainClient:
    return ChainClient(anvil.rpc_url, anvil.chain_id)


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "nib.db"


@pytest.fixture
def wallet(
    chain: Any, client: ChainClient, judge_signer: VerdictSigner, db_path: Path, events: Events
) -> Wallet:
    return Wallet(
        KeyHandle(dev_account(AGENT)),
        db_path=db_path,
        chain=client,
        usdc=chain.usdc,
        trusted_judge=judge_signer.address,
        emit=events,
    )


@pytest.fixture(scope="module")
def paywall_server(anvil: Any) -> Iterator[PaywallServer]:
    with PaywallServer(anvil.rpc_url, anvil.usdc) as server:
        yield server


@pytest.fixture
def paywall(paywall_server: PaywallServer) -> Iterator[PaywallServer]:
    """The module's paywall, its default terms restored after each test."""
    yield paywall_server
    for name, price in DEFAULT_PRICES.items():
        paywall_server.state.set_price(name, price)
    paywall_server.state.set_pay_to(dev_account(SELLER).address)


@pytest.fixture
def make_ctx(anvil: Any, client: ChainClient, events: Events) -> Callable[..., ToolContext]:
    def build(**overrides: Any) -> ToolContext:
        fields: dict[str, Any] = {
            "run_id": "run-test",
            "chain": client,
            "network": get_network("anvil", rpc_url=anvil.rpc_url, usdc=anvil.usdc),
            "wallet": None,
            "emit": events,
            "allowlist": (),
            "spend_cap_atomic": CAP,
        }
        fields.update(overrides)
        return ToolContext(**fields)

    return build
