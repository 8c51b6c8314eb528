"""The one rule for a 0x address that a user or a model writes: 0x and 40 hex digits, and
a mixed-case one only with a valid EIP-55 checksum, so a typo in a checksummed address is
refused rather than paid. Tool arguments and the allowlist both check with it."""

from __future__ import annotations

import re

__all__ = ["checked_address"]

_HEX40 = re.compile(r"^0x[0-9a-fA-F]{40}\Z")


def checked_address(value: str) -> str:
    """``value`` unchanged when it is an address, else a ValueError that says what was
    found, what was expected and the fix."""
    if not _HEX40.match(value):
        raise ValueError(
            f"found {value!r}; expected a 0x-prefixed 20-byte hex address (0x + 40 hex digits), "
            "e.g. 0x70997970C51812dc3A010C7d01b50e0d17dc79C8; fix: copy the whole address (42 "
            "characters)"
        )
    body = value[2:]
    if body != body.lower() and body != body.upper():
        # Only a mixed-case address carries a checksum, and only checking it needs keccak.
        from eth_utils import is_checksum_address

        if not is_checksum_address(value):
            raise ValueError(
                f"found {value!r} whose mixed case is not a valid EIP-55 checksum (a typo?); "
                "expected the checksum form or all lower case; fix: copy the address again"
            )
    return value
