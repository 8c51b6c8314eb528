"""Money constants and USDC display: one home for the agent, the wallet and the devnet.

Money is an ``int`` in atomic units (USDC has 6 decimals, gas is wei); a ``Decimal``
only for display. Gas counts against the USDC spend cap at one ETH price, set once
(``NIB_ETH_PRICE_USDC``) and held by the wallet's meter, which the loop's cap
projection reads too. (The judge formats amounts itself: it imports nothing of ours.)
"""

from __future__ import annotations

from decimal import Decimal

__all__ = [
    "ATOMIC_PER_USDC",
    "DEFAULT_ETH_PRICE_USDC",
    "USDC_DECIMALS",
    "WEI_PER_ETH",
    "format_usdc",
    "gas_to_usdc",
    "usdc_decimal",
]

USDC_DECIMALS = 6
ATOMIC_PER_USDC = 10**USDC_DECIMALS
WEI_PER_ETH = 10**18
#: Whole USDC per ETH when counting gas against the cap: deliberately high, so the
#: dollar cap errs on the side of stopping early.
DEFAULT_ETH_PRICE_USDC = 3_000


def gas_to_usdc(wei: int, eth_price_usdc: int) -> int:
    """``wei`` of gas as atomic USDC at ``eth_price_usdc`` whole USDC per ETH, rounded
    up (never under-count what gas costs against the cap)."""
    return -(-wei * eth_price_usdc * ATOMIC_PER_USDC // WEI_PER_ETH)


def usdc_decimal(atomic: int, decimals: int = USDC_DECIMALS) -> Decimal:
    """Atomic units as a whole-token ``Decimal`` (display and reports only)."""
    return Decimal(atomic).scaleb(-decimals)


def format_usdc(atomic: int, decimals: int = USDC_DECIMALS) -> str:
    """``1500000`` -> ``"1.50 USDC"``: exact, at least two decimals, never a float."""
    value = usdc_decimal(atomic, decimals)
    text = format(value.quantize(Decimal(1).scaleb(-decimals)).normalize(), "f")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.ljust(2, '0')} USDC"
