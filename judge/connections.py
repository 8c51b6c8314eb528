"""Connections to a local service, kept for reuse (the judge's and the wallet's clients),
and the per-process thread pools that read the chain beside them.
"""

from __future__ import annotations

import http.client
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, Protocol, TypeVar

__all__ = ["STALE", "ConnectionPool", "thread_pool"]

#: Failures of a reused kept-alive HTTP connection before any answer arrived: the server
#: had closed it (its idle timeout), so the request never reached it and may be sent
#: once more on a new connection.
STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)

_POOLS: dict[str, tuple[int, ThreadPoolExecutor]] = {}
_POOLS_LOCK = threading.Lock()


def thread_pool(name: str, workers: int = 8) -> ThreadPoolExecutor:
    """This process's thread pool called ``name``, made on first use. Keyed by process: a
    pool inherited through fork has no threads in the child and would never run what is
    submitted to it."""
    with _POOLS_LOCK:
        held = _POOLS.get(name)
        if held is None or held[0] != os.getpid():
            held = _POOLS[name] = (os.getpid(), ThreadPoolExecutor(workers, thread_name_prefix=name))
        return held[1]


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class ConnectionPool(Generic[C]):
    """Connections to a service kept for reuse, one per concurrent call (clients are
    called from several threads); a connection serves one call at a time. An idle
    connection the service closed meanwhile (readable while idle) is dropped, as is one
    idle for ``idle_s`` or longer when given (before servers commonly drop theirs), and a
    forked child never shares its parent's connections."""

    def __init__(
        self,
        connect: Callable[[], C],
        stream: Callable[[C], socket.socket | None],
        *,
        idle_s: float | None = None,
    ) -> None:
        self._connect = connect
        self._stream = stream
        self._idle_s = idle_s
        self._idle: list[tuple[float, C]] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def take(self) -> tuple[C, bool]:
        """A connection, and whether it is a reused one."""
        now = time.monotonic()
        with self._lock:
            if self._pid != os.getpid():
                self._idle, self._pid = [], os.getpid()
            while self._idle:
                since, conn = self._idle.pop()
                sock = self._stream(conn)
                fresh = self._idle_s is None or now - since < self._idle_s
                if fresh and sock is not None and not _readable(sock):
                    return conn, True
                conn.close()
        return self._connect(), False

    def give_back(self, conn: C) -> None:
        with self._lock:
            self._idle.append((time.monotonic(), conn))

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for _, conn in idle:
            conn.close()


def _readable(sock: socket.socket) -> bool:
    """Whether ``sock`` has data or an end waiting (poll, not select: select() cannot
    take a descriptor numbered 1024 or above, and a busy service holds more than that)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(0))
