"""The deterministic free-read policy."""

from __future__ import annotations

import pytest

from judge.errors import JudgeConfigError
from judge.policy import FreePolicyRow, FreeReadPolicy

# The judge knows no tool by name: the agent hands it rows its tools carry.
ROWS = (
    FreePolicyRow("base_fee", max_calls_per_run=4, max_result_bytes=2_048),
    FreePolicyRow("block_info", max_calls_per_run=4, max_result_bytes=8_192),
    FreePolicyRow("tx_receipt", max_calls_per_run=4, max_result_bytes=16_384),
)
TOOLS = ("base_fee", "block_info", "tx_receipt")


def _policy() -> FreeReadPolicy:
    return FreeReadPolicy(ROWS)


def test_the_table_is_the_rows_given_and_empty_by_default() -> None:
    assert _policy().tools == TOOLS
    assert FreeReadPolicy().tools == ()
    assert not FreeReadPolicy().decide_free("base_fee", 0).allowed


def test_allowed_until_the_per_run_limit() -> None:
    policy = _policy()
    first = policy.decide_free("base_fee", 0)
    assert first.outcome == "allowed" and first.allowed
    assert first.reason == "call 1 of 4 for 'base_fee'; result up to 2048 bytes within 10 s"
    refused = policy.decide_free("base_fee", 4)
    assert refused.outcome == "refused"
    assert refused.reason == (
        "free tool 'base_fee' already ran 4 times this run; the limit is 4. "
        "Fix: use the earlier results or another tool."
    )


def test_unknown_tool_is_refused_with_the_known_ones() -> None:
    d = _policy().decide_free("web_search", 0)
    assert d.outcome == "refused" and d.row is None
    assert d.reason == (
        "unknown free tool 'web_search'; known free tools: "
        + ", ".join(TOOLS)
        + ". Fix: propose one of the known tools."
    )


def test_decisions_are_deterministic() -> None:
    a, b = _policy(), _policy()
    for tool in (*TOOLS, "nope"):
        for n in range(6):
            assert a.decide_free(tool, n) == b.decide_free(tool, n)


def test_rows_can_be_added_overridden_and_removed() -> None:
    base = _policy()
    custom = base.with_rows(
        FreePolicyRow("base_fee", allowed=False),
        FreePolicyRow("mempool", max_calls_per_run=1, max_result_bytes=100, timeout_s=2),
    )
    assert base.decide_free("base_fee", 0).allowed  # the original is unchanged
    disabled = custom.decide_free("base_fee", 0)
    assert disabled.reason == (
        "free tool 'base_fee' is disabled by policy; fix: use another tool or enable its "
        "policy row."
    )
    assert custom.decide_free("mempool", 0).allowed
    assert not custom.decide_free("mempool", 1).allowed
    assert "tx_receipt" not in custom.without("tx_receipt").tools


def test_result_size_limit() -> None:
    policy = _policy()
    assert policy.check_result("base_fee", 2048).allowed
    too_big = policy.check_result("base_fee", 2049)
    assert too_big.reason == (
        "result of 'base_fee' is 2049 bytes; the limit is 2048. "
        "Fix: narrow the query (fewer blocks, one address)."
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tool": ""}, "without a tool name"),
        ({"tool": "x", "max_calls_per_run": -1}, r"max_calls_per_run=-1"),
        ({"tool": "x", "timeout_s": 0}, r"timeout_s=0"),
    ],
)
def test_bad_rows_are_config_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(JudgeConfigError, match=message):
        FreePolicyRow(**kwargs)  # type: ignore[arg-type]
