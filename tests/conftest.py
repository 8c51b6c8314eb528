"""Shared fixtures: one real Anvil per test session, snapshot/revert per test.

Chain tests never mock the node: the session starts Anvil on a free loopback port,
deploys TestUSDC from the deployer, funds the agent with 100 test USDC, and each test
that writes to the chain runs between ``evm_snapshot`` and ``evm_revert``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chain.devkeys import AGENT, DEPLOYER, dev_account


@dataclass
class DevChain:
    rpc_url: str
    chain_id: int
    usdc: str
    w3: Any
    pid: int

    def rpc(self, method: str, params: list[Any] | None = None) -> Any:
        resp = self.w3.provider.make_request(method, params or [])
        if "error" in resp:
            raise RuntimeError(f"{method} failed: {resp['error']}")
        return resp["result"]


@pytest.fixture(scope="session")
def anvil(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevChain]:
    from chain.client import ChainClient
    from chain.devnet import FUND_USDC, AnvilProcess
    from chain.usdc import deploy_test_usdc, mint

    log = tmp_path_factory.mktemp("anvil") / "anvil.log"
    proc = AnvilProcess(port=0, log=log)
    try:
        client = ChainClient(proc.rpc_url, proc.chain_id)
        usdc = deploy_test_usdc(client.w3, dev_account(DEPLOYER))
        mint(client.w3, usdc, dev_account(DEPLOYER), dev_account(AGENT).address, FUND_USDC)
        yield DevChain(proc.rpc_url, proc.chain_id, usdc, client.w3, proc.pid)
    finally:
        proc.stop()


@pytest.fixture
def chain(anvil: DevChain) -> Iterator[DevChain]:
    snap = anvil.rpc("evm_snapshot")
    try:
        yield anvil
    finally:
        anvil.rpc("evm_revert", [snap])


@pytest.fixture
def nib_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "nib-home"
    home.mkdir()
    monkeypatch.setenv("NIB_HOME", str(home))
    monkeypatch.setenv("NIB_WALLET_PASSWORD", "test-passphrase")
    return home
