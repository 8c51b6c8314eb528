"""The OpenAI chat-completions protocol over httpx, for any server that speaks it.

OpenAI, OpenRouter, Ollama, vLLM, llama.cpp and LM Studio all accept the same request;
only the base URL, key and model differ. Tools travel natively (``tools`` in the request,
``tool_calls`` in the reply, ``role: tool`` messages for results). Output that must be
JSON asks for it with ``response_format``: a JSON Schema where the server enforces one
(OpenAI, vLLM, Ollama, LM Studio: ``json_schema``; llama-cpp-python: ``json_object`` with
a ``schema``, enforced by grammar), else plain JSON mode.

Servers differ in what they accept, so each known rejection (HTTP 400/422 naming the
field) is retried once with that field stepped down, and the step is remembered for the
rest of the session: ``response_format`` json_schema -> json_object+schema -> json_object
-> none; ``tools`` -> the JSON text protocol (``tool_protocol`` becomes ``json-text``, and
every reply says so). ``tool_choice`` is ``auto``, the one value every server accepts
(llama-cpp-python fails on ``required``); ``submit_answer`` and ``done`` are tools, so a
reply without a call is the model stopping.
"""

from __future__ import annotations

import json
from typing import Unpack

import httpx

import agent.models._http as _http
from agent.jsonvalues import JSONObject, as_list, as_object
from agent.models.base import (
    Message,
    ModelReply,
    ModelRequest,
    ToolCall,
    ToolProtocol,
)

