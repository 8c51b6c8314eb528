"""Native tool calling and structured output, pinned by recordings in each wire format.

Each test replays a recorded provider response and checks both directions: the request
nib sends (tools, tool_choice, tool results, response_format) and what it reads back
(tool calls, parallel calls, refusals, stop reasons, usage).
"""

from __future__ import annotations

import pytest

from agent.errors import ModelUnavailable
from agent.models.anthropic import AnthropicModel
from agent.models.base import ModelRequest, OutputSchema, ToolSpec
from agent.models.openai_compat import OpenAICompatModel

KEY = "sk-test-abcdef0123456789"
TOOLS = (
    ToolSpec(
        "base_fee",
        "Latest block's base fee in gwei.",
        {
            "type": "object",
            "properties": {
                "block": {
                    "anyOf": [{"type": "integer"}, {"type": "null"}],
                    "description": "Block number; latest when omitted.",
                }
            },
        },
    ),
    ToolSpec("gas_price", "Current gas price in gwei.", {"type": "object", "properties": {}}),
    ToolSpec(
        "submit_answer",
        "Finish with an answer citing evidence ids.",
        {
            "type": "object",
            "properties": {
                "answer": {"type": "string"},
                "evidence": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["answer", "evidence"],
        },
    ),
)
PROTOCOL = 'Reply with one JSON object: {"action":"call","tool":NAME,"args":{...}}'
AFTER_A_CALL = [
    {"role": "system", "content": "You are nib."},
    {"role": "user", "content": "Task: what is the base fee?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "call_A1", "name": "base_fee", "args": {}}],
    },
    {"role": "tool", "tool_call_id": "call_A1", "name": "base_fee", "content": "0.875 gwei [e1]"},
]
CHECKLIST = OutputSchema(
    "checklist",
    {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "object"}}},
        "required": ["items"],
    },
)


def openai(replay, **kw) -> OpenAICompatModel:
    return OpenAICompatModel(model="gpt-4o-mini", api_key=KEY, transport=replay.transport, **kw)


def anthropic(replay) -> AnthropicModel:
    return AnthropicModel(model="claude-sonnet-4-5", api_key=KEY, transport=replay.transport)


def propose(messages=None) -> ModelRequest:
    return ModelRequest(
        "propose",
        messages or AFTER_A_CALL[:2],
        tools=TOOLS,
        text_protocol=PROTOCOL,
        max_output_tokens=256,
    )


# ---------------------------------------------------------------- OpenAI


def test_openai_sends_tool_schemas_and_reads_one_call(replay, arun):
    rp = replay("openai_tool_call")
    reply = arun(openai(rp).complete(propose()))
    body = rp.json()
    assert body["tool_choice"] == "auto"
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "base_fee",
            "description": "Latest block's base fee in gwei.",
            "parameters": TOOLS[0].parameters,
        },
    }
    assert "response_format" not in body
    assert PROTOCOL not in str(body["messages"])
    [call] = reply.tool_calls
    assert (call.id, call.name, call.args, call.error) == (
        "call_Qp3TbX9vC2hQ1",
        "base_fee",
        {"block": None},
        None,
    )
    assert reply.stop_reason == "tool_calls"
    assert reply.protocol == "native"
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.estimated) == (
        980,
        38,
        False,
    )


def test_openai_parallel_calls_come_back_in_order(replay, arun):
    rp = replay("openai_parallel_tool_calls")
    reply = arun(openai(rp).complete(propose()))
    assert [(c.id, c.name) for c in reply.tool_calls] == [
        ("call_A1", "base_fee"),
        ("call_B2", "gas_price"),
        ("call_C3", "block_number"),
    ]


def test_openai_tool_results_travel_as_tool_messages(replay, arun):
    rp = replay("openai_submit_answer")
    reply = arun(openai(rp).complete(propose(AFTER_A_CALL)))
    messages = rp.json()["messages"]
    assert messages[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_A1",
                "type": "function",
                "function": {"name": "base_fee", "arguments": "{}"},
            }
        ],
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "call_A1", "content": "0.875 gwei [e1]"}
    [call] = reply.tool_calls
    assert call.name == "submit_answer"
    assert call.args == {"answer": "The base fee is 0.875 gwei [e1].", "evidence": ["e1"]}


