"""Who may hold a connection to the wallet service, and for how long.

The socket is a server, not a pipe: every connection names its peer by the kernel's
credentials (``SO_PEERCRED``: pid and uid, never a field of the request), a peer of
another uid is refused, one process holds at most MAX_PER_PEER connections (a new one
takes the slot of its own oldest idle connection, which is closed) and the service at
most MAX_CONNECTIONS. At that cap a newcomer takes a slot from someone else, counted by
**who** the connections are for, not by process (forking buys nothing): first the oldest
idle connection of a confined process that has proven no task (it can do nothing but
prove one, and costs its holder nothing to open again); else an idle connection of the
identity holding the most (a proven task, or one process of the user's), when it holds
more than the newcomer's would. So a flood of any number of processes, proven or not,
crowds out only itself, and a newcomer is refused only while every slot runs a request.
A connection idle for IDLE_S, or a frame that does not arrive whole within FRAME_S of its
first byte, is closed. A refused connection is answered by a small overflow pool:
``/health`` as usual, anything else a typed ``WalletOverloaded`` refusal (nothing run),
then closed.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "FRAME_S", "IDLE_S", "MAX_CONNECTIONS", "MAX_PER_PEER", "OVERFLOW_S", "OVERFLOW_WAITING",
    "UNPROVEN", "Admission", "Peer", "peer_of", "process_state", "read_exact",
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
    #: Its start time (clock ticks after boot, /proc/PID/stat): with the pid, one process
    #: for its whole life, never a later one that reuses the pid.
    started: int = 0
    #: Whether it runs confined as an agent process (no_new_privs or a seccomp filter,
    #: which agent.confine sets and nothing can unset). An unconfined process of the
    #: service's own user is the user: it can read the admin token and the database.
    confined: bool = True

    @property
    def key(self) -> tuple[int, int]:
        return (self.pid, self.started)

    @property
    def holder(self) -> str:
        """``host:pid``: what nonce leases and recovery name it by (process_identity)."""
        return f"{socket.gethostname()}:{self.pid}"


def peer_of(conn: socket.socket) -> Peer:
    """The connecting process's pid and uid (``SO_PEERCRED``), its start time and whether
    it is confined (read from /proc as the connection is taken in; a process that cannot
    be read counts as confined: it gets the least)."""
    pid, uid, _gid = _UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    started, confined = process_state(pid)
    return Peer(pid, uid, started, confined)


def process_state(pid: int) -> tuple[int, bool]:
    """``pid``'s start time and whether it is confined (see Peer); (0, True) when gone.

    Confined means more restricted than this service: no_new_privs, or more seccomp
    filters, than the service itself has (a container may put every process under one)."""
    found = _read_state(pid)
    if found is None:
        return 0, True
    started, restrictions = found
    own = _read_state(os.getpid())
    return started, own is None or any(p > o for p, o in zip(restrictions, own[1], strict=True))


def _read_state(pid: int) -> tuple[int, tuple[int, int]] | None:
    """``pid``'s start time and (no_new_privs, seccomp filters) from /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:  # noqa: PTH123
            fields = stat.read().rsplit(b")", 1)[1].split()
        with open(f"/proc/{pid}/status", "rb") as status:  # noqa: PTH123
            lines = dict(line.split(b":", 1) for line in status.read().splitlines() if b":" in line)
        no_new_privs = int(lines.get(b"NoNewPrivs", b"0"))
        # Seccomp_filters (Linux 5.9+); before it, a filter shows as mode 2.
        filters = int(lines.get(b"Seccomp_filters", b"1" if int(lines.get(b"Seccomp", b"0")) else b"0"))
        return int(fields[19]), (no_new_privs, filters)  # stat's field 22; fields[0] is 3
    except (OSError, IndexError, ValueError):
        return None


#: The identity of a confined process that has proven no task (see Admission).
UNPROVEN = ""


