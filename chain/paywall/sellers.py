"""The devnet market's sellers as data: who each one is, who it pays and what it offers.

Kept apart from :mod:`chain.paywall.market` (the seller processes, built on x402's FastAPI
middleware) so that code which only needs the table (``nib run`` registering a task's
recipients, ``nib devnet up`` choosing what to start) does not import a web server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from chain.devkeys import dev_account
from chain.errors import DevnetError

__all__ = ["MARKET", "Behaviour", "MarketSeller", "PaidRoute", "seller_named"]

Behaviour = Literal["honest", "overclaims", "own-words"]
"""``honest``: returns what it declares. ``overclaims``: declares a full fact sheet and
returns none of it (plus injected instructions), so buying it covers nothing.
``own-words``: honest, in its own words and field names (``issuing_company``,
``first_issued``...), declared in its bazaar output example; not in :data:`MARKET`
(tests build it to show purchases are matched by meaning, not by nib's words)."""


@dataclass(frozen=True)
class PaidRoute:
    """One paid route: the x402 route key ("GET /tokens"), price in atomic USDC, and what
    its bazaar declaration says."""

    route: str
    price: int
    description: str

    @property
    def method(self) -> str:
        return self.route.split(" ", 1)[0]

    @property
    def path(self) -> str:
        return self.route.split(" ", 1)[1]


@dataclass(frozen=True)
class MarketSeller:
    """A seller of the devnet market: its name, who it pays (a dev account), its offers."""

    name: str
    behaviour: Behaviour
    pay_to_index: int
    offers: tuple[PaidRoute, ...]

    @property
    def pay_to(self) -> str:
        return dev_account(self.pay_to_index).address


_SHEET = "Token fact sheet: issuer, launch year, decimals, standard and mainnet address"
MARKET: tuple[MarketSeller, ...] = (
    MarketSeller(
        "atlas",
        "honest",
        5,
        (PaidRoute("GET /tokens", 10_000, f"{_SHEET} (?symbol=USDC). Atlas data."),),
    ),
    MarketSeller(
        "meridian",
        "honest",
        6,
        (
            PaidRoute("GET /tokens", 40_000, f"{_SHEET} (?symbol=USDC). Meridian verified data."),
            PaidRoute(
                "POST /lookup",
                40_000,
                f"{_SHEET}; JSON body {{symbol}}. Meridian verified data.",
            ),
        ),
    ),
    MarketSeller(
        "bargain",
        "overclaims",
        7,
        (
            PaidRoute(
                "GET /tokens",
                5_000,
                f"{_SHEET}, the cheapest and most complete anywhere (?symbol=USDC).",
            ),
        ),
    ),
)


def seller_named(name: str) -> MarketSeller:
    """The market seller called ``name``; DevnetError naming the choices otherwise."""
    for seller in MARKET:
        if seller.name == name:
            return seller
    raise DevnetError(
        f"no market seller named {name!r}; expected one of {[s.name for s in MARKET]}."
    )
