"""The wallet as its own process (``nib wallet serve``), and the client the agent uses.

The signer process is the only one that unlocks the keystore; the agent process holds a
:class:`WalletClient` and never key material. The channel is a Unix domain socket in
``NIB_HOME`` (created 0600 in a 0700 directory), not loopback HTTP with a token: the
kernel checks the socket file's owner on every connect, so there is no token that could
leak through an environment, a child process or a log, and no port another local user
could reach. Every check of :class:`~wallet.signer.Wallet` runs in the service (with the
judge's re-check, which consumes the verdict where it was issued); refusals travel as
``{"error": {"type", "code", "message"}}`` and are raised again as the same
:mod:`wallet.errors` class. A service that does not answer in time is
:class:`~wallet.errors.WalletUnreachable`.

The wire is length-prefixed JSON (a 4-byte big-endian length, then that many bytes of
UTF-8 JSON), one request and one answer at a time on a connection the client keeps:
``{"route": "/v1/sign-typed-data", "body": {...}}`` answered by ``{"status": 200,
"data": {...}}`` or ``{"status": 409|422|404, "error": {...}}``. Each connection is
served by its own thread, which runs the wallet call itself. Chosen over HTTP because
only our own client speaks to this socket, and HTTP's framing, routing and thread hops
cost ~1-3 ms a call on the paid path where this costs ~0.05 ms (bench/services.py).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import socketserver
import stat
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import ParamSpec

from judge.service import ConnectionPool, refuse_inspection
from judge.storage import describe, is_url, process_identity
from judge.verdict import Verdict, parse_verdict
from judge.wire import from_wire, wire_int, wire_object, wire_str
from wallet import errors
from wallet.errors import LedgerError, SpendRefused, WalletError, WalletUnreachable
from wallet.ledger import SpendRow
from wallet.meter import Reservation, RunSpend
from wallet.nonces import acting_for
from wallet.recovery import RunRecovery
from wallet.signed import SentTx, SignedTx, SignedTypedData
from wallet.signer import Wallet

__all__ = ["SOCKET_NAME", "WalletClient", "WalletServer", "create_routes", "serve"]

SOCKET_NAME = "wallet.sock"
DEFAULT_TIMEOUT_S = 75.0  # a send waits for its receipt (the wallet waits up to 60 s)
_API = "/v1"
#: The fields of a wallet error that cross the wire with its message and code (what the
#: agent's handlers read: SpendRefused's verdict and limits, SettlementUnproven's finding).
_ERROR_FIELDS = ("verdict_id", "limit", "observed", "finding", "tx_hash")
#: The largest frame either side reads; real requests and answers are a few KiB.
MAX_FRAME_BYTES = 1024 * 1024
_LENGTH = struct.Struct(">I")
#: The most JSON arrays and objects a request may open (it bounds their nesting). Real
#: requests open a few dozen; a frame of nested brackets parsed as it came overflowed the
#: C stack of the service's thread and killed the wallet (py_ecc, imported with
#: eth_account, raises the recursion limit to 100000, past what a thread's stack holds).
MAX_JSON_CONTAINERS = 10_000

Route = Callable[[Mapping[str, object]], dict[str, object]]


def _signed_to_wire(signed: SignedTypedData | SignedTx) -> dict[str, object]:
    return {"kind": type(signed).__name__, **asdict(signed)}


def _signed_from_wire(data: object) -> SignedTypedData | SignedTx:
    fields = dict(wire_object("signed", data))
    kind = fields.pop("kind", None)
    cls: type[SignedTypedData | SignedTx] = SignedTx if kind == "SignedTx" else SignedTypedData
    return from_wire(cls, fields)


# ------------------------------------------------------------------------------ wire


class _FrameTooLarge(ValueError):
    pass


def _frame(message: Mapping[str, object]) -> bytes:
    data = json.dumps(message, separators=(",", ":")).encode()
    return _LENGTH.pack(len(data)) + data


def _parse(data: bytes) -> object:
    """A request frame's JSON, refused (ValueError) before parsing when it opens more
    than MAX_JSON_CONTAINERS arrays and objects."""
    opened = data.count(b"[") + data.count(b"{")
    if opened > MAX_JSON_CONTAINERS:
        raise ValueError(
            f"found {opened} JSON arrays and objects in one request; expected at most "
            f"{MAX_JSON_CONTAINERS}; fix: send the fields WalletClient sends, nothing more."
        )
    return json.loads(data)


def _length(header: bytes) -> int:
    (size,) = _LENGTH.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise _FrameTooLarge(
            f"found a frame of {size} bytes; expected at most {MAX_FRAME_BYTES} bytes; "
            "fix: send the fields WalletClient sends, nothing more."
        )
    return int(size)


P = ParamSpec("P")


class _Relay:
    """The wallet's audit events (reserve and sign, refuse, broadcast, settle, fail),
    handed back with the answer to the request that caused them, so they join the run's
    trace in the agent's store (the service writes no run table; its record is the
    ledger). Each request is served in one thread: events are collected per thread."""

    def __init__(self) -> None:
        self._local = threading.local()

    def emit(self, name: str, data: Mapping[str, object]) -> None:
        events: list[dict[str, object]] | None = getattr(self._local, "events", None)
        if events is not None:
            events.append({"type": name, "data": {**data, "by": f"wallet service pid {os.getpid()}"}})

    def relayed(self, route: Callable[P, dict[str, object]]) -> Callable[P, dict[str, object]]:
        """``route`` answering with ``"events"``; a refusal carries them in its error."""

        @functools.wraps(route)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> dict[str, object]:
            events: list[dict[str, object]] = []
            self._local.events = events
            try:
                return {**route(*args, **kwargs), "events": events}
            except WalletError as exc:
                exc.relayed_events = events  # type: ignore[attr-defined]
                raise
            finally:
                self._local.events = None

        return wrapper


# Long by design: the routes are closures over the state this factory builds (one
# wallet, one relay); split apart they would each take the same state.
def create_routes(wallet: Wallet) -> dict[str, Route]:
    """``wallet``'s signing and money-state calls by route; the wallet's events of each
    call travel back in its answer (see :class:`_Relay`)."""
    relay, own = _Relay(), wallet.emit

    def emit(name: str, data: dict[str, object]) -> None:
        relay.emit(name, data)
        if own is not None:
            own(name, data)

    wallet.emit = emit
    routes: dict[str, Route] = {}

    def route(path: str) -> Callable[[Route], Route]:
        def register(fn: Route) -> Route:
            routes[_API + path] = fn
            return fn

        return register

    def verdict_of(body: Mapping[str, object]) -> Verdict | None:
        raw = body.get("verdict")
        return None if raw is None else parse_verdict(wire_object("verdict", raw))

    @route("/health")
    def health(_: Mapping[str, object]) -> dict[str, object]:
        return {
            "address": wallet.address,
            "usdc": wallet.usdc,
            "eth_price_usdc": wallet.meter.eth_price_usdc,
            "database": database_identity(wallet.meter.store.path),
        }

    @route("/sign-typed-data")
    @relay.relayed
    def sign_typed_data(body: Mapping[str, object]) -> dict[str, object]:
        signed = wallet.sign_typed_data(
            wire_object("payload", body["payload"]),
            verdict_of(body),
            run_id=str(body["run_id"]),
            cap=wire_int(body["cap"]),
            resource=wire_str(body.get("resource")),
        )
        return _signed_to_wire(signed)

    @route("/sign-transaction")
    @relay.relayed
    def sign_transaction(body: Mapping[str, object]) -> dict[str, object]:
        signed = wallet.sign_transaction(
            wire_object("payload", body["payload"]),
            verdict_of(body),
            run_id=str(body["run_id"]),
            cap=wire_int(body["cap"]),
        )
        return _signed_to_wire(signed)

    def stored(body: Mapping[str, object]) -> SignedTypedData | SignedTx:
        # The agent names a signed record; the service trusts only its own ledger row.
        signed = _signed_from_wire(body["signed"])
        row = wallet.meter.ledger.get(signed.reservation.id)
        if row.verdict_id != signed.verdict_id or row.run_id != signed.run_id:
            raise LedgerError(
                f"found a signed record for ledger row {row.id} that does not match it "
                f"(verdict {signed.verdict_id} vs {row.verdict_id}); expected the record the "
                "wallet handed out; fix: send the record exactly as it was returned."
            )
        return signed

    @route("/send-transaction")
    @relay.relayed
    def send_transaction(body: Mapping[str, object]) -> dict[str, object]:
        signed = stored(body)
        if not isinstance(signed, SignedTx):
            raise LedgerError("found a typed-data record; expected a signed transaction.")
        with acting_for(wire_str(body.get("holder"))):  # a refused broadcast releases the worker's number
            return asdict(wallet.send_transaction(signed))

    @route("/settle")
    @relay.relayed
    def settle(body: Mapping[str, object]) -> dict[str, object]:
        wallet.settle(stored(body), str(body["tx_hash"]))
        return {"ok": True}

    @route("/fail")
    @relay.relayed
    def fail(body: Mapping[str, object]) -> dict[str, object]:
        wallet.fail(stored(body), str(body["note"]))
        return {"ok": True}

    @route("/usage")
    def usage(body: Mapping[str, object]) -> dict[str, object]:
        return asdict(wallet.meter.usage(str(body["run_id"])))

    @route("/settle-row")
    @relay.relayed
    def settle_row(body: Mapping[str, object]) -> dict[str, object]:
        # Settles only what the chain proves (Wallet.settle checks the receipt's logs).
        wallet.settle(wallet.spend_row(str(body["spend_id"])), str(body["tx_hash"]))
        return {"ok": True}

    @route("/keep-payment")
    @relay.relayed
    def keep_payment(body: Mapping[str, object]) -> dict[str, object]:
        signed = stored(body)
        if not isinstance(signed, SignedTypedData):
            raise LedgerError("found a transaction record; expected a signed authorization.")
        wallet.keep_payment(signed, (str(body["name"]), str(body["value"])))
        return {"ok": True}

    @route("/live-authorization")
    def live_authorization(body: Mapping[str, object]) -> dict[str, object]:
        row = wallet.live_authorization(str(body["resource"]))
        return {"row": None if row is None else _row_to_wire(row)}

    @route("/spend-row")
    def spend_row(body: Mapping[str, object]) -> dict[str, object]:
        return {"row": _row_to_wire(wallet.spend_row(str(body["spend_id"])))}

    @route("/keep-signed")
    @relay.relayed
    def keep_signed(body: Mapping[str, object]) -> dict[str, object]:
        wallet.meter.keep_signed(str(body["reservation_id"]), str(body["note"]))
        return {"ok": True}

    def nonce_op(op: str) -> Route:
        def run(body: Mapping[str, object]) -> dict[str, object]:
            manager = wallet.nonces
            # Numbers are held by the calling worker process, so its recovery finds them.
            with acting_for(wire_str(body.get("holder"))):
                if op == "allocate":
                    return {"value": manager.allocate()}
                if op == "resync":
                    return {"value": manager.resync()}
                if op == "claim":
                    return {"value": manager.claim(wire_int(body["n"]))}
                getattr(manager, op)(wire_int(body["n"]))
                return {"value": None}

        return run

    for op in ("allocate", "resync", "claim", "confirm", "release"):
        routes[f"{_API}/nonces/{op}"] = nonce_op(op)

    @route("/recover-run")
    @relay.relayed
    def recover_run(body: Mapping[str, object]) -> dict[str, object]:
        # A worker whose lease ran out: its run's money state, in the one signer.
        return asdict(
            wallet.recover_run(str(body["run_id"]), str(body["holder"]), str(body["why"]))
        )

    return routes


def _refusal(exc: WalletError) -> dict[str, object]:
    """A refusal as it travels: its class, code, message, named fields and events."""
    body: dict[str, object] = {"type": type(exc).__name__, "code": exc.code, "message": str(exc)}
    for name in _ERROR_FIELDS:
        if getattr(exc, name, None) is not None:
            body[name] = getattr(exc, name)
    body["events"] = getattr(exc, "relayed_events", [])
    return {"status": 409 if isinstance(exc, SpendRefused) else 422, "error": body}


def _malformed(detail: str) -> dict[str, object]:
    message = (
        f"found a malformed request ({detail}); expected the fields WalletClient sends; "
        "fix: use wallet.service.WalletClient."
    )
    return {"status": 422, "error": {"type": "WalletError", "code": "wallet-error", "message": message}}


def _answer(routes: Mapping[str, Route], request: object) -> dict[str, object]:
    """The answer to one request: the route's data, or a refusal that names the fix."""
    if not isinstance(request, dict) or not isinstance(request.get("body"), dict):
        return _malformed("expected an object with 'route' and a 'body' object")
    path = request.get("route")
    handler = routes.get(path) if isinstance(path, str) else None
    if handler is None:
        answer = _malformed(f"no route {path!r}; expected one of {sorted(routes)}")
        return {**answer, "status": 404}
    try:
        return {"status": 200, "data": handler(request["body"])}
    except WalletError as exc:
        return _refusal(exc)
    except (KeyError, TypeError, ValueError) as exc:
        return _malformed(f"{type(exc).__name__}: {exc}")
    except Exception:  # noqa: BLE001 - the service stays up; the caller learns it failed
        traceback.print_exc(file=sys.stderr)
        return {"status": 500}


