"""The wallet service's server: the routes of :mod:`wallet.operations` over a Unix socket.

The signer process is the only one that unlocks the keystore. The socket lives in
``NIB_HOME`` (created 0600 in a 0700 directory): the kernel checks the socket file's
owner on every connect, so there is no token to leak and no port another local user
could reach. Each connection is served by its own thread, which runs the wallet call
itself; every check of :class:`~wallet.signer.Wallet` runs here (with the judge's
re-check, which consumes the verdict where it was issued).
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import socketserver
import stat
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import asdict, replace
from pathlib import Path
from typing import ParamSpec

from judge.hardening import refuse_inspection
from judge.storage import describe, is_url
from judge.tasks import TASK_TOKEN, TaskRegistry
from judge.verdict import Verdict, parse_verdict
from judge.wire import check_handlers, wire_int, wire_object, wire_str
from wallet.admission import (
    FRAME_S,
    IDLE_S,
    OVERFLOW_S,
    OVERFLOW_WAITING,
    Admission,
    Peer,
    peer_of,
    read_exact,
)
from wallet.callers import Callers
from wallet.errors import (
    LedgerError,
    WalletError,
    WalletOverloaded,
    WalletUnreachable,
)
from wallet.ledger import SpendRow
from wallet.nonces import acting_for, bounded_by, holder_state
from wallet.operations import HEALTH, OPERATIONS
from wallet.signed import SignedTx, SignedTypedData
from wallet.signer import Wallet
from wallet.wire import (
    HEADER_BYTES,
    STOPPING_STATUS,
    FrameTooLarge,
    frame,
    frame_length,
    parse_request,
    refusal,
    row_to_wire,
    signed_from_wire,
    signed_to_wire,
)

__all__ = [
    "SOCKET_NAME",
    "WalletServer",
    "create_routes",
    "database_identity",
    "prepare_socket_dir",
    "serve",
]

SOCKET_NAME = "wallet.sock"

Route = Callable[[Mapping[str, object]], dict[str, object]]

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


class _Handlers:
    """One method per operation of :mod:`wallet.operations`, named as its
    ``Operation.handler``; each takes the request body and returns the answer's data.

    A route that names a ledger row or a run acts only on a task the calling process has
    proven it acts for (:class:`~wallet.callers.Callers`; issue 22)."""

    def __init__(self, wallet: Wallet, callers: Callers) -> None:
        self.wallet = wallet
        self.callers = callers

    def _row(self, spend_id: str, what: str) -> SpendRow:
        """Ledger row ``spend_id``, if the caller may name it (NotYourTask otherwise)."""
        row = self.wallet.meter.ledger.get(spend_id)
        self.callers.check(_CALLER.get(), row.run_id, f"{what} of ledger row {row.id}")
        return row

    def _signed_for_caller(self, signed: SignedTypedData | SignedTx) -> dict[str, object]:
        """A signature handed out: the verdict's task is proven for the calling process."""
        caller = _CALLER.get()
        if caller is not None:
            self.callers.bind(caller, signed.run_id)
        return signed_to_wire(signed)

    def prove_task(self, body: Mapping[str, object]) -> dict[str, object]:
        caller = _CALLER.get()
        if caller is None:
            raise LedgerError("found a task proof with no calling process; expected a socket caller.")
        return {"task_id": self.callers.prove(caller, str(body["token"]))}

    def health(self, _: Mapping[str, object]) -> dict[str, object]:
        wallet = self.wallet
        return {
            "address": wallet.address,
            "usdc": wallet.usdc,
            "eth_price_usdc": wallet.meter.eth_price_usdc,
            "database": database_identity(wallet.meter.store.path),
        }

    # The run a payment is booked under and its cap are the verdict's task and that
    # task's registered cap (wallet.authorize.Authorizer.booked_under): the body names neither.
    def sign_typed_data(self, body: Mapping[str, object]) -> dict[str, object]:
        verdict = _verdict_of(body)
        signed = self.wallet.sign_typed_data(
            wire_object("payload", body["payload"]), verdict, run_id=_named_run(body, verdict),
            spend_cap_atomic=0, resource=wire_str(body.get("resource")),
        )
        return self._signed_for_caller(signed)

    def sign_transaction(self, body: Mapping[str, object]) -> dict[str, object]:
        verdict = _verdict_of(body)
        signed = self.wallet.sign_transaction(
            wire_object("payload", body["payload"]), verdict, run_id=_named_run(body, verdict),
            spend_cap_atomic=0,
        )
        return self._signed_for_caller(signed)

    def _stored(self, body: Mapping[str, object]) -> SignedTypedData | SignedTx:
        # The agent names a signed record; the service trusts only its own ledger row.
        signed = signed_from_wire(body["signed"])
        row = self._row(signed.reservation.id, "a signed record")
        if row.verdict_id != signed.verdict_id or row.run_id != signed.run_id:
            raise LedgerError(
                f"found a signed record for ledger row {row.id} that does not match it "
                f"(verdict {signed.verdict_id} vs {row.verdict_id}); expected the record the "
                "wallet handed out; fix: send the record exactly as it was returned."
            )
        return signed

    def send_transaction(self, body: Mapping[str, object]) -> dict[str, object]:
        signed = self._stored(body)
        if not isinstance(signed, SignedTx):
            raise LedgerError("found a typed-data record; expected a signed transaction.")
        # A refused broadcast releases the number the connecting process holds.
        return asdict(self.wallet.send_transaction(signed))

    def settle(self, body: Mapping[str, object]) -> dict[str, object]:
        self.wallet.settle(self._stored(body), str(body["tx_hash"]))
        return {"ok": True}

    def settle_row(self, body: Mapping[str, object]) -> dict[str, object]:
        # Settles only what the chain proves (Wallet.settle checks the receipt's logs).
        wallet = self.wallet
        wallet.settle(self._row(str(body["spend_id"]), "a settlement"), str(body["tx_hash"]))
        return {"ok": True}

    def fail(self, body: Mapping[str, object]) -> dict[str, object]:
        self.wallet.fail(self._stored(body), str(body["note"]))
        return {"ok": True}

    def keep_payment(self, body: Mapping[str, object]) -> dict[str, object]:
        signed = self._stored(body)
        if not isinstance(signed, SignedTypedData):
            raise LedgerError("found a transaction record; expected a signed authorization.")
        self.wallet.keep_payment(signed, (str(body["name"]), str(body["value"])))
        return {"ok": True}

    def live_authorization(self, body: Mapping[str, object]) -> dict[str, object]:
        # One live authorization per task, payTo and resource: a confined caller is told
        # only of its own tasks' rows (another task's row, under whatever resource name,
        # holds nothing of its up); the user of any row, without another task's header.
        caller = _CALLER.get()
        runs = self._groups()
        row = self.wallet.live_authorization(str(body["resource"]), runs)
        if row is not None and not self.callers.may_act_on(caller, row.run_id):
            row = replace(row, x402_payment=None)
        return {"row": None if row is None else row_to_wire(row)}

    def spend_row(self, body: Mapping[str, object]) -> dict[str, object]:
        return {"row": row_to_wire(self._row(str(body["spend_id"]), "a read"))}

    def usage(self, body: Mapping[str, object]) -> dict[str, object]:
        run_id = str(body["run_id"])
        self.callers.check(_CALLER.get(), run_id, f"the usage of run {run_id}")
        return asdict(self.wallet.meter.usage(run_id))

    def keep_signed(self, body: Mapping[str, object]) -> dict[str, object]:
        row = self._row(str(body["reservation_id"]), "a note")
        self.wallet.meter.keep_signed(row.id, str(body["note"]))
        return {"ok": True}

    # Numbers are held by the connecting process (its kernel credentials, set around every
    # request of the connection: see _Connection), so its recovery finds them and a
    # number it takes and never sends is freed once it exits or its lease ends.
    # A confined caller's hold is bounded by the tasks it acts for (wallet.nonces.MAX_HELD),
    # so a process that forks renews nothing.
    def _groups(self) -> tuple[str, ...] | None:
        caller = _CALLER.get()
        if caller is None or not caller.confined:
            return None
        return tuple(sorted(self.callers.tasks_of(caller)))

    def nonces_allocate(self, body: Mapping[str, object]) -> dict[str, object]:
        with bounded_by(self._groups()):
            return {"value": self.wallet.nonces.allocate()}

    def nonces_resync(self, body: Mapping[str, object]) -> dict[str, object]:
        return {"value": self.wallet.nonces.resync()}

    def nonces_claim(self, body: Mapping[str, object]) -> dict[str, object]:
        with bounded_by(self._groups()):
            return {"value": self.wallet.nonces.claim(wire_int(body["n"]))}

    def nonces_confirm(self, body: Mapping[str, object]) -> dict[str, object]:
        # A caller's confirm says the chain used the number; from a confined caller only
        # the chain's count is believed (a number "confirmed" unsent would be a gap for good).
        n, nonces = wire_int(body["n"]), self.wallet.nonces
        if self._groups() is not None and nonces.pending_count() <= n:
            nonces.release(n)
        else:
            nonces.confirm(n)
        return {"value": None}

    def nonces_release(self, body: Mapping[str, object]) -> dict[str, object]:
        self.wallet.nonces.release(wire_int(body["n"]))
        return {"value": None}

    def abandon_authorization(self, body: Mapping[str, object]) -> dict[str, object]:
        row = self._row(str(body["spend_id"]), "the abandonment")
        row = self.wallet.abandon_authorization(row.id, str(body["why"]))
        return {"row": row_to_wire(row)}

    def recover_run(self, body: Mapping[str, object]) -> dict[str, object]:
        # A worker whose lease ran out: its run's money state, in the one signer. Only a
        # holder that is gone, or the caller itself (a process whose wallet service died).
        holder, caller = str(body["holder"]), _CALLER.get()
        if holder_state(holder) == "alive" and (caller is None or holder != caller.holder):
            raise LedgerError(
                f"found a recovery for holder {holder}, a running process that is not the "
                f"caller ({caller.holder if caller else 'unknown'}); expected a holder that "
                "can no longer act; fix: recover a worker's runs once it has died."
            )
        run_id = str(body["run_id"])
        live = self.callers.live_other(caller, run_id)
        if live is not None:  # the holder named is the caller's word; this is the wallet's
            raise LedgerError(
                f"found a recovery of run {run_id} naming holder {holder}, but process {live} "
                "is alive and acts for that task here (it proved the task or signed under "
                "it); expected the run of a process that has exited; nothing was changed; "
                "fix: recover a run once the process acting for it is gone."
            )
        found = self.wallet.recover_run(run_id, holder, str(body["why"]))
        return asdict(found)


