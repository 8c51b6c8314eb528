"""The wallet as its own process (``nib wallet serve``), and the client the agent uses.

The service is said once, in four modules, each with one job:

- :mod:`wallet.operations`: the table of operations (route, request, answer, refusals);
- :mod:`wallet.server`: the routes over a Unix socket in ``NIB_HOME`` and the process;
- :mod:`wallet.client`: :class:`WalletClient`, the agent's handle (no key);
- :mod:`wallet.wire`: the length-prefixed JSON frames and the records in them.

This module names the service's public parts in one place for the commands and tests.
"""

from __future__ import annotations

from wallet.client import DEFAULT_TIMEOUT_S, WalletClient
from wallet.server import (
    SOCKET_NAME,
    WalletServer,
    create_routes,
    database_identity,
    prepare_socket_dir,
    serve,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "SOCKET_NAME",
    "WalletClient",
    "WalletServer",
    "create_routes",
    "database_identity",
    "prepare_socket_dir",
    "serve",
]
