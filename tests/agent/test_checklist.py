"""Checklist extraction and coverage."""

from __future__ import annotations

import json

import pytest

from agent.loop.checklist import Checklist, ChecklistItem, parse_checklist


def test_parse_caps_items_and_drops_unknown_kinds() -> None:
    items = [
        {"text": f"fact {i}", "kind": "base_fee_gwei" if i == 0 else "vibes"} for i in range(7)
    ]
    cl = parse_checklist(json.dumps({"items": items}))
    assert len(cl.items) == 5 and cl.items[0].kind == "base_fee_gwei" and cl.items[1].kind is None
    assert [i.id for i in cl.items] == ["c1", "c2", "c3", "c4", "c5"]


@pytest.mark.parametrize("text", ["no json", '{"items": "x"}', "{oops}"])
def test_parse_errors(text: str) -> None:
    with pytest.raises(ValueError, match="checklist reply"):
        parse_checklist(text)


def test_cover_by_kind_and_by_words_and_focus() -> None:
    cl = Checklist(
        (
            ChecklistItem("c1", "base fee gwei", "base_fee_gwei"),
            ChecklistItem("c2", "latest block number", None),
        )
    )
    assert cl.focus() and cl.focus().id == "c1" and not cl.complete  # type: ignore[union-attr]
    cl = cl.cover({"base_fee_gwei": "1.5"}, "base fee 1.5 gwei", "e1")
    assert cl.items[0].covered and cl.items[0].value == "1.5" and cl.items[0].evidence_id == "e1"
    assert cl.focus().id == "c2"  # type: ignore[union-attr]
    cl = cl.cover({}, "the latest block number is 812", "e2")
    assert cl.complete and cl.focus() is None and cl.items[1].evidence_id == "e2"


def test_empty_checklist_is_never_complete() -> None:
    assert not Checklist().complete


def test_round_trip() -> None:
    cl = Checklist((ChecklistItem("c1", "x", None, True, "v", "e1"),))
    assert Checklist.from_dicts(cl.as_dicts()) == cl
