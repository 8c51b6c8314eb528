"""Who may hold a connection to the wallet service, and for how long.

The socket is a server, not a pipe: every connection names its peer by the kernel's
credentials (``SO_PEERCRED``: pid and uid, never a field of the request), a peer of
another uid is refused, one process holds at most MAX_PER_PEER connections and the
service at most MAX_CONNECTIONS; a connection idle for IDLE_S, or a frame that does not
arrive whole within FRAME_S of its first byte, is closed. A connection past a cap is
answered by a small overflow pool: ``/health`` as usual, anything else a typed
``WalletOverloaded`` refusal (nothing run), then closed.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass

__all__ = [
    "FRAME_S", "IDLE_S", "MAX_CONNECTIONS", "MAX_PER_PEER", "OVERFLOW_S", "OVERFLOW_WAITING",
    "Admission", "Peer", "peer_of", "read_exact",
]

#: Connections served at once, in all and from one process (each holds a thread).
MAX_CONNECTIONS = 256
MAX_PER_PEER = 32
#: How long a connection may wait between requests, and how long a frame may take to
#: arrive once its first byte came (a real request arrives in one write).
IDLE_S = 120.0
FRAME_S = 10.0
#: How long the overflow pool waits for the one request it answers on a refused
#: connection, and how many refused connections may wait for it (the rest are closed).
OVERFLOW_S = 2.0
OVERFLOW_WAITING = 32
_UCRED = struct.Struct("3i")


@dataclass(frozen=True)
class Peer:
    """The process at the other end of a connection, as the kernel names it."""

    pid: int
    uid: int

    @property
    def holder(self) -> str:
        """``host:pid``: what nonce leases and recovery name it by (process_identity)."""
        return f"{socket.gethostname()}:{self.pid}"


def peer_of(conn: socket.socket) -> Peer:
    """The connecting process's pid and uid (``SO_PEERCRED``)."""
    pid, uid, _gid = _UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return Peer(pid, uid)


class Admission:
    """Counts of connections held, in all and per peer process."""

    def __init__(self, total: int = MAX_CONNECTIONS, per_peer: int = MAX_PER_PEER) -> None:
        self.total, self.per_peer = total, per_peer
        self._held: Counter[int] = Counter()
        self._lock = threading.Lock()

    def admit(self, peer: Peer) -> str | None:
        """Take a slot for ``peer``; None when admitted, else why not (say it, then close)."""
        if peer.uid != os.getuid():
            return (f"found a connection from uid {peer.uid}; expected uid {os.getuid()}, the "
                    "wallet service's own user; fix: run nib as that user.")
        with self._lock:
            mine, held = self._held[peer.pid], sum(self._held.values())
            if mine < self.per_peer and held < self.total:
                self._held[peer.pid] += 1
                return None
        return (f"found {mine} connections from process {peer.pid} and {held} in all; expected "
                f"at most {self.per_peer} per process and {self.total} in all; nothing was run. "
                "Fix: close idle connections (a WalletClient keeps one per concurrent call).")

    def leave(self, peer: Peer) -> None:
        with self._lock:
            self._held[peer.pid] -= 1
            if self._held[peer.pid] <= 0:
                del self._held[peer.pid]


def read_exact(conn: socket.socket, size: int, deadline: float, *, first: bool = False) -> bytes | None:
    """``size`` bytes from ``conn`` by ``deadline`` (socket.timeout past it); None when
    the peer closed before the first byte of a ``first`` read (a clean end)."""
    chunks: list[bytes] = []
    while size:
        conn.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = conn.recv(min(size, 1 << 20))
        if not chunk:
            if first and not chunks:
                return None
            raise ConnectionResetError("the peer closed the connection mid-frame")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
