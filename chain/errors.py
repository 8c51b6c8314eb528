"""Errors raised by the chain package.

Every message names what was found, what was expected, and the fix.

    ChainError                  root of everything this package raises
    ├── RpcUnreachable          the RPC URL does not answer
    ├── WrongChain              the RPC answers for another chain id than configured
    ├── RpcError                the node answered with a JSON-RPC error (carries its code)
    ├── TransactionReverted     a transaction was mined but reverted
    ├── UnknownNetwork          a network name that is not in the registry
    ├── AnvilMissing            no Anvil binary found where we look
    └── DevnetError             the local devnet could not be started, found or stopped
"""

from __future__ import annotations

import urllib.parse

from chain.http_proxy import is_loopback


class ChainError(Exception):
    """Root of every error raised by ``chain``."""


class RpcUnreachable(ChainError):
    """The RPC endpoint did not answer."""

    def __init__(self, url: str, detail: str = "", *, chain_id: int | None = None,
                 devnet: bool | None = None) -> None:
        self.url = url
        # The fix is the network's own: the devnet's is `nib devnet up`; any other chain's
        # node (a local one included) is the user's RPC to check, whatever its address.
        # ``devnet`` is the caller's knowledge of the chain; without it, a loopback guess.
        if devnet is None:
            devnet = chain_id is None and is_loopback(urllib.parse.urlsplit(url).hostname or "")
        hint = (
            "start the local devnet with `nib devnet up`"
            if devnet
            else f"check that the node at {url}"
            + (f" (chain {chain_id})" if chain_id else "")
            + " is up and reachable, or set NIB_RPC_URL to a working endpoint"
        )
        extra = f" ({detail})" if detail else ""
        super().__init__(f"RPC {url} is unreachable{extra}; expected a JSON-RPC node there. Fix: {hint}.")


class WrongChain(ChainError):
    """The node reports a different chain id than the configured network."""

    def __init__(self, url: str, expected: int, found: int) -> None:
        self.url, self.expected, self.found = url, expected, found
        super().__init__(
            f"RPC {url} is on chain id {found}, expected {expected}. Fix: point the RPC URL at a "
            f"node for chain {expected}, or select the network whose chain id is {found}."
        )


class RpcError(ChainError):
    """The node returned a JSON-RPC error."""

    def __init__(self, url: str, method: str, code: int | None, message: str) -> None:
        self.url, self.method, self.code = url, method, code
        super().__init__(
            f"RPC {url} refused {method}: error {code}: {message}. Fix: check the call's "
            "arguments and that the node supports this method."
        )


class TransactionReverted(ChainError):
    """A transaction was mined with status 0."""

    def __init__(self, tx_hash: str, what: str, reason: str = "") -> None:
        self.tx_hash = tx_hash
        why = f": {reason}" if reason else ""
        super().__init__(
            f"{what} reverted in transaction {tx_hash}{why}; expected status 1. Fix: check the "
            "sender's balance and the call's arguments, then send it again."
        )


class TokenDomainMismatch(ChainError):
    """The configured network pins a USDC EIP-712 domain the token itself does not report."""


class UnknownNetwork(ChainError):
    """A network name that is not registered."""


class AnvilMissing(ChainError):
    """No Anvil binary could be found."""


class DevnetError(ChainError):
    """The local devnet could not be started, inspected or stopped."""


def innermost(exc: BaseException) -> BaseException:
    """The exception a task group's wrapping hides (anyio wraps transport errors in one):
    the first one inside ``exc`` (through nested groups), or ``exc`` itself when it is no
    exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