def _verdict_of(body: Mapping[str, object]) -> Verdict | None:
    raw = body.get("verdict")
    return None if raw is None else parse_verdict(wire_object("verdict", raw))


def _named_run(body: Mapping[str, object], verdict: Verdict | None) -> str:
    """The run a request names, if it names one: checked against the verdict's task and
    refused naming both when it differs (wallet.authorize.Authorizer.booked_under)."""
    return wire_str(body.get("run_id")) or ""


#: The process at the other end of the connection a request arrived on.
_CALLER: ContextVar[Peer | None] = ContextVar("nib_wallet_caller", default=None)


def create_routes(
    wallet: Wallet,
    task_of_token: Callable[[str], str | None] | None = None,
    callers: Callers | None = None,
) -> dict[str, Route]:
    """``wallet``'s operations (:data:`wallet.operations.OPERATIONS`) by route; the
    wallet's events of each call that relays them travel back in its answer (see
    :class:`_Relay`). ``callers``: the tasks each process proved (shared with the
    server's admission); a new record by default. Raises TypeError when the handlers and
    the table disagree."""
    relay, own = _Relay(), wallet.emit

    def emit(name: str, data: dict[str, object]) -> None:
        relay.emit(name, data)
        if own is not None:
            own(name, data)

    wallet.emit = emit
    wallet.require_task = True  # the service pays only under a registered task's verdict
    handlers = _Handlers(wallet, callers or Callers(task_of_token or _judge_tokens(wallet)))
    check_handlers(_Handlers, (op.handler for op in OPERATIONS), "wallet.operations.OPERATIONS")
    routes: dict[str, Route] = {}
    for op in OPERATIONS:
        handler: Route = getattr(handlers, op.handler)
        routes[op.route] = relay.relayed(handler) if op.relays_events else handler
    return routes


