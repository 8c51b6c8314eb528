"""The judge service's operations, each said once: its method and route, who may call
it, the body it takes, the answer it gives and the refusals it may raise.

The server (:mod:`judge.server`) serves exactly these routes and takes who may call each
from here (:mod:`judge.gate`); the client (:mod:`judge.client`) calls them by these
constants; ``tests/test_service_operations.py`` holds the client against the agent's
protocol (``agent.seams.AgentJudge``) through ``client``, the attribute that makes the
call. Adding an operation is one entry here, one handler and one client method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Generic, Literal, Required, TypedDict, TypeVar

from judge.errors import JudgeConfigError, JudgeError, TaskScopeRefused, VerdictInvalid

__all__ = ["API", "OPERATIONS", "Access", "Operation", "routes_for"]

#: Every route starts with it (the wire's version).
API: Final = "/v1"

Access = Literal["open", "agent", "service", "worker", "admin"]
"""Who may call an operation (see :class:`judge.gate.TokenGate`).

- ``open``: anyone on loopback, no token (the judge's address).
- ``agent``: a task token, for its own task; the admin token; the services' token when
  no admin token is set.
- ``service``: as ``agent``, and also the services' own token (the wallet's re-check).
- ``worker``: a worker token only (claiming a queued task's token).
- ``admin``: the user's admin token only.
"""

RequestT = TypeVar("RequestT", covariant=True)
ResponseT = TypeVar("ResponseT", covariant=True)


class Empty(TypedDict):
    """A body with no fields."""


class Ok(TypedDict):
    ok: bool


class Health(TypedDict):
    judge: str
    scheme: str
    #: The judge reads a seller's own 402 before approving a purchase from it.
    reads_seller_terms: bool


class Record(TypedDict, total=False):
    """A typed record's wire form (``PaidCallRequest.to_wire()``, a verdict's
    ``model_dump()``, ``TaskLimits.to_wire()``, a calibration report)."""


class Registered(TypedDict, total=False):
    """A registered task's limits (``TaskLimits.to_wire()``) and its task token."""

    task_token: str


class FreeRequest(TypedDict):
    """A free read's ruling; the judge counts the task's reads itself (no count is sent)."""

    tool: str


class AheadRequest(TypedDict):
    """A seller's resource a task is about to ask a decision about (its 402 is read now)."""

    task_id: str
    url: str
    method: str
    body: object


class Started(TypedDict, total=False):
    """A read started ahead, as ``judge.seller_terms.AheadRead.to_wire`` writes it: whether
    it was, the 402 it found (or None), whether the seller stalled it, the status it read
    and why it found no offer."""

    started: Required[bool]
    stated: dict[str, object] | None
    stalled: bool
    status: int | None
    why: str | None


class VerdictIdRequest(TypedDict):
    verdict_id: str


class OutcomeRequest(TypedDict, total=False):
    verdict_id: Required[str]
    fact_kind: Required[str]
    covered: Required[bool]
    #: ``paid-not-delivered``: the seller took the money and did not deliver.
    delivery: str


class HeldOutcomeRequest(TypedDict):
    """A non-delivery whose payment (ledger row ``spend_id``) the wallet could not decide:
    held until it settles, then counted as ``paid-not-delivered``."""

    verdict_id: str
    fact_kind: str
    spend_id: str


class StandingRequest(TypedDict):
    """``task_id``: the run a spend is booked under (``other-task`` when not the verdict's)."""

    verdict_id: str
    payload_fingerprint: str | None
    task_id: str | None


class StandingAnswer(TypedDict):
    standing: str


class GrantRequest(TypedDict):
    verdict_id: str
    by: str
    task_id: str | None


class TaskIdRequest(TypedDict):
    task_id: str


class TaskTokenAnswer(TypedDict):
    task_token: str


class ClaimAnswer(TaskTokenAnswer):
    """A queued task's token and the digest its text and cap were registered with: a
    worker runs only the text that digests to it."""

    text_digest: str


class WorkerTokenAnswer(TypedDict):
    worker_token: str


