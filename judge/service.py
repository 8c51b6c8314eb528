"""The judge as its own HTTP service on loopback, and the client the agent uses.

The service is said once, in modules with one job each:

- :mod:`judge.operations`: the table of operations (method, route, access, request,
  answer, refusals);
- :mod:`judge.server`: the routes and the process (``nib judge serve``);
- :mod:`judge.gate`: the body-size and token gates in front of the routes;
- :mod:`judge.client`: :class:`JudgeClient`, what the agent and the wallet ask with;
- :mod:`judge.connections`, :mod:`judge.hardening`, :mod:`judge.wire`: the kept
  connections, the process hardening and the JSON readers both services share.

This module names the service's public parts in one place for the commands and tests.
"""

from __future__ import annotations

from judge.client import DEFAULT_TIMEOUT_S, JudgeClient
from judge.connections import ConnectionPool
from judge.hardening import refuse_inspection
from judge.server import JudgeServer, create_app, serve

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ConnectionPool",
    "JudgeClient",
    "JudgeServer",
    "create_app",
    "refuse_inspection",
    "serve",
]