def _judge_tokens(wallet: Wallet) -> Callable[[str], str | None]:
    """The task a task token is of, as the judge recorded it (``judge.tasks``) in the
    services' database, which the wallet shares; read when a process first proves one."""
    registry: list[TaskRegistry] = []

    def task_of(token: str) -> str | None:
        if not registry:
            registry.append(TaskRegistry(wallet.meter.store.db))
        scope = registry[0].token_scope(token)
        return scope[1] if scope is not None and scope[0] == TASK_TOKEN else None

    return task_of


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
        return refusal(exc)
    except (KeyError, TypeError, ValueError) as exc:
        return _malformed(f"{type(exc).__name__}: {exc}")
    except Exception:  # noqa: BLE001 - the service stays up; the caller learns it failed
        traceback.print_exc(file=sys.stderr)
        return {"status": 500}



class _Connection(socketserver.BaseRequestHandler):
    """One admitted connection: requests answered in turn, in this connection's thread,
    each acting for the connecting process (its kernel credentials)."""

    server: _SocketServer

    def handle(self) -> None:
        conn: socket.socket = self.request
        peer = peer_of(conn)
        self.server.opened(conn)
        token = _CALLER.set(peer)
        try:
            with acting_for(peer.holder):
                while self._serve_one(conn):
                    pass
        except OSError:
            return  # the client went away, or idled or dripped past its deadline
        finally:
            _CALLER.reset(token)
            self.server.closed(conn)
            self.server.admission.leave(peer, conn)

    def _serve_one(self, conn: socket.socket) -> bool:
        """Read and answer one request; False when the connection is over."""
        first = read_exact(conn, 1, time.monotonic() + IDLE_S, first=True)
        if first is None:
            return False  # the client closed the connection
        deadline = time.monotonic() + FRAME_S  # the rest of the frame, whole
        try:
            header = first + (read_exact(conn, HEADER_BYTES - 1, deadline) or b"")
            request: object = parse_request(read_exact(conn, frame_length(header), deadline) or b"")
        except FrameTooLarge as exc:
            _reply(conn, _malformed(str(exc)))
            return False  # the rest of the frame is not read: the connection ends
        except ValueError as exc:
            request = exc
        if not self.server.begin():
            _reply(conn, {"status": STOPPING_STATUS})
            return False
        self.server.admission.running(conn, True)
        try:
            answer = (
                _malformed(f"not JSON: {request}")
                if isinstance(request, ValueError)
                else _answer(self.server.routes, request)
            )
            _reply(conn, answer)
        finally:
            self.server.end()
            self.server.admission.running(conn, False)
        return True


