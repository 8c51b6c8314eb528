"""The chain side: networks, a web3 client with typed errors, TestUSDC and EIP-3009 helpers,
the Anvil devnet lifecycle and the local x402 paywall. Imports nothing else of nib's.

The names below are imported on first use (PEP 562), so that importing one
sub-package (the CLI, a service) does not load all of them: `nib --help` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chain.client import (
        ChainClient,
        Receipt,
        TransferLog,
    )
    from chain.errors import (
        AnvilMissing,
        ChainError,
        DevnetError,
        RpcError,
        RpcUnreachable,
        TransactionReverted,
        UnknownNetwork,
        WrongChain,
    )
    from chain.networks import (
        NETWORKS,
        Network,
        custom_network,
        get_network,
    )

__all__ = [
    "AnvilMissing",
    "ChainClient",
    "ChainError",
    "DevnetError",
    "NETWORKS",
    "Network",
    "Receipt",
    "RpcError",
    "RpcUnreachable",
    "TransactionReverted",
    "TransferLog",
    "UnknownNetwork",
    "WrongChain",
    "custom_network",
    "get_network",
]

#: Where each exported name lives.
_HOMES = {
    "AnvilMissing": "chain.errors",
    "ChainClient": "chain.client",
    "ChainError": "chain.errors",
    "DevnetError": "chain.errors",
    "NETWORKS": "chain.networks",
    "Network": "chain.networks",
    "Receipt": "chain.client",
    "RpcError": "chain.errors",
    "RpcUnreachable": "chain.errors",
    "TransactionReverted": "chain.errors",
    "TransferLog": "chain.client",
    "UnknownNetwork": "chain.errors",
    "WrongChain": "chain.errors",
    "custom_network": "chain.networks",
    "get_network": "chain.networks",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
