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
from agent.tools.pay_http import PayHttpTool
from agent.tools.registry_default import default_registry
from agent.tools.transfer import UsdcTransferTool

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