__all__ = ["JSON_PURPOSES", "OPENAI_BASE_URL", "OpenAICompatModel"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
JSON_PURPOSES = frozenset({"checklist", "propose"})
"""Purposes whose text reply the loop parses as JSON. ``replan`` asks for plain text."""

_REJECTIONS = (400, 422, 500)
"""Statuses a server rejects a field with (llama-cpp-python answers validation errors with
500); a step-down is tried only when the error text names the field."""

_FORMATS = ("json_schema", "json_object_schema", "json_object", None)
"""``response_format`` tiers, strongest first; a server's rejection steps one down."""


class OpenAICompatModel(_http.HttpModel):
    """A chat-completions model. ``local`` picks the default profile (local-guarded).

    ``tool_protocol`` is ``native`` until the server rejects ``tools`` (or when forced
    with ``tool_protocol="json-text"``). The API key lives in a private attribute and
    never appears in ``repr`` or in an error message (``key_env`` names its variable).
    """

    provider = "openai"
    default_base_url = OPENAI_BASE_URL
    default_key_env = "NIB_OPENAI_API_KEY"

    def __init__(
        self,
        *,
        json_mode: bool = True,
        tool_protocol: ToolProtocol = "native",
        **connection: Unpack[_http.Connection],
    ) -> None:
        super().__init__(**connection)
        self.tool_protocol: ToolProtocol = tool_protocol
        self._format = 0 if json_mode else len(_FORMATS) - 1
        self._tokens_field = "max_tokens"

    def __repr__(self) -> str:
        return (
            f"OpenAICompatModel(model={self.model!r}, base_url={self.base_url!r}, "
            f"local={self.local}, tools={self.tool_protocol}, "
            f"key={'set' if self._api_key else 'unset'})"
        )

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def _native(self, request: ModelRequest) -> bool:
        return bool(request.tools) and self.tool_protocol == "native"

    def _payload(self, request: ModelRequest) -> JSONObject:
        native = self._native(request)
        messages: list[JSONObject] | list[dict[str, str]]
        if native:
            messages = [_wire_message(m) for m in request.messages]
        else:
            protocol = request.text_protocol if request.tools else ""
            messages = list(_http.text_messages(request.messages, protocol))
        payload: JSONObject = {
            "model": self.model,
            "messages": messages,
            self._tokens_field: request.max_output_tokens,
        }
        if self._temperature is not None:
            payload["temperature"] = self._temperature
        if native:
            payload["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
            payload["tool_choice"] = "auto"
        elif request.output is not None or request.purpose in JSON_PURPOSES:
            response_format = self._response_format(request)
            if response_format is not None:
                payload["response_format"] = response_format
        return payload

    def _response_format(self, request: ModelRequest) -> JSONObject | None:
        tier = _FORMATS[self._format]
        if tier is None:
            return None
        if request.output is None or tier == "json_object":
            return {"type": "json_object"}
        if tier == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {"name": request.output.name, "schema": request.output.schema},
            }
        return {"type": "json_object", "schema": request.output.schema}

    async def complete(self, request: ModelRequest) -> ModelReply:
        """One chat completion; raises ModelUnavailable with the fix on any failure."""
        async with self._client() as client:
            body = await self._post(client, request)
        choice = _first_choice(body, self.name)
        message = choice.get("message")
        if not isinstance(message, dict):
            raise _http.bad_shape(self.name, "choices[0] has no message")
        stop_reason = choice.get("finish_reason")
        calls = _tool_calls(message.get("tool_calls"))
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        refusal = message.get("refusal")
        if not text and not calls and isinstance(refusal, str) and refusal:
            text, stop_reason = refusal, "refusal"
        if not calls and request.purpose in JSON_PURPOSES:
            text = _http.extract_json_text(text)
        return ModelReply(
            text=text,
            usage=_http.reported_usage(
                body, request, text, calls, prompt=("prompt_tokens",), completion="completion_tokens"
            ),
            tool_calls=calls,
            stop_reason=stop_reason if isinstance(stop_reason, str) else None,
            protocol=self.tool_protocol if request.tools else None,
        )

    async def _post(self, client: httpx.AsyncClient, request: ModelRequest) -> JSONObject:
        for _ in range(6):
            payload = self._payload(request)
            response = await self._send(client, self.url, payload)
            if response.status_code not in _REJECTIONS or not self._step_down(
                request, payload, _http.error_detail(response).lower()
            ):
                break
        return self._decode(response)

    def _step_down(self, request: ModelRequest, payload: JSONObject, detail: str) -> bool:
        """Adjust the one field a rejection names; False when it names none we can adjust."""
        if _http.is_context_overflow(detail):
            return False
        if "response_format" in payload and "response_format" in detail:
            while self._response_format(request) == payload["response_format"]:
                self._format += 1
            return True
        if "tools" in payload and ("tool" in detail or "function" in detail):
            self.tool_protocol = "json-text"
            return True
        if self._tokens_field == "max_tokens" and "max_completion_tokens" in detail:
            self._tokens_field = "max_completion_tokens"
            return True
        return False


def _wire_message(message: Message) -> JSONObject:
    """A loop message in chat-completions form (tool calls and tool results included)."""
    role = message.get("role", "user")
    if role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.get("tool_call_id", ""),
            "content": str(message.get("content") or ""),
        }
    out: JSONObject = {"role": role, "content": message.get("content") or ""}
    if role == "assistant" and message.get("tool_calls"):
        # "" rather than null: OpenAI accepts both, llama-cpp-python rejects null (500).
        out["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("args", {}))},
            }
            for c in map(as_object, as_list(message["tool_calls"]))
        ]
    return out


def _first_choice(body: JSONObject, provider: str) -> JSONObject:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _http.bad_shape(provider, "the body has no choices[0]")
    return as_object(choices[0])


def _tool_calls(raw: object) -> tuple[ToolCall, ...]:
    """``message.tool_calls`` as ToolCalls; arguments that are not a JSON object -> error."""
    if not isinstance(raw, list):
        return ()
    calls = []
    for n, item in enumerate(raw):
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict):
            continue
        call_id = str(item.get("id") or f"call_{n}")
        name = str(function.get("name") or "")
        arguments = function.get("arguments")
        try:
            args = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
        except ValueError as exc:
            calls.append(ToolCall(call_id, name, error=f"arguments of {name} are not JSON ({exc})"))
            continue
        if isinstance(arguments, dict):
            args = arguments
        if not isinstance(args, dict):
            calls.append(ToolCall(call_id, name, error=f"arguments of {name} are not an object"))
            continue
        calls.append(ToolCall(call_id, name, args))
    return tuple(calls)
