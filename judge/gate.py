"""The judge service's gates: what a request must carry before a handler sees it.

Two ASGI middlewares in front of :mod:`judge.server`'s routes: :class:`BodyLimit`
refuses bodies over a size before they are read, and :class:`TokenGate` takes who may
call each route from :mod:`judge.operations` (``Operation.access``) and says in
``scope["nib.task"]`` which task the caller's token acts for. Also the JSON answers
both gates and routes give.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from judge.errors import TaskScopeRefused
from judge.operations import HEALTH, routes_for
from judge.tasks import TASK_TOKEN, WORKER_TOKEN

__all__ = ["MAX_BODY_BYTES", "BodyLimit", "Json", "TokenGate", "error", "malformed"]

#: The largest request body the service reads; real requests are a few KiB.
MAX_BODY_BYTES = 64 * 1024
#: Routes only the user (the admin token) may call, and what each does.
_ADMIN_PATHS = {route: op.summary for route, op in routes_for("admin").items()}
#: The one route a worker token may call: the task token of a task queued for a worker.
(_CLAIMS,) = routes_for("worker")
#: The routes the services' own token (NIB_JUDGE_TOKEN) may call once agents hold task
#: tokens: what the wallet service asks before it signs (``/health`` takes no token).
_SERVICE_PATHS = tuple(routes_for("service"))
_OPEN_PATH = HEALTH.route

class BodyLimit:
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
    # Deferred: ~100 ms to import (min of 3 runs after judge.gate, 2 busy cores), and
    # only the odd type needs it, off the hot path.
    from fastapi.encoders import jsonable_encoder

    return jsonable_encoder(value)


class Json(Response):
    """A JSON answer: ``json.dumps``, with FastAPI's encoder only for types JSON lacks."""

    media_type = "application/json"

    def render(self, content: object) -> bytes:
        return json.dumps(content, separators=(",", ":"), default=_json_default).encode()


def error(kind: str, message: str, status: int) -> Json:
    return Json({"error": {"type": kind, "message": message}}, status)


def _refused(message: str, status: int) -> Json:
    return error("JudgeConfigError", message, status)


def malformed(detail: str) -> Json:
    return error(
        "JudgeRequestInvalid",
        f"found a malformed request body ({detail}); expected the fields JudgeClient sends; "
        "fix: use judge.service.JudgeClient.",
        422,
    )



class TokenGate:
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

    def _refusal(self, scope: Scope) -> Json | None:
        path = scope["path"]
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        admin = self.admin_auth
        scope["nib.task"] = None
        # Who asks, for judge.admission's share: set again below once the token is known.
        scope["nib.caller"] = "health" if path == _OPEN_PATH else "anyone"
        if path in _ADMIN_PATHS and scope["method"] == "POST":
            if admin is None or not hmac.compare_digest(given, admin):
                return _refused(
                    f"found {_ADMIN_PATHS[path]} without the judge's admin token; expected "
                    "'Authorization: Bearer <NIB_JUDGE_ADMIN_TOKEN>' (the user's, not the "
                    "agent's); fix: do it as the user with `nib run`, `nib submit`, "
                    "`nib approve RUN` or `nib judge approve`, which hold it.",
                    403,
                )
            scope["nib.caller"] = "admin"
        elif path != _OPEN_PATH and self.agent_auth is not None:
            if hmac.compare_digest(given, self.agent_auth):
                # With an admin token, agents act with task tokens: the services' own
                # token is the wallet's, for its re-check only. Without one (a bare
                # `nib judge serve`) no task token can be issued and it is the only one.
                if admin is None or path in _SERVICE_PATHS:
                    scope["nib.caller"] = "anyone" if admin is None else "service"
                    return None
                return error(
                    TaskScopeRefused.__name__,
                    f"found the judge service's own token (NIB_JUDGE_TOKEN) on {path}; "
                    f"expected it only on {', '.join(_SERVICE_PATHS)} (the wallet service's "
                    "re-check before it signs); fix: act for a task with the token the judge "
                    "issued when the task was registered (nib run, nib worker and nib "
                    "approve get it).",
                    403,
                )
            if admin is not None and hmac.compare_digest(given, admin):
                scope["nib.caller"] = "admin"
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
                return error(
                    TaskScopeRefused.__name__,
                    f"found a {kind} token on {path}; expected a worker token only on "
                    f"{_CLAIMS} and a task token on the task's own routes; fix: claim the "
                    "task's token first (nib worker does).",
                    403,
                )
            scope["nib.task"] = task if kind == TASK_TOKEN else WORKER_TOKEN
            scope["nib.caller"] = f"task {task}" if kind == TASK_TOKEN else "the worker token"
        return None