def test_openai_arguments_that_are_not_json_are_an_error_on_the_call(replay, arun):
    rp = replay("openai_bad_arguments")
    reply = arun(openai(rp).complete(propose()))
    [call] = reply.tool_calls
    assert call.name == "eth_balance" and call.args == {}
    assert call.error is not None and "not JSON" in call.error
    assert reply.stop_reason == "length"


def test_openai_refusal_is_text_with_stop_reason_refusal(replay, arun):
    rp = replay("openai_refusal")
    reply = arun(openai(rp).complete(propose()))
    assert reply.tool_calls == ()
    assert reply.text == "I'm sorry, I can't help with that request."
    assert reply.stop_reason == "refusal"


def test_openai_server_without_tools_falls_back_to_the_text_protocol_once(replay, arun):
    rp = replay("openai_tools_400", "openai_success", "openai_success")
    m = openai(rp)
    schema = OutputSchema("proposal", {"type": "object"})
    request = ModelRequest(
        "propose", AFTER_A_CALL, tools=TOOLS, text_protocol=PROTOCOL, output=schema
    )
    reply = arun(m.complete(request))
    assert "tools" in rp.json(0)
    fallback = rp.json(1)
    assert "tools" not in fallback and "tool_choice" not in fallback
    # The protocol joins the system prompt; calls and results become plain turns.
    assert fallback["messages"][0]["content"] == f"You are nib.\n\n{PROTOCOL}"
    assert fallback["messages"][2] == {
        "role": "assistant",
        "content": '{"args": {}, "tool": "base_fee"}',
    }
    assert fallback["messages"][3] == {
        "role": "user",
        "content": "Result of base_fee: 0.875 gwei [e1]",
    }
    assert fallback["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "proposal", "schema": {"type": "object"}},
    }
    assert reply.protocol == "json-text" and m.tool_protocol == "json-text"
    assert reply.text == '{"action":"call","tool":"base_fee","args":{}}'
    arun(m.complete(request))
    assert "tools" not in rp.json(2)
    assert len(rp.requests) == 3


def test_openai_structured_output_asks_for_the_schema(replay, arun):
    rp = replay("openai_schema_checklist")
    request = ModelRequest("checklist", AFTER_A_CALL[:2], output=CHECKLIST)
    reply = arun(openai(rp).complete(request))
    assert rp.json()["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "checklist", "schema": CHECKLIST.schema},
    }
    assert reply.text.startswith('{"items"')


def test_openai_schema_rejection_steps_to_json_object_with_schema_then_plain(replay, arun):
    rp = replay(
        "openai_response_format_400", "openai_response_format_400", "openai_schema_checklist"
    )
    request = ModelRequest("checklist", AFTER_A_CALL[:2], output=CHECKLIST)
    arun(openai(rp).complete(request))
    assert rp.json(1)["response_format"] == {"type": "json_object", "schema": CHECKLIST.schema}
    assert rp.json(2)["response_format"] == {"type": "json_object"}


def test_replan_is_plain_text(replay, arun):
    rp = replay("openai_no_usage")
    arun(openai(rp).complete(ModelRequest("replan", AFTER_A_CALL[:2])))
    assert "response_format" not in rp.json()


def test_openai_length_stop_reason_is_reported(replay, arun):
    rp = replay("openai_length")
    reply = arun(openai(rp).complete(ModelRequest("checklist", AFTER_A_CALL[:2])))
    assert reply.stop_reason == "length"


@pytest.mark.parametrize(
    ("recording", "factory"), [("openai_context_400", openai), ("anthropic_context_400", anthropic)]
)
def test_context_overflow_is_its_own_failure_kind(replay, arun, recording, factory):
    rp = replay(recording)
    with pytest.raises(ModelUnavailable) as info:
        arun(factory(rp).complete(propose()))
    assert info.value.kind == "context-overflow"
    assert "context window" in info.value.fix
    assert len(rp.requests) == 1


# ---------------------------------------------------------------- Anthropic


