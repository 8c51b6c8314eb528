"""The fact vocabulary: every kind of fact a checklist item can ask for, a tool can
provide and a seller (the devnet's paywall and market) can sell.

One home: the agent's checklist and tools, the offline planner and the paywall's
catalogue all read ``FactKind`` from here; the judge matches kinds as plain strings.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "CHAIN_FACT_KINDS",
    "DERIVED_KINDS",
    "FACT_KINDS",
    "KIND_PARAMS",
    "OPEN_PARAMS",
    "FactKind",
    "is_fact_kind",
]

FactKind = Literal[
    # Free chain reads.
    "base_fee_gwei",  # the latest block's base fee per gas, gwei
    "gas_price_gwei",  # the node's suggested gas price, gwei
    "block_number",  # the latest block's number
    "block_timestamp",  # a block's unix timestamp
    "block_gas_used",  # the gas a block's transactions used, summed (its gasUsed)
    "block_gas_limit",  # a block's gas limit (its gasLimit)
    "block_tx_count",  # how many transactions a block holds
    "block_fullness",  # the share of its gas limit a block used (gasUsed / gasLimit), in %
    "eth_balance",  # an address's ETH balance
    "usdc_balance",  # an address's USDC balance
    "token_symbol",  # an ERC-20 token's symbol
    "token_name",  # an ERC-20 token's full name (its name())
    "token_decimals",  # an ERC-20 token's decimals
    "token_supply",  # an ERC-20 token's total supply
    "token_issuer",  # the account that controls an ERC-20 token's issuance (its owner())
    "tx_status",  # a mined transaction's status (success / reverted)
    "tx_gas_used",  # a mined transaction's gas used
    "tx_block",  # the number of the block a transaction was mined in
    "tx_time",  # the unix timestamp of the block a transaction was mined in
    "tx_gas_price",  # the gas price a mined transaction paid (its effectiveGasPrice), in gwei
    "tx_fee",  # what a mined transaction paid for its gas (gas used x that price), in ETH
    "transfer_count",  # USDC Transfer logs in a block range
    "transfer_list",  # the USDC Transfers in a block range, each listed (up to a cap)
    "transfer_max",  # the largest USDC Transfer in a block range
    "usdc_sent_total",  # USDC an address sent in a block range (its Transfer logs, summed)
    "usdc_received_total",  # USDC an address received in a block range (likewise)
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
        "block_gas_used",
        "block_gas_limit",
        "block_tx_count",
        "block_fullness",
        "eth_balance",
        "usdc_balance",
        "token_symbol",
        "token_name",
        "token_decimals",
        "token_supply",
        "token_issuer",
        "tx_status",
        "tx_gas_used",
        "tx_block",
        "tx_time",
        "tx_gas_price",
        "tx_fee",
        "transfer_count",
        "transfer_list",
        "transfer_max",
        "usdc_sent_total",
        "usdc_received_total",
        "transfer_receipt",
    }
)


def is_fact_kind(value: object) -> bool:
    """True when ``value`` is one of :data:`FACT_KINDS`."""
    return value in FACT_KINDS


#: Kinds computed from other items rather than read. ``comparison``: params ``of`` (item
#: ids, comma-separated) and ``op``: ``max``/``min`` (which is largest/smallest), ``sum``,
#: ``count`` (how many pass ``cmp`` ``than``), ``diff`` (the first minus the second), or
#: ``unit`` (one id, its value in ``unit``).
#: ``condition``: params ``of`` (one item id), ``op`` (``<``, ``<=``, ``>``, ``>=``) and
#: ``than`` (a number in the unit of that item's value): true or false.
DERIVED_KINDS: frozenset[str] = frozenset({"comparison", "condition"})

#: The parameters that make a fact kind's value *that* value: an observation covers an
#: item only when these agree. Absent means the default (the latest block; the configured
#: USDC for ``token``; the agent's own wallet for ``address``; the tool's default window
#: for ``blocks``; every block from the first for a total; any ``counterparty``; no
#: transaction for ``of_tx``, which asks a block fact of the block a transaction was mined
#: in, read through its receipt). Any
#: item may also carry ``if`` (the id of a condition item): when that condition is false,
#: the item is settled as not needed, derived from the condition.
KIND_PARAMS: dict[str, tuple[str, ...]] = {
    "base_fee_gwei": ("block", "of_tx"),
    "block_number": ("block", "of_tx"),
    "block_timestamp": ("block", "of_tx"),
    "block_gas_used": ("block", "of_tx"),
    "block_gas_limit": ("block", "of_tx"),
    "block_tx_count": ("block", "of_tx"),
    "block_fullness": ("block", "of_tx"),
    "eth_balance": ("address",),
    "usdc_balance": ("address",),
    "token_symbol": ("token",),
    "token_name": ("token",),
    "token_decimals": ("token",),
    "token_supply": ("token",),
    "token_issuer": ("token",),
    "tx_status": ("tx_hash",),
    "tx_gas_used": ("tx_hash",),
    "tx_block": ("tx_hash",),
    "tx_time": ("tx_hash",),
    "tx_gas_price": ("tx_hash",),
    "tx_fee": ("tx_hash",),
    "transfer_count": ("address", "sender", "recipient", "blocks", "from_block", "to_block"),
    "transfer_list": ("address", "sender", "recipient", "blocks", "from_block", "to_block"),
    "transfer_max": ("address", "sender", "recipient", "blocks", "from_block", "to_block"),
    "usdc_sent_total": ("address", "counterparty", "blocks", "from_block", "to_block"),
    "usdc_received_total": ("address", "counterparty", "blocks", "from_block", "to_block"),
    "token_factsheet": ("symbol",),
    "protocol_factsheet": ("name",),
    "transfer_receipt": ("to", "amount"),
}

#: Parameters with no default meaning: an item that does not name one takes any value
#: (a "transfer receipt" item without ``to`` is covered by the transfer the run made).
OPEN_PARAMS: frozenset[str] = frozenset({"to", "amount", "tx_hash", "symbol", "name"})
