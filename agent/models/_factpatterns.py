"""The offline planner's checklist patterns: task phrases -> fact kinds, with subjects.

A pattern table over the shared fact-kind vocabulary (agent/checklist.py) and the
subjects a fact is about (an address, a transaction hash, a token symbol, a protocol).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

__all__ = [
    "ADDRESS",
    "FACT_PATTERNS",
    "MAX_ITEMS",
    "TX_HASH",
    "FactPattern",
    "Subject",
    "datasets",
    "extract_checklist",
    "infer_kind",
    "word_positions",
]

MAX_ITEMS = 5
ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}(?![0-9a-fA-F])")
TX_HASH = re.compile(r"0x[0-9a-fA-F]{64}(?![0-9a-fA-F])")

Subject = Literal["none", "account", "token", "tx", "symbol", "protocol"]
"""What a fact is about. ``none``: the chain itself. ``account``: a 0x address holding
funds. ``token``: a 0x token contract. ``tx``: a 0x transaction hash. ``symbol``: a token
symbol (USDC). ``protocol``: a protocol name (uniswap)."""


@dataclass(frozen=True)
class FactPattern:
    """Task phrases that ask for one fact kind, the item text, and what the fact is about."""

    kind: str
    pattern: re.Pattern[str]
    label: str
    subject: Subject
    needs_hash: bool = False


def _p(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.IGNORECASE)


FACT_PATTERNS: tuple[FactPattern, ...] = (
    # Priority order: an earlier pattern claims its span, so "average gas price" is
    # gas_stats, not gas_price_gwei, and "ETH balance of" is not a USDC "balance of".
    FactPattern("premium_report", _p(r"premium\s+report"), "premium report", "none"),
    FactPattern(
        "protocol_factsheet",
        _p(r"protocol\s+fact[\s-]*sheets?|\bprotocols?\b"),
        "protocol fact sheet",
        "protocol",
    ),
    FactPattern(
        "token_factsheet",
        _p(r"(?:token\s+)?fact[\s-]*sheets?"),
        "token fact sheet",
        "symbol",
    ),
    FactPattern(
        "gas_stats",
        _p(r"gas\s+(?:usage\s+)?(?:statistics|stats)|average\s+gas(?:\s+(?:price|used|usage))?"),
        "gas statistics",
        "none",
    ),
    FactPattern(
        "transfer_stats",
        _p(r"transfers?\s+(?:statistics|stats|volume)|\bvolume\b"),
        "USDC transfer statistics",
        "none",
    ),
    FactPattern("tx_gas_used", _p(r"gas\s+used"), "transaction gas used", "tx"),
    FactPattern("base_fee_gwei", _p(r"base[\s-]*fee"), "base fee (gwei)", "none"),
    FactPattern("gas_price_gwei", _p(r"gas\s+price|price\s+of\s+gas"), "gas price (gwei)", "none"),
    FactPattern(
        "block_timestamp",
        _p(r"(?:(?:latest|current)\s+)?(?:block\s+)?timestamp|block\s+time\b"),
        "latest block timestamp",
        "none",
    ),
    FactPattern(
        "block_number",
        _p(r"block\s+number|block\s+height|(?:latest|current)\s+block"),
        "latest block number",
        "none",
    ),
    FactPattern("eth_balance", _p(r"\b(?:eth|ether)\s+balance"), "ETH balance", "account"),
    FactPattern(
        "usdc_balance",
        _p(r"usdc\s+balance|token\s+balance|balance\s+of|\bbalance\b"),
        "USDC balance",
        "account",
    ),
    FactPattern("token_symbol", _p(r"\bsymbols?\b"), "token symbol", "token"),
    FactPattern("token_decimals", _p(r"\bdecimals\b"), "token decimals", "token"),
    FactPattern("token_supply", _p(r"(?:total\s+)?supply"), "token total supply", "token"),
    FactPattern(
        "transfer_count",
        _p(r"(?:number\s+of\s+)?(?:usdc\s+)?transfers\b|transfer\s+count"),
        "USDC transfer count",
        "account",
    ),
    FactPattern("tx_status", _p(r"\breceipt\b|\bstatus\b"), "transaction status", "tx"),
    FactPattern(
        "tx_status", _p(r"\b(?:transaction|tx)\b"), "transaction status", "tx", needs_hash=True
    ),
)
"""The checklist pattern table, in priority order; the kinds are the shared fact-kind
vocabulary of agent/checklist.py."""


@lru_cache(maxsize=1)
def datasets() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(token symbols, protocol names) the paywall has fact sheets for."""

    def keys(name: str, field: str, fallback: tuple[str, ...]) -> tuple[str, ...]:
        try:
            text = resources.files("chain").joinpath("data", f"{name}.json").read_text("utf-8")
            return tuple(json.loads(text)[field])
        except (OSError, ValueError, KeyError, ModuleNotFoundError):
            return fallback

    return keys("tokens", "tokens", ("USDC",)), keys("protocols", "protocols", ())