def _reply(conn: socket.socket, answer: Mapping[str, object]) -> None:
    conn.settimeout(IDLE_S)  # a client that never reads its answer is let go
    conn.sendall(frame(answer))


def _overloaded(why: str) -> dict[str, object]:
    return refusal(WalletOverloaded(why))


#: How long a stopping service lets the requests it is running finish (a send waits up
#: to 60 s for its receipt; a signature takes milliseconds).
STOP_GRACE_S = 10.0


class _SocketServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 64  # connects of concurrent runs wait in the kernel, not refused

    def __init__(self, path: Path, routes: Mapping[str, Route], callers: Callers | None = None) -> None:
        self.routes = routes
        self.admission = Admission(identity=callers.identity if callers is not None else None)
        # Connections past a cap: a few threads answer /health or WalletOverloaded.
        self._overflow = ThreadPoolExecutor(4, thread_name_prefix="nib-wallet-overflow")
        self._overflow_waiting = 0
        self._open: set[socket.socket] = set()
        self._lock = threading.Condition()
        self._busy = 0
        self._stopping = False
        super().__init__(str(path), _Connection)
        # Narrowed right after bind; the 0700 directory keeps everyone else out meanwhile.
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        """Admit the connection (its own thread) or hand it to the overflow pool; no
        thread per connection past the caps."""
        why = self.admission.admit(peer_of(request), request)
        if why is None:
            super().process_request(request, client_address)  # type: ignore[arg-type]
            return
        with self._lock:
            room = self._overflow_waiting < OVERFLOW_WAITING
            self._overflow_waiting += room
        if room:
            self._overflow.submit(self._answer_overflow, request, why)
            return
        try:
            request.setblocking(False)
            request.send(frame(_overloaded(why)))
        except OSError:
            pass
        self.shutdown_request(request)

    def _answer_overflow(self, conn: socket.socket, why: str) -> None:
        """One request on a connection past a cap: /health is answered, anything else
        refused as WalletOverloaded (not run); then the connection is closed."""
        try:
            deadline = time.monotonic() + OVERFLOW_S
            header = read_exact(conn, HEADER_BYTES, deadline, first=True)
            if header is not None:
                request = parse_request(read_exact(conn, frame_length(header), deadline) or b"")
                health = isinstance(request, dict) and request.get("route") == HEALTH.route
                _reply(conn, _answer(self.routes, request) if health else _overloaded(why))
        except (OSError, ValueError):
            pass
        finally:
            with self._lock:
                self._overflow_waiting -= 1
            self.shutdown_request(conn)

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
        self._overflow.shutdown(wait=False, cancel_futures=True)
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
    cannot read the unlocked key from its memory (see judge.hardening.refuse_inspection).
    """
    refuse_inspection()
    path = prepare_socket_dir(home)
    callers = Callers(_judge_tokens(wallet))
    server = _SocketServer(path, create_routes(wallet, callers=callers), callers)
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
        self._callers = Callers(_judge_tokens(wallet))
        self._routes = create_routes(wallet, callers=self._callers)
        self._server: _SocketServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout_s: float = 10.0) -> WalletServer:
        try:
            self._server = _SocketServer(self.socket_path, self._routes, self._callers)
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
