"""Serving the devnet's x402 processes: an ASGI app on a loopback port, in a thread or in
the foreground of its own process (``nib devnet up`` starts one process per service).
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp

from chain.errors import DevnetError

__all__ = ["AppServer", "serve_forever", "service_parser", "wait_for_service"]

_READY_TIMEOUT_S = 60.0  # a bound on failure (polled), sized for a loaded two-core machine


class AppServer:
    """An ASGI app served by uvicorn in a background thread; a context manager.

    ``url`` is ``http://host:port`` once started (port 0 picks a free one).
    """

    def __init__(
        self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, name: str, lifespan: bool = False
    ) -> None:
        self.app = app
        #: Run the app's startup/shutdown (an MCP streamable HTTP server's session manager).
        self._lifespan = "on" if lifespan else "off"
        self.name = name
        self._host = host
        self._port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def __repr__(self) -> str:
        return f"AppServer(name={self.name!r}, url={self.url!r})"

    def start(self) -> AppServer:
        """Start serving; return once the socket is bound, or raise DevnetError."""
        config = uvicorn.Config(
            self.app, host=self._host, port=self._port, log_level="warning",
            lifespan=self._lifespan,  # type: ignore[arg-type]
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name=f"nib-{self.name}", daemon=True)
        thread.start()
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                raise DevnetError(
                    f"the {self.name} did not start on {self._host}:{self._port} within "
                    f"{_READY_TIMEOUT_S:.0f}s; expected a bound socket. Fix: pick a free port."
                )
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        self._server, self._thread = server, thread
        self.url = f"http://{self._host}:{port}"
        return self

    def stop(self) -> None:
        """Stop serving and join the thread (idempotent)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> AppServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(
    server: AppServer,
    *,
    url_file: str | Path | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Run ``server`` until SIGTERM/SIGINT: print its URL, write it to ``url_file``
    atomically (readiness for ``nib devnet up``), then call ``on_ready(url)``."""
    stop = threading.Event()
    with server:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        if on_ready is not None:
            on_ready(server.url)
        if url_file is not None:
            path = Path(url_file)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(server.url + "\n", encoding="utf-8")
            os.replace(tmp, path)
        print(server.url, flush=True)
        stop.wait()


def wait_for_service(url: str, timeout_s: float = 30.0) -> None:
    """Poll ``url`` until it answers 200 (a service started beside this one), or raise
    DevnetError naming it; lets the devnet start every process at once."""
    import httpx

    from chain.http_proxy import proxy_for
    from chain.tls import tls_context

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url, timeout=1.0, trust_env=False, proxy=proxy_for(url),
                         verify=tls_context()).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise DevnetError(
                f"{url} did not answer within {timeout_s:.0f}s; expected the devnet "
                "facilitator service. Fix: start it first (`nib devnet up` does)."
            )
        time.sleep(0.1)


def service_parser(module: str, *, market: bool) -> argparse.ArgumentParser:
    """The command line every devnet service shares (``python -m module``): where to bind,
    where to write the bound URL, the chain id, and for the market's sellers the
    facilitator service to settle through, the USDC they sell for and the RPC its
    EIP-712 domain is read from (``chain.usdc.token_domain``)."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--url-file", help="write the bound URL here once serving")
    parser.add_argument("--chain-id", type=int, default=None, help="expected chain id (default: the RPC's)")
    if market:
        parser.add_argument("--facilitator-url", required=True)
        parser.add_argument("--usdc", required=True, help="TestUSDC address on that chain")
        parser.add_argument(
            "--rpc-url", required=True, help="the chain's RPC: the token's EIP-712 domain is read there"
        )
    return parser
