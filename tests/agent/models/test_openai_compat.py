"""OpenAI-compatible provider on recorded responses: success, usage, JSON mode, errors."""

from __future__ import annotations

import httpx
import pytest

from agent.errors import ModelUnavailable
from agent.models.base import ModelRequest
from agent.models.openai_compat import OpenAICompatModel

KEY = "sk-test-abcdef0123456789"
MESSAGES = [
    {"role": "system", "content": "You are nib. Reply with JSON."},
    {"role": "user", "content": "Task: what is the base fee?"},
]


def model(replay, **kw) -> OpenAICompatModel:
    return OpenAICompatModel(
        model="gpt-4o-mini",
        base_url="https://api.openai.com/v1/",
        api_key=KEY,
        transport=replay.transport,
        **kw,
    )


def propose() -> ModelRequest:
    return ModelRequest(purpose="propose", messages=MESSAGES, max_output_tokens=256)


def test_success_sends_the_protocol_and_reads_usage(replay, arun):
    rp = replay("openai_success")
    reply = arun(model(rp).complete(propose()))
    assert reply.text == '{"action":"call","tool":"base_fee","args":{}}'
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (412, 17)
    assert reply.usage.estimated is False
    req = rp.requests[0]
    assert str(req.url) == "https://api.openai.com/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    body = rp.json()
    assert body["model"] == "gpt-4o-mini"
    assert body["messages"] == MESSAGES
    assert body["max_tokens"] == 256
    assert body["response_format"] == {"type": "json_object"}


def test_plain_text_purposes_do_not_ask_for_json(replay, arun):
    rp = replay("openai_no_usage")
    request = ModelRequest(purpose="synthesize", messages=MESSAGES)
    reply = arun(model(rp).complete(request))
    assert reply.text == "Base fee is 0.875 gwei (evidence e1)."
    assert "response_format" not in rp.json()


def test_missing_usage_is_estimated_and_marked(replay, arun):
    rp = replay("openai_no_usage")
    reply = arun(model(rp).complete(ModelRequest(purpose="synthesize", messages=MESSAGES)))
    assert reply.usage.estimated is True
    assert reply.usage.input_tokens > 10
    assert reply.usage.output_tokens > 3


def test_json_in_a_fence_is_unwrapped(replay, arun):
    rp = replay("openai_fenced")
    reply = arun(model(rp).complete(ModelRequest(purpose="checklist", messages=MESSAGES)))
    assert reply.text == '{"items": [{"text": "base fee gwei", "kind": "base_fee_gwei"}]}'
    assert reply.usage.estimated is False


def test_rejected_response_format_falls_back_once_and_is_remembered(replay, arun):
    rp = replay("openai_response_format_400", "openai_success", "openai_success")
    m = model(rp)
    reply = arun(m.complete(propose()))
    assert reply.text.startswith('{"action":"call"')
    assert "response_format" in rp.json(0)
    assert "response_format" not in rp.json(1)
    arun(m.complete(propose()))
    assert "response_format" not in rp.json(2)
    assert len(rp.requests) == 3


def test_no_key_sends_no_authorization_header(replay, arun):
    rp = replay("openai_success")
    m = OpenAICompatModel(
        model="qwen2.5:7b", base_url="http://localhost:11434/v1", transport=rp.transport
    )
    arun(m.complete(propose()))
    assert "authorization" not in rp.requests[0].headers
    assert str(rp.requests[0].url) == "http://localhost:11434/v1/chat/completions"


@pytest.mark.parametrize(
    ("recording", "kind", "needle"),
    [
        ("openai_401", "auth", "NIB_OPENAI_API_KEY"),
        ("openai_403", "auth", "NIB_OPENAI_API_KEY"),
        ("openai_429", "rate-limit", "rate limited: wait or lower concurrency"),
        ("openai_500", "server", "provider down"),
        ("openai_malformed", "bad-response", "not JSON"),
    ],
)
def test_errors_map_to_model_unavailable(replay, arun, recording, kind, needle):
    rp = replay(recording)
    with pytest.raises(ModelUnavailable) as info:
        arun(model(rp).complete(propose()))
    err = info.value
    assert err.kind == kind
    assert needle in str(err)
    assert KEY not in str(err) and KEY not in err.fix
    assert "sk-test" not in str(err)


def test_auth_fix_names_the_variable_the_key_came_from(replay, arun):
    rp = replay("openai_401")
    with pytest.raises(ModelUnavailable) as info:
        arun(model(rp, key_env="OPENAI_API_KEY").complete(propose()))
    assert "OPENAI_API_KEY" in info.value.fix
    assert "HTTP 401" in str(info.value)


def test_rate_limit_reports_retry_after(replay, arun):
    rp = replay("openai_429")
    with pytest.raises(ModelUnavailable) as info:
        arun(model(rp).complete(propose()))
    assert "retry after 20s" in info.value.fix


def test_timeout_is_provider_down(replay, arun):
    rp = replay(httpx.ReadTimeout)
    with pytest.raises(ModelUnavailable) as info:
        arun(model(rp).complete(propose()))
    assert info.value.kind == "timeout"
    assert "provider down" in info.value.fix
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)


def test_connection_refused_is_provider_down(replay, arun):
    rp = replay(httpx.ConnectError)
    with pytest.raises(ModelUnavailable) as info:
        arun(model(rp).complete(propose()))
    assert info.value.kind == "server"
    assert "NIB_MODEL_BASE_URL" in info.value.fix


def test_repr_never_shows_the_key(replay):
    m = model(replay())
    assert KEY not in repr(m)
    assert "key=set" in repr(m)
