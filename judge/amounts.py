"""USDC amounts in the judge's words: its decimals and how a reason shows an amount.

The one home of both inside the judge (its rulings and its mandates read them here); the
judge imports nothing outside itself, so chain.money keeps the agent's and the wallet's
copy of the constant and their formatter, which adds the unit ("0.40 USDC").
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

__all__ = ["USDC_DECIMALS", "format_usdc"]

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
