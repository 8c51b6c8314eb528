"""The Anthropic messages API over httpx.

The system prompt travels separately from the messages, consecutive turns of one role
are merged (the API wants user/assistant alternation), and usage comes from
``input_tokens``/``output_tokens``.
"""

from __future__ import annotations

from typing import Any

import httpx

from agent.models import _http
from agent.models.base import ModelReply, ModelRequest, Usage
from agent.models.openai_compat import JSON_PURPOSES

__all__ = ["ANTHROPIC_BASE_URL", "ANTHROPIC_VERSION", "AnthropicModel"]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


class AnthropicModel:
    """A Claude model over the messages API. The key never appears in ``repr`` or errors."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str = ANTHROPIC_BASE_URL,
        api_key: str | None = None,
        key_env: str = "NIB_ANTHROPIC_API_KEY",
        local: bool = False,
        timeout: httpx.Timeout | float = _http.DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        temperature: float | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.name = f"anthropic:{model}"
        self.local = local
        self.key_env = key_env
        self._api_key = api_key or None
        self._timeout = timeout
        self._transport = transport
        self._temperature = temperature

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

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _payload(self, request: ModelRequest) -> dict[str, Any]:
        system, messages = split_messages(request.messages)
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_output_tokens,
            "messages": messages,
        }
        if system:
            payload["system"] = system
        if self._temperature is not None:
            payload["temperature"] = self._temperature
        return payload

    async def complete(self, request: ModelRequest) -> ModelReply:
        """One messages call; raises ModelUnavailable with the fix on any failure."""
        async with httpx.AsyncClient(timeout=self._timeout, transport=self._transport) as client:
            response = await _http.post(
                client,
                self.url,
                headers=self._headers(),
                payload=self._payload(request),
                provider=self.name,
            )
        body = _http.decode(
            response, provider=self.name, key_env=self.key_env, secret=self._api_key
        )
        text = _reply_text(body, self.name)
        if request.purpose in JSON_PURPOSES:
            text = _http.extract_json_text(text)
        return ModelReply(text=text, usage=_usage(body, request, text))


def split_messages(messages: list[dict[str, str]]) -> tuple[str, list[dict[str, str]]]:
    """(system prompt, alternating user/assistant turns starting with user)."""
    system_parts: list[str] = []
    turns: list[dict[str, str]] = []
    for message in messages:
        role = message.get("role", "user")
        content = str(message.get("content", ""))
        if role == "system":
            system_parts.append(content)
            continue
        role = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1] = {"role": role, "content": f"{turns[-1]['content']}\n\n{content}"}
        else:
            turns.append({"role": role, "content": content})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": "Begin."})
    return "\n\n".join(p for p in system_parts if p), turns


def _reply_text(body: dict[str, Any], provider: str) -> str:
    content = body.get("content")
    if not isinstance(content, list):
        raise _http.bad_shape(provider, "the body has no content list")
    texts = [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    if not texts:
        raise _http.bad_shape(
            provider, f"content has no text block (stop_reason={body.get('stop_reason')!r})"
        )
    return "".join(texts)


def _usage(body: dict[str, Any], request: ModelRequest, text: str) -> Usage:
    usage = body.get("usage")
    if isinstance(usage, dict):
        prompt = _http.usage_int(usage.get("input_tokens"))
        completion = _http.usage_int(usage.get("output_tokens"))
        if prompt is not None and completion is not None:
            # Cached prompt tokens are reported apart from input_tokens; they still count.
            for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
                prompt += _http.usage_int(usage.get(key)) or 0
            return Usage(input_tokens=prompt, output_tokens=completion, estimated=False)
    return _http.estimated_usage(request, text)
