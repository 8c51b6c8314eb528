"""The judge service's client: what the agent and the wallet service ask the judge.

:class:`JudgeClient` makes the calls of :class:`~judge.jev.Judge` the agent needs, each
an operation of :mod:`judge.operations`, over HTTP/1.1 on loopback. Typed judge errors
travel as ``{"error": {"type", "message"}}`` and are raised again here; a judge that
does not answer within the timeout is :class:`~judge.errors.JudgeUnreachable`.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Mapping
from typing import TypeVar, cast, get_args

import judge.errors as judge_errors
import judge.operations as ops
from judge.calibration import CalibrationReport, Delivery
from judge.connections import STALE, ConnectionPool
from judge.errors import JudgeConfigError, JudgeError, JudgeOverloaded, JudgeUnreachable
from judge.jev import PaidCallRequest
from judge.mcp_terms import SELLER_READ_S
from judge.policy import FreeDecision
from judge.records import Grant, Standing
from judge.seller_terms import AheadRead
from judge.tasks import TaskLimits
from judge.verdict import Verdict, parse_verdict, verify_verdict
from judge.wire import free_from_wire, from_wire

__all__ = ["DECIDE_TIMEOUT_S", "DEFAULT_TIMEOUT_S", "JudgeClient"]

DEFAULT_TIMEOUT_S = 2.0
#: How long a decision on a purchase may take: the judge reads the seller's own terms
#: itself for it (judge.seller_terms, each read bounded by SELLER_READ_S), so a slow
#: seller is the judge's refusal, never reported as the judge being unreachable.
DECIDE_TIMEOUT_S = SELLER_READ_S + DEFAULT_TIMEOUT_S

_Req = TypeVar("_Req", bound=Mapping[str, object])
_Resp = TypeVar("_Resp")



class JudgeClient:
    """Talks to a judge service; the same methods as :class:`~judge.jev.Judge`.

    Every call finishes within about ``timeout_s`` seconds or raises JudgeUnreachable;
    a decision on a purchase within ``decide_timeout_s`` (default: DECIDE_TIMEOUT_S, the
    judge's own bounded read of the seller's terms plus ``timeout_s``).
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
        decide_timeout_s: float | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.decide_timeout_s = (
            max(timeout_s, DECIDE_TIMEOUT_S) if decide_timeout_s is None else decide_timeout_s
        )
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
        self._reads_terms: bool | None = None

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
            f"answering in time (a decision on a purchase within {self.decide_timeout_s:g} s, "
            f"anything else within {self.timeout_s:g} s). Fix: `nib services status` says whether "
            "the judge service runs; `nib devnet up` (the devnet) or `nib services up` "
            "restarts it (a judge of your own at NIB_JUDGE_URL: `nib judge serve`).",
            url=self.url,
        )

    def _overloaded(self, detail: str) -> JudgeOverloaded:
        return JudgeOverloaded(
            f"the judge at {self.url} is overloaded ({detail}); nothing was decided, no "
            "money moved. Fix: run the task again in a moment, or fewer agents at once "
            "against this judge.",
            url=self.url,
        )

    def _exchange(
        self, method: str, path: str, body: Mapping[str, object] | None, wait_s: float
    ) -> tuple[int, bytes]:
        """(status, body) of one request, each read of the answer waiting at most
        ``wait_s``; transport failures as JudgeUnreachable, named as the phase that failed
        (ConnectError, ReadTimeout, ...)."""
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        for attempt in (1, 2):
            conn, reused = self._pool.take()
            phase = "Read" if conn.sock is not None else "Connect"
            try:
                if conn.sock is None:
                    conn.connect()
                    phase = "Read"
                conn.sock.settimeout(wait_s)
                conn.request(method, path, body=payload, headers=self._headers)
                response = conn.getresponse()
                data = response.read()
            except STALE as exc:
                conn.close()
                if reused and attempt == 1:
                    continue
                raise self._unreachable(f"{phase}Error: {exc}") from exc
            except TimeoutError as exc:
                conn.close()
                raise self._unreachable(f"{phase}Timeout after {wait_s:g} s: {exc}") from exc
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise self._unreachable(f"{phase}Error: {type(exc).__name__}: {exc}") from exc
            if response.will_close:
                conn.close()
            else:
                self._pool.give_back(conn)
            return response.status, data
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(self, op: ops.Operation[_Req, _Resp], body: _Req | None = None) -> _Resp:
        """The answer to ``op`` with ``body``, or the judge's refusal raised as itself."""
        # A decision and a read ahead wait for the judge's own read of a seller's 402.
        wait_s = self.decide_timeout_s if op in (ops.DECIDE, ops.AHEAD) else self.timeout_s / 2
        status, raw = self._exchange(op.method, op.route, body, wait_s)
        try:
            data = json.loads(raw)
        except ValueError as exc:
            if status == 503:  # uvicorn's own limit: plain text, no refusal of the judge's
                raise self._overloaded("its server answered 503, past its connection limit") from exc
            raise self._unreachable(f"HTTP {status}, not JSON") from exc
        if 200 <= status < 300 and isinstance(data, dict):
            return cast(_Resp, data)
        error = data.get("error") if isinstance(data, dict) else None
        if status == 401:
            # The judge is up but refuses to rule for us: a dependency that refuses.
            detail = error.get("message") if isinstance(error, dict) else "unauthorised"
            raise JudgeUnreachable(
                f"the judge at {self.url} refused the request ({detail})", url=self.url
            )
        if status == 503:
            detail = error.get("message") if isinstance(error, dict) else str(data)[:200]
            raise self._overloaded(str(detail))
        if isinstance(error, dict):
            cls = getattr(judge_errors, str(error.get("type")), None)
            if (
                isinstance(cls, type)
                and issubclass(cls, JudgeError)
                and cls is not JudgeUnreachable
            ):
                raise cls(str(error.get("message")))
        raise self._unreachable(f"HTTP {status}: {str(data)[:200]}")

    @property
    def reads_seller_terms(self) -> bool:
        """Whether the judge service reads a seller's own 402 before it approves a
        purchase from it (``nib judge serve`` does: agent.cli.runtime.build_local_judge),
        as it reports; False when it cannot be asked (the conservative answer: a paid tool
        then reads the terms again itself)."""
        if self._reads_terms is None:
            try:
                self._reads_terms = self._call(ops.HEALTH).get("reads_seller_terms") is True
            except JudgeError:
                return False
        return self._reads_terms

    @property
    def address(self) -> str:
        """The judge's address, as the service reports it."""
        if self._address is None:
            # A configured trusted address wins: trust is not taken from the service's claim.
            self._address = self.trusted_judge or str(self._call(ops.HEALTH)["judge"])
        return self._address

    def decide(self, request: PaidCallRequest) -> Verdict:
        verdict = parse_verdict(self._call(ops.DECIDE, _record(request.to_wire())))
        if self.trusted_judge is not None:
            verify_verdict(verdict, self.trusted_judge)
        return verdict

    def read_ahead(
        self, task_id: str, url: str, method: str = "GET", body: object = None
    ) -> AheadRead:
        answer = self._call(ops.AHEAD, {"task_id": task_id, "url": url, "method": method,
                                        "body": body})
        return AheadRead.from_wire(answer)

    def decide_free(self, tool: str, calls_so_far: int = 0) -> FreeDecision:
        """The service's ruling on one free read of ``tool``. ``calls_so_far`` is not sent:
        the service counts the task's reads itself (an allowed ruling counts one)."""
        answer = self._call(ops.FREE, {"tool": tool})
        return free_from_wire(answer)

    def recheck(self, verdict: Verdict) -> None:
        self._call(ops.RECHECK, _record(verdict.model_dump()))

    def revoke(self, verdict_id: str) -> None:
        self._call(ops.REVOKE, {"verdict_id": verdict_id})

    def record_outcome(
        self, verdict_id: str, fact_kind: str, covered: bool, delivery: Delivery = "delivered"
    ) -> None:
        body: ops.OutcomeRequest = {
            "verdict_id": verdict_id, "fact_kind": fact_kind, "covered": covered,
            "delivery": delivery,
        }
        self._call(ops.OUTCOMES, body)

    def hold_outcome(self, verdict_id: str, fact_kind: str, spend_id: str) -> None:
        body: ops.HeldOutcomeRequest = {
            "verdict_id": verdict_id, "fact_kind": fact_kind, "spend_id": spend_id,
        }
        self._call(ops.HELD_OUTCOMES, body)

    def register_task(self, limits: TaskLimits) -> TaskLimits:
        """Register a task (needs a client built with the admin token)."""
        return TaskLimits.from_wire(self._call(ops.TASKS, _record(limits.to_wire())))

    def register_task_for_token(self, limits: TaskLimits, *, queued: bool = False) -> str:
        """Register a task (admin token; ``queued``: for a worker to claim) and return a
        token that acts for that task only (what its agent process gets)."""
        body = _record({**limits.to_wire(), "queued": queued})
        return str(self._call(ops.TASKS, body)["task_token"])

    def task_token(self, task_id: str) -> str:
        """A new token for a registered task (admin token)."""
        return str(self._call(ops.TASK_TOKENS, {"task_id": task_id})["task_token"])

    def worker_token(self) -> str:
        """A token that may only claim the tokens of queued tasks (admin token)."""
        return str(self._call(ops.WORKER_TOKENS, {})["worker_token"])

    def claim(self, task_id: str) -> tuple[str, str]:
        """The token of a task registered as queued (a client with a worker token), and
        the digest of the text and cap it was registered with (``judge.tasks.text_digest``)."""
        found = self._call(ops.CLAIMS, {"task_id": task_id})
        return str(found["task_token"]), str(found["text_digest"])

    def grant(self, verdict_id: str, *, by: str = "admin", task_id: str | None = None) -> Grant:
        """Grant an escalated payment (needs a client built with the admin token)."""
        body: ops.GrantRequest = {"verdict_id": verdict_id, "by": by, "task_id": task_id}
        return from_wire(Grant, self._call(ops.GRANTS, body))

    def verdict_standing(
        self, verdict_id: str, payload_fingerprint: str | None, task_id: str | None = None
    ) -> Standing:
        body: ops.StandingRequest = {
            "verdict_id": verdict_id, "payload_fingerprint": payload_fingerprint,
            "task_id": task_id,
        }
        answer = self._call(ops.STANDING, body)["standing"]
        if answer not in get_args(Standing):
            raise self._unreachable(f"an unknown standing {answer!r}")
        return cast(Standing, answer)

    def calibration(self) -> CalibrationReport:
        return from_wire(CalibrationReport, self._call(ops.CALIBRATION))


def _record(fields: Mapping[str, object]) -> ops.Record:
    """A record's wire form as the body of an operation that takes one."""
    return cast(ops.Record, dict(fields))
