"""Which model a run thinks with, from its configuration (:class:`agent.config.NibSettings`).

No model configured means the offline planner, so a fresh machine still runs. A model
is ``local`` when its base URL points at this machine or a private network; that picks
the default profile (local-guarded) in agent/limits.py.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from agent.errors import AgentConfigError
from agent.models._http import DEFAULT_TIMEOUT, Connection
from agent.models.anthropic import ANTHROPIC_BASE_URL, AnthropicModel
from agent.models.base import Model, ToolProtocol
from agent.models.offline import OfflinePlanner
from agent.models.openai_compat import OPENAI_BASE_URL, OpenAICompatModel

if TYPE_CHECKING:
    from agent.config import NibSettings

__all__ = [
    "PROVIDER_ALIASES",
    "ModelSettings",
    "Provider",
    "is_local_url",
    "model_from_config",
    "model_settings",
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


def _clean(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else _clean(value.get_secret_value())


def model_settings(settings: NibSettings) -> ModelSettings:
    """The model settings of a run, from its one configuration (:class:`NibSettings`,
    which read the ``NIB_*`` variables, the providers' key variables and the TOML file)."""
    return _resolve(
        provider=_clean(settings.model_provider),
        model=_clean(settings.model),
        base_url=_clean(settings.model_base_url),
        keys={
            "NIB_OPENAI_API_KEY": _secret(settings.openai_api_key),
            "OPENAI_API_KEY": _secret(settings.plain_openai_api_key),
            "NIB_ANTHROPIC_API_KEY": _secret(settings.anthropic_api_key),
            "ANTHROPIC_API_KEY": _secret(settings.plain_anthropic_api_key),
        },
        timeout=settings.model_timeout,
        tools=settings.model_tools,
    )


def settings_from_env(
    env: Mapping[str, str],
    *,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
) -> ModelSettings:
    """Resolve the model settings from a mapping of variables (a child process's or a
    test's environment); explicit arguments win over ``env``. A run reads them through
    :func:`model_settings` instead, from its :class:`NibSettings`.

    Reads NIB_MODEL_PROVIDER, NIB_MODEL, NIB_MODEL_BASE_URL, NIB_MODEL_TIMEOUT (seconds),
    NIB_MODEL_TOOLS (native | json-text) and the provider's key (NIB_OPENAI_API_KEY or
    OPENAI_API_KEY; NIB_ANTHROPIC_API_KEY or ANTHROPIC_API_KEY).
    """
    return _resolve(
        provider=_clean(provider) or _clean(env.get("NIB_MODEL_PROVIDER")),
        model=_clean(model) or _clean(env.get("NIB_MODEL")),
        base_url=_clean(base_url) or _clean(env.get("NIB_MODEL_BASE_URL")),
        keys={var: _clean(env.get(var)) for vars_ in _KEY_VARS.values() for var in vars_},
        api_key=_clean(api_key),
        timeout=env.get("NIB_MODEL_TIMEOUT"),
        tools=env.get("NIB_MODEL_TOOLS"),
    )


def _resolve(
    *,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    keys: Mapping[str, str | None],
    timeout: str | float | None,
    tools: str | None,
    api_key: str | None = None,
) -> ModelSettings:
    """The settings these values name. With neither a provider, a model nor a base URL,
    the provider is ``offline``; a model or base URL without a provider means ``openai``
    (the common protocol), or ``anthropic`` when the model name starts with ``claude``.
    ``keys`` maps each key variable to its value; ``api_key`` wins over them."""
    if provider is None:
        if model is None and base_url is None:
            return ModelSettings(provider="offline")
        provider = "anthropic" if (model or "").lower().startswith("claude") else "openai"
    kind, alias_url = _provider(provider)
    if kind == "offline":
        return ModelSettings(provider="offline")
    if model is None:
        raise AgentConfigError(
            f"NIB_MODEL_PROVIDER={provider} is set but no model is named; expected "
            f"NIB_MODEL (e.g. {'claude-sonnet-4-5' if kind == 'anthropic' else 'gpt-4o-mini'})."
            " Fix: set NIB_MODEL, or unset NIB_MODEL_PROVIDER to use the offline planner.",
            source="NIB_MODEL",
        )
    base_url = (
        base_url or alias_url or (OPENAI_BASE_URL if kind == "openai" else ANTHROPIC_BASE_URL)
    )
    key_vars = _KEY_VARS[kind]
    key_env, key = key_vars[0], api_key
    if key is None:
        key_env, key = next(((v, keys[v]) for v in key_vars if keys.get(v)), (key_env, None))
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
        timeout_s=_timeout(timeout),
        tool_protocol=_tools(tools),
    )


def _provider(raw: str) -> tuple[Provider, str | None]:
    alias = PROVIDER_ALIASES.get(raw.lower())
    if alias is None:
        raise AgentConfigError(
            f"NIB_MODEL_PROVIDER={raw!r} is not a known provider; expected one of: "
            f"{', '.join(sorted(PROVIDER_ALIASES))}. Fix: set NIB_MODEL_PROVIDER=openai for any "
            "chat-completions server (with NIB_MODEL_BASE_URL), or anthropic.",
            source="NIB_MODEL_PROVIDER",
        )
    return alias


def _timeout(raw: str | float | None) -> float | None:
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


def model_from_config(
    config: ModelSettings | NibSettings | None = None,
    *,
    env: Mapping[str, str] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    timeout: httpx.Timeout | float | None = None,
) -> Model:
    """The model to run with: offline planner, chat-completions or Anthropic.

    ``config`` is resolved :class:`ModelSettings` or the run's :class:`NibSettings`;
    without one, ``env`` (a mapping of variables) is read, and without that the settings
    are loaded (:func:`agent.config.load_settings`). ``transport`` replaces the HTTP
    transport (tests replay recorded responses through ``httpx.MockTransport``). Raises
    AgentConfigError on a bad config.
    """
    if isinstance(config, ModelSettings):
        settings = config
    elif config is not None:
        settings = model_settings(config)
    elif env is not None:
        settings = settings_from_env(env)
    else:
        from agent.config import load_settings

        settings = model_settings(load_settings())
    if settings.provider == "offline":
        return OfflinePlanner()
    assert settings.model is not None and settings.base_url is not None
    if timeout is None:
        timeout = (
            DEFAULT_TIMEOUT
            if settings.timeout_s is None
            else httpx.Timeout(settings.timeout_s, connect=min(10.0, settings.timeout_s))
        )
    connection: Connection = {
        "model": settings.model,
        "base_url": settings.base_url,
        "api_key": settings.api_key,
        "local": is_local_url(settings.base_url),
        "timeout": timeout,
        "transport": transport,
    }
    if settings.key_env is not None:  # else the provider's own variable is named
        connection["key_env"] = settings.key_env
    if settings.provider == "anthropic":
        return AnthropicModel(**connection)
    return OpenAICompatModel(tool_protocol=settings.tool_protocol, **connection)