def test_anthropic_sends_tools_and_reads_tool_use(replay, arun):
    rp = replay("anthropic_tool_use")
    reply = arun(anthropic(rp).complete(propose()))
    body = rp.json()
    assert body["tools"][0] == {
        "name": "base_fee",
        "description": "Latest block's base fee in gwei.",
        "input_schema": TOOLS[0].parameters,
    }
    assert body["tool_choice"] == {"type": "auto"}
    [call] = reply.tool_calls
    assert (call.id, call.name, call.args) == ("toolu_01A09q90qw90lq917835lq9", "base_fee", {})
    assert reply.text == "I'll read the base fee first."
    assert reply.stop_reason == "tool_use" and reply.protocol == "native"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (1120, 74)


def test_anthropic_parallel_tool_use(replay, arun):
    rp = replay("anthropic_parallel_tool_use")
    reply = arun(anthropic(rp).complete(propose()))
    assert [c.name for c in reply.tool_calls] == ["base_fee", "gas_price"]


def test_anthropic_tool_results_ride_in_the_next_user_turn(replay, arun):
    rp = replay("anthropic_submit_answer")
    reply = arun(anthropic(rp).complete(propose(AFTER_A_CALL)))
    body = rp.json()
    assert body["system"] == "You are nib."
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "call_A1", "name": "base_fee", "input": {}}],
    }
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_A1", "content": "0.875 gwei [e1]"}
        ],
    }
    assert reply.tool_calls[0].args["evidence"] == ["e1"]


def test_anthropic_refusal_and_max_tokens_stop_reasons(replay, arun):
    rp = replay("anthropic_refusal", "anthropic_max_tokens")
    refused = arun(anthropic(rp).complete(propose()))
    assert (refused.text, refused.tool_calls, refused.stop_reason) == ("", (), "refusal")
    cut = arun(anthropic(rp).complete(ModelRequest("synthesize", AFTER_A_CALL[:2])))
    assert (cut.text, cut.stop_reason) == ("The base fee is", "max_tokens")


def test_anthropic_structured_output_is_a_forced_tool_call(replay, arun):
    rp = replay("anthropic_forced_output")
    request = ModelRequest("checklist", AFTER_A_CALL[:2], output=CHECKLIST)
    reply = arun(anthropic(rp).complete(request))
    body = rp.json()
    assert body["tool_choice"] == {"type": "tool", "name": "checklist"}
    assert body["tools"][0]["input_schema"] == CHECKLIST.schema
    assert reply.tool_calls == ()
    assert reply.text == '{"items": [{"text": "base fee gwei", "kind": "base_fee_gwei"}]}'


def test_anthropic_counts_tokens_exactly_before_sending(replay, arun):
    rp = replay("anthropic_count_tokens")
    assert arun(anthropic(rp).count_tokens(propose(AFTER_A_CALL))) == 1187
    req = rp.requests[0]
    assert str(req.url) == "https://api.anthropic.com/v1/messages/count_tokens"
    body = rp.json()
    assert "max_tokens" not in body and body["tools"][0]["name"] == "base_fee"


# ---------------------------------------------------------------- llama.cpp (recorded here)


def local(replay) -> OpenAICompatModel:
    return OpenAICompatModel(
        model="smollm2", base_url="http://127.0.0.1:8080/v1", transport=replay.transport
    )


def test_llamacpp_tool_call_is_read_from_tool_calls_not_function_call(replay, arun):
    rp = replay("llamacpp_tool_call")
    reply = arun(local(rp).complete(propose()))
    [call] = reply.tool_calls
    assert (call.name, call.args) == ("get_weather", {"city": "Paris", "unit": "celsius"})
    assert reply.protocol == "native" and reply.usage.estimated is False


def test_llamacpp_rejects_json_schema_with_500_and_takes_json_object_with_schema(replay, arun):
    rp = replay("llamacpp_json_schema_500", "llamacpp_json_object_schema")
    m = local(rp)
    reply = arun(m.complete(ModelRequest("checklist", AFTER_A_CALL[:2], output=CHECKLIST)))
    assert rp.json(0)["response_format"]["type"] == "json_schema"
    assert rp.json(1)["response_format"] == {"type": "json_object", "schema": CHECKLIST.schema}
    assert reply.text == '{ "name": "Ada", "age": 36 }'


def test_llamacpp_context_overflow(replay, arun):
    rp = replay("llamacpp_context_400")
    with pytest.raises(ModelUnavailable) as info:
        arun(local(rp).complete(propose()))
    assert info.value.kind == "context-overflow" and "2048 tokens" in str(info.value)
