"""The judge's key off the devnet: a passphrase of its own, never the wallet's."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli.runtime import JUDGE_KEY_FILE, _judge_account
from agent.config import NibSettings
from agent.errors import AgentConfigError
from chain.networks import get_network


def test_the_judge_key_never_opens_with_the_wallet_passphrase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    network = get_network("base-sepolia")
    monkeypatch.delenv("NIB_JUDGE_PASSWORD", raising=False)
    monkeypatch.setenv("NIB_WALLET_PASSWORD", "the-wallet-passphrase")
    # Settings read every NIB_* variable once, when they are loaded.
    settings = NibSettings(home=tmp_path, network="base-sepolia")
    with pytest.raises(AgentConfigError, match="NIB_JUDGE_PASSWORD is not set") as err:
        _judge_account(settings, network)
    assert "the wallet's is never used for it" in str(err.value)
    assert not (tmp_path / JUDGE_KEY_FILE).exists()  # nothing was created under it
    monkeypatch.setenv("NIB_JUDGE_PASSWORD", "the-judge-passphrase")
    settings = NibSettings(home=tmp_path, network="base-sepolia")
    created = _judge_account(settings, network)
    assert _judge_account(settings, network).address == created.address
