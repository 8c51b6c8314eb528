"""Anthropic messages provider on recorded responses: success, usage, errors."""

from __future__ import annotations

import httpx
import pytest

from agent.errors import ModelUnavailable
from agent.models.anthropic import ANTHROPIC_VERSION, AnthropicModel, split_messages
from agent.models.base import ModelRequest

KEY = "sk-ant-test-0123456789abcdef"
MESSAGES = [
    {"role": "system", "content": "You are nib."},
    {"role": "system", "content": "Reply with JSON."},
    {"role": "user", "content": "Task: base fee and gas price?"},
]


def model(replay, **kw) -> AnthropicModel:
    return AnthropicModel(model="claude-sonnet-4-5", api_key=KEY, transport=replay.transport, **kw)


def propose() -> ModelRequest:
    return ModelRequest(purpose="propose", messages=MESSAGES, max_output_tokens=300)


def test_success_separates_the_system_prompt_and_reads_usage(replay, arun):
    rp = replay("anthropic_success")
    reply = arun(model(rp).complete(propose()))
    assert reply.text.startswith('{"action":"batch"')
    # input_tokens + cache reads; cached prompt tokens still count against the budget
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (630, 41)
    assert reply.usage.estimated is False
    req = rp.requests[0]
    assert str(req.url) == "https://api.anthropic.com/v1/messages"
    assert req.headers["x-api-key"] == KEY
    assert req.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert "authorization" not in req.headers
    body = rp.json()
    assert body["system"] == "You are nib.\n\nReply with JSON."
    assert body["messages"] == [{"role": "user", "content": "Task: base fee and gas price?"}]
    assert body["max_tokens"] == 300
    assert body["model"] == "claude-sonnet-4-5"


def test_base_url_with_v1_is_accepted(replay, arun):
    rp = replay("anthropic_success")
    m = AnthropicModel(
        model="m", base_url="https://proxy.example/v1/", api_key=KEY, transport=rp.transport
    )
    arun(m.complete(propose()))
    assert str(rp.requests[0].url) == "https://proxy.example/v1/messages"


def test_missing_usage_is_estimated_and_marked(replay, arun):
    rp = replay("anthropic_no_usage")
    reply = arun(model(rp).complete(ModelRequest(purpose="synthesize", messages=MESSAGES)))
    assert reply.text == "The base fee is 0.875 gwei (evidence e1)."
    assert reply.usage.estimated is True
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0


def test_turns_alternate_and_start_with_user():
    system, turns = split_messages(
        [
            {"role": "system", "content": "S"},
            {"role": "assistant", "content": "A1"},
            {"role": "user", "content": "U1"},
            {"role": "user", "content": "U2"},
        ]
    )
    assert system == "S"
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[-1]["content"] == "U1\n\nU2"


@pytest.mark.parametrize(
    ("recording", "kind", "needle"),
    [
        ("anthropic_401", "auth", "NIB_ANTHROPIC_API_KEY"),
        ("anthropic_403", "auth", "NIB_ANTHROPIC_API_KEY"),
        ("anthropic_429", "rate-limit", "rate limited: wait or lower concurrency"),
        ("anthropic_500", "server", "provider down"),
        ("anthropic_malformed", "bad-response", "not JSON"),
    ],
)
def test_errors_map_to_model_unavailable(replay, arun, recording, kind, needle):
    rp = replay(recording)
    with pytest.raises(ModelUnavailable) as info:
        arun(model(rp).complete(propose()))
    assert info.value.kind == kind
    assert needle in str(info.value)
    assert KEY not in str(info.value) and KEY not in info.value.fix


def test_rate_limit_reports_retry_after(replay, arun):
    rp = replay("anthropic_429")
    with pytest.raises(ModelUnavailable) as info:
        arun(model(rp).complete(propose()))
    assert "retry after 7s" in str(info.value)


def test_timeout_is_provider_down(replay, arun):
    rp = replay(httpx.ReadTimeout)
    with pytest.raises(ModelUnavailable) as info:
        arun(model(rp).complete(propose()))
    assert info.value.kind == "timeout"
    assert "provider down" in str(info.value)


def test_repr_never_shows_the_key(replay):
    assert KEY not in repr(model(replay()))
