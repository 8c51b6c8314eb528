"""NIB_PAYWALL_URL is the runtime's paywall (and so on the allowlist), not only the planner's."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli.runtime import paywall_for
from agent.config import NibSettings
from chain.devnet import DevnetInfo


def test_nib_paywall_url_is_the_runtime_paywall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NIB_HOME", str(tmp_path))
    monkeypatch.delenv("NIB_CONFIG", raising=False)
    monkeypatch.setenv("NIB_PAYWALL_URL", "http://127.0.0.1:9911")
    settings = NibSettings()
    devnet = DevnetInfo.__new__(DevnetInfo)
    object.__setattr__(devnet, "paywall_url", "http://127.0.0.1:8402")
    assert paywall_for(None, settings, devnet) == "http://127.0.0.1:9911"
    assert paywall_for("http://127.0.0.1:7000", settings, devnet) == "http://127.0.0.1:7000"
    monkeypatch.delenv("NIB_PAYWALL_URL")
    assert paywall_for(None, NibSettings(), devnet) == "http://127.0.0.1:8402"