def word_positions(text: str, names: Iterable[str]) -> list[tuple[int, str]]:
    found = []
    for name in names:
        for m in re.finditer(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.IGNORECASE):
            found.append((m.start(), name))
    return sorted(found)


def _nearest(found: list[tuple[int, str]], start: int, end: int) -> str | None:
    """The first subject after the phrase, else the last one before it."""
    after = [v for pos, v in found if pos >= end]
    if after:
        return after[0]
    before = [v for pos, v in found if pos < start]
    return before[-1] if before else None


def extract_checklist(task: str, *, max_items: int = MAX_ITEMS) -> list[dict[str, Any]]:
    """Checklist items ``{"text", "kind"}`` for ``task``, in the order the task asks.

    One item per fact kind; the item text names its subject (address, tx hash, token
    symbol or protocol) when the task gives one, so the proposal can find it again.
    """
    symbols, protocols = datasets()
    subjects: dict[Subject, list[tuple[int, str]]] = {
        "account": [(m.start(), m.group(0)) for m in ADDRESS.finditer(task)],
        "token": [(m.start(), m.group(0)) for m in ADDRESS.finditer(task)],
        "tx": [(m.start(), m.group(0)) for m in TX_HASH.finditer(task)],
        "symbol": word_positions(task, symbols),
        "protocol": word_positions(task, protocols),
    }
    claimed: list[tuple[int, int]] = []
    hits: list[tuple[int, str, str]] = []
    for fp in FACT_PATTERNS:
        if fp.needs_hash and not subjects["tx"]:
            continue
        for m in fp.pattern.finditer(task):
            start, end = m.span()
            if any(start < e and s < end for s, e in claimed):
                continue
            claimed.append((start, end))
            kind, label, subject = fp.kind, fp.label, fp.subject
            if kind == "token_factsheet":
                # "fact sheet of Uniswap" is a protocol's sheet: the nearest name decides.
                sym = _nearest(subjects["symbol"], start, end)
                proto = _nearest(subjects["protocol"], start, end)
                if proto and (not sym or _closer(task, proto, sym, end)):
                    kind, label, subject = "protocol_factsheet", "protocol fact sheet", "protocol"
            value = None if subject == "none" else _nearest(subjects[subject], start, end)
            text = f"{label} of {value}" if value else label
            hits.append((start, kind, text))
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for _, kind, text in sorted(hits):
        if kind in seen:
            continue
        seen.add(kind)
        items.append({"text": text, "kind": kind})
    return items[:max_items]


def _closer(task: str, a: str, b: str, end: int) -> bool:
    """True when ``a`` occurs at or after ``end`` before ``b`` does (or ``b`` never does)."""
    lower = task.lower()
    pa, pb = lower.find(a.lower(), end), lower.find(b.lower(), end)
    if pa < 0:
        return pb < 0 and lower.rfind(a.lower(), 0, end) > lower.rfind(b.lower(), 0, end)
    return pb < 0 or pa < pb


def infer_kind(text: str) -> str | None:
    items = extract_checklist(text, max_items=1)
    return items[0]["kind"] if items else None