class _Connection(socketserver.StreamRequestHandler):
    """One client connection: requests answered in turn, in this connection's thread."""

    server: _SocketServer

    def handle(self) -> None:
        self.server.opened(self.connection)
        try:
            while True:
                header = self.rfile.read(_LENGTH.size)
                if len(header) < _LENGTH.size:
                    return  # the client closed the connection
                try:
                    data = self.rfile.read(_length(header))
                    request = _parse(data)
                except _FrameTooLarge as exc:
                    self.wfile.write(_frame(_malformed(str(exc))))
                    return  # the rest of the frame is not read: the connection ends
                except ValueError as exc:
                    request = exc
                if not self.server.begin():
                    self.wfile.write(_frame(_STOPPING))
                    return
                try:
                    answer = (
                        _malformed(f"not JSON: {request}")
                        if isinstance(request, ValueError)
                        else _answer(self.server.routes, request)
                    )
                finally:
                    self.server.end()
                self.wfile.write(_frame(answer))
        except OSError:
            return  # the client went away mid-answer
        finally:
            self.server.closed(self.connection)


#: The answer to a request that arrives while the service stops: not run, so nothing signed.
_STOPPING: dict[str, object] = {"status": 503}
#: How long a stopping service lets the requests it is running finish (a send waits up
#: to 60 s for its receipt; a signature takes milliseconds).
STOP_GRACE_S = 10.0


