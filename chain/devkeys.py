"""Anvil's published development accounts, derived from its well-known mnemonic.

These keys are public knowledge and hold value only on a local devnet (chain id
31337). They are derived here instead of being written out, so no key literal
lives in the source tree; the wallet refuses them on any other chain.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

    from chain.client import ChainClient

DEVNET_CHAIN_ID = 31337
#: Holds FiatToken's proxy admin role on a devnet with Circle's token (a proxy admin may not
#: call the token, so no other role may be it).
PROXY_ADMIN = 9
DEV_MNEMONIC = "test test test test test test test test test test test junk"

#: Roles on the devnet, by Anvil account index.
DEPLOYER = 0  # deploys TestUSDC, owns the faucet, and is the x402 facilitator
AGENT = 1  # the agent's wallet
SELLER = 2  # the local paywall's payTo address
JUDGE = 3  # the judge's signing key in tests and on the devnet
OUTSIDER = 4  # an unrelated account, for transfers the task never involved


@cache
def dev_account(index: int) -> LocalAccount:
    """Return Anvil dev account ``index`` (0-9), derived from the standard mnemonic."""
    if not 0 <= index < 10:
        raise ValueError(f"Anvil has dev accounts 0-9; got index {index}.")
    # eth-account (py_ecc's BLS tables among it: ~0.5 s) loads when a key is derived, not
    # for the constants above (the devnet's chain id, read by every `nib` command).
    from eth_account import Account

    Account.enable_unaudited_hdwallet_features()
    return Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")


@cache
def dev_addresses() -> frozenset[str]:
    """Lower-case addresses of all ten dev accounts."""
    return frozenset(dev_account(i).address.lower() for i in range(10))


def is_dev_address(address: str) -> bool:
    """True when ``address`` belongs to one of Anvil's published dev keys."""
    return address.lower() in dev_addresses()


def local_dev_account(client: ChainClient, index: int, role: str) -> LocalAccount:
    """Dev account ``index`` for a devnet service's ``role``, only when ``client`` is a local
    Anvil node (its dev accounts are funded there and worth nothing; a chain twin keeps
    another chain's id, so the id alone does not tell). Raises DevnetError otherwise."""
    from chain.errors import DevnetError

    version = str(client.call("web3_clientVersion", lambda: client.w3.client_version))
    if not version.lower().startswith("anvil/") or not client.rpc_url.startswith(
        ("http://127.0.0.1", "http://localhost")
    ):
        raise DevnetError(
            f"the {role}'s default key is Anvil's published dev key, usable only on a local "
            f"Anvil; {client.rpc_url} answers as {version!r}. Fix: pass a key of your own."
        )
    return dev_account(index)
