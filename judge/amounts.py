"""USDC amounts in the judge's words: its decimals and how a reason shows an amount.

The one home of both inside the judge (its rulings and its mandates read them here); the
judge imports nothing outside itself, so chain.money keeps the agent's and the wallet's
copy of the constant and their formatter, which adds the unit ("0.40 USDC").
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, Decimal

__all__ = ["GLUED_NUMBER", "USDC_DECIMALS", "format_usdc", "plain_numbers"]

USDC_DECIMALS = 6


def format_usdc(amount: int | Decimal, decimals: int = USDC_DECIMALS) -> str:
    """Atomic units as a human amount with at least 2 decimals: 400000 -> '0.40'."""
    if type(amount) is int:  # exact without Decimal: whole and fractional digits
        whole, frac = divmod(abs(amount), 10**decimals)
        digits = str(frac).rjust(decimals, "0").rstrip("0").ljust(2, "0")
        return f"{'-' if amount < 0 else ''}{whole}.{digits}"
    value = (Decimal(amount).scaleb(-decimals)).quantize(
        Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_EVEN
    )
    if value == 0:
        value = abs(value)  # no "-0.00"
    text = format(value, "f")
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0").ljust(2, "0")
    return f"{whole}.{frac}"


#: How numbers are written beside amounts, each made its plain decimal by
#: :func:`plain_numbers`. A number's digits never start inside a word (a hash, an address).
_GROUPED = re.compile(r"(?<![\w.,])(?<!block )(?<!blocks )\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d|,\d)", re.I)
_SCALE = {"k": 3, "thousand": 3, "m": 6, "mm": 6, "mn": 6, "million": 6, "b": 9, "bn": 9, "billion": 9}
_MAGNITUDE = re.compile(r"(?<![\w.])(?!0x)(\d+(?:\.\d+)?)(?:\s?(k)|(mm|mn|m|bn|b)|\s*(thousand|million|billion))\b",
                        re.I)
_EXPONENT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)e([+-]?\d{1,2})\b", re.I)
#: USDC's atomic units (the only token nib counts in them; ETH's are wei), "of USDC" or not.
_ATOMIC = re.compile(r"(?<![\w.])(\d+)\s+atomic(?:\s+units?|\b)(?:\s+of\s+usdc\b|\s+usdc\b)?", re.I)
_HALF = re.compile(r"\bhalf\s+(?:a|an|one)\s+(usdc|eth|ether|gwei)\b", re.I)
#: Dollars are USDC (1 USDC is 1 dollar, as a spend bound reads "$0.15"), never a value of
#: another asset in dollars ("$2 of ETH" stays as written, and unread).
_DOLLARS = re.compile(r"\$\s?((?>\d+(?:\.\d+)?))(?:\s+(?:worth\s+)?(?:of|in)\s+usdc\b|\s*usdc\b)?"
                      r"(?!\d|\s+(?:worth\s+)?(?:of|in)\s+(?:eth|ether|wei|gwei)\b)", re.I)
_GLUED_UNIT = re.compile(r"(?<![\w.])(?!0x)(\d+(?:\.\d+)?)(usdc|ether|eth|gwei|wei|cents)\b", re.I)
#: A number with letters glued on that :func:`plain_numbers` does not read ("2x", "24h",
#: "5q"), or with one letter after it ("2 m", "5 x"; never "a" or "I"). Read without them
#: it would be the number alone (outside round 56: "more than 1k USDC" was tested as more
#: than 1, at exit 0): whoever finds one leaves its sentence unread.
GLUED_NUMBER = re.compile(r"(?<![\w.])(?!0x)\d+(?:\.\d+)?(?:(?!(?:st|nd|rd|th)\b)[a-z]+|\s+(?![ai]\b)[a-z])\b",
                          re.I)


def _decimal(value: Decimal) -> str:
    return format(value, "f") if value == value.to_integral_value() else format(value.normalize(), "f")


def plain_numbers(text: str) -> str:
    """``text`` with its numbers written plainly: "1,000" -> "1000", "1k" / "1.5 thousand"
    / "2M" / "3 billion" -> "1000" / "1500" / "2000000" / "3000000000", "5e1" -> "50",
    "500000 atomic units (of USDC)" -> "0.5 USDC", "half a USDC" -> "0.5 USDC", "$2 (of
    USDC)" -> "2 USDC", "10usdc" -> "10 usdc". Exact (Decimal), and one home: the judge's
    mandates and spend bounds and the offline planner read a task through it, so both
    read the same number. A number with other letters glued on is left as written
    (``GLUED_NUMBER``)."""
    text = _GROUPED.sub(lambda m: m.group(0).replace(",", ""), text)
    text = _EXPONENT.sub(lambda m: _decimal(Decimal(m[1]).scaleb(int(m[2]))), text)
    text = _MAGNITUDE.sub(
        lambda m: _decimal(Decimal(m[1]).scaleb(_SCALE[(m[2] or m[3] or m[4]).lower()])), text
    )
    text = _ATOMIC.sub(lambda m: f"{_decimal(Decimal(m[1]).scaleb(-USDC_DECIMALS))} USDC", text)
    text = _HALF.sub(r"0.5 \1", text)
    text = _DOLLARS.sub(r"\1 USDC", text)
    return _GLUED_UNIT.sub(r"\1 \2", text)
