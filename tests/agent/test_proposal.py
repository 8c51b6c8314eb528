"""The proposal protocol: four shapes, tolerant extraction, actionable errors."""

from __future__ import annotations

import pytest

from agent.errors import ProposalInvalid
from agent.loop.proposal import (
    Batch,
    Call,
    Done,
    NoAction,
    SubmitAnswer,
    parse_proposal,
    propose_messages,
    retry_messages,
)


def test_call() -> None:
    assert parse_proposal('{"action":"call","tool":"base_fee","args":{}}') == Call("base_fee", {})


def test_call_inside_prose_and_fences() -> None:
    text = 'Sure.\n```json\n{"action": "call", "tool": "eth_balance", "args": {"a": "}"}}\n```'
    assert parse_proposal(text) == Call("eth_balance", {"a": "}"})


def test_batch_submit_done() -> None:
    batch = parse_proposal('{"action":"batch","calls":[{"tool":"a","args":{}},{"tool":"b"}]}')
    assert batch == Batch((Call("a", {}), Call("b", {})))
    assert parse_proposal(
        '{"action":"submit_answer","answer":" 42 ","evidence":["e1"]}'
    ) == SubmitAnswer("42", ("e1",))
    assert parse_proposal('{"action":"done"}') == Done(None)
    assert parse_proposal('{"action":"done","answer":"x"}') == Done("x")


@pytest.mark.parametrize("text", ["", "I will check the fees later.", "   "])
def test_no_json_is_no_action(text: str) -> None:
    assert isinstance(parse_proposal(text), NoAction)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"action": "call", "tool": ', "not valid JSON"),
        ('{"tool": "base_fee"}', 'no "action"'),
        ('{"action": "fly"}', "does not match the protocol"),
        ('{"action": "call", "tool": "x", "args": {}, "why": "because"}', "Extra inputs"),
        ('{"action": "submit_answer", "answer": ""}', "answer"),
        ('{"action": "batch", "calls": []}', "calls"),
    ],
)
def test_malformed_raises_with_fix(text: str, needle: str) -> None:
    with pytest.raises(ProposalInvalid, match=needle) as info:
        parse_proposal(text)
    assert "Fix" in str(info.value) or "expected" in str(info.value)


def test_retry_is_minimal_context() -> None:
    msgs = retry_messages("reply is not valid JSON", ["base_fee", "gas_price"])
    assert len(msgs) == 2 and "base_fee, gas_price" in msgs[1]["content"]
    assert "Task" not in msgs[1]["content"]


def test_propose_prompt_has_self_model_focus_feedback() -> None:
    ctx = {
        "task": "fees?",
        "self_model": {"agent": "nib", "version": "0.1"},
        "self_model_text": "wallet: 0xabc",
        "tools": [
            {
                "name": "base_fee",
                "kind": "free",
                "facts": ["base_fee_gwei"],
                "description": "d",
                "args": {"properties": {}},
            }
        ],
        "checklist": [{"id": "c1", "text": "base fee gwei", "covered": False, "value": None}],
        "focus": {"id": "c1", "text": "base fee gwei"},
        "evidence": [],
        "history": "(no steps yet)",
        "feedback": ["tool 'x' is not wired"],
        "lessons": ["call base_fee first"],
    }
    system, user = (m["content"] for m in propose_messages(ctx))
    assert "wallet: 0xabc" in user and "base_fee (free; facts base_fee_gwei" in system
    assert "Focus now: c1 base fee gwei" in user and "tool 'x' is not wired" in user
    assert "call base_fee first" in user
