"""The judge as its own HTTP service on loopback (``nib judge serve``).

Running the judge in a separate process means the process that runs the model never
holds the approving key. The routes are the operations of :mod:`judge.operations`, one
handler each (:class:`_Handlers`), behind the gates of :mod:`judge.gate`; requests are
the bodies :class:`~judge.client.JudgeClient` sends, answers are verdicts as the judge
signed them and the other records' wire forms.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import cast

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from judge.admission import DECISION_THREADS, InFlight, Waiting, admitting_protocol
from judge.calibration import Delivery, check_outcome
from judge.errors import (
    JudgeConfigError,
    JudgeError,
    JudgeUnreachable,
    TaskScopeRefused,
    VerdictInvalid,
)
from judge.gate import BodyLimit, Json, TokenGate, error, malformed
from judge.hardening import refuse_inspection
from judge.held import check_hold
from judge.http_proxy import is_loopback
from judge.jev import Judge, PaidCallRequest
from judge.operations import OPERATIONS
from judge.tasks import TASK_TOKEN, WORKER_TOKEN, TaskLimits
from judge.verdict import SCHEME, parse_verdict
from judge.wire import check_handlers, free_to_wire

__all__ = ["JudgeServer", "create_app", "serve"]



#: A route's handler: the request body, and the task the caller's token is for (None:
#: any task; see judge.gate.TokenGate).
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
    (bench/roundtrip.py); the refusals are the same: a JudgeError as itself (409 for a
    verdict, else 422), a malformed body 422, an unknown route 404."""

    def __init__(
        self, get: dict[str, Handler], post: dict[str, Handler], pooled: frozenset[str],
        max_in_flight: int,
    ) -> None:
        self.routes = {"GET": get, "POST": post}
        self.pooled = pooled
        #: Requests being answered now, per caller (judge.admission): past a task's share,
        #: or past ``max_in_flight`` in all for a caller that has one in flight, a typed
        #: JudgeOverloaded (503); /health, the admin and the services' token always pass.
        self.in_flight = InFlight(max_in_flight)
        # As many as anyio's default for FastAPI's sync routes: a slow chain read of one
        # decision does not hold up the others.
        self._pool = ThreadPoolExecutor(max_workers=DECISION_THREADS, thread_name_prefix="nib-judge")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        handler = self.routes.get(method, {}).get(path)
        if handler is None:
            known = any(path in table for table in self.routes.values())
            status = 405 if known else 404
            what = "method" if known else "route"
            answer = error("JudgeRequestInvalid", f"found {what} {method} {path}; expected "
                            "a route JudgeClient calls; fix: use judge.service.JudgeClient.",
                            status)
        elif (busy := self.in_flight.refusal(caller := scope.get("nib.caller", "anyone"),
                                             threaded := path in self.pooled)):
            answer = error("JudgeOverloaded", busy, 503)
        else:
            self.in_flight.enter(caller, threaded)  # one event loop: no lock needed
            try:
                answer = await self._answer(handler, method, await _body(receive), path,
                                            scope.get("nib.task"))
            finally:
                self.in_flight.leave(caller, threaded)
        await answer(scope, receive, send)

    async def _answer(
        self, handler: Handler, method: str, raw: bytes, path: str, task: str | None
    ) -> Json:
        body: dict[str, object] = {}
        if method == "POST":
            try:
                # UTF-8 only (RFC 8259): json.loads would also take UTF-16 and UTF-32 bytes,
                # in which the NUL check below reads no escape.
                parsed = json.loads(raw.decode("utf-8"))
            except ValueError as exc:  # UnicodeDecodeError is a ValueError
                return malformed(f"not JSON in UTF-8: {exc}")
            if not isinstance(parsed, dict):
                return malformed(f"found a JSON {type(parsed).__name__}; expected an object")
            if b"\\u0000" in raw:
                # No record stores it (PostgreSQL's text refuses NUL): refused as input.
                return malformed("found a NUL character (\\u0000) in a string; expected text "
                                 "without one; fix: drop it")
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