@dataclass(frozen=True)
class Operation(Generic[RequestT, ResponseT]):
    """One call the judge service answers."""

    name: str
    method: Literal["GET", "POST"]
    access: Access
    request: type[RequestT]
    response: type[ResponseT]
    #: The refusals the client may raise for it (besides JudgeUnreachable).
    errors: tuple[type[JudgeError], ...]
    #: The client attribute that makes the call; the agent's protocol is held against it.
    client: str
    #: What it does, as a refusal names it ("a task registration").
    summary: str
    #: Other client attributes that make the same call.
    also: tuple[str, ...] = ()
    #: Runs on the server's thread pool (it waits on the chain), not on its event loop.
    pooled: bool = False

    @property
    def route(self) -> str:
        return f"{API}/{self.name}"

    @property
    def handler(self) -> str:
        """The server's method that answers it (``task-tokens``: ``task_tokens``)."""
        return self.name.replace("-", "_")


_SCOPED = (TaskScopeRefused, JudgeConfigError)

HEALTH: Final = Operation(
    "health", "GET", "open", Empty, Health, (), "address", "the judge's address"
)
CALIBRATION: Final = Operation(
    "calibration", "GET", "agent", Empty, Record, (), "calibration", "the calibration report"
)
DECIDE: Final = Operation(
    "decide", "POST", "agent", Record, Record, _SCOPED, "decide", "a paid call's verdict",
    pooled=True,
)
AHEAD: Final = Operation(
    "terms-ahead", "POST", "agent", AheadRequest, Started, (TaskScopeRefused,), "read_ahead",
    "a read of a seller's terms ahead of a decision", pooled=True,
)
FREE: Final = Operation(
    "free", "POST", "agent", FreeRequest, Record, (), "decide_free", "a free read's decision"
)
RECHECK: Final = Operation(
    "recheck", "POST", "service", Record, Ok, (VerdictInvalid, TaskScopeRefused), "recheck",
    "a re-check of a verdict",
)
REVOKE: Final = Operation(
    "revoke", "POST", "agent", VerdictIdRequest, Ok, (TaskScopeRefused,), "revoke",
    "a revocation of a verdict",
)
OUTCOMES: Final = Operation(
    "outcomes", "POST", "agent", OutcomeRequest, Ok, _SCOPED, "record_outcome",
    "an outcome of a verdict",
)
HELD_OUTCOMES: Final = Operation(
    "held-outcomes", "POST", "agent", HeldOutcomeRequest, Ok, _SCOPED, "hold_outcome",
    "a non-delivery held until its payment settles",
)
STANDING: Final = Operation(
    "standing", "POST", "agent", StandingRequest, StandingAnswer, (TaskScopeRefused,),
    "verdict_standing", "the standing of a verdict",
)
TASKS: Final = Operation(
    "tasks", "POST", "admin", Record, Registered, (JudgeConfigError,), "register_task",
    "a task registration", also=("register_task_for_token",),
)
GRANTS: Final = Operation(
    "grants", "POST", "admin", GrantRequest, Record, (JudgeConfigError,), "grant",
    "a grant of an escalation",
)
TASK_TOKENS: Final = Operation(
    "task-tokens", "POST", "admin", TaskIdRequest, TaskTokenAnswer, (TaskScopeRefused,),
    "task_token", "a task token",
)
CLAIMS: Final = Operation(
    "claims", "POST", "worker", TaskIdRequest, ClaimAnswer, (TaskScopeRefused,), "claim",
    "a claim of a queued task's token",
)
WORKER_TOKENS: Final = Operation(
    "worker-tokens", "POST", "admin", Empty, WorkerTokenAnswer, (), "worker_token",
    "a worker token",
)

#: Every operation.
OPERATIONS: Final[tuple[Operation[object, object], ...]] = (
    HEALTH,
    CALIBRATION,
    DECIDE,
    AHEAD,
    FREE,
    RECHECK,
    REVOKE,
    OUTCOMES,
    HELD_OUTCOMES,
    STANDING,
    TASKS,
    GRANTS,
    TASK_TOKENS,
    CLAIMS,
    WORKER_TOKENS,
)


def routes_for(access: Access) -> dict[str, Operation[object, object]]:
    """The operations ``access`` describes, by route."""
    return {op.route: op for op in OPERATIONS if op.access == access}
