"""Tools the agent can propose: the interface (``base``) and the wired implementations.

The names below are imported on first use (chain.lazy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chain.lazy import exports

if TYPE_CHECKING:
    from agent.tools.base import (
        Emit,
        Observation,
        Quote,
        QuoteKind,
        Tool,
        ToolContext,
        ToolKind,
        ToolRegistry,
        format_validation_error,
    )
    from agent.tools.registry_default import default_registry
    from agent.tools.transfer import UsdcTransferTool
    from agent.tools.x402.pay_http import PayHttpTool

__all__ = [
    "Emit",
    "Observation",
    "PayHttpTool",
    "Quote",
    "QuoteKind",
    "Tool",
    "ToolContext",
    "ToolKind",
    "ToolRegistry",
    "UsdcTransferTool",
    "default_registry",
    "format_validation_error",
]

#: Where each exported name lives.
_HOMES = {
    "Emit": "agent.tools.base",
    "Observation": "agent.tools.base",
    "PayHttpTool": "agent.tools.x402.pay_http",
    "Quote": "agent.tools.base",
    "QuoteKind": "agent.tools.base",
    "Tool": "agent.tools.base",
    "ToolContext": "agent.tools.base",
    "ToolKind": "agent.tools.base",
    "ToolRegistry": "agent.tools.base",
    "UsdcTransferTool": "agent.tools.transfer",
    "default_registry": "agent.tools.registry_default",
    "format_validation_error": "agent.tools.base",
}


__getattr__ = exports(__name__, _HOMES, globals())
