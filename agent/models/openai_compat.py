"""The OpenAI chat-completions protocol over httpx, for any server that speaks it.

OpenAI, OpenRouter, Ollama, vLLM, llama.cpp and LM Studio all accept the same request;
only the base URL, key and model differ. Proposals and checklists ask for JSON output,
and fall back to plain text on servers that reject ``response_format``.
"""

from __future__ import annotations

from typing import Any

import httpx

from agent.models import _http
from agent.models.base import ModelReply, ModelRequest, Usage

__all__ = ["OPENAI_BASE_URL", "OpenAICompatModel"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
JSON_PURPOSES = frozenset({"checklist", "propose", "replan"})
"""Purposes whose reply the loop parses as JSON; asked for with ``response_format``."""


class OpenAICompatModel:
    """A chat-completions model. ``local`` picks the default profile (local-guarded).

    The API key lives in a private attribute and never appears in ``repr`` or in an
    error message (``key_env`` names the variable it came from, for the fix).
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str = OPENAI_BASE_URL,
        api_key: str | None = None,
        key_env: str = "NIB_OPENAI_API_KEY",
        local: bool = False,
        timeout: httpx.Timeout | float = _http.DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        temperature: float | None = None,
        json_mode: bool = True,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.name = f"openai:{model}"
        self.local = local
        self.key_env = key_env
        self._api_key = api_key or None
        self._timeout = timeout
        self._transport = transport
        self._temperature = temperature
        self._json_mode = json_mode
        self._tokens_field = "max_tokens"

    def __repr__(self) -> str:
        return (
            f"OpenAICompatModel(model={self.model!r}, base_url={self.base_url!r}, "
            f"local={self.local}, key={'set' if self._api_key else 'unset'})"
        )

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def _payload(self, request: ModelRequest, *, json_mode: bool) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": m.get("role", "user"), "content": m.get("content", "")}
                for m in request.messages
            ],
            self._tokens_field: request.max_output_tokens,
        }
        if self._temperature is not None:
            payload["temperature"] = self._temperature
        if json_mode:
            payload["response_format"] = {"type": "json_object"}
        return payload

    async def complete(self, request: ModelRequest) -> ModelReply:
        """One chat completion; raises ModelUnavailable with the fix on any failure."""
        async with httpx.AsyncClient(timeout=self._timeout, transport=self._transport) as client:
            body = await self._post(client, request)
        text = _reply_text(body, self.name)
        if request.purpose in JSON_PURPOSES:
            text = _http.extract_json_text(text)
        return ModelReply(text=text, usage=_usage(body, request, text))

    async def _post(self, client: httpx.AsyncClient, request: ModelRequest) -> dict[str, Any]:
        # Servers differ in what they accept; each known rejection is retried once with
        # the one field it names adjusted, and remembered for later calls.
        json_mode = self._json_mode and request.purpose in JSON_PURPOSES
        for _ in range(3):
            response = await _http.post(
                client,
                self.url,
                headers=self._headers(),
                payload=self._payload(request, json_mode=json_mode),
                provider=self.name,
            )
            if response.status_code not in (400, 422):
                break
            detail = response.text.lower()
            if json_mode and "response_format" in detail:
                json_mode = self._json_mode = False
            elif self._tokens_field == "max_tokens" and "max_completion_tokens" in detail:
                self._tokens_field = "max_completion_tokens"
            else:
                break
        return _http.decode(
            response, provider=self.name, key_env=self.key_env, secret=self._api_key
        )


def _reply_text(body: dict[str, Any], provider: str) -> str:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _http.bad_shape(provider, "the body has no choices[0]")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        reason = choices[0].get("finish_reason")
        raise _http.bad_shape(
            provider, f"choices[0].message.content is not text (finish_reason={reason!r})"
        )
    return content


def _usage(body: dict[str, Any], request: ModelRequest, text: str) -> Usage:
    usage = body.get("usage")
    if isinstance(usage, dict):
        prompt = _http.usage_int(usage.get("prompt_tokens"))
        completion = _http.usage_int(usage.get("completion_tokens"))
        if prompt is not None and completion is not None:
            return Usage(input_tokens=prompt, output_tokens=completion, estimated=False)
    return _http.estimated_usage(request, text)