class Admission:
    """The connections held, per peer process, and which are running a request.

    ``identity`` names who a peer's connections are for (``UNPROVEN`` for a confined
    process that proved no task); by default each process is its own identity."""

    def __init__(
        self,
        total: int = MAX_CONNECTIONS,
        per_peer: int = MAX_PER_PEER,
        identity: Callable[[Peer], str] | None = None,
    ) -> None:
        self.total, self.per_peer = total, per_peer
        self._identity = identity or (lambda peer: f"process {peer.pid}")
        self._held: dict[int, list[socket.socket]] = {}  # pid -> its connections, oldest first
        self._peers: dict[socket.socket, Peer] = {}  # every connection held, oldest first
        self._busy: set[socket.socket] = set()
        self._lock = threading.Lock()

    def admit(self, peer: Peer, conn: socket.socket) -> str | None:
        """Take a slot for ``conn``; None when admitted, else why not (say it, then close).

        A process at its cap gets the slot of its own oldest idle connection (closed): a
        process that hoards connections crowds out only itself."""
        if peer.uid != os.getuid():
            return (f"found a connection from uid {peer.uid}; expected uid {os.getuid()}, the "
                    "wallet service's own user; fix: run nib as that user.")
        evict = None
        with self._lock:
            mine = self._held.setdefault(peer.pid, [])
            held = sum(len(c) for c in self._held.values())
            if len(mine) >= self.per_peer:
                evict = self._idle_of(mine)
            elif held >= self.total:
                evict = self._fair_share(peer)
            if evict is None and (len(mine) >= self.per_peer or held >= self.total):
                if not mine:
                    del self._held[peer.pid]
                return (f"found {len(mine)} connections from process {peer.pid}, each running a "
                        f"request, and {held} in all; expected at most {self.per_peer} per "
                        f"process and {self.total} in all; nothing was run. Fix: wait for the "
                        "calls under way, or close idle connections.")
            mine.append(conn)
            self._peers[conn] = peer
        if evict is not None:
            with contextlib.suppress(OSError):
                evict.shutdown(socket.SHUT_RDWR)
        return None

    def _idle_of(self, conns: list[socket.socket]) -> socket.socket | None:
        """The oldest of ``conns`` not running a request, taken out (to close)."""
        evict = next((c for c in conns if c not in self._busy), None)
        if evict is not None:
            self._take(evict)
        return evict

    def _take(self, conn: socket.socket) -> socket.socket:
        peer = self._peers.pop(conn)
        mine = self._held.get(peer.pid, [])
        if conn in mine:
            mine.remove(conn)
        return conn

    def _fair_share(self, newcomer: Peer) -> socket.socket | None:
        """At the total cap, the slot of the oldest idle connection of a confined process
        that proved no task; else of an idle connection of the identity holding the most,
        if it holds more than the newcomer's would (its count + 1): many processes that
        fill the service between them crowd out only each other, and an identity holding
        few connections is always let in. None when no such connection is idle."""
        ids = {conn: self._identity(peer) for conn, peer in self._peers.items()}
        idle = [conn for conn in ids if conn not in self._busy]
        unproven = next((conn for conn in idle if ids[conn] == UNPROVEN), None)
        if unproven is not None:
            return self._take(unproven)
        counts = Counter(ids.values())
        have = counts.get(self._identity(newcomer), 0)
        for who, n in counts.most_common():
            if n <= have + 1:
                return None
            evict = next((conn for conn in idle if ids[conn] == who), None)
            if evict is not None:
                return self._take(evict)
        return None

    def running(self, conn: socket.socket, busy: bool) -> None:
        """Mark ``conn`` as running a request (never evicted) or idle again."""
        with self._lock:
            (self._busy.add if busy else self._busy.discard)(conn)

    def leave(self, peer: Peer, conn: socket.socket) -> None:
        with self._lock:
            self._busy.discard(conn)
            self._peers.pop(conn, None)
            mine = self._held.get(peer.pid, [])
            if conn in mine:
                mine.remove(conn)
            if not mine:
                self._held.pop(peer.pid, None)


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