class _SocketServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 64  # connects of concurrent runs wait in the kernel, not refused

    def __init__(self, path: Path, routes: Mapping[str, Route]) -> None:
        self.routes = routes
        self._open: set[socket.socket] = set()
        self._lock = threading.Condition()
        self._busy = 0
        self._stopping = False
        super().__init__(str(path), _Connection)
        # Narrowed right after bind; the 0700 directory keeps everyone else out meanwhile.
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)

    def opened(self, conn: socket.socket) -> None:
        with self._lock:
            self._open.add(conn)

    def closed(self, conn: socket.socket) -> None:
        with self._lock:
            self._open.discard(conn)

    def begin(self) -> bool:
        """Whether a request that arrived may run (False once the service stops)."""
        with self._lock:
            if self._stopping:
                return False
            self._busy += 1
            return True

    def end(self) -> None:
        with self._lock:
            self._busy -= 1
            self._lock.notify_all()

    def close_all(self, serving: bool, grace_s: float = STOP_GRACE_S) -> None:
        """Stop serving: no new connection or request is taken, the requests running
        finish (within ``grace_s``), then every connection is closed, so a client sees
        the service gone at once (never a half-alive service)."""
        with self._lock:
            self._stopping = True
        if serving:
            self.shutdown()
        self.server_close()
        with self._lock:
            self._lock.wait_for(lambda: self._busy == 0, timeout=grace_s)
            conns, self._open = list(self._open), set()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def database_identity(location: object) -> str:
    """Which database ``location`` names, comparable across processes: a SQLite file's
    resolved path, or a PostgreSQL URL with its password masked."""
    if is_url(location):
        return describe(str(location))
    return str(Path(str(location)).resolve())


