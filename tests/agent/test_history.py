"""Shaped history stays linear; the naive transcript does not."""

from __future__ import annotations

from agent.loop.history import HistoryEntry, full_transcript_tokens, render, shaped_tokens


def test_line_has_tool_literal_input_outcome() -> None:
    e = HistoryEntry(2, "eth_balance", {"address": "0xAB", "block": 5}, "ok", "1.5 ETH\nmore", "e2")
    assert e.line() == 'step 2: eth_balance {"address":"0xAB","block":5} -> ok [e2]: 1.5 ETH more'
    assert render([]) == "(no steps yet)"


def test_long_summary_is_cut() -> None:
    line = HistoryEntry(1, "t", {}, "ok", "x " * 500).line()
    assert len(line) < 260 and line.endswith("…")


def test_shaped_history_is_far_cheaper_than_the_full_transcript() -> None:
    big = {
        "summary": "block 1: 150 transfers",
        "rows": [{"from": f"0x{i:040x}"} for i in range(50)],
    }
    steps = [("token_transfers", {"block": n}, big) for n in range(6)]
    full, shaped = full_transcript_tokens(steps), shaped_tokens(steps)
    assert shaped * 20 < full

    # the request at step k carries k-1 earlier steps: its growth per step is one line
    def context_at(fn, k):  # type: ignore[no-untyped-def]
        return fn(steps[:k]) - fn(steps[: k - 1])

    growth = [context_at(shaped_tokens, k + 1) - context_at(shaped_tokens, k) for k in (2, 3, 4)]
    assert len(set(growth)) <= 2 and max(growth) < 40  # bounded, ~constant: linear context
    assert context_at(full_transcript_tokens, 3) - context_at(full_transcript_tokens, 2) > 500
