"""Which model a run thinks with, from configuration and ``NIB_*`` environment variables.

No model configured means the offline planner, so a fresh machine still runs. A model
is ``local`` when its base URL points at this machine or a private network; that picks
the default profile (local-guarded) in agent/limits.py.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from agent.errors import AgentConfigError
from agent.models._http import DEFAULT_TIMEOUT
from agent.models.anthropic import ANTHROPIC_BASE_URL, AnthropicModel
from agent.models.base import Model, ToolProtocol
from agent.models.offline import OfflinePlanner
from agent.models.openai_compat import OPENAI_BASE_URL, OpenAICompatModel

__all__ = [
    "PROVIDER_ALIASES",
    "ModelSettings",
    "Provider",
    "is_local_url",
    "model_from_config",
    "settings_from_env",
]

Provider = Literal["offline", "openai", "anthropic"]
"""``offline``: the deterministic planner, no network. ``openai``: any chat-completions
server (OpenAI, OpenRouter, Ollama, vLLM, llama.cpp, LM Studio). ``anthropic``: the
Anthropic messages API."""

PROVIDER_ALIASES: dict[str, tuple[Provider, str | None]] = {
    "openai": ("openai", None),
    "openai-compat": ("openai", None),
    "openrouter": ("openai", "https://openrouter.ai/api/v1"),
    "ollama": ("openai", "http://localhost:11434/v1"),
    "vllm": ("openai", "http://localhost:8000/v1"),
    "llamacpp": ("openai", "http://localhost:8080/v1"),
    "llama.cpp": ("openai", "http://localhost:8080/v1"),
    "lmstudio": ("openai", "http://localhost:1234/v1"),
    "anthropic": ("anthropic", None),
    "offline": ("offline", None),
    "none": ("offline", None),
}
"""Accepted NIB_MODEL_PROVIDER values -> (protocol, default base URL for that server)."""

_KEY_VARS: dict[Provider, tuple[str, ...]] = {
    "openai": ("NIB_OPENAI_API_KEY", "OPENAI_API_KEY"),
    "anthropic": ("NIB_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
    "offline": (),
}


@dataclass(frozen=True)
class ModelSettings:
    """The resolved model configuration. ``key_env`` names where the key came from."""

    provider: Provider
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    key_env: str | None = None
    #: Seconds to wait for one reply (NIB_MODEL_TIMEOUT); None: the adapters' default.
    timeout_s: float | None = None
    #: How proposals travel (NIB_MODEL_TOOLS): ``native`` (fall back on rejection) or
    #: ``json-text`` (never send tools: servers that accept but ignore them).
    tool_protocol: ToolProtocol = "native"


def is_local_url(url: str) -> bool:
    """True when ``url``'s host is loopback, ``localhost``, or a private/link-local address."""
    host = (urlsplit(url if "//" in url else f"//{url}").hostname or "").lower()
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


