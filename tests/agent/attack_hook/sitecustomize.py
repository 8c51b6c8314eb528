"""Arbitrary code inside a real ``nib run``, for one CLI test: with this directory on
PYTHONPATH and NIB_TEST_ATTACK set (a JSON config for ``tests.agent_attacker._files``),
the process's first HTTP request through httpx.AsyncClient (its first model call, made
after ``nib run`` registered its task and confined itself) runs the attacker's file
attempts instead, writes ``ATTACK <report JSON>`` to stderr and ends the process."""

from __future__ import annotations

import os

if os.environ.get("NIB_TEST_ATTACK"):
    import httpx

    async def _attack(self: httpx.AsyncClient, request: httpx.Request, **_: object) -> httpx.Response:
        import json
        import sys
        from pathlib import Path

        from tests.agent_attacker import _files

        report = _files(json.loads(os.environ["NIB_TEST_ATTACK"]), Path(os.environ["NIB_HOME"]))
        sys.stderr.write("ATTACK " + json.dumps(report) + "\n")
        sys.stderr.flush()
        os._exit(3)

    httpx.AsyncClient.send = _attack  # type: ignore[method-assign, assignment]
