"""The judge as its own HTTP service on loopback, and the client the agent uses.

Running the judge in a separate process means the process that runs the model never
holds the approving key. The wire format is JSON: requests are
``PaidCallRequest.to_wire()``, answers are verdicts as the judge signed them; typed
judge errors travel as ``{"error": {"type", "message"}}`` and are raised again by the
client. A judge that does not answer within the client's timeout is
:class:`~judge.errors.JudgeUnreachable`.
"""

from __future__ import annotations

import asyncio
import hmac
import http.client
import ipaddress
import json
import os
import select
import socket
import sys
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, Protocol, TypeVar, cast, get_args

import uvicorn
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from judge import errors
from judge.calibration import CalibrationReport
from judge.errors import (
    JudgeConfigError,
    JudgeError,
    JudgeUnreachable,
    TaskScopeRefused,
    VerdictInvalid,
)
from judge.jev import Judge, PaidCallRequest
from judge.policy import FreeDecision
from judge.records import Grant, Standing
from judge.tasks import TASK_TOKEN, WORKER_TOKEN, TaskLimits
from judge.verdict import SCHEME, Verdict, parse_verdict, verify_verdict
from judge.wire import from_wire, wire_int

DEFAULT_TIMEOUT_S = 2.0
#: The largest request body the service reads; real requests are a few KiB.
MAX_BODY_BYTES = 64 * 1024
_API = "/v1"
#: Routes only the user (the admin token) may call, and what each does.
_ADMIN_PATHS = {
    f"{_API}/tasks": "a task registration",
    f"{_API}/grants": "a grant of an escalation",
    f"{_API}/task-tokens": "a task token",
    f"{_API}/worker-tokens": "a worker token",
}
#: The one route a worker token may call: the task token of a task queued for a worker.
_CLAIMS = f"{_API}/claims"
#: The routes the services' own token (NIB_JUDGE_TOKEN) may call once agents hold task
#: tokens: what the wallet service asks before it signs (``/health`` takes no token).
_SERVICE_PATHS = (f"{_API}/recheck",)


class _BodyLimit:
    """ASGI middleware: refuse bodies over ``limit`` bytes before the app reads them.

    A declared Content-Length over the limit is answered 413 without reading a byte; a
    body without one (chunked) is read here and cut off as soon as it passes the limit.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        try:
            too_big = declared is not None and int(declared) > self.limit
        except ValueError:
            too_big = True
        if too_big:
            await self._refuse(send, declared)
            return
        # No trustworthy length: take the body here, at most ``limit`` bytes, then hand
        # the app what was read (the app never reads from the socket itself).
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message]), send)
                return
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.limit:
                await self._refuse(send, str(seen).encode())
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        await self.app(
            scope, _replay([{"type": "http.request", "body": body, "more_body": False}]), send
        )

    async def _refuse(self, send: Send, size: bytes | None) -> None:
        found = size.decode(errors="replace") if size else "more"
        message = (
            f"found a request body of {found} bytes; expected at most {self.limit} bytes; "
            "fix: send the fields JudgeClient sends, nothing more."
        )
        body = json.dumps(
            {"error": {"type": "JudgeRequestInvalid", "message": message}}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _replay(messages: list[Message]) -> Receive:
    queue = list(messages)

    async def receive() -> Message:
        if queue:
            return queue.pop(0)
        return {"type": "http.disconnect"}

    return receive


def _json_default(value: object) -> object:
    from fastapi.encoders import jsonable_encoder  # only for the odd type, off the hot path

    return jsonable_encoder(value)


class _Json(Response):
    """A JSON answer: ``json.dumps``, with FastAPI's encoder only for types JSON lacks."""

    media_type = "application/json"

    def render(self, content: object) -> bytes:
        return json.dumps(content, separators=(",", ":"), default=_json_default).encode()


def _error(kind: str, message: str, status: int) -> _Json:
    return _Json({"error": {"type": kind, "message": message}}, status)


def _refused(message: str, status: int) -> _Json:
    return _error("JudgeConfigError", message, status)