def prepare_socket_dir(home: Path) -> Path:
    """``home`` as a 0700 directory, and the socket path inside it (stale file removed)."""
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(home, stat.S_IRWXU)
    path = home / SOCKET_NAME
    path.unlink(missing_ok=True)
    return path


def serve(wallet: Wallet, home: Path, on_ready: Callable[[Path], None] | None = None) -> None:
    """Run the wallet service in the foreground on ``home/wallet.sock`` (``nib wallet serve``).

    The process is made non-dumpable first: the agent, a process of the same OS user,
    cannot read the unlocked key from its memory (see judge.service.refuse_inspection).
    """
    refuse_inspection()
    path = prepare_socket_dir(home)
    server = _SocketServer(path, create_routes(wallet))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # stop as uvicorn did: let calls finish
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, name="nib-wallet", daemon=True)
    thread.start()
    if on_ready is not None:
        on_ready(path)
    stop.wait()
    server.close_all(serving=True)
    path.unlink(missing_ok=True)


class WalletServer:
    """The wallet service in a background thread (tests, benchmarks)."""

    def __init__(self, wallet: Wallet, home: Path) -> None:
        self.socket_path = prepare_socket_dir(home)
        self._routes = create_routes(wallet)
        self._server: _SocketServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout_s: float = 10.0) -> WalletServer:
        try:
            self._server = _SocketServer(self.socket_path, self._routes)
        except OSError as exc:
            raise WalletUnreachable(
                f"the wallet service could not listen on {self.socket_path} ({exc}); "
                "fix: check that NIB_HOME is writable."
            ) from exc
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="nib-wallet", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.close_all(self._thread is not None and self._thread.is_alive())
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> WalletServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _RemoteMeter:
    def __init__(self, client: WalletClient) -> None:
        self._client = client
        self._eth_price: int | None = None

    @property
    def eth_price_usdc(self) -> int:
        """The wallet meter's ETH price (gas is held and metered at it)."""
        if self._eth_price is None:
            self._eth_price = wire_int(self._client._call("/health")["eth_price_usdc"])
        return self._eth_price

    def usage(self, run_id: str) -> RunSpend:
        return from_wire(RunSpend, self._client._call("/usage", {"run_id": run_id}))

    def keep_signed(self, res: Reservation | str, note: str) -> None:
        rid = res if isinstance(res, str) else res.id
        self._client._call("/keep-signed", {"reservation_id": rid, "note": note})


