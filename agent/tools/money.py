"""Money words the paying tools share, each defined here once: an amount of USDC as the
planner may write it (:data:`UsdcAmount`), the run's spend cap the wallet reserves against
(:func:`spend_cap`) and the run's wallet (:func:`require_wallet`). ``usdc_transfer``,
``pay_http``, ``pay_mcp`` and ``discover`` import them from here, not from each other."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Annotated

from pydantic import BeforeValidator

from agent.errors import PermanentToolError
from chain.money import USDC_DECIMALS

if TYPE_CHECKING:
    from agent.seams import AgentWallet
    from agent.tools.base import ToolContext

__all__ = ["UsdcAmount", "parse_usdc_amount", "require_wallet", "spend_cap"]

_UNIT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(usdc)\s*\Z", re.IGNORECASE)
_ATOMIC = re.compile(r"^\s*[0-9]+\s*\Z")


def parse_usdc_amount(value: object, decimals: int = USDC_DECIMALS) -> int:
    """An amount as atomic USDC: an int (atomic), a digit string (atomic) or ``"1.5 USDC"``.

    Exact: ``"1.5 USDC"`` -> 1500000; more than ``decimals`` fractional digits, floats,
    negatives, zero and unit-less decimals (``"1.5"``: atomic or USDC?) are refused.
    """
    if isinstance(value, bool) or isinstance(value, float):
        raise ValueError(
            f"found {value!r} ({type(value).__name__}); expected an int of atomic units "
            "(1 USDC = 1000000) or a string like '1.5 USDC'; money is never a float"
        )
    if isinstance(value, int):
        atomic = value
    elif isinstance(value, str) and _ATOMIC.match(value):
        atomic = int(value)
    elif isinstance(value, str) and (m := _UNIT.match(value)):
        try:
            whole = Decimal(m.group(1))
        except InvalidOperation as exc:  # pragma: no cover - the regex admits only digits
            raise ValueError(f"found {value!r}; expected a decimal amount") from exc
        scaled = whole.scaleb(decimals)
        if scaled != scaled.to_integral_value():
            raise ValueError(
                f"found {value!r} with more than {decimals} decimal places; USDC has "
                f"{decimals}; fix: round the amount to {decimals} places"
            )
        atomic = int(scaled)
    else:
        raise ValueError(
            f"found {value!r}; expected an int of atomic units (1 USDC = 1000000) or a "
            "string with the unit, like '1.5 USDC'"
        )
    if atomic <= 0:
        raise ValueError(f"found {value!r}; expected a positive amount")
    return atomic


UsdcAmount = Annotated[int, BeforeValidator(parse_usdc_amount)]
"""Atomic USDC parsed from an int, a digit string or ``"1.5 USDC"``."""


def require_wallet(ctx: ToolContext, tool: str) -> AgentWallet:
    """The run's wallet; a PermanentToolError naming the fix when the run has none (a run's
    wallet does not change while it runs)."""
    if ctx.wallet is None:
        raise PermanentToolError(
            f"{tool}: no wallet is configured for this run; expected an unlocked wallet. "
            "Fix: create one with `nib wallet new` (or `nib devnet up` on the devnet)."
        )
    return ctx.wallet


def spend_cap(ctx: ToolContext, tool: str) -> int:
    """The run's spend cap (atomic USDC) the wallet reserves against; fail closed without it."""
    cap = ctx.spend_cap_atomic
    if isinstance(cap, bool) or not isinstance(cap, int) or cap <= 0:
        raise PermanentToolError(
            f"{tool}: the run's spend cap in the tool context is {ctx.spend_cap_atomic!r}; "
            "expected a positive "
            "int of atomic USDC (ToolContext.spend_cap_atomic). Nothing was signed. Fix: build "
            "the ToolContext with the run's limits."
        )
    return cap
