"""The devnet lifecycle on a real Anvil: up, reuse, status, down, and bad states."""

from __future__ import annotations

import json
import socket

import pytest

from chain import devnet
from chain.client import ChainClient
from chain.errors import AnvilMissing, DevnetError


def test_up_reuse_down(tmp_path):
    info = devnet.up(tmp_path, paywall=False)
    try:
        assert info.running and info.chain_id == 31337
        c = ChainClient(info.rpc_url, 31337)
        assert c.token_balance(info.usdc, info.wallet) == 100_000_000
        again = devnet.up(tmp_path, paywall=False)
        assert again.pid == info.pid and again.rpc_url == info.rpc_url
        st = devnet.status(tmp_path)
        assert st is not None and st.running
    finally:
        devnet.down(tmp_path)
    assert not devnet.pid_alive(info.pid)
    st = devnet.status(tmp_path)
    assert st is not None and not st.running


def test_state_survives_restart(tmp_path):
    first = devnet.up(tmp_path, paywall=False)
    devnet.down(tmp_path)
    second = devnet.up(tmp_path, paywall=False)
    try:
        assert second.usdc == first.usdc
        assert ChainClient(second.rpc_url, 31337).token_balance(second.usdc, second.wallet) == 100_000_000
    finally:
        devnet.down(tmp_path)


def test_stale_pid_is_replaced(tmp_path):
    facts = tmp_path / "devnet" / "devnet.json"
    facts.parent.mkdir(parents=True)
    facts.write_text(json.dumps({"rpc_url": "http://127.0.0.1:1", "chain_id": 31337, "usdc": "",
                                 "wallet": "", "seller": "", "paywall_url": None,
                                 "pid": 999_999, "paywall_pid": None}))
    info = devnet.up(tmp_path, paywall=False)
    try:
        assert info.running and info.pid != 999_999
    finally:
        devnet.down(tmp_path)


def test_unreadable_facts_are_moved_aside(tmp_path):
    facts = tmp_path / "devnet" / "devnet.json"
    facts.parent.mkdir(parents=True)
    facts.write_text("{not json")
    with pytest.raises(DevnetError, match="unreadable"):
        devnet.status(tmp_path)
    assert facts.with_suffix(".json.broken").exists()
    assert devnet.status(tmp_path) is None


def test_port_taken_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(DevnetError, match=f"port {port} on 127.0.0.1 is already in use"):
            devnet.AnvilProcess(port=port)


def test_anvil_missing_names_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("NIB_ANVIL", str(tmp_path / "nope"))
    with pytest.raises(AnvilMissing, match="npm install --prefix tools @foundry-rs/anvil@1.7.1"):
        devnet.find_anvil()


def test_corrupt_state_file_is_moved_aside_and_the_devnet_starts_fresh(tmp_path, capfd):
    state = tmp_path / "devnet" / "anvil-state.json"
    state.parent.mkdir(parents=True)
    state.write_text("{this is not anvil state")
    info = devnet.up(tmp_path, paywall=False)
    try:
        assert info.running
        assert ChainClient(info.rpc_url, 31337).token_balance(info.usdc, info.wallet) == 100_000_000
        assert list(state.parent.glob("anvil-state.broken-*.json")), "the bad state file was kept aside"
        assert "moved it to" in capfd.readouterr().err
    finally:
        devnet.down(tmp_path)


def test_anvil_and_the_paywall_start_without_our_secrets(tmp_path, monkeypatch):
    secrets = {"NIB_WALLET_PASSWORD": "wallet-pass-x1", "NIB_JUDGE_TOKEN": "judge-token-x2",
               "NIB_JUDGE_PASSWORD": "judge-pass-x3", "ANTHROPIC_API_KEY": "model-key-x4"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    info = devnet.up(tmp_path)
    try:
        assert info.pid and info.paywall_pid
        for pid in (info.pid, info.paywall_pid):
            environ = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
            names = {entry.split("=", 1)[0] for entry in environ.split("\0") if entry}
            assert names <= set(devnet.CHILD_ENV_KEYS), names - set(devnet.CHILD_ENV_KEYS)
            for value in secrets.values():
                assert value not in environ
    finally:
        devnet.down(tmp_path)
