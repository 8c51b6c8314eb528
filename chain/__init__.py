"""The chain side: networks, a web3 client with typed errors, TestUSDC and EIP-3009 helpers,
the Anvil devnet lifecycle and the local x402 paywall. Imports nothing else of nib's."""

from __future__ import annotations

from chain.client import ChainClient, Receipt, TransferLog
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
from chain.networks import NETWORKS, Network, custom_network, get_network

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
