"""Fixtures that move a test module onto Circle's token: import them into the module
(``from _on_circle import anvil, market``) and its ``anvil``, ``chain``, ``market`` and
every fixture built on them run on the session's Circle devnet (tests/conftest.py
``circle_anvil``, ``circle_market``) instead of TestUSDC's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def anvil(circle_anvil: Any) -> Iterator[Any]:
    yield circle_anvil


@pytest.fixture(scope="module")
def market(circle_market: dict[str, str]) -> dict[str, str]:
    return circle_market
