"""Property-based fuzzing of the parsers that read untrusted text: the model's proposal,
tool arguments, and a seller's 402. Whatever comes in, they return a value or raise
their package's own typed error; nothing else escapes."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agent.errors import ProposalInvalid, ToolArgsError
from agent.loop.proposal import Batch, Call, Done, NoAction, SubmitAnswer, parse_proposal
from agent.tools.registry_default import default_registry
from agent.tools.x402.protocol import X402ProtocolError, parse_payment_required

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40)
json_values = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4),
    max_leaves=12,
)
ADDRESS = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
FIELD_VALUES = (
    json_values
    | st.sampled_from([ADDRESS, ADDRESS.lower(), "0x" + "0" * 40, "1.5 USDC", "0.000001 USDC",
                       "http://127.0.0.1:8402/analytics/gas", "-1", "1e6", "0x" + "f" * 64])
)


@FUZZ
@given(st.text(max_size=300))
def test_proposal_parser_on_any_text(text: str) -> None:
    try:
        parsed = parse_proposal(text)
    except ProposalInvalid as exc:
        assert "expected" in str(exc) or "Fix" in str(exc)
        return
    assert isinstance(parsed, Call | Batch | SubmitAnswer | Done | NoAction)


proposal_like = st.fixed_dictionaries(
    {"action": st.sampled_from(["call", "batch", "submit_answer", "done", "CALL", "", "pay"])},
    optional={
        "tool": st.text(max_size=20) | json_values,
        "args": st.dictionaries(st.text(max_size=10), FIELD_VALUES, max_size=4) | json_values,
        "calls": st.lists(st.dictionaries(st.sampled_from(["tool", "args", "x"]), json_values),
                          max_size=4) | json_values,
        "answer": json_values,
        "evidence": st.lists(st.text(max_size=5), max_size=3) | json_values,
        "verdict": json_values,
    },
)


@FUZZ
@given(proposal_like, st.sampled_from(["", "Sure: ", "```json\n"]))
def test_proposal_parser_on_protocol_shaped_json(obj: dict[str, Any], prefix: str) -> None:
    try:
        parsed = parse_proposal(prefix + json.dumps(obj))
    except ProposalInvalid:
        return
    assert isinstance(parsed, Call | Batch | SubmitAnswer | Done | NoAction)


REGISTRY = default_registry(paywall_url="http://127.0.0.1:8402")
TOOL_FIELDS = sorted(
    {f for n in REGISTRY.names() for f in REGISTRY.get(n).args_model.model_fields}  # type: ignore[union-attr]
)


@FUZZ
@given(
    st.sampled_from(REGISTRY.names()),
    st.dictionaries(st.sampled_from([*TOOL_FIELDS, "verdict", "extra"]), FIELD_VALUES, max_size=4)
    | json_values,
)
def test_tool_arguments_validate_or_raise_tool_args_error(name: str, args: Any) -> None:
    tool = REGISTRY.get(name)
    assert tool is not None
    try:
        parsed = tool.parse_args(args)
    except ToolArgsError as exc:
        assert name in str(exc)
        return
    assert isinstance(parsed, BaseModel)
    json.dumps(parsed.model_dump(mode="json"))  # normalised args are fingerprintable JSON


requirement = st.fixed_dictionaries(
    {
        "scheme": st.sampled_from(["exact", "upto", ""]) | json_values,
        "network": st.sampled_from(["eip155:31337", "eip155:1", "base-sepolia", "solana:x"])
        | json_values,
        "asset": st.sampled_from([ADDRESS, "0x123"]) | json_values,
        "amount": st.sampled_from(["50000", "0", "-1", "1e3", ""]) | json_values,
        "payTo": st.sampled_from([ADDRESS, "nobody"]) | json_values,
        "maxTimeoutSeconds": st.integers(-5, 10**12) | json_values,
    },
    optional={"extra": json_values, "maxAmountRequired": json_values, "resource": json_values},
)
payment_required = st.fixed_dictionaries(
    {"x402Version": st.sampled_from([1, 2, 3, "2", True]) | json_values},
    optional={"accepts": st.lists(requirement, max_size=3) | json_values,
              "resource": json_values, "error": json_values},
)


def _response(headers: dict[str, str], content: bytes = b"") -> httpx.Response:
    return httpx.Response(
        402, headers=headers, content=content,
        request=httpx.Request("GET", "http://127.0.0.1:8402/analytics/gas"),
    )


def _check(response: httpx.Response) -> None:
    try:
        parsed = parse_payment_required(response)
    except X402ProtocolError as exc:
        assert "402" in str(exc) or "x402" in str(exc) or "PAYMENT-REQUIRED" in str(exc)
        return
    assert parsed.accepts


@FUZZ
@given(payment_required, st.booleans())
def test_402_header_and_body_parse_or_raise_the_protocol_error(
    data: dict[str, Any], in_header: bool
) -> None:
    raw = json.dumps(data).encode()
    if in_header:
        _check(_response({"PAYMENT-REQUIRED": base64.b64encode(raw).decode()}))
    else:
        _check(_response({"content-type": "application/json"}, raw))


@FUZZ
@given(st.text(max_size=200) | st.binary(max_size=200).map(lambda b: base64.b64encode(b).decode()))
def test_402_garbage_header_raises_the_protocol_error(header: str) -> None:
    try:
        _check(_response({"PAYMENT-REQUIRED": header.encode("ascii", "ignore").decode() or "x"}))
    except UnicodeEncodeError:  # pragma: no cover - httpx refuses non-latin-1 header values
        return
