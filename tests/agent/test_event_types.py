"""Every event type the product emits is listed, once, in ``agent.store.EVENT_TYPES``.

The check reads the product packages' source: any call of an ``emit``-named callable
(``emit``, ``self._emit``, ``ctx.emit``, ...) whose first argument is a string, and any
``store.event(run_id, "type", ...)``, names an event type; each must be listed with a
description (the loop's and the tools' in agent/store.py, the wallet's in
wallet/events.py, the judge's in judge/events.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

from agent.store import EVENT_TYPES

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agent", "wallet", "judge", "chain")


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def emitted(source: str) -> set[str]:
    """The event types ``source`` emits by name."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
        if "emit" in name and node.args:
            kind = _literal(node.args[0])
        elif name == "event" and len(node.args) >= 2:
            kind = _literal(node.args[1])
        else:
            continue
        if kind is not None:
            found.add(kind)
    return found


def _product_emits() -> dict[str, list[str]]:
    where: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for kind in emitted(path.read_text()):
                where.setdefault(kind, []).append(str(path.relative_to(ROOT)))
    return where


def test_every_emitted_event_type_is_listed_with_a_description() -> None:
    where = _product_emits()
    unlisted = {kind: files for kind, files in where.items() if kind not in EVENT_TYPES}
    assert not unlisted, f"event types emitted but not in agent.store.EVENT_TYPES: {unlisted}"
    assert all(EVENT_TYPES.values())
    assert len(where) >= 50  # the scan sees the emits (52 types when this was written)


def test_the_scan_finds_an_unlisted_emit() -> None:
    source = 'def f(ctx, store):\n    ctx.emit("tool.new_kind", {})\n    store.event("r", "x.y", {})\n'
    assert emitted(source) == {"tool.new_kind", "x.y"}
    assert "tool.new_kind" not in EVENT_TYPES


def test_listed_types_are_emitted_somewhere() -> None:
    """No stale entry: a listed type nothing emits is a second word for nothing."""
    stale = set(EVENT_TYPES) - set(_product_emits())
    assert not stale, f"listed in EVENT_TYPES but never emitted: {sorted(stale)}"
