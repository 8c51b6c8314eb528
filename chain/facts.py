"""The fact vocabulary: every kind of fact a checklist item can ask for, a tool can
provide and a seller (the devnet's paywall and market) can sell.

One home: the agent's checklist and tools, the offline planner and the paywall's
catalogue all read ``FactKind`` from here; the judge matches kinds as plain strings.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["CHAIN_FACT_KINDS", "FACT_KINDS", "FactKind", "is_fact_kind"]

FactKind = Literal[
    # Free chain reads.
    "base_fee_gwei",  # the latest block's base fee per gas, gwei
    "gas_price_gwei",  # the node's suggested gas price, gwei
    "block_number",  # the latest block's number
    "block_timestamp",  # a block's unix timestamp
    "eth_balance",  # an address's ETH balance
    "usdc_balance",  # an address's USDC balance
    "token_symbol",  # an ERC-20 token's symbol
    "token_decimals",  # an ERC-20 token's decimals
    "token_supply",  # an ERC-20 token's total supply
    "tx_status",  # a mined transaction's status (success / reverted)
    "tx_gas_used",  # a mined transaction's gas used
    "transfer_count",  # USDC Transfer logs in a block range
    "transfer_max",  # the largest USDC Transfer in a block range
    # Sold by x402 sellers.
    "gas_stats",  # gas analytics over recent blocks
    "transfer_stats",  # USDC transfer analytics over recent blocks
    "token_factsheet",  # a token's factsheet
    "protocol_factsheet",  # a protocol's factsheet
    "premium_report",  # the premium market report
    # Money moved by the agent itself.
    "transfer_receipt",  # the receipt of a USDC transfer the agent sent
]
"""A kind of fact, as a checklist item, a tool's ``facts`` and an observation's keys
spell it (see the comment beside each value)."""

#: Every fact kind, for membership tests and prompts.
FACT_KINDS: frozenset[FactKind] = frozenset(get_args(FactKind))


#: Facts the chain itself can establish (balances, fees, blocks, transfers): read for
#: free, never bought, and never covered by what a seller says.
CHAIN_FACT_KINDS: frozenset[FactKind] = frozenset(
    {
        "base_fee_gwei",
        "gas_price_gwei",
        "block_number",
        "block_timestamp",
        "eth_balance",
        "usdc_balance",
        "token_symbol",
        "token_decimals",
        "token_supply",
        "tx_status",
        "tx_gas_used",
        "transfer_count",
        "transfer_receipt",
    }
)


def is_fact_kind(value: object) -> bool:
    """True when ``value`` is one of :data:`FACT_KINDS`."""
    return value in FACT_KINDS
