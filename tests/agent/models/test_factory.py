"""Choosing the model from configuration and NIB_* variables."""

from __future__ import annotations

import pytest

from agent.config import NibSettings, load_settings
from agent.errors import AgentConfigError, ModelUnavailable
from agent.models.anthropic import AnthropicModel
from agent.models.base import ModelRequest
from agent.models.factory import is_local_url, model_from_config, settings_from_env
from agent.models.offline import OfflinePlanner
from agent.models.openai_compat import OpenAICompatModel

KEY = "sk-test-factory-0123456789"


def test_nothing_configured_is_the_offline_planner() -> None:
    assert isinstance(model_from_config(env={}), OfflinePlanner)
    assert isinstance(model_from_config(env={"NIB_MODEL_PROVIDER": "offline"}), OfflinePlanner)


def test_openai_from_env_prefers_the_nib_variable() -> None:
    env = {
        "NIB_MODEL_PROVIDER": "openai",
        "NIB_MODEL": "gpt-4o-mini",
        "NIB_OPENAI_API_KEY": KEY,
        "OPENAI_API_KEY": "sk-other-0000000000",
    }
    m = model_from_config(env=env)
    assert isinstance(m, OpenAICompatModel)
    assert m.model == "gpt-4o-mini" and m.base_url == "https://api.openai.com/v1"
    assert m.key_env == "NIB_OPENAI_API_KEY" and m.local is False
    assert KEY not in repr(m)


def test_plain_openai_key_variable_is_accepted_and_named_in_auth_errors(replay, arun) -> None:
    rp = replay("openai_401")
    env = {"NIB_MODEL_PROVIDER": "openai", "NIB_MODEL": "gpt-4o-mini", "OPENAI_API_KEY": KEY}
    m = model_from_config(env=env, transport=rp.transport)
    with pytest.raises(ModelUnavailable) as info:
        arun(m.complete(ModelRequest("propose", [{"role": "user", "content": "hi"}])))
    assert "OPENAI_API_KEY" in info.value.fix and KEY not in str(info.value)


def test_anthropic_from_env() -> None:
    env = {
        "NIB_MODEL_PROVIDER": "anthropic",
        "NIB_MODEL": "claude-sonnet-4-5",
        "ANTHROPIC_API_KEY": KEY,
    }
    m = model_from_config(env=env)
    assert isinstance(m, AnthropicModel)
    assert m.key_env == "ANTHROPIC_API_KEY" and m.url == "https://api.anthropic.com/v1/messages"


def test_local_server_needs_no_key_and_is_local() -> None:
    env = {"NIB_MODEL_PROVIDER": "ollama", "NIB_MODEL": "qwen2.5:7b"}
    m = model_from_config(env=env)
    assert isinstance(m, OpenAICompatModel)
    assert m.base_url == "http://localhost:11434/v1" and m.local is True


def test_model_or_base_url_without_provider_infers_it() -> None:
    assert isinstance(
        model_from_config(
            env={"NIB_MODEL": "llama3", "NIB_MODEL_BASE_URL": "http://10.0.0.5:8000/v1"}
        ),
        OpenAICompatModel,
    )
    assert isinstance(
        model_from_config(env={"NIB_MODEL": "claude-haiku-4-5", "ANTHROPIC_API_KEY": KEY}),
        AnthropicModel,
    )


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://localhost:11434/v1", True),
        ("http://127.0.0.1:8080", True),
        ("http://[::1]:1234/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://10.1.2.3/v1", True),
        ("http://172.16.0.9/v1", True),
        ("http://gpu.localhost/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://openrouter.ai/api/v1", False),
        ("http://8.8.8.8/v1", False),
    ],
)
def test_is_local_url(url: str, local: bool) -> None:
    assert is_local_url(url) is local


def test_provider_without_model_names_nib_model() -> None:
    with pytest.raises(AgentConfigError) as info:
        model_from_config(env={"NIB_MODEL_PROVIDER": "openai", "NIB_OPENAI_API_KEY": KEY})
    assert "NIB_MODEL" in str(info.value) and info.value.source == "NIB_MODEL"


def test_unknown_provider_lists_the_choices() -> None:
    with pytest.raises(AgentConfigError) as info:
        model_from_config(env={"NIB_MODEL_PROVIDER": "gemini", "NIB_MODEL": "x"})
    assert "'gemini'" in str(info.value) and "anthropic" in str(info.value)


def test_hosted_model_without_key_names_both_variables() -> None:
    with pytest.raises(AgentConfigError) as info:
        model_from_config(env={"NIB_MODEL_PROVIDER": "anthropic", "NIB_MODEL": "claude-x"})
    msg = str(info.value)
    assert "NIB_ANTHROPIC_API_KEY or ANTHROPIC_API_KEY" in msg
    assert "export NIB_ANTHROPIC_API_KEY=" in msg


def test_config_object_wins_over_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("NIB_HOME", str(tmp_path))
    settings = NibSettings(
        model_provider="openai", model="from-config", model_base_url="http://127.0.0.1:1234/v1"
    )
    m = model_from_config(settings, env={"NIB_MODEL": "from-env"})
    assert isinstance(m, OpenAICompatModel)
    assert m.model == "from-config" and m.local is True


def test_settings_repr_hides_the_key() -> None:
    s = settings_from_env({"NIB_MODEL_PROVIDER": "openai", "NIB_MODEL": "m", "OPENAI_API_KEY": KEY})
    assert s.api_key == KEY and KEY not in repr(s) and s.key_env == "OPENAI_API_KEY"


def test_a_run_reads_model_keys_through_its_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """One config home: the key comes from NibSettings (here the provider's own variable),
    is named in auth errors by its variable, and shows in no repr or dump."""
    for var in ("NIB_CONFIG", "NIB_ANTHROPIC_API_KEY", "NIB_MODEL_BASE_URL", "NIB_MODEL_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NIB_HOME", str(tmp_path))
    monkeypatch.setenv("NIB_MODEL_PROVIDER", "anthropic")
    monkeypatch.setenv("NIB_MODEL", "claude-x")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    settings = load_settings()
    assert KEY not in repr(settings) and KEY not in settings.model_dump_json()
    m = model_from_config(settings)
    assert isinstance(m, AnthropicModel) and m.key_env == "ANTHROPIC_API_KEY"
    assert KEY not in repr(m)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(AgentConfigError) as info:
        model_from_config(load_settings())
    assert "NIB_ANTHROPIC_API_KEY or ANTHROPIC_API_KEY" in str(info.value)


def test_the_factory_reads_no_environment_itself() -> None:
    import inspect

    from agent.models import factory

    source = inspect.getsource(factory)
    assert "os.environ" not in source and "getenv" not in source
