"""A bound the task sets on its own spending, in words: "don't spend more than 0.20 USDC",
"spend at most 0.05 USDC", "with a budget of 0.2 USDC", ", no more than 0.20 USDC".

Read from the user's task text only. It can lower what a run spends, never raise it: the
loop takes the least of it and the run's spend cap (agent/loop/limits.py), and the offline
planner bids no more than it. Its words ("don't ... more than") are no words that withhold
a payment (judge/mandates.py ``withheld_by``), except in a task that orders a transfer,
where which amount the bound is about is not read and the order stays withheld.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from judge.amounts import USDC_DECIMALS, plain_numbers

__all__ = ["SPEND_BOUND", "SpendBound", "blank_spend_bounds", "spend_bound"]

#: Words bounding what is spent, said with a verb of spending or a budget: the amount may
#: come without its unit ("don't spend more than 0.2").
_VERBAL = (
    r"\b(?:do\s+not|don['’]?t|dont|never)\s+(?:spend|pay)\s+(?:any\s+)?"
    r"(?:more\s+than|over|above|beyond|in\s+excess\s+of)"
    r"|\b(?:spend|pay)(?:ing)?\s+(?:at\s+most|no\s+more\s+than|not\s+more\s+than|less\s+than|"
    r"under|below|up\s+to|a\s+maximum\s+of|max(?:imum)?)"
    r"|\bwithout\s+(?:spending|paying)\s+(?:more\s+than|over|above)"
    r"|\b(?:(?:with|on|within|using|given)\s+)?(?:a|my|the|your)\s+(?:total\s+|max(?:imum)?\s+)?"
    r"budget\s+(?:of|is)"
    r"|\bkeep\s+(?:it|the\s+(?:cost|price|spend(?:ing)?|total))\s+(?:under|below|within)"
)
#: The same bound with no verb, as a clause of its own (", no more than 0.20 USDC") or a
#: price ("for no more than 0.1 USDC"): only with its unit, so no threshold of a condition
#: ("holds no more than 3 USDC", "under 50 gwei") is one.
_BARE = (
    r"(?:(?<=[,;:(])|\bfor)\s*(?:and\s+)?(?:no\s+more\s+than|not\s+more\s+than|at\s+most|"
    r"under|below|less\s+than|max(?:imum)?|up\s+to)"
)
_AMOUNT = r"\$?\s*(?P<num>\d+(?:\.\d+)?)(?:\s*(?:usdc|usd|dollars?)\b)?"
_PRICED = r"(?:\$\s*(?P<bnum>\d+(?:\.\d+)?)|(?P<bnum2>\d+(?:\.\d+)?)\s*(?:usdc|usd|dollars?)\b)"
SPEND_BOUND = re.compile(rf"(?:{_VERBAL})\s+{_AMOUNT}|(?:{_BARE})\s+{_PRICED}", re.IGNORECASE)
"""The words of a spend bound and its amount (see the module docstring)."""


@dataclass(frozen=True)
class SpendBound:
    """The least bound the task's words set: atomic USDC, and the words that said it."""

    atomic: int
    words: str


def spend_bound(task: str) -> SpendBound | None:
    """The least spend bound ``task`` says, or None. A bound of zero or with more than six
    decimals is none (its words stay unread, and withhold as before)."""
    found = [b for m in SPEND_BOUND.finditer(plain_numbers(task)) if (b := _bound(m)) is not None]
    return min(found, key=lambda b: b.atomic, default=None)


def blank_spend_bounds(task: str) -> str:
    """``task`` with the words of each spend bound it says blanked, in place (the same
    length, so places in it stand): read, they are no other part of the task."""
    return SPEND_BOUND.sub(lambda m: " " * len(m.group(0)) if _bound(m) else m.group(0), task)


def _bound(m: re.Match[str]) -> SpendBound | None:
    atomic = Decimal(m["num"] or m["bnum"] or m["bnum2"]).scaleb(USDC_DECIMALS)
    if atomic <= 0 or atomic != atomic.to_integral_value():
        return None
    return SpendBound(int(atomic), " ".join(m.group(0).split()))
