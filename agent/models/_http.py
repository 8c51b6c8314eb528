"""Plumbing both HTTP model providers share: one POST with typed failures, token estimates
and JSON extraction from a reply's text.

Third-party errors are translated here, once, into :class:`agent.errors.ModelUnavailable`
with the human fix; no message built here ever contains the API key.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Required, TypedDict, Unpack

import httpx

from agent.errors import ModelUnavailable
from agent.jsonvalues import JSONObject, as_list, as_object
from agent.loop.history import one_line
from agent.loop.tokens import count_json, count_messages, count_text
from agent.models.base import ModelRequest, ToolCall, Usage
from judge.http_proxy import proxy_for
from judge.tls import tls_context

__all__ = [
    "DEFAULT_TIMEOUT",
    "Connection",
    "HttpModel",
    "bad_shape",
    "decode",
    "error_detail",
    "estimate_tokens",
    "estimated_usage",
    "extract_json_text",
    "is_context_overflow",
    "post",
    "redact",
    "reported_usage",
    "status_error",
    "text_messages",
    "usage_int",
]

DEFAULT_TIMEOUT = httpx.Timeout(120.0, connect=10.0)
"""Generous read timeout: a local model on a laptop may take a minute for one proposal."""

_BODY_EXCERPT = 200


def estimate_tokens(text: str) -> int:
    """Estimated tokens in ``text`` (agent/tokens.py's offline counter)."""
    return count_text(text)


_KEYLIKE = re.compile(r"\b(?:sk|pk|key)-[A-Za-z0-9_\-*.]{6,}")


def redact(text: str, secret: str | None) -> str:
    """``text`` with the API key (and anything shaped like a key) replaced by ``[redacted]``."""
    if secret:
        text = text.replace(secret, "[redacted]")
    return _KEYLIKE.sub("[redacted]", text)


def _excerpt(text: str) -> str:
    return one_line(text, _BODY_EXCERPT)


def error_detail(response: httpx.Response) -> str:
    """The provider's own error message when the body has one, else a body excerpt."""
    try:
        body = response.json()
    except ValueError:
        return _excerpt(response.text)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return _excerpt(err["message"])
        if isinstance(err, str):
            return _excerpt(err)
        if isinstance(body.get("message"), str):
            return _excerpt(body["message"])
    return _excerpt(response.text)


def status_error(
    response: httpx.Response, *, provider: str, key_env: str, secret: str | None = None
) -> ModelUnavailable:
    """The typed error for a non-2xx ``response``; ``key_env`` names the key's variable."""
    status = response.status_code
    detail = redact(error_detail(response), secret)
    where = provider
    try:
        where = f"{provider} at {response.request.url.copy_with(query=None)}"
    except RuntimeError:  # a response built without a request (tests, adapters)
        pass
    if status in (401, 403):
        what = "rejected the API key" if status == 401 else "refused access with this API key"
        fix = (
            f"check the API key in {key_env} (and that it may use this model); "
            f"set {key_env} to a valid key"
        )
        return ModelUnavailable("auth", fix, f"{where} {what} (HTTP {status}: {detail}); {fix}.")
    if status == 429:
        retry_after = response.headers.get("retry-after")
        fix = "rate limited: wait or lower concurrency"
        if retry_after:
            fix += f" (provider asks to retry after {retry_after}s)"
        return ModelUnavailable("rate-limit", fix, f"{where} answered HTTP 429 ({detail}); {fix}.")
    if status in (400, 413, 422) and is_context_overflow(detail):
        fix = (
            "the request does not fit the model's context window: give the server a larger "
            "context (llama.cpp: --n_ctx), use a model with a longer one, or lower max_tokens"
        )
        return ModelUnavailable(
            "context-overflow", fix, f"{where} answered HTTP {status} ({detail}); {fix}."
        )
    if status >= 500:
        fix = "provider down: retry later or point NIB_MODEL_BASE_URL at another endpoint"
        return ModelUnavailable("server", fix, f"{where} answered HTTP {status} ({detail}); {fix}.")
    fix = "check NIB_MODEL (the model name) and NIB_MODEL_BASE_URL"
    return ModelUnavailable(
        "bad-response",
        fix,
        f"{where} answered HTTP {status} ({detail}); expected 200 with a completion; {fix}.",
    )


async def post(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    payload: JSONObject,
    provider: str,
) -> httpx.Response:
    """POST ``payload``; transport failures become ModelUnavailable, statuses are kept.

    Timeouts -> ``timeout``; connection failures -> ``server`` (provider down).
    """
    try:
        return await client.post(url, headers=dict(headers), json=payload)
    except httpx.TimeoutException as exc:
        fix = "provider down or too slow: retry later, or use a smaller/faster model"
        raise ModelUnavailable(
            "timeout", fix, f"{provider} did not answer in time ({type(exc).__name__}); {fix}."
        ) from exc
    except httpx.TransportError as exc:
        fix = "provider down or unreachable: check NIB_MODEL_BASE_URL and that the server runs"
        raise ModelUnavailable(
            "server", fix, f"{provider} could not be reached ({type(exc).__name__}); {fix}."
        ) from exc


def decode(
    response: httpx.Response, *, provider: str, key_env: str, secret: str | None = None
) -> JSONObject:
    """The JSON object of a 2xx ``response``, or raise ModelUnavailable.

    401/403 -> ``auth``; 429 -> ``rate-limit``; 5xx -> ``server``; other statuses and
    bodies that are not a JSON object -> ``bad-response``. ``secret`` (the API key) is
    redacted from anything the provider echoed back.
    """
    if response.status_code >= 300:
        raise status_error(response, provider=provider, key_env=key_env, secret=secret)
    try:
        body = response.json()
    except ValueError as exc:
        fix = "the endpoint is not speaking the expected API: check NIB_MODEL_BASE_URL"
        raise ModelUnavailable(
            "bad-response",
            fix,
            f"{provider} answered HTTP {response.status_code} with a body that is not JSON "
            f"({redact(_excerpt(response.text), secret)!r}); {fix}.",
        ) from exc
    if not isinstance(body, dict):
        raise bad_shape(provider, f"the body is a JSON {type(body).__name__}, not an object")
    return as_object(body)


def bad_shape(provider: str, what: str) -> ModelUnavailable:
    """A 200 response whose JSON lacks what the protocol promises (``what`` names it)."""
    fix = "the endpoint is not speaking the expected API: check NIB_MODEL_BASE_URL"
    return ModelUnavailable("bad-response", fix, f"{provider} answered 200 but {what}; {fix}.")


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def extract_json_text(text: str) -> str:
    """The JSON object inside ``text`` (code fences or prose stripped), else ``text``.

    Models asked for JSON sometimes wrap it in ```json fences or a sentence; the loop
    parses proposals strictly, so providers hand it the bare object when one is there.
    """
    stripped = text.strip()
    candidates = [stripped]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return candidate
    return text


_OVERFLOW = re.compile(
    r"context[ _](?:length|window)|maximum context|prompt is too long|too many tokens"
    r"|exceeds? (?:the )?(?:model'?s? )?(?:context|maximum)",
    re.IGNORECASE,
)


def is_context_overflow(detail: str) -> bool:
    """True when a provider's error text says the prompt does not fit the context window.

    OpenAI: ``context_length_exceeded`` / "maximum context length"; Anthropic: "prompt is
    too long"; llama.cpp: "Requested tokens (N) exceed context window of M"; vLLM:
    "maximum context length".
    """
    return bool(_OVERFLOW.search(detail))


def text_messages(
    messages: Iterable[Mapping[str, object]], text_protocol: str = ""
) -> list[dict[str, str]]:
    """Messages for a server without native tool calling: plain ``role``/``content`` text.

    ``text_protocol`` joins the system prompt; an assistant's tool calls become the JSON
    it would have written, and tool results become a user turn naming the call.
    """
    out: list[dict[str, str]] = []
    for message in messages:
        role = str(message.get("role", "user"))
        content = str(message.get("content") or "")
        if role == "assistant" and message.get("tool_calls"):
            calls = [
                json.dumps({"tool": c["name"], "args": c.get("args", {})}, sort_keys=True)
                for c in map(as_object, as_list(message["tool_calls"]))
            ]
            content = "\n".join(filter(None, [content, *calls]))
        elif role == "tool":
            role = "user"
            content = f"Result of {message.get('name', 'the call')}: {content}"
        out.append({"role": role, "content": content})
    if text_protocol:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{text_protocol}"}
        else:
            out.insert(0, {"role": "system", "content": text_protocol})
    return out


def usage_int(value: object) -> int | None:
    """A token count from a usage field: non-negative int, or None when absent/invalid."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def estimated_usage(request: ModelRequest, text: str, calls: Iterable[ToolCall] = ()) -> Usage:
    """Usage counted offline (``estimated=True``) for a provider that reported none."""
    written = [c.as_message() for c in calls]
    return Usage(
        input_tokens=count_messages(
            request.messages, [(t.name, t.description, t.parameters) for t in request.tools]
        ),
        output_tokens=estimate_tokens(text) + (count_json(written) if written else 0),
        estimated=True,
    )


def reported_usage(
    body: Mapping[str, object],
    request: ModelRequest,
    text: str,
    calls: tuple[ToolCall, ...],
    *,
    prompt: tuple[str, ...],
    completion: str,
) -> Usage:
    """The usage the provider reported: input = the first ``prompt`` field plus the others
    (cached prompt tokens reported apart still count), output = ``completion``; counted
    offline (:func:`estimated_usage`) when the body reports no usable figures."""
    usage = body.get("usage")
    if isinstance(usage, dict):
        first = usage_int(usage.get(prompt[0]))
        written = usage_int(usage.get(completion))
        if first is not None and written is not None:
            cached = sum(usage_int(usage.get(key)) or 0 for key in prompt[1:])
            return Usage(input_tokens=first + cached, output_tokens=written, estimated=False)
    return estimated_usage(request, text, calls)


class Connection(TypedDict, total=False):
    """How an HTTP model is reached: the keyword arguments of both providers."""

    model: Required[str]
    base_url: str
    api_key: str | None
    #: The variable the key came from (named in auth errors, never the key itself).
    key_env: str
    #: A local endpoint (picks the default profile, local-guarded).
    local: bool
    timeout: httpx.Timeout | float
    #: Replaces the HTTP transport (tests replay recorded responses).
    transport: httpx.AsyncBaseTransport | None
    temperature: float | None


class HttpModel(ABC):
    """What both HTTP providers hold: the model, where it runs (``local`` picks the default
    profile), the API key in a private attribute that no repr or error shows (``key_env``
    names its variable), and one POST whose failures are typed. Each provider adds its
    wire format (``_headers``, the payload, the reply) and its defaults."""

    #: The name prefix: ``openai:gpt-4o-mini``, ``anthropic:claude-...``.
    provider = ""
    default_base_url = ""
    default_key_env = ""

    def __init__(self, **connection: Unpack[Connection]) -> None:
        self.model = connection["model"]
        self.base_url = connection.get("base_url", self.default_base_url).rstrip("/")
        self.name = f"{self.provider}:{self.model}"
        self.local = connection.get("local", False)
        self.key_env = connection.get("key_env", self.default_key_env)
        self._api_key = connection.get("api_key") or None
        self._timeout = connection.get("timeout", DEFAULT_TIMEOUT)
        self._transport = connection.get("transport")
        self._temperature = connection.get("temperature")

    @abstractmethod
    def _headers(self) -> dict[str, str]:
        """The provider's request headers (its key header, its version)."""

    def _client(self) -> httpx.AsyncClient:
        # httpx mounts a proxy over every URL, ahead of a given transport (a test double).
        proxy = None if self._transport is not None else proxy_for(self.base_url)
        return httpx.AsyncClient(timeout=self._timeout, transport=self._transport,
                                 trust_env=False, proxy=proxy, verify=tls_context())

    async def _send(
        self, client: httpx.AsyncClient, url: str, payload: JSONObject
    ) -> httpx.Response:
        return await post(client, url, headers=self._headers(), payload=payload, provider=self.name)

    def _decode(self, response: httpx.Response) -> JSONObject:
        return decode(response, provider=self.name, key_env=self.key_env, secret=self._api_key)
