"""The default registry: exact tool names, kinds and facts the rest of the system relies on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import pytest
from pydantic import BaseModel

from agent.tools.base import FreeLimits, Tool, ToolContext, ToolRegistry
from agent.tools.registry_default import default_registry
from chain.devkeys import AGENT, dev_account

#: The contract names the prompts, the eval suite and the audit trail rely on.
FREE_TOOL_NAMES = (
    "base_fee",
    "gas_price",
    "block_info",
    "eth_balance",
    "token_balance",
    "token_info",
    "tx_receipt",
    "token_transfers",
    "usdc_totals",
    "discover",
    "mcp_tools",
)
PAID_TOOL_NAMES = ("pay_http", "pay_mcp", "usdc_transfer")

FREE_FACTS = {
    "token_name",
    "tx_gas_price",
    "tx_fee",
    "transfer_list",
    "transfer_max",
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
    "token_decimals",
    "token_supply",
    "token_issuer",
    "tx_status",
    "tx_gas_used",
    "tx_block",
    "tx_time",
    "transfer_count",
    "usdc_sent_total",
    "usdc_received_total",
}
PAID_FACTS = {
    "gas_stats",
    "transfer_stats",
    "token_factsheet",
    "protocol_factsheet",
    "premium_report",
    "transfer_receipt",
}


def test_default_registry_wires_every_tool_by_its_contract_name() -> None:
    registry = default_registry(paywall_url="http://127.0.0.1:8402")
    assert isinstance(registry, ToolRegistry)
    assert registry.names() == sorted(FREE_TOOL_NAMES + PAID_TOOL_NAMES)
    for name in FREE_TOOL_NAMES:
        assert registry.get(name).kind == "free"  # type: ignore[union-attr]
    for name in PAID_TOOL_NAMES:
        assert registry.get(name).kind == "paid"  # type: ignore[union-attr]
    declared = {f for n in registry.names() for f in registry.get(n).facts}  # type: ignore[union-attr]
    assert declared == FREE_FACTS | PAID_FACTS
    described = registry.describe()
    json.dumps(described)
    pay = next(d for d in described if d["name"] == "pay_http")
    assert "http://127.0.0.1:8402" in pay["description"]
    assert {tuple(e["facts"]) for e in pay["endpoints"]} == {
        ("gas_stats",),
        ("transfer_stats",),
        ("token_factsheet",),
        ("protocol_factsheet",),
        ("premium_report",),
    }


def test_free_only_registry_and_policy_rows_agree() -> None:
    registry = default_registry(paid=False)
    assert registry.names() == sorted(FREE_TOOL_NAMES)
    # The policy is built from the tools: one row per free tool, none for a paid one.
    assert default_registry().free_policy().tools == tuple(sorted(FREE_TOOL_NAMES))


class _NoArgs(BaseModel):
    pass


class _Free(Tool):
    kind = "free"
    args_model = _NoArgs
    description = "a free read"

    def __init__(self, name: str, facts: tuple[str, ...], limits: FreeLimits | None) -> None:
        self.name = name
        self.facts = facts  # type: ignore[assignment]  # deliberately outside the Literal
        self.free_limits = limits


def test_registering_a_free_tool_without_its_policy_row_fails() -> None:
    with pytest.raises(ValueError, match="'mempool' has no free-read policy row"):
        ToolRegistry([_Free("mempool", ("block_number",), None)])


def test_registering_a_fact_kind_outside_the_vocabulary_fails() -> None:
    limits = FreeLimits(max_calls_per_run=2, max_result_bytes=1_024)
    with pytest.raises(ValueError, match=r"fact kinds \['mempool_size'\] outside the vocabulary"):
        ToolRegistry([_Free("mempool", ("block_number", "mempool_size"), limits)])
    registry = ToolRegistry([_Free("mempool", ("block_number",), limits)])
    row = registry.free_policy().row("mempool")
    assert row is not None and (row.max_calls_per_run, row.max_result_bytes) == (2, 1_024)


@pytest.mark.parametrize(
    "row", default_registry(paid=False).free_policy().rows(), ids=lambda r: r.tool
)
def test_free_observations_fit_the_policy_result_size(
    row: Any, anvil: Any, make_ctx: Callable[..., ToolContext], request: pytest.FixtureRequest
) -> None:
    args: dict[str, Any] | None = {
        "eth_balance": {"address": dev_account(AGENT).address},
        "token_balance": {"address": dev_account(AGENT).address},
        "usdc_totals": {"address": dev_account(AGENT).address},
        "tx_receipt": None,
    }.get(row.tool, {})
    if args is None:
        block = anvil.w3.eth.get_block(anvil.w3.eth.block_number, full_transactions=False)
        if not block["transactions"]:
            pytest.skip("no transaction in the head block to read a receipt of")
        args = {"tx_hash": "0x" + bytes(block["transactions"][0]).hex()}
    tool = default_registry(paid=False).get(row.tool)
    assert tool is not None
    extras: dict[str, Any] = {}
    allowlist: tuple[str, ...] = ()
    if row.tool == "discover":  # the devnet market's discovery API, every offer listed
        extras["discovery_urls"] = request.getfixturevalue("market")["facilitator"]
    if row.tool == "mcp_tools":  # the devnet market's paid MCP server
        allowlist = (request.getfixturevalue("market")["mcp"],)
        args = {"server": allowlist[0] + "/sse"}
    obs = asyncio.run(tool.run(tool.parse_args(args), make_ctx(extras=extras, allowlist=allowlist)))
    assert obs.ok and "\n" not in obs.summary
    assert len(json.dumps(asdict(obs)).encode()) <= row.max_result_bytes
    assert set(obs.facts) <= set(tool.facts)
