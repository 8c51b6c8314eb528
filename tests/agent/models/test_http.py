"""Shared provider plumbing: JSON extraction, redaction, status mapping."""

from __future__ import annotations

import httpx
import pytest

from agent.models import _http


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"action":"done"}', '{"action":"done"}'),
        ('  {"a": 1}\n', '{"a": 1}'),
        ('```json\n{"a": 1}\n```', '{"a": 1}'),
        ('Sure! {"a": {"b": 2}} Hope that helps.', '{"a": {"b": 2}}'),
        ("no json here", "no json here"),
        ('{"broken": ', '{"broken": '),
    ],
)
def test_extract_json_text(text: str, expected: str) -> None:
    assert _http.extract_json_text(text) == expected


def test_redact_removes_the_key_and_key_shaped_strings() -> None:
    text = "bad key sk-live-ABCDEF123456 and mysecretvalue"
    out = _http.redact(text, "mysecretvalue")
    assert "ABCDEF123456" not in out and "mysecretvalue" not in out
    assert out.count("[redacted]") == 2


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, "auth"),
        (403, "auth"),
        (429, "rate-limit"),
        (500, "server"),
        (503, "server"),
        (404, "bad-response"),
    ],
)
def test_status_error_kinds(status: int, kind: str) -> None:
    request = httpx.Request("POST", "https://api.example/v1/chat/completions?key=zzz")
    response = httpx.Response(status, json={"error": {"message": "nope"}}, request=request)
    err = _http.status_error(response, provider="openai:m", key_env="NIB_OPENAI_API_KEY")
    assert err.kind == kind
    assert f"HTTP {status}" in str(err) and "nope" in str(err)
    assert "zzz" not in str(err)  # query strings are dropped from the URL shown


def test_estimate_is_positive_for_text_and_zero_for_empty() -> None:
    assert _http.estimate_tokens("") == 0
    assert _http.estimate_tokens("hello world, this is a test") > 3
