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

__all__ = [
    "Emit",
    "Observation",
    "Quote",
    "QuoteKind",
    "Tool",
    "ToolContext",
    "ToolKind",
    "ToolRegistry",
    "format_validation_error",
]
