"""Red team: the wallet service's wire (length-prefixed JSON on its Unix socket) against
what an agent process can send it: a huge declared length, JSON nested past the parser's
recursion limit, frames that are not requests, and hundreds of connections held open.
Each is refused or outlasted; the service then still answers and signs nothing."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time
from pathlib import Path
from typing import Any

from chain import devnet
from tests._services import Composition


def _exchange(path: str, payload: bytes, declared: int | None = None) -> bytes:
    """Send one frame (``declared`` overrides its length) and read what comes back
    until the service closes or answers one frame."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(struct.pack(">I", len(payload) if declared is None else declared) + payload)
        if declared is not None:
            s.shutdown(socket.SHUT_WR)
        data = b""
        with contextlib.suppress(OSError):
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                if len(data) >= 4 and len(data) >= 4 + struct.unpack(">I", data[:4])[0]:
                    break
        return data


def test_the_wallet_service_outlasts_malformed_frames_and_held_connections(
    chain: Any, service_forks: Any, tmp_path: Path
) -> None:
    comp = Composition("services", chain, forks=service_forks)
    try:
        services = comp.start(tmp_path / "nib.db")
        path = str(services.wallet.socket_path)
        huge = _exchange(path, b"", declared=0xFFFFFFFF)
        assert b"expected at most" in huge, huge[:300]
        nested = _exchange(path, b"[" * 200_000 + b"]" * 200_000)
        assert b"JSON arrays and objects in one request" in nested, nested[:300]
        not_request = _exchange(path, json.dumps([1, 2]).encode())
        assert b'"status":422' in not_request, not_request[:300]
        no_route = _exchange(path, json.dumps({"route": "/v1/../health", "body": {}}).encode())
        assert b'"status":404' in no_route, no_route[:300]
        held = []
        for _ in range(300):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            s.sendall(struct.pack(">I", 1000) + b"{")  # a frame begun, never finished
            held.append(s)
        started = time.monotonic()
        address = services.wallet.address
        answered_in = time.monotonic() - started
        for s in held:
            s.close()
        alive = devnet.pid_alive(services.pids[1])
    finally:
        comp.close()
    assert alive
    assert address.startswith("0x") and answered_in < 5, answered_in
