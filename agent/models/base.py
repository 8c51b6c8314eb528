"""The model interface: one request in, one reply out (text and/or tool calls), with usage.

Providers translate their errors into :class:`agent.errors.ModelUnavailable` at this
boundary. ``context`` gives non-LLM planners (the offline planner, scripted doubles)
the same information the messages carry, already structured.

Tool calling is native where the provider offers it (OpenAI ``tools``/``tool_calls``,
Anthropic ``tool_use``/``tool_result``): a request carries :class:`ToolSpec` schemas and a
reply carries :class:`ToolCall` values. A provider that rejects ``tools`` is asked again
with ``text_protocol`` appended to the system prompt (the JSON text protocol) and the
reply comes back as text; the adapter remembers that for the rest of the session and
says so in ``ModelReply.protocol``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from agent.jsonvalues import JSONObject

__all__ = [
    "Message",
    "Model",
    "ModelReply",
    "ModelRequest",
    "OutputSchema",
    "Purpose",
    "ToolCall",
    "ToolProtocol",
    "ToolSpec",
    "Usage",
]

Purpose = Literal["checklist", "propose", "replan", "synthesize", "lesson"]
"""Why the loop is asking. ``checklist``: extract <=5 measurable facts (once per run).
``propose``: the next action (tool calls, or JSON in the text protocol). ``replan``: rethink from the trajectory (every 3rd
step). ``synthesize``: the final answer as plain text. ``lesson``: the number of one of a
failed run's candidate lessons (agent.loop.lessons)."""


@dataclass(frozen=True)
class Usage:
    """Tokens one request used. ``estimated`` is True when counted offline, not reported."""

    input_tokens: int
    output_tokens: int
    estimated: bool

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


ToolProtocol = Literal["native", "json-text"]
"""How proposals travel: the provider's native tool calling, or the JSON text protocol."""

Message = JSONObject
"""A chat message: ``{"role": "system"|"user"|"assistant", "content": str}``; an assistant
message may add ``"tool_calls": [{"id", "name", "args"}]``, and a tool result is
``{"role": "tool", "tool_call_id": ID, "name": TOOL, "content": str}``."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the provider sees it: name, description, JSON Schema of its arguments."""

    name: str
    description: str
    parameters: JSONObject


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model made. ``error`` is set when its arguments were not a JSON
    object (the loop treats that as a malformed proposal); ``args`` is then empty."""

    id: str
    name: str
    args: JSONObject = field(default_factory=dict)
    error: str | None = None

    def as_message(self) -> JSONObject:
        return {"id": self.id, "name": self.name, "args": self.args}


@dataclass(frozen=True)
class OutputSchema:
    """A JSON Schema the reply's text must follow (grammar- or tool-enforced where offered)."""

    name: str
    schema: JSONObject


@dataclass(frozen=True)
class ModelRequest:
    """One call to the model.

    ``messages`` are :data:`Message` dicts. ``tools`` are offered for native tool calling;
    ``text_protocol`` is what to append to the system prompt instead when the provider
    has no native tool calling. ``output`` asks for text that follows a JSON Schema.
    ``context`` keys: task, tools (name, kind, facts, args schema), checklist
    ([{id, text, kind, covered, value}]), focus, evidence ([{id, tool, args, summary,
    facts}]), history, self_model, lessons.
    """

    purpose: Purpose
    messages: list[Message]
    context: JSONObject = field(default_factory=dict)
    max_output_tokens: int = 1024
    tools: tuple[ToolSpec, ...] = ()
    text_protocol: str = ""
    output: OutputSchema | None = None


@dataclass(frozen=True)
class ModelReply:
    """The model's text and tool calls, what it cost in tokens, and why it stopped.

    ``stop_reason`` is the provider's own word (``stop``, ``tool_calls``, ``length``,
    ``end_turn``, ``refusal``...). ``protocol`` says how tools travelled when tools were
    offered (None otherwise).
    """

    text: str
    usage: Usage
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str | None = None
    protocol: ToolProtocol | None = None


@runtime_checkable
class Model(Protocol):
    """A model provider. ``local`` is True for a local endpoint (chooses the profile)."""

    name: str
    local: bool

    async def complete(self, request: ModelRequest) -> ModelReply:
        """Answer ``request``; raise ModelUnavailable when the provider is unusable."""
        ...