def _malformed(detail: str) -> _Json:
    return _error(
        "JudgeRequestInvalid",
        f"found a malformed request body ({detail}); expected the fields JudgeClient sends; "
        "fix: use judge.service.JudgeClient.",
        422,
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _free_to_wire(d: FreeDecision) -> dict[str, object]:
    row = None
    if d.row is not None:
        row = {
            "tool": d.row.tool,
            "allowed": d.row.allowed,
            "max_calls_per_run": d.row.max_calls_per_run,
            "max_result_bytes": d.row.max_result_bytes,
            "timeout_s": d.row.timeout_s,
        }
    return {"outcome": d.outcome, "tool": d.tool, "reason": d.reason, "row": row}


def _free_from_wire(data: Mapping[str, object]) -> FreeDecision:
    return from_wire(FreeDecision, data)


class _TokenGate:
    """ASGI middleware: admin routes take the admin token, every other route but
    ``/health`` a token the judge knows, and says whose it is in ``scope["nib.task"]``:
    the task a task token was issued for (the routes refuse any other task), ``None`` for
    the admin and the services' token (which, with an admin token set, may only make the
    wallet's re-check: _SERVICE_PATHS), :data:`WORKER_TOKEN` for a
    worker token, which may only claim queued tasks' tokens. A plain ASGI callable rather
    than ``@app.middleware("http")``, whose per-request task group and streams cost more
    than the check itself on every call the agent and the wallet make."""

    def __init__(
        self,
        app: ASGIApp,
        agent_auth: bytes | None,
        admin_auth: bytes | None,
        scope_of: Callable[[str], tuple[str, str | None] | None] | None = None,
    ) -> None:
        self.app = app
        self.agent_auth = agent_auth
        self.admin_auth = admin_auth
        self.scope_of = scope_of
        self._known: dict[bytes, tuple[str, str | None]] = {}  # issued tokens never change

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _issued(self, given: bytes) -> tuple[str, str | None] | None:
        found = self._known.get(given)
        if found is None and self.scope_of is not None and given.startswith(b"Bearer "):
            found = self.scope_of(given[7:].decode(errors="replace"))
            if found is not None:
                self._known[given] = found
        return found

    def _refusal(self, scope: Scope) -> _Json | None:
        path = scope["path"]
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        admin = self.admin_auth
        scope["nib.task"] = None
        if path in _ADMIN_PATHS and scope["method"] == "POST":
            if admin is None or not hmac.compare_digest(given, admin):
                return _refused(
                    f"found {_ADMIN_PATHS[path]} without the judge's admin token; expected "
                    "'Authorization: Bearer <NIB_JUDGE_ADMIN_TOKEN>' (the user's, not the "
                    "agent's); fix: do it as the user with `nib run`, `nib submit`, "
                    "`nib approve RUN` or `nib judge approve`, which hold it.",
                    403,
                )
        elif path != f"{_API}/health" and self.agent_auth is not None:
            if hmac.compare_digest(given, self.agent_auth):
                # With an admin token, agents act with task tokens: the services' own
                # token is the wallet's, for its re-check only. Without one (a bare
                # `nib judge serve`) no task token can be issued and it is the only one.
                if admin is None or path in _SERVICE_PATHS:
                    return None
                return _error(
                    TaskScopeRefused.__name__,
                    f"found the judge service's own token (NIB_JUDGE_TOKEN) on {path}; "
                    f"expected it only on {', '.join(_SERVICE_PATHS)} (the wallet service's "
                    "re-check before it signs); fix: act for a task with the token the judge "
                    "issued when the task was registered (nib run, nib worker and nib "
                    "approve get it).",
                    403,
                )
            if admin is not None and hmac.compare_digest(given, admin):
                return None
            issued = self._issued(given)
            if issued is None:
                return _refused(
                    "found a request without the judge service's token or a token this "
                    "judge issued; expected 'Authorization: Bearer <the task's token>' (nib "
                    "run, nib worker and nib approve get it when the task is registered; "
                    "the wallet's re-check sends NIB_JUDGE_TOKEN, the value the service was "
                    "started with); fix: run the task with the nib commands, which register "
                    "it first.",
                    401,
                )
            kind, task = issued
            if (kind == WORKER_TOKEN) != (path == _CLAIMS):
                return _error(
                    TaskScopeRefused.__name__,
                    f"found a {kind} token on {path}; expected a worker token only on "
                    f"{_CLAIMS} and a task token on the task's own routes; fix: claim the "
                    "task's token first (nib worker does).",
                    403,
                )
            scope["nib.task"] = task if kind == TASK_TOKEN else WORKER_TOKEN
        return None


#: A route's handler: the request body, and the task the caller's token is for (None:
#: any task; see _TokenGate).
Handler = Callable[[dict[str, object], str | None], dict[str, object]]


def _only(own: str | None, task: str | None, what: str) -> None:
    """Refuse a task token's request that concerns ``task``, not its own ``own``."""
    if own is not None and task != own:
        raise TaskScopeRefused(
            f"found {what} of task {task!r} with the token of task {own!r}; expected a task "
            "token to act for its own task only; fix: send the token nib issued for that "
            "task (each run gets its own)."
        )


class _Routes:
    """The judge's routes as one plain ASGI app: the path picks a handler, the JSON body
    is read with ``json.loads``, and the handler runs: on the event loop itself when it
    only reads and writes the record (the re-check, on the paid path: no hand-off to a
    worker thread and back, two thread wake-ups that cost more than the work on a busy
    machine), on this app's own thread pool when it waits on the chain (a decision
    reads the balance: a slow node must not hold up the re-checks). FastAPI's routing,
    body validation and response encoding cost more than these calls themselves
    (bench/services.py); the refusals are the same: a JudgeError as itself (409 for a
    verdict, else 422), a malformed body 422, an unknown route 404."""

    def __init__(
        self, get: dict[str, Handler], post: dict[str, Handler], pooled: frozenset[str]
    ) -> None:
        self.routes = {"GET": get, "POST": post}
        self.pooled = pooled
        # As many as anyio's default for FastAPI's sync routes: a slow chain read of one
        # decision does not hold up the others.
        self._pool = ThreadPoolExecutor(max_workers=40, thread_name_prefix="nib-judge")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        handler = self.routes.get(method, {}).get(path)
        if handler is None:
            known = any(path in table for table in self.routes.values())
            status = 405 if known else 404
            what = "method" if known else "route"
            answer = _error("JudgeRequestInvalid", f"found {what} {method} {path}; expected "
                            "a route JudgeClient calls; fix: use judge.service.JudgeClient.",
                            status)
        else:
            task = scope.get("nib.task")
            answer = await self._answer(handler, method, await _body(receive), path, task)
        await answer(scope, receive, send)

    async def _answer(
        self, handler: Handler, method: str, raw: bytes, path: str, task: str | None
    ) -> _Json:
        body: dict[str, object] = {}
        if method == "POST":
            try:
                parsed = json.loads(raw)
            except ValueError as exc:
                return _malformed(f"not JSON: {exc}")
            if not isinstance(parsed, dict):
                return _malformed(f"found a JSON {type(parsed).__name__}; expected an object")
            body = parsed
        if path not in self.pooled:
            return _run(handler, body, task)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, _run, handler, body, task)


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _run(handler: Handler, body: dict[str, object], task: str | None) -> _Json:
    try:
        return _Json(handler(body, task))
    except JudgeError as exc:
        status = 409 if isinstance(exc, VerdictInvalid) else 422
        status = 403 if isinstance(exc, TaskScopeRefused) else status
        return _error(type(exc).__name__, str(exc), status)
    except (KeyError, TypeError, ValueError) as exc:
        return _malformed(f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - the service stays up; the caller learns it failed
        traceback.print_exc(file=sys.stderr)
        return _error("InternalError", f"the judge failed ({type(exc).__name__}); see its log", 500)


def create_app(
    judge: Judge, *, token: str | None = None, admin_token: str | None = None
) -> ASGIApp:
    """An ASGI app exposing ``judge`` (bind it to loopback only).

    With ``token`` every route but ``/health`` requires ``Authorization: Bearer <token>``
    (the services' own: only the wallet's re-check when ``admin_token`` is set), a task token (issued when the admin
    registers the task; it acts for that task and its verdicts only) or the admin token,
    so other local processes and other tasks' agents cannot ask for verdicts, revoke them
    or skew calibration.
    Registering a task (``POST /v1/tasks``) takes ``admin_token`` (the user's, never the
    agent's); without one, tasks cannot be registered over the wire at all.
    """
    agent_auth = f"Bearer {token}".encode() if token else None
    admin_auth = f"Bearer {admin_token}".encode() if admin_token else None

    def task_of(verdict_id: str) -> str | None:
        rec = judge.records.get(verdict_id)
        return None if rec is None else rec.task_id

    def decide(body: dict[str, object], own: str | None) -> dict[str, object]:
        request = PaidCallRequest.from_wire(body)
        for offer in (request, *request.alternatives):
            _only(own, offer.task_id, "a payment")
        return judge.decide(request).model_dump()

    def recheck(body: dict[str, object], own: str | None) -> dict[str, object]:
        verdict = parse_verdict(body)
        if own is not None:
            _only(own, task_of(verdict.id), "a re-check of a verdict")
        judge.recheck(verdict)
        return {"ok": True}

    def revoke(body: dict[str, object], own: str | None) -> dict[str, object]:
        verdict_id = str(body["verdict_id"])
        if own is not None:
            _only(own, task_of(verdict_id), "a revocation of a verdict")
        judge.revoke(verdict_id)
        return {"ok": True}

    def outcomes(body: dict[str, object], own: str | None) -> dict[str, object]:
        covered = body.get("covered")
        if not isinstance(covered, bool):
            raise JudgeConfigError(
                f"found covered={covered!r}; expected true or false; fix: send a JSON boolean."
            )
        verdict_id = str(body["verdict_id"])
        if own is not None:
            _only(own, task_of(verdict_id), "an outcome of a verdict")
        judge.record_outcome(verdict_id, str(body["fact_kind"]), covered)
        return {"ok": True}

    def standing(body: dict[str, object], own: str | None) -> dict[str, object]:
        fp = body.get("payload_fingerprint")
        verdict_id = str(body["verdict_id"])
        if own is not None:
            _only(own, task_of(verdict_id), "the standing of a verdict")
        return {"standing": judge.verdict_standing(verdict_id, None if fp is None else str(fp))}

    def grant(body: dict[str, object], _own: str | None) -> dict[str, object]:
        task = body.get("task_id")
        return judge.grant(
            str(body["verdict_id"]),
            by=str(body.get("by") or "admin"),
            task_id=None if task is None else str(task),
        ).to_wire()

    def register(body: dict[str, object], _own: str | None) -> dict[str, object]:
        limits = judge.register_task(TaskLimits.from_wire(body))
        if body.get("queued") is True:
            judge.tasks.mark_queued(limits.task_id)
        return {**limits.to_wire(), "task_token": judge.tasks.issue_token(TASK_TOKEN, limits.task_id)}

    def task_token(body: dict[str, object], own: str | None) -> dict[str, object]:
        task = str(body["task_id"])
        if judge.tasks.get(task) is None:
            raise TaskScopeRefused(
                f"found a token asked for task {task!r}, which is not registered with this "
                "judge; expected a registered task; fix: register it first (nib run, nib "
                "submit with the services up)."
            )
        if own is not None and not judge.tasks.queued(task):  # a worker's claim
            raise TaskScopeRefused(
                f"found a worker's claim of task {task!r}, which was not registered as "
                "queued; expected a task `nib submit` registered for a worker; fix: "
                "`nib submit` the task (with the services up) for a worker to run it."
            )
        return {"task_token": judge.tasks.issue_token(TASK_TOKEN, task)}

    routes = _Routes(
        get={
            f"{_API}/health": lambda _b, _o: {"judge": judge.address, "scheme": SCHEME},
            f"{_API}/calibration": lambda _b, _o: dict(judge.calibration()),
        },
        post={
            f"{_API}/decide": decide,
            f"{_API}/free": lambda b, _o: _free_to_wire(
                judge.decide_free(str(b["tool"]), wire_int(b["calls_so_far"]))
            ),
            f"{_API}/recheck": recheck,
            f"{_API}/revoke": revoke,
            f"{_API}/outcomes": outcomes,
            f"{_API}/standing": standing,
            f"{_API}/tasks": register,
            f"{_API}/grants": grant,
            f"{_API}/task-tokens": task_token,
            _CLAIMS: task_token,
            f"{_API}/worker-tokens": lambda _b, _o: {
                "worker_token": judge.tasks.issue_token(WORKER_TOKEN)
            },
        },
        pooled=frozenset({f"{_API}/decide"}),
    )
    return _TokenGate(routes, agent_auth=agent_auth, admin_auth=admin_auth,
                      scope_of=judge.tasks.token_scope)


def _server(
    judge: Judge,
    host: str,
    port: int,
    token: str | None = None,
    *,
    insecure: bool = False,
    admin_token: str | None = None,
) -> uvicorn.Server:
    if not token and not insecure:
        raise JudgeConfigError(
            "found no token for the judge service; expected NIB_JUDGE_TOKEN so only the "
            "agent and the wallet can ask for verdicts; fix: set NIB_JUDGE_TOKEN (e.g. "
            "`export NIB_JUDGE_TOKEN=$(openssl rand -hex 32)`), or pass --insecure on the devnet."
        )
    if not _is_loopback(host):
        raise JudgeConfigError(
            f"found judge host {host!r}; expected a loopback address (127.0.0.1, ::1, "
            "localhost) because the judge holds an approving key; fix: bind to 127.0.0.1."
        )
    config = uvicorn.Config(
        _BodyLimit(create_app(judge, token=token, admin_token=admin_token)),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
    return uvicorn.Server(config)


def refuse_inspection() -> bool:
    """Make this process non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``, Linux).

    Other processes of the same OS user can then no longer read its memory
    (``/proc/PID/mem``) or environment, nor attach a debugger: only a process with
    CAP_SYS_PTRACE (root) can; and no core dump carries its key. The judge and the wallet
    services call it before they load a key. Returns whether it took effect.
    """
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    pr_set_dumpable = 4
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(pr_set_dumpable, 0, 0, 0, 0)) == 0


def serve(
    host: str,
    port: int,
    judge: Judge,
    token: str | None = None,
    *,
    insecure: bool = False,
    admin_token: str | None = None,
) -> None:
    """Run the judge service in the foreground until interrupted (``nib judge serve``).

    Refuses to start without ``token`` unless ``insecure`` (the caller allows that on the
    devnet only).
    """
    refuse_inspection()
    _server(judge, host, port, token, insecure=insecure, admin_token=admin_token).run()


class JudgeServer:
    """The judge service in a background thread, for tests and embedding.

    ``with JudgeServer(judge) as server: JudgeClient(server.url)``; port 0 picks a
    free port. Start-up waits with a deadline and raises if the server never starts.
    """

    def __init__(
        self,
        judge: Judge,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        token: str | None = None,
        insecure: bool = False,
        admin_token: str | None = None,
    ) -> None:
        self._server = _server(
            judge, host, port, token, insecure=insecure, admin_token=admin_token
        )
        self._host = host
        self._port = port
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.url = ""

    def start(self, timeout_s: float = 10.0) -> JudgeServer:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        self._sock = sock
        port = sock.getsockname()[1]
        host = f"[{self._host}]" if family == socket.AF_INET6 else self._host
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="nib-judge", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise JudgeUnreachable(
                    f"the judge service at {self.url} did not start within {timeout_s} s; "
                    "expected it to listen on loopback; fix: check that the port is free.",
                    url=self.url,
                )
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._sock is not None:
            self._sock.close()

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class ConnectionPool(Generic[C]):
    """Connections to a local service kept for reuse, one per concurrent call (clients
    are called from several threads); a connection serves one call at a time. An idle
    connection the service closed meanwhile (readable while idle) is dropped, and a
    forked child never shares its parent's connections."""

    def __init__(
        self, connect: Callable[[], C], stream: Callable[[C], socket.socket | None]
    ) -> None:
        self._connect = connect
        self._stream = stream
        self._idle: list[C] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def take(self) -> tuple[C, bool]:
        """A connection, and whether it is a reused one."""
        with self._lock:
            if self._pid != os.getpid():
                self._idle, self._pid = [], os.getpid()
            while self._idle:
                conn = self._idle.pop()
                sock = self._stream(conn)
                if sock is not None and not select.select([sock], [], [], 0)[0]:
                    return conn, True
                conn.close()
        return self._connect(), False

    def give_back(self, conn: C) -> None:
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


#: Failures of a reused keep-alive connection before any answer arrived: the service
#: had closed it (its idle timeout), so the request never reached it and is sent once more.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class JudgeClient:
    """Talks to a judge service; the same methods as :class:`~judge.jev.Judge`.

    Every call finishes within about ``timeout_s`` seconds or raises JudgeUnreachable.
    With ``trusted_judge``, verdicts are verified against that address on arrival.
    HTTP/1.1 over kept-alive connections with the standard library's client: it costs a
    fraction of httpx's per call, which is on the paid path twice (the agent's decision,
    the wallet's re-check).
    """

    def __init__(
        self,
        url: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        trusted_judge: str | None = None,
        token: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.trusted_judge = trusted_judge
        parsed = urllib.parse.urlsplit(self.url)
        if parsed.scheme != "http" or not parsed.hostname:
            raise JudgeConfigError(
                f"found judge URL {url!r}; expected http://HOST:PORT on loopback; fix: set "
                "NIB_JUDGE_URL to the URL `nib services status` prints."
            )
        host, port = parsed.hostname, parsed.port or 80
        self._headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"

        def connect() -> http.client.HTTPConnection:
            # Phases run one after another, so split the budget to bound the total.
            return http.client.HTTPConnection(host, port, timeout=timeout_s / 4)

        self._pool: ConnectionPool[http.client.HTTPConnection] = ConnectionPool(
            connect, lambda c: c.sock
        )
        self._address: str | None = None

    def __repr__(self) -> str:
        return f"JudgeClient(url={self.url!r}, timeout_s={self.timeout_s})"

    def use_token(self, token: str) -> None:
        """Send ``token`` from the next call on (a process that runs one task after
        another, each with the token the judge issued for it)."""
        self._headers["Authorization"] = f"Bearer {token}"

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> JudgeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unreachable(self, detail: str) -> JudgeUnreachable:
        return JudgeUnreachable(
            f"the judge at {self.url} is unreachable ({detail}); expected a judge service "
            f"answering within {self.timeout_s:g} s. Fix: start it with `nib judge serve`, "
            "or unset NIB_JUDGE_URL to use the in-process judge.",
            url=self.url,
        )

    def _exchange(
        self, method: str, path: str, body: Mapping[str, object] | None
    ) -> tuple[int, bytes]:
        """(status, body) of one request; transport failures as JudgeUnreachable, named
        as the phase that failed (ConnectError, ReadTimeout, ...)."""
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        for attempt in (1, 2):
            conn, reused = self._pool.take()
            phase = "Read" if conn.sock is not None else "Connect"
            try:
                if conn.sock is None:
                    conn.connect()
                    phase = "Read"
                conn.sock.settimeout(self.timeout_s / 2)
                conn.request(method, _API + path, body=payload, headers=self._headers)
                response = conn.getresponse()
                data = response.read()
            except _STALE as exc:
                conn.close()
                if reused and attempt == 1:
                    continue
                raise self._unreachable(f"{phase}Error: {exc}") from exc
            except TimeoutError as exc:
                conn.close()
                raise self._unreachable(f"{phase}Timeout: {exc}") from exc
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise self._unreachable(f"{phase}Error: {type(exc).__name__}: {exc}") from exc
            if response.will_close:
                conn.close()
            else:
                self._pool.give_back(conn)
            return response.status, data
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(
        self, method: str, path: str, body: Mapping[str, object] | None = None
    ) -> dict[str, object]:
        status, raw = self._exchange(method, path, body)
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise self._unreachable(f"HTTP {status}, not JSON") from exc
        if 200 <= status < 300 and isinstance(data, dict):
            return data
        error = data.get("error") if isinstance(data, dict) else None
        if status == 401:
            # The judge is up but refuses to rule for us: a dependency that refuses.
            detail = error.get("message") if isinstance(error, dict) else "unauthorised"
            raise JudgeUnreachable(
                f"the judge at {self.url} refused the request ({detail})", url=self.url
            )
        if isinstance(error, dict):
            cls = getattr(errors, str(error.get("type")), None)
            if (
                isinstance(cls, type)
                and issubclass(cls, JudgeError)
                and cls is not JudgeUnreachable
            ):
                raise cls(str(error.get("message")))
        raise self._unreachable(f"HTTP {status}: {str(data)[:200]}")

    @property
    def address(self) -> str:
        """The judge's address, as the service reports it."""
        if self._address is None:
            # A configured trusted address wins: trust is not taken from the service's claim.
            self._address = self.trusted_judge or str(self._call("GET", "/health")["judge"])
        return self._address

    def decide(self, request: PaidCallRequest) -> Verdict:
        verdict = parse_verdict(self._call("POST", "/decide", request.to_wire()))
        if self.trusted_judge is not None:
            verify_verdict(verdict, self.trusted_judge)
        return verdict

    def decide_free(self, tool: str, calls_so_far: int) -> FreeDecision:
        return _free_from_wire(
            self._call("POST", "/free", {"tool": tool, "calls_so_far": calls_so_far})
        )

    def recheck(self, verdict: Verdict) -> None:
        self._call("POST", "/recheck", verdict.model_dump())

    def revoke(self, verdict_id: str) -> None:
        self._call("POST", "/revoke", {"verdict_id": verdict_id})

    def record_outcome(self, verdict_id: str, fact_kind: str, covered: bool) -> None:
        self._call(
            "POST",
            "/outcomes",
            {"verdict_id": verdict_id, "fact_kind": fact_kind, "covered": covered},
        )

    def register_task(self, limits: TaskLimits) -> TaskLimits:
        """Register a task (needs a client built with the admin token)."""
        return TaskLimits.from_wire(self._call("POST", "/tasks", limits.to_wire()))

    def register_task_for_token(self, limits: TaskLimits, *, queued: bool = False) -> str:
        """Register a task (admin token; ``queued``: for a worker to claim) and return a
        token that acts for that task only (what its agent process gets)."""
        body = {**limits.to_wire(), "queued": queued}
        return str(self._call("POST", "/tasks", body)["task_token"])

    def task_token(self, task_id: str) -> str:
        """A new token for a registered task (admin token)."""
        return str(self._call("POST", "/task-tokens", {"task_id": task_id})["task_token"])

    def worker_token(self) -> str:
        """A token that may only claim the tokens of queued tasks (admin token)."""
        return str(self._call("POST", "/worker-tokens", {})["worker_token"])

    def claim(self, task_id: str) -> str:
        """The token of a task registered as queued (a client with a worker token)."""
        return str(self._call("POST", "/claims", {"task_id": task_id})["task_token"])

    def grant(self, verdict_id: str, *, by: str = "admin", task_id: str | None = None) -> Grant:
        """Grant an escalated payment (needs a client built with the admin token)."""
        body = {"verdict_id": verdict_id, "by": by, "task_id": task_id}
        return from_wire(Grant, self._call("POST", "/grants", body))

    def verdict_standing(self, verdict_id: str, payload_fingerprint: str | None) -> Standing:
        answer = self._call(
            "POST",
            "/standing",
            {"verdict_id": verdict_id, "payload_fingerprint": payload_fingerprint},
        )["standing"]
        if answer not in get_args(Standing):
            raise self._unreachable(f"an unknown standing {answer!r}")
        return cast(Standing, answer)

    def calibration(self) -> CalibrationReport:
        return from_wire(CalibrationReport, self._call("GET", "/calibration"))
