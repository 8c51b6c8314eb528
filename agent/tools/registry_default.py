"""The default tool set: every free chain read, ``discover``, ``mcp_tools``, ``pay_http``,
``pay_mcp`` and ``usdc_transfer``."""

from __future__ import annotations

from agent.tools.base import ToolRegistry
from agent.tools.chain_reads import chain_read_tools
from agent.tools.discover import DiscoverTool
from agent.tools.transfer import UsdcTransferTool
from agent.tools.x402.mcp_tools import McpToolsTool
from agent.tools.x402.offers import OfferBook
from agent.tools.x402.pay_http import PayHttpTool
from agent.tools.x402.pay_mcp import PayMcpTool

__all__ = ["default_registry"]


def default_registry(*, paywall_url: str | None = None, paid: bool = True) -> ToolRegistry:
    """A registry with all free chain reads and, unless ``paid`` is False, the paid tools.

    ``paywall_url`` (the local paywall, ``nib devnet up`` reports it) is named in
    ``pay_http``'s description and endpoint list, so planners know what it sells.
    """
    offers = OfferBook()  # what discover finds, shared with the paying tools
    registry = ToolRegistry((*chain_read_tools(), DiscoverTool(offers), McpToolsTool()))
    if paid:
        registry.register(PayHttpTool(paywall_url, offers))
        registry.register(PayMcpTool(offers))
        registry.register(UsdcTransferTool())
    return registry