class _RemoteNonces:
    """The wallet's nonce manager, behind the service (the transfer tool pins nonces)."""

    def __init__(self, client: WalletClient) -> None:
        self._client = client

    def _op(self, op: str, n: int | None = None) -> object:
        return self._client._call(
            f"/nonces/{op}", {"n": n, "holder": self._client.holder}
        )["value"]

    def allocate(self) -> int:
        return wire_int(self._op("allocate"))

    def resync(self) -> int:
        return wire_int(self._op("resync"))

    def claim(self, n: int) -> bool:
        return bool(self._op("claim", n))

    def confirm(self, n: int) -> None:
        self._op("confirm", n)

    def release(self, n: int) -> None:
        self._op("release", n)


def _answer_of(conn: socket.socket, deadline: float) -> object:
    """The framed answer to the request just sent on ``conn``, read by ``deadline``."""
    header = _read_exact(conn, _LENGTH.size, deadline)
    return json.loads(_read_exact(conn, _length(header), deadline))


def _read_exact(conn: socket.socket, size: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    while size:
        conn.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = conn.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionResetError("the wallet service closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class WalletClient:
    """The agent's handle on the wallet service: the same calls as the paid tools make on
    :class:`~wallet.signer.Wallet`, and no key. Every call finishes within ``timeout_s``
    or raises WalletUnreachable."""

    def __init__(self, socket_path: str | Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.socket_path = Path(socket_path)
        self.timeout_s = timeout_s
        self._connections: ConnectionPool[socket.socket] = ConnectionPool(
            self._connect, lambda conn: conn
        )
        self._address: str | None = None
        self.meter = _RemoteMeter(self)
        self.nonces = _RemoteNonces(self)
        self.clock: Callable[[], float] = time.time
        #: This process, as the holder of the nonces the service allocates for it.
        self.holder = process_identity()
        #: Where the service's events go (the run's audit trail), as Wallet(emit=...).
        self.emit: Callable[[str, dict[str, object]], None] | None = None

    def __repr__(self) -> str:
        return f"WalletClient(socket={str(self.socket_path)!r})"

    def close(self) -> None:
        self._connections.close()

    def _connect(self) -> socket.socket:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(self.socket_path))
        except OSError:
            conn.close()
            raise
        return conn

    def _unreachable(self, exc: BaseException, sent: bool) -> WalletUnreachable:
        outcome = (
            "the request was sent and its answer is unknown; `nib audit reconcile` "
            "settles what the ledger holds" if sent else "nothing was signed"
        )
        return WalletUnreachable(
            f"the wallet service on {self.socket_path} is unreachable "
            f"({type(exc).__name__}: {exc}); expected it to answer within "
            f"{self.timeout_s:g} s. Fix: start it with `nib services up` (or "
            f"`nib wallet serve`); {outcome}."
        )

    def _send(self, route: str, body: Mapping[str, object]) -> object:
        """The service's answer to one request. A reused connection that fails before the
        request could reach the service is replaced once; once the request may have
        reached it, it is never sent again (a signature is never asked for twice)."""
        request = _frame({"route": _API + route, "body": body})
        deadline = time.monotonic() + self.timeout_s
        for attempt in (1, 2):
            try:
                conn, reused = self._connections.take()
            except OSError as exc:
                raise self._unreachable(exc, sent=False) from exc
            try:
                conn.settimeout(max(deadline - time.monotonic(), 0.001))
                conn.sendall(request)
            except (BrokenPipeError, ConnectionResetError) as exc:
                # The write itself was refused: on a Unix socket the service had closed
                # this connection, so it never read the request.
                conn.close()
                if reused and attempt == 1:
                    continue
                raise self._unreachable(exc, sent=False) from exc
            except OSError as exc:  # a write that timed out may have reached it in part
                conn.close()
                raise self._unreachable(exc, sent=True) from exc
            try:
                answer = _answer_of(conn, deadline)
            except (OSError, ValueError) as exc:
                # Sent: the service may have read it and acted (signed, broadcast) before
                # it died, whether the connection then ends in EOF or a reset. Never sent
                # again, never reported as nothing signed.
                conn.close()
                raise self._unreachable(exc, sent=True) from exc
            self._connections.give_back(conn)
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(self, path: str, body: dict[str, object] | None = None) -> dict[str, object]:
        answer = self._send(path, body or {})
        status = answer.get("status") if isinstance(answer, dict) else None
        if status == 200 and isinstance(answer, dict) and isinstance(answer.get("data"), dict):
            data: dict[str, object] = answer["data"]
            self._relay(data.pop("events", None))
            return data
        error = answer.get("error") if isinstance(answer, dict) else None
        if status == _STOPPING["status"]:
            raise WalletUnreachable(
                f"the wallet service on {self.socket_path} is stopping and did not run "
                f"{path}; nothing was signed. Fix: start it with `nib services up`."
            )
        if not isinstance(error, dict):
            raise WalletUnreachable(
                f"the wallet service failed to answer {path} (status {status}); its log "
                "has the cause; fix: restart it with `nib services up`."
            )
        self._relay(error.pop("events", None))
        cls = getattr(errors, str(error.get("type")), None)
        if not (isinstance(cls, type) and issubclass(cls, WalletError)):
            cls = WalletError
        raise _rebuilt(cls, error)

    def health(self) -> dict[str, object]:
        """The service's address, USDC contract, ETH price and database (no secrets)."""
        return self._call("/health")

    def _relay(self, events: object) -> None:
        """The service's events for this call, into the run's audit trail."""
        if self.emit is None or not isinstance(events, list):
            return
        for event in events:
            if isinstance(event, dict) and isinstance(event.get("data"), dict):
                self.emit(str(event.get("type")), event["data"])

    @property
    def address(self) -> str:
        if self._address is None:
            self._address = str(self._call("/health")["address"])
        return self._address

    @property
    def usdc(self) -> str:
        """The USDC contract the wallet service pays in."""
        return str(self._call("/health")["usdc"])

    @property
    def database(self) -> str:
        """Which database the service keeps its ledger in (``database_identity``)."""
        return str(self._call("/health")["database"])

    def recover_run(self, run_id: str, holder: str, why: str) -> RunRecovery:
        """The service recovers what the dead worker ``holder`` left for ``run_id`` (see
        ``Wallet.recover_run``)."""
        found = self._call("/recover-run", {"run_id": run_id, "holder": holder, "why": why})
        return from_wire(RunRecovery, found)

    def sign_typed_data(
        self,
        payload: Mapping[str, object],
        verdict: Verdict | None,
        *,
        run_id: str,
        cap: int,
        resource: str | None = None,
    ) -> SignedTypedData:
        """MOVES MONEY: the service signs an EIP-3009 authorization the verdict approved."""
        body = {**_sign_body(payload, verdict, run_id, cap), "resource": resource}
        data = self._call("/sign-typed-data", body)
        signed = _signed_from_wire(data)
        assert isinstance(signed, SignedTypedData)
        return signed

    def sign_transaction(
        self, tx: Mapping[str, object], verdict: Verdict | None, *, run_id: str, cap: int
    ) -> SignedTx:
        """MOVES MONEY: the service signs a pinned USDC transfer the verdict approved."""
        signed = _signed_from_wire(self._call("/sign-transaction", _sign_body(tx, verdict, run_id, cap)))
        assert isinstance(signed, SignedTx)
        return signed

    def send_transaction(self, signed: SignedTx, reservation: Reservation | None = None) -> SentTx:
        """MOVES MONEY: the service broadcasts ``signed`` and waits for its receipt."""
        return from_wire(SentTx, self._call(
            "/send-transaction", {"signed": _signed_to_wire(signed), "holder": self.holder}
        ))

    def settle(self, signed: SignedTypedData | SignedTx | SpendRow, tx_hash: str) -> None:
        if isinstance(signed, SpendRow):
            self._call("/settle-row", {"spend_id": signed.id, "tx_hash": tx_hash})
            return
        self._call("/settle", {"signed": _signed_to_wire(signed), "tx_hash": tx_hash})

    def keep_payment(self, signed: SignedTypedData, header: tuple[str, str]) -> None:
        name, value = header
        self._call(
            "/keep-payment", {"signed": _signed_to_wire(signed), "name": name, "value": value}
        )

    def live_authorization(self, resource: str) -> SpendRow | None:
        row = self._call("/live-authorization", {"resource": resource})["row"]
        return None if row is None else SpendRow.from_row(dict(wire_object("row", row)))

    def spend_row(self, spend_id: str) -> SpendRow:
        row = self._call("/spend-row", {"spend_id": spend_id})["row"]
        return SpendRow.from_row(dict(wire_object("row", row)))

    def fail(self, signed: SignedTypedData | SignedTx, note: str) -> None:
        self._call("/fail", {"signed": _signed_to_wire(signed), "note": note})


def _row_to_wire(row: SpendRow) -> dict[str, object]:
    """A ledger row for the agent, with the stored payment header (the agent re-sends it
    to the same seller; it is the authorization the agent already handed over)."""
    return {**row.to_dict(), "x402_payment": row.x402_payment}


def _rebuilt(cls: type[WalletError], error: Mapping[str, object]) -> WalletError:
    """The service's refusal as the same class, without calling its constructor (some
    take fields only the service knows); message, code and the named fields survive."""
    exc = cls.__new__(cls)
    WalletError.__init__(exc, str(error.get("message")))
    if isinstance(exc, SpendRefused):
        exc.reason = exc.message
    for name in _ERROR_FIELDS:
        if name in error or isinstance(exc, SpendRefused) and name == "verdict_id":
            setattr(exc, name, error.get(name))
    return exc


def _sign_body(
    payload: Mapping[str, object], verdict: Verdict | None, run_id: str, cap: int
) -> dict[str, object]:
    return {
        "payload": dict(payload),
        "verdict": None if verdict is None else verdict.model_dump(),
        "run_id": run_id,
        "cap": cap,
    }
