"""Replay recorded provider responses through httpx.MockTransport; nothing leaves the box.

A recording is a JSON file under ``recordings/`` with ``status``, ``headers`` and either
``body`` (JSON) or ``body_text`` (raw, for malformed bodies).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

RECORDINGS = Path(__file__).parent / "recordings"
T = TypeVar("T")


def recorded_response(name: str) -> httpx.Response:
    rec = json.loads((RECORDINGS / f"{name}.json").read_text())
    if "body_text" in rec:
        return httpx.Response(rec["status"], headers=rec["headers"], text=rec["body_text"])
    return httpx.Response(
        rec["status"], headers=rec["headers"], content=json.dumps(rec["body"]).encode()
    )


class Replay:
    """A MockTransport serving recordings in order and keeping every request it saw."""

    def __init__(self, *names: str | type[Exception]) -> None:
        self.queue = list(names)
        self.requests: list[httpx.Request] = []
        self.transport = httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.queue:
            raise AssertionError(f"unexpected extra request to {request.url}")
        item = self.queue.pop(0)
        if isinstance(item, type):
            raise item("simulated", request=request)  # type: ignore[call-arg]
        return recorded_response(item)

    def json(self, n: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[n].content)


@pytest.fixture
def replay() -> Callable[..., Replay]:
    return Replay


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@pytest.fixture
def arun() -> Callable[[Coroutine[Any, Any, Any]], Any]:
    return run


@pytest.fixture(scope="session")
def local_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """SmolLM2-135M behind ``llama_cpp.server`` on a free loopback port, once per session."""
    from _local_llm import local_server

    with local_server(tmp_path_factory.mktemp("llama")) as server:
        yield server