def _run(handler: Handler, body: dict[str, object], task: str | None) -> Json:
    try:
        return Json(handler(body, task))
    except JudgeError as exc:
        status = 409 if isinstance(exc, VerdictInvalid) else 422
        status = 403 if isinstance(exc, TaskScopeRefused) else status
        return error(type(exc).__name__, str(exc), status)
    except (KeyError, TypeError, ValueError) as exc:
        return malformed(f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - the service stays up; the caller learns it failed
        traceback.print_exc(file=sys.stderr)
        return error("InternalError", f"the judge failed ({type(exc).__name__}); see its log", 500)


class _Handlers:
    """One method per operation of :mod:`judge.operations`, named as its
    ``Operation.handler``: each takes the request body and the task the caller's token
    acts for (None: any task), and returns the answer."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge

    def _task_of(self, verdict_id: str) -> str | None:
        rec = self.judge.records.get(verdict_id)
        return None if rec is None else rec.task_id

    def health(self, _body: dict[str, object], _own: str | None) -> dict[str, object]:
        return {"judge": self.judge.address, "scheme": SCHEME,
                "reads_seller_terms": self.judge.reads_seller_terms}

    def calibration(self, _body: dict[str, object], _own: str | None) -> dict[str, object]:
        return dict(self.judge.calibration())

    def decide(self, body: dict[str, object], own: str | None) -> dict[str, object]:
        request = PaidCallRequest.from_wire(body)
        for offer in (request, *request.alternatives):
            _only(own, offer.task_id, "a payment")
        return self.judge.decide(request).model_dump()

    def terms_ahead(self, body: dict[str, object], own: str | None) -> dict[str, object]:
        task = str(body["task_id"])
        _only(own, task, "a read of a seller's terms")
        method = str(body.get("method") or "GET")
        return self.judge.read_ahead(task, str(body["url"]), method, body.get("body")).to_wire()

    def free(self, body: dict[str, object], own: str | None) -> dict[str, object]:
        # The count is the judge's, per task the token acts for; a count in the body is ignored.
        return free_to_wire(self.judge.count_free(own or "", str(body["tool"])))

    def recheck(self, body: dict[str, object], own: str | None) -> dict[str, object]:
        verdict = parse_verdict(body)
        if own is not None:
            _only(own, self._task_of(verdict.id), "a re-check of a verdict")
        self.judge.recheck(verdict)
        return {"ok": True}

    def revoke(self, body: dict[str, object], own: str | None) -> dict[str, object]:
        verdict_id = str(body["verdict_id"])
        if own is not None:
            _only(own, self._task_of(verdict_id), "a revocation of a verdict")
        self.judge.revoke(verdict_id)
        return {"ok": True}

    def outcomes(self, body: dict[str, object], own: str | None) -> dict[str, object]:
        covered = body.get("covered")
        if not isinstance(covered, bool):
            raise JudgeConfigError(
                f"found covered={covered!r}; expected true or false; fix: send a JSON boolean."
            )
        verdict_id = str(body["verdict_id"])
        if own is not None:
            _only(own, self._task_of(verdict_id), "an outcome of a verdict")
        delivery = body.get("delivery", "delivered")
        check_outcome(covered, delivery)
        self.judge.record_outcome(
            verdict_id, str(body["fact_kind"]), covered, cast(Delivery, delivery)
        )
        return {"ok": True}

    def held_outcomes(self, body: dict[str, object], own: str | None) -> dict[str, object]:
        verdict_id, fact_kind, spend_id = body["verdict_id"], body["fact_kind"], body["spend_id"]
        check_hold(verdict_id, fact_kind, spend_id)  # before any record is read with them
        if own is not None:
            _only(own, self._task_of(str(verdict_id)), "a held outcome of a verdict")
        self.judge.hold_outcome(str(verdict_id), str(fact_kind), str(spend_id))
        return {"ok": True}

    def standing(self, body: dict[str, object], own: str | None) -> dict[str, object]:
        fp = body.get("payload_fingerprint")
        verdict_id = str(body["verdict_id"])
        if own is not None:
            _only(own, self._task_of(verdict_id), "the standing of a verdict")
        task = body.get("task_id")
        found = self.judge.verdict_standing(
            verdict_id, None if fp is None else str(fp), None if task is None else str(task)
        )
        return {"standing": found}

    def grants(self, body: dict[str, object], _own: str | None) -> dict[str, object]:
        task = body.get("task_id")
        return self.judge.grant(
            str(body["verdict_id"]),
            by=str(body.get("by") or "admin"),
            task_id=None if task is None else str(task),
        ).to_wire()

    def tasks(self, body: dict[str, object], _own: str | None) -> dict[str, object]:
        judge = self.judge
        limits = judge.register_task(TaskLimits.from_wire(body))
        if body.get("queued") is True:
            judge.tasks.mark_queued(limits.task_id)
        token = judge.tasks.issue_token(TASK_TOKEN, limits.task_id)
        return {**limits.to_wire(), "task_token": token}

    def task_tokens(self, body: dict[str, object], own: str | None) -> dict[str, object]:
        task = str(body["task_id"])
        tasks = self.judge.tasks
        if tasks.get(task) is None:
            raise TaskScopeRefused(
                f"found a token asked for task {task!r}, which is not registered with this "
                "judge; expected a registered task; fix: register it first (nib run, nib "
                "submit with the services up)."
            )
        if own is not None and not tasks.queued(task):  # a worker's claim
            raise TaskScopeRefused(
                f"found a worker's claim of task {task!r}, which was not registered as "
                "queued; expected a task `nib submit` registered for a worker; fix: "
                "`nib submit` the task (with the services up) for a worker to run it."
            )
        return {"task_token": tasks.issue_token(TASK_TOKEN, task)}

    def claims(self, body: dict[str, object], own: str | None) -> dict[str, object]:
        limits = self.judge.tasks.get(str(body["task_id"]))
        digest = "" if limits is None else limits.text_digest
        return {**self.task_tokens(body, own), "text_digest": digest}

    def worker_tokens(self, _body: dict[str, object], _own: str | None) -> dict[str, object]:
        return {"worker_token": self.judge.tasks.issue_token(WORKER_TOKEN)}


def create_app(
    judge: Judge, *, token: str | None = None, admin_token: str | None = None,
    max_in_flight: int | None = None,
) -> ASGIApp:
    """An ASGI app exposing ``judge`` (bind it to loopback only).

    With ``token`` every route but ``/health`` requires ``Authorization: Bearer <token>``
    (the services' own: only the wallet's re-check when ``admin_token`` is set), a task
    token (issued when the admin registers the task; it acts for that task and its
    verdicts only) or the admin token,
    so other local processes and other tasks' agents cannot ask for verdicts, revoke them
    or skew calibration.
    Registering a task (``POST /v1/tasks``) takes ``admin_token`` (the user's, never the
    agent's); without one, tasks cannot be registered over the wire at all.
    A task has at most judge.admission.PER_CALLER_IN_FLIGHT requests in flight, and past
    ``max_in_flight`` in all (default MAX_IN_FLIGHT) only a caller with none in flight gets
    in; others get a typed ``JudgeOverloaded`` (503). ``/health``, the admin token and the
    services' own token are always answered.
    """
    handlers = _Handlers(judge)
    check_handlers(_Handlers, (op.handler for op in OPERATIONS), "judge.operations.OPERATIONS")
    tables: dict[str, dict[str, Handler]] = {"GET": {}, "POST": {}}
    for op in OPERATIONS:
        tables[op.method][op.route] = getattr(handlers, op.handler)
    pooled = frozenset(op.route for op in OPERATIONS if op.pooled)
    routes = _Routes(get=tables["GET"], post=tables["POST"], pooled=pooled,
                     max_in_flight=MAX_IN_FLIGHT if max_in_flight is None else max_in_flight)
    agent_auth = f"Bearer {token}".encode() if token else None
    admin_auth = f"Bearer {admin_token}".encode() if admin_token else None
    return TokenGate(routes, agent_auth=agent_auth, admin_auth=admin_auth,
                     scope_of=judge.tasks.token_scope)


#: The largest request head (request line and headers) the judge reads; real ones are < 1 KiB.
MAX_HEADER_BYTES = 16 * 1024
#: Requests the judge answers at once; past it a typed JudgeOverloaded (503) for a caller
#: that already has one in flight (judge.admission.InFlight).
MAX_IN_FLIGHT = 256
#: Open files the judge asks for (its soft limit, up to the hard one): the connections
#: waiting for a request (judge.admission.MAX_WAITING) and those being answered fit.
OPEN_FILES = 4096


def _server(
    judge: Judge,
    host: str,
    port: int,
    token: str | None = None,
    *,
    insecure: bool = False,
    admin_token: str | None = None,
    max_in_flight: int | None = None,
) -> uvicorn.Server:
    if not token and not insecure:
        raise JudgeConfigError(
            "found no token for the judge service; expected NIB_JUDGE_TOKEN so only the "
            "agent and the wallet can ask for verdicts; fix: set NIB_JUDGE_TOKEN (e.g. "
            "`export NIB_JUDGE_TOKEN=$(openssl rand -hex 32)`), or pass --insecure on the devnet."
        )
    if not is_loopback(host):
        raise JudgeConfigError(
            f"found judge host {host!r}; expected a loopback address (127.0.0.1, ::1, "
            "localhost) because the judge holds an approving key; fix: bind to 127.0.0.1."
        )
    config = uvicorn.Config(
        BodyLimit(create_app(judge, token=token, admin_token=admin_token, max_in_flight=max_in_flight)),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        # h11, not httptools: h11 caps what it buffers of a request's head (httptools
        # took 1 MB of headers); a request whose head is larger is answered 400 and closed.
        # Each connection has HEAD_DEADLINE_S to send its whole request, the oldest
        # waiting one is closed past MAX_WAITING (judge.admission): no uvicorn
        # limit_concurrency, which counted idle connections and answered /health 503.
        http=admitting_protocol(Waiting()),
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )
    _raise_open_files(OPEN_FILES)
    return uvicorn.Server(config)


def _raise_open_files(wanted: int) -> None:
    """Raise this process's soft limit of open files to ``wanted`` (at most the hard one)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


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
        max_in_flight: int | None = None,
    ) -> None:
        self._server = _server(
            judge, host, port, token, insecure=insecure, admin_token=admin_token,
            max_in_flight=max_in_flight,
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
