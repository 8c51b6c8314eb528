"""Fixtures for the fault suite: the local x402 paywall on the session's Anvil."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from chain.devkeys import SELLER, dev_account
from chain.paywall.app import DEFAULT_PRICES, PaywallServer
from tests._support import assert_money_audited


@pytest.fixture(scope="module")
def paywall_server(anvil: Any) -> Iterator[PaywallServer]:
    with PaywallServer(anvil.rpc_url, anvil.usdc) as server:
        yield server


@pytest.fixture
def paywall(chain: Any, paywall_server: PaywallServer) -> Iterator[PaywallServer]:
    """The module's paywall inside this test's chain snapshot; default terms restored."""
    yield paywall_server
    for name, price in DEFAULT_PRICES.items():
        paywall_server.state.set_price(name, price)
    paywall_server.state.set_pay_to(dev_account(SELLER).address)


@pytest.fixture(autouse=True)
def _money_audited(tmp_path: Any) -> Iterator[None]:
    """After every test here: `nib audit verify` passes on each database the test wrote,
    and each run's reported spend equals its ledger's."""
    yield
    assert_money_audited(tmp_path)
