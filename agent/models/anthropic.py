"""The Anthropic messages API over httpx.

The system prompt travels separately from the messages, consecutive turns of one role
are merged (the API wants user/assistant alternation), and usage comes from
``input_tokens``/``output_tokens``. Tools travel natively: ``tools`` with an
``input_schema``, ``tool_use`` blocks in the reply, ``tool_result`` blocks in the next
user turn. Output that must follow a JSON Schema is asked for as a forced tool call
(``tool_choice: {"type": "tool"}``) whose input is the JSON. Token counts before sending
come from the count-tokens endpoint (``count_tokens``), which is exact.
"""

from __future__ import annotations

import json

import agent.models._http as _http
from agent.jsonvalues import JSONObject, as_list, as_object
from agent.models.base import Message, ModelReply, ModelRequest, ToolCall, ToolProtocol
from agent.models.openai_compat import JSON_PURPOSES

__all__ = ["ANTHROPIC_BASE_URL", "ANTHROPIC_VERSION", "AnthropicModel"]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


class AnthropicModel(_http.HttpModel):
    """A Claude model over the messages API. The key never appears in ``repr`` or errors."""

    provider = "anthropic"
    default_base_url = ANTHROPIC_BASE_URL
    default_key_env = "NIB_ANTHROPIC_API_KEY"
    tool_protocol: ToolProtocol = "native"

    def __repr__(self) -> str:
        return (
            f"AnthropicModel(model={self.model!r}, base_url={self.base_url!r}, "
            f"local={self.local}, key={'set' if self._api_key else 'unset'})"
        )

    @property
    def url(self) -> str:
        # Accept both "https://api.anthropic.com" and ".../v1" as the base URL.
        base = self.base_url if self.base_url.endswith("/v1") else f"{self.base_url}/v1"
        return f"{base}/messages"

    @property
    def count_url(self) -> str:
        return f"{self.url}/count_tokens"

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _payload(self, request: ModelRequest, *, counting: bool = False) -> JSONObject:
        system, messages = split_messages(request.messages)
        payload: JSONObject = {"model": self.model, "messages": messages}
        if not counting:
            payload["max_tokens"] = request.max_output_tokens
            if self._temperature is not None:
                payload["temperature"] = self._temperature
        if system:
            payload["system"] = system
        if request.tools:
            payload["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
            payload["tool_choice"] = {"type": "auto"}
        elif request.output is not None:
            payload["tools"] = [
                {
                    "name": request.output.name,
                    "description": "Record the reply as JSON following this schema.",
                    "input_schema": request.output.schema,
                }
            ]
            payload["tool_choice"] = {"type": "tool", "name": request.output.name}
        return payload

    async def complete(self, request: ModelRequest) -> ModelReply:
        """One messages call; raises ModelUnavailable with the fix on any failure."""
        body = await self._call(self.url, self._payload(request))
        text, calls = _reply_parts(body, self.name)
        stop_reason = body.get("stop_reason")
        if request.output is not None and not request.tools:
            # The schema came back as a forced tool call: its input is the JSON reply.
            forced = [c for c in calls if c.name == request.output.name]
            if forced:
                text, calls = json.dumps(forced[0].args), ()
        if not calls and request.purpose in JSON_PURPOSES:
            text = _http.extract_json_text(text)
        return ModelReply(
            text=text,
            usage=_http.reported_usage(
                body,
                request,
                text,
                calls,
                # Cached prompt tokens are reported apart from input_tokens; they still count.
                prompt=("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"),
                completion="output_tokens",
            ),
            tool_calls=calls,
            stop_reason=stop_reason if isinstance(stop_reason, str) else None,
            protocol="native" if request.tools else None,
        )

    async def count_tokens(self, request: ModelRequest) -> int:
        """Exact input tokens of ``request`` from the count-tokens endpoint (no generation)."""
        body = await self._call(self.count_url, self._payload(request, counting=True))
        tokens = _http.usage_int(body.get("input_tokens"))
        if tokens is None:
            raise _http.bad_shape(self.name, "the count-tokens body has no input_tokens")
        return tokens

    async def _call(self, url: str, payload: JSONObject) -> JSONObject:
        async with self._client() as client:
            response = await self._send(client, url, payload)
        return self._decode(response)


_Content = str | list[JSONObject]
"""A turn's content: plain text, or content blocks (text, tool_use, tool_result)."""


def _blocks(message: Message) -> list[JSONObject]:
    """One loop message as Anthropic content blocks (text, tool_use or tool_result)."""
    content = str(message.get("content") or "")
    if message.get("role") == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id", ""),
                "content": content,
            }
        ]
    blocks: list[JSONObject] = [{"type": "text", "text": content}] if content else []
    for call in map(as_object, as_list(message.get("tool_calls"))):
        blocks.append(
            {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["args"]}
        )
    return blocks


def split_messages(messages: list[Message]) -> tuple[str, list[JSONObject]]:
    """(system prompt, alternating user/assistant turns starting with user).

    Plain-text turns stay strings; a turn holding tool calls or tool results becomes a
    list of content blocks (tool results ride in the user turn that follows the call).
    """
    system_parts: list[str] = []
    turns: list[tuple[str, _Content]] = []
    for message in messages:
        role = message.get("role", "user")
        if role == "system":
            system_parts.append(str(message.get("content") or ""))
            continue
        role = "assistant" if role == "assistant" else "user"
        structured = message.get("role") == "tool" or bool(message.get("tool_calls"))
        content: _Content = _blocks(message) if structured else str(message.get("content") or "")
        if turns and turns[-1][0] == role:
            turns[-1] = (role, _join(turns[-1][1], content))
        else:
            turns.append((role, content))
    if not turns or turns[0][0] != "user":
        turns.insert(0, ("user", "Begin."))
    return "\n\n".join(p for p in system_parts if p), [
        {"role": role, "content": content} for role, content in turns
    ]


def _join(first: _Content, second: _Content) -> _Content:
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}"
    as_blocks = [
        *([{"type": "text", "text": first}] if isinstance(first, str) else first),
        *([{"type": "text", "text": second}] if isinstance(second, str) else second),
    ]
    # Tool results must come first in a user turn.
    return sorted(as_blocks, key=lambda b: b.get("type") != "tool_result")


def _reply_parts(body: JSONObject, provider: str) -> tuple[str, tuple[ToolCall, ...]]:
    """The reply's text (text blocks joined) and its tool_use blocks as ToolCalls."""
    content = body.get("content")
    if not isinstance(content, list):
        raise _http.bad_shape(provider, "the body has no content list")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            name = str(block.get("name") or "")
            args = block.get("input")
            call_id = str(block.get("id") or f"toolu_{len(calls)}")
            if isinstance(args, dict):
                calls.append(ToolCall(call_id, name, args))
            else:
                calls.append(ToolCall(call_id, name, error=f"input of {name} is not an object"))
    return "".join(texts), tuple(calls)
