"""Tools the agent can propose: the interface (``base``) and the wired implementations."""

from __future__ import annotations

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
