"""Shaped history stays linear; the naive transcript does not."""

from __future__ import annotations

from agent.loop.history import (
    HistoryEntry,
    full_transcript_tokens,
    one_line,
    render,
    shaped_tokens,
)


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


def test_a_long_line_is_cut_at_a_word_within_the_limit() -> None:
    """Outside tester 13 (F6): a refusal reason in an answer line ended "so it cannot check
    that th…". A cut ends on a whole word; only a word longer than half the room is cut
    inside it."""
    reason = "the judge could not read its terms, so it cannot check that the payload pays it"
    cut = one_line(reason, 52)
    assert cut == "the judge could not read its terms, so it cannot…", cut
    assert len(cut) <= 52
    assert one_line("so it cannot check that the", 27) == "so it cannot check that the"
    assert one_line("so  it\ncannot   check", 40) == "so it cannot check"
    # A word that would take more than half the room: cut hard, never dropped whole.
    assert one_line("paid 0x" + "ab" * 40, 30) == "paid 0x" + "ab" * 11 + "…"
    assert len(one_line("x" * 500, 200)) == 200


def test_every_clipped_line_is_cut_at_a_word() -> None:
    """The answer's lines, the CLI's cells and the report's events cut as one_line does."""
    from agent.cli.common import short
    from agent.loop.answers import item_line
    from agent.report.page import _event_summary

    words = "the judge could not read its terms so it cannot check that the payload pays it " * 5
    value = item_line({"text": "sheet", "value": words, "provenance": "observed",
                       "evidence_id": "e1"})
    shown = value.removeprefix("sheet: ").split(" (observed")[0]
    assert shown.endswith("…") and shown[:-1].rstrip() in words and words.startswith(shown[:-1])
    assert shown[:-1].split()[-1] in words.split(), shown
    assert short(words, 18) == "the judge could…"
    assert _event_summary({"why": words}, 22) == "why=the judge could…"
