"""The chain side: networks, a web3 client with typed errors, TestUSDC and EIP-3009 helpers,
the Anvil devnet lifecycle and the local x402 paywall. Imports nothing else of nib's.

The names below are imported on first use (chain.lazy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chain.lazy import exports

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


__getattr__ = exports(__name__, _HOMES, globals())
