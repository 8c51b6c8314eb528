"""The devnet's token settings: Circle's token deployed from npm, an outside token
(NIB_USDC_ADDRESS) checked and used or refused loudly, funding any address."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eth_account import Account

from chain import devnet
from chain.client import ChainClient
from chain.devkeys import DEPLOYER, dev_account
from chain.devtoken import check_token, fund
from chain.errors import DevnetError
from chain.usdc import deploy_test_usdc


def test_check_token_reads_code_eip3009_and_domain(chain: Any, circle_anvil: Any) -> None:
    assert (check_token(chain.rpc_url, chain.usdc).name, check_token(chain.rpc_url, chain.usdc).version) \
        == ("USDC", "2")
    circle = check_token(circle_anvil.rpc_url, circle_anvil.usdc)
    assert (circle.address, circle.name, circle.version) == (circle_anvil.usdc, "USDC", "2")


def test_check_token_refuses_what_x402_cannot_pay_with(chain: Any) -> None:
    nobody = Account.create().address
    with pytest.raises(DevnetError, match=f"NIB_USDC_ADDRESS={nobody} has no code.*Fix: set NIB_USDC_ADDRESS"):
        check_token(chain.rpc_url, nobody)
    chain.rpc("anvil_setCode", [nobody, "0x00"])  # a contract that answers nothing
    with pytest.raises(DevnetError, match="does not answer EIP-3009 and EIP-712"):
        check_token(chain.rpc_url, nobody)
    with pytest.raises(DevnetError, match="is not an address"):
        check_token(chain.rpc_url, "0x1234")


def test_fund_mints_the_devnets_token_and_gas_to_any_address(chain: Any, circle_anvil: Any) -> None:
    someone = Account.create().address
    for dev, kind in ((chain, "test"), (circle_anvil, "circle")):
        c = ChainClient(dev.rpc_url)
        fund(dev.rpc_url, dev.usdc, kind, someone, 2_500_000)
        assert c.token_balance(dev.usdc, someone) == 2_500_000
        assert c.eth_balance(someone) >= 10**18
    with pytest.raises(DevnetError, match="was not deployed by the devnet"):
        fund(chain.rpc_url, chain.usdc, "outside", someone, 1)


def test_nib_usdc_address_points_the_devnet_at_that_token_or_stops(tmp_path: Path) -> None:
    from agent.cli.runtime import resolve_network
    from agent.config import load_settings
    from agent.errors import AgentConfigError

    info = devnet.up(tmp_path, paywall=False)
    try:
        other = deploy_test_usdc(ChainClient(info.rpc_url).w3, dev_account(DEPLOYER), name="Other Dollar")
        settings = load_settings().model_copy(update={"usdc_address": other})
        # Before the devnet is pointed at it: refused, naming the setting and the fix.
        with pytest.raises(AgentConfigError, match=f"NIB_USDC_ADDRESS={other} but the running devnet"):
            resolve_network(settings, info)
        moved = devnet.up(tmp_path, paywall=False, choice=devnet.TokenChoice(usdc=other))
        assert (moved.usdc, moved.token, moved.pid) == (other, "outside", info.pid)
        assert devnet.status(tmp_path).usdc == other  # type: ignore[union-attr]
        assert resolve_network(settings, moved).usdc == other
        with pytest.raises(DevnetError, match="has no code"):
            devnet.up(tmp_path, paywall=False, choice=devnet.TokenChoice(usdc=Account.create().address))
    finally:
        devnet.down(tmp_path)
