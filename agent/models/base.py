"""The model interface: one request in, one text reply out, with token usage.

Providers translate their errors into :class:`agent.errors.ModelUnavailable` at this
boundary. ``context`` gives non-LLM planners (the offline planner, scripted doubles)
the same information the messages carry, already structured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = ["Model", "ModelReply", "ModelRequest", "Purpose", "Usage"]

Purpose = Literal["checklist", "propose", "replan", "synthesize", "lesson"]
"""Why the loop is asking. ``checklist``: extract <=5 measurable facts (once per run).
``propose``: the next action as JSON. ``replan``: rethink from the trajectory (every 3rd
step). ``synthesize``: the final answer as plain text. ``lesson``: one sentence distilled
from a failed run."""


@dataclass(frozen=True)
class Usage:
    """Tokens one request used. ``estimated`` is True when counted offline, not reported."""

    input_tokens: int
    output_tokens: int
    estimated: bool

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ModelRequest:
    """One call to the model.

    ``messages`` are ``{"role": "system"|"user"|"assistant", "content": str}`` dicts.
    ``context`` keys: task, tools (name, kind, facts, args schema), checklist
    ([{id, text, kind, covered, value}]), focus, evidence ([{id, tool, args, summary,
    facts}]), history, self_model, lessons.
    """

    purpose: Purpose
    messages: list[dict[str, str]]
    context: dict[str, Any] = field(default_factory=dict)
    max_output_tokens: int = 1024


@dataclass(frozen=True)
class ModelReply:
    """The model's text and what it cost in tokens."""

    text: str
    usage: Usage


@runtime_checkable
class Model(Protocol):
    """A model provider. ``local`` is True for a local endpoint (chooses the profile)."""

    name: str
    local: bool

    async def complete(self, request: ModelRequest) -> ModelReply:
        """Answer ``request``; raise ModelUnavailable when the provider is unusable."""
        ...
