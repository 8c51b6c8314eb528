"""Fixtures for the adversarial suite: adversarial x402 sellers on loopback.

The harness itself (deps, the obeying model, the injecting tool) is in adv_harness.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from adv_harness import SELLER_ADDR, Shared
from sellers import AdversarialSeller, serve

from tests._support import assert_money_audited

# --------------------------------------------------------------------------- sellers


@pytest.fixture
def seller_factory(chain: Any) -> Iterator[Callable[..., tuple[AdversarialSeller, str]]]:
    """Start adversarial sellers on loopback for one test; all stop afterwards."""
    with ExitStack() as stack:

        def start(**options: Any) -> tuple[AdversarialSeller, str]:
            options.setdefault("pay_to", SELLER_ADDR)
            seller = AdversarialSeller(chain.rpc_url, chain.usdc, **options)
            url = stack.enter_context(serve(seller.app))
            return seller, url

        yield start


@pytest.fixture(scope="module")
def attacker_seller(anvil: Any) -> Iterator[tuple[AdversarialSeller, str]]:
    """An honest-looking x402 seller that pays an attacker; never on any allowlist."""
    from injections import attacker

    seller = AdversarialSeller(anvil.rpc_url, anvil.usdc, pay_to=attacker("seller"))
    with serve(seller.app) as url:
        yield seller, url


@pytest.fixture(scope="module")
def shared_services(
    anvil: Any, service_forks: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Shared]:
    """One judge service and one wallet service for the module's services tests (each
    run registers its own task; the ledger and the verdict record grow across tests, as
    a long-running service's do). Audited when the module ends."""
    from tests._services import Composition

    db = tmp_path_factory.mktemp("shared-services") / "services.db"
    composition = Composition("services", anvil, forks=service_forks)
    try:
        yield Shared(db, composition.start(db))
    finally:
        composition.close()
    assert_money_audited(db.parent)


@pytest.fixture
def services_of(composition: Any, request: pytest.FixtureRequest) -> Shared | None:
    """The module's shared services when the test runs in the services composition."""
    return request.getfixturevalue("shared_services") if composition.services else None


@pytest.fixture(autouse=True)
def _money_audited(tmp_path: Any) -> Iterator[None]:
    """After every test here: `nib audit verify` passes on each database the test wrote,
    and each run's reported spend equals its ledger's."""
    yield
    assert_money_audited(tmp_path)