def _clean(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def settings_from_env(
    env: Mapping[str, str] | None = None,
    *,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
) -> ModelSettings:
    """Resolve the model settings; explicit arguments win over the environment.

    Reads NIB_MODEL_PROVIDER, NIB_MODEL, NIB_MODEL_BASE_URL, NIB_MODEL_TIMEOUT (seconds),
    NIB_MODEL_TOOLS (native | json-text) and the provider's key (NIB_OPENAI_API_KEY or
    OPENAI_API_KEY; NIB_ANTHROPIC_API_KEY or ANTHROPIC_API_KEY).
    With neither a provider, a model nor a base URL set, the provider is ``offline``.
    A model or base URL without a provider means ``openai`` (the common protocol), or
    ``anthropic`` when the model name starts with ``claude``.
    """
    env = os.environ if env is None else env
    raw_provider = _clean(provider) or _clean(env.get("NIB_MODEL_PROVIDER"))
    model = _clean(model) or _clean(env.get("NIB_MODEL"))
    base_url = _clean(base_url) or _clean(env.get("NIB_MODEL_BASE_URL"))

    if raw_provider is None:
        if model is None and base_url is None:
            return ModelSettings(provider="offline")
        raw_provider = "anthropic" if (model or "").lower().startswith("claude") else "openai"
    alias = PROVIDER_ALIASES.get(raw_provider.lower())
    if alias is None:
        raise AgentConfigError(
            f"NIB_MODEL_PROVIDER={raw_provider!r} is not a known provider; expected one of: "
            f"{', '.join(sorted(PROVIDER_ALIASES))}. Fix: set NIB_MODEL_PROVIDER=openai for any "
            "chat-completions server (with NIB_MODEL_BASE_URL), or anthropic.",
            source="NIB_MODEL_PROVIDER",
        )
    kind, alias_url = alias
    if kind == "offline":
        return ModelSettings(provider="offline")
    if model is None:
        raise AgentConfigError(
            f"NIB_MODEL_PROVIDER={raw_provider} is set but no model is named; expected "
            f"NIB_MODEL (e.g. {'claude-sonnet-4-5' if kind == 'anthropic' else 'gpt-4o-mini'})."
            " Fix: set NIB_MODEL, or unset NIB_MODEL_PROVIDER to use the offline planner.",
            source="NIB_MODEL",
        )
    base_url = (
        base_url or alias_url or (OPENAI_BASE_URL if kind == "openai" else ANTHROPIC_BASE_URL)
    )

    key_vars = _KEY_VARS[kind]
    key_env = key_vars[0]
    key = _clean(api_key)
    if key is None:
        for var in key_vars:
            key = _clean(env.get(var))
            if key is not None:
                key_env = var
                break
    if key is None and not is_local_url(base_url):
        raise AgentConfigError(
            f"{kind} model {model!r} at {base_url} needs an API key and none is set; expected "
            f"{' or '.join(key_vars)}. Fix: export {key_vars[0]}=<your key>, or point "
            "NIB_MODEL_BASE_URL at a local server that needs none.",
            source=key_vars[0],
        )
    return ModelSettings(
        provider=kind,
        model=model,
        base_url=base_url,
        api_key=key,
        key_env=key_env,
        timeout_s=_timeout(env.get("NIB_MODEL_TIMEOUT")),
        tool_protocol=_tools(env.get("NIB_MODEL_TOOLS")),
    )


def _timeout(raw: str | None) -> float | None:
    text = _clean(raw)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise AgentConfigError(
            f"NIB_MODEL_TIMEOUT={text!r} is not a positive number of seconds; expected e.g. "
            "120. Fix: set it to how long one model reply may take, or unset it.",
            source="NIB_MODEL_TIMEOUT",
        )
    return value


def _tools(raw: str | None) -> ToolProtocol:
    text = (_clean(raw) or "native").lower()
    if text in ("native", "json-text", "json"):
        return "native" if text == "native" else "json-text"
    raise AgentConfigError(
        f"NIB_MODEL_TOOLS={text!r} is not a tool protocol; expected native or json-text. Fix: "
        "unset it (native, with automatic fallback) or set json-text for servers that "
        "accept tools but ignore them.",
        source="NIB_MODEL_TOOLS",
    )


def _from_config(config: Any) -> dict[str, str | None]:
    """Pick model fields out of a config object or mapping (agent config, CLI flags)."""
    names = {
        "provider": ("model_provider", "provider"),
        "model": ("model", "model_name"),
        "base_url": ("model_base_url", "base_url"),
        "api_key": ("model_api_key", "api_key"),
    }
    found: dict[str, str | None] = {}
    for key, candidates in names.items():
        for name in candidates:
            value = config.get(name) if isinstance(config, Mapping) else getattr(config, name, None)
            if value is not None and not callable(value):
                if hasattr(value, "get_secret_value"):  # pydantic SecretStr
                    value = value.get_secret_value()
                found[key] = _clean(value)
                break
    return found


def model_from_config(
    config: ModelSettings | Mapping[str, Any] | Any | None = None,
    *,
    env: Mapping[str, str] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    timeout: httpx.Timeout | float | None = None,
) -> Model:
    """The model to run with: offline planner, chat-completions or Anthropic.

    ``config`` may be resolved :class:`ModelSettings`, or any object/mapping with some of
    ``model_provider``, ``model``, ``model_base_url``, ``model_api_key`` (values set there
    win over ``env``). ``transport`` replaces the HTTP transport (tests replay recorded
    responses through ``httpx.MockTransport``). Raises AgentConfigError on a bad config.
    """
    if isinstance(config, ModelSettings):
        settings = config
    else:
        overrides = _from_config(config) if config is not None else {}
        settings = settings_from_env(env, **overrides)
    if settings.provider == "offline":
        return OfflinePlanner()
    assert settings.model is not None and settings.base_url is not None
    local = is_local_url(settings.base_url)
    if timeout is None:
        timeout = (
            DEFAULT_TIMEOUT
            if settings.timeout_s is None
            else httpx.Timeout(settings.timeout_s, connect=min(10.0, settings.timeout_s))
        )
    if settings.provider == "anthropic":
        return AnthropicModel(
            model=settings.model,
            base_url=settings.base_url,
            api_key=settings.api_key,
            key_env=settings.key_env or "NIB_ANTHROPIC_API_KEY",
            local=local,
            timeout=timeout,
            transport=transport,
        )
    return OpenAICompatModel(
        model=settings.model,
        base_url=settings.base_url,
        api_key=settings.api_key,
        key_env=settings.key_env or "NIB_OPENAI_API_KEY",
        local=local,
        timeout=timeout,
        transport=transport,
        tool_protocol=settings.tool_protocol,
    )
