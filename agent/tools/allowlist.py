"""The user's allowlist (NIB_SELLER_ALLOWLIST): the seller origins nib may buy from and the
0x addresses it may pay, read by one parser. An entry no request could reach or no payment
could go to is the user's mistake, refused when the settings load, never skipped."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from agent.errors import AgentConfigError
from agent.tools.address import checked_address
from chain.seller_url import seller_url

__all__ = ["ALLOWLIST_SETTING", "SETTING", "Allowlist", "parse_allowlist"]

#: The setting that holds the allowlist (``seller_allowlist`` in config.toml).
SETTING = "NIB_SELLER_ALLOWLIST"
#: The setting as refusals name it, with what goes in it.
ALLOWLIST_SETTING = f"{SETTING} (comma-separated origins, e.g. http://127.0.0.1:8402)"
_ORIGIN = "http://127.0.0.1:8402"


@dataclass(frozen=True)
class Allowlist:
    """An allowlist's entries by kind, in the order given, without repeats. ``sellers``:
    seller origins as written (http or https, a host, a port from 1 to 65535); a purchase
    may be made from each one's origin. ``addresses``: recipients, lower case."""

    sellers: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()

    @property
    def entries(self) -> tuple[str, ...]:
        """Every entry: the sellers, then the addresses."""
        return (*self.sellers, *self.addresses)


def parse_allowlist(entries: str | Iterable[str]) -> Allowlist:
    """``entries`` (the setting's comma-separated text, or the entries themselves) as an
    :class:`Allowlist`; an AgentConfigError naming the first bad entry, what an entry
    must be and the fix. An entry is a seller origin, checked by the rules every URL a
    paid tool requests is (chain.seller_url), or a 0x address, checked as
    an address argument is (agent.tools.address)."""
    items = entries.split(",") if isinstance(entries, str) else entries
    return _parse(tuple(e.strip() for e in items if e.strip()))


@functools.lru_cache(maxsize=64)  # read by paid tools on every call; the entries never change
def _parse(entries: tuple[str, ...]) -> Allowlist:
    sellers: dict[str, None] = {}
    addresses: dict[str, None] = {}
    for entry in entries:
        try:
            if entry[:2].lower() == "0x":
                addresses.setdefault(checked_address(entry).lower(), None)
            elif "://" in entry:
                seller_url(entry, what=f"seller origin in {SETTING}", example=_ORIGIN)
                sellers.setdefault(entry, None)
            else:
                raise ValueError(
                    f"found {entry!r}, which is neither a seller origin nor a 0x address; "
                    f"expected http(s)://host[:port] (e.g. {_ORIGIN}) or 0x and 40 hex digits. "
                    f"Fix: write a seller's origin with its scheme (http://{entry} if it is a "
                    "host and port), an address in full"
                )
        except ValueError as exc:
            raise AgentConfigError(
                f"{SETTING}: {exc}; or drop the entry (entries are comma-separated)",
                source=SETTING,
            ) from exc
    return Allowlist(tuple(sellers), tuple(addresses))
