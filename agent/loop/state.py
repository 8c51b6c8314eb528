"""A run's state as a value, and the dependencies a run is given.

``RunState`` is everything a run knows (counters, clock accounting,
checklist, pending verdict and quote, executed fingerprints, evidence, spend,
tokens, the addresses its task names) and round-trips through JSON, so a paused run resumes in another process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, TypeAdapter

from agent.loop.limits import Limits
from agent.loop.result import EvidenceItem, StopReason
from agent.models.base import Model
from agent.seams import AgentJudge, AgentWallet, SpendView
from agent.store import RunStore
from agent.tools.base import Quote, ToolRegistry
from chain.client import ChainClient
from chain.networks import Network
from judge.policy import FreeReadPolicy

if TYPE_CHECKING:
    import httpx

__all__ = [
    "Decision",
    "Deps",
    "FailedForGood",
    "PendingCall",
    "RunState",
    "RunStatus",
    "jsonable",
    "unjsonable",
]

Decision = Literal["approve", "deny"]
"""A human's ruling on a paused paid call: ``approve`` it (the judge re-issues an approving
verdict for the same payload and the run goes on) or ``deny`` it (the run stops)."""

_QUOTE = TypeAdapter(Quote)

RunStatus = Literal["running", "paused", "stopped"]
"""``running``: a process is driving it. ``paused``: awaiting approval, state in the store.
``stopped``: it returned its result."""


class PendingCall(BaseModel):
    """A paid call held for a human: the exact quote and the judge's escalate verdict."""

    step: int
    tool: str
    args: dict[str, object]
    fingerprint: str
    quote: dict[str, object]
    verdict: dict[str, object]

    def held_quote(self) -> Quote:
        """The held quote as the tool made it (bytes restored; its fields checked)."""
        return _QUOTE.validate_python(unjsonable(self.quote))


class FailedForGood(BaseModel):
    """A call that failed for a reason the same call can never overcome: the step it failed
    at and why (the error the model was shown)."""

    step: int
    why: str


class RunState(BaseModel):
    """Everything a run knows; JSON round-trips, so another process can resume it."""

    run_id: str
    task: str
    profile: str
    limits: dict[str, object]
    #: 0x addresses the task itself names (lower-case), extracted once when the run
    #: starts: with the allowlist, the only recipients a direct transfer may pay.
    task_addresses: list[str] = Field(default_factory=list)
    #: The chain head when the checklist was first read: relative block references
    #: ("the previous block", "2 blocks ago") resolve against it, once, for the whole run.
    head_at_start: int | None = None
    status: RunStatus = "running"
    started_at: float = Field(default_factory=time.time)
    elapsed_s: float = 0.0
    step: int = 0
    checklist: list[dict[str, object]] = Field(default_factory=list)
    checklist_done: bool = False
    plan: str = ""
    replanned_at: int = 0
    lessons: list[str] = Field(default_factory=list)
    history: list[dict[str, object]] = Field(default_factory=list)
    feedback: list[str] = Field(default_factory=list)
    evidence: list[EvidenceItem] = Field(default_factory=list)
    executed: dict[str, int] = Field(default_factory=dict)
    #: Call fingerprints that failed for good (a PermanentToolError, e.g. a seller's terms
    #: no buyer can pay) -> when and why: like the executed set, never run again.
    failed_for_good: dict[str, FailedForGood] = Field(default_factory=dict)
    attempted: list[str] = Field(default_factory=list)
    proposed: list[str] = Field(default_factory=list)
    nudged: dict[str, int] = Field(default_factory=dict)
    free_calls: dict[str, int] = Field(default_factory=dict)
    successful_tools: list[str] = Field(default_factory=list)
    signatures: list[str] = Field(default_factory=list)
    #: Sellers (origins) handed a payment in this run that did not deliver -> what was
    #: found, paid or not, in NonDelivery.said's words: never paid again in the run (issue 28).
    failed_sellers: dict[str, str] = Field(default_factory=dict)
    consecutive_failures: int = 0
    consecutive_skips: int = 0
    #: Steps in a row that called a tool (or spent) and covered no checklist item.
    churn_steps: int = 0
    #: Re-read checklists in a row that asked for other facts than the run's (drift).
    checklist_drifts: int = 0
    covered_seen: int = 0
    calls_seen: int = 0
    consecutive_failed_proposals: int = 0
    spend_usdc: int = 0
    gas_wei: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_estimated: bool = False
    #: How proposals travel to this run's model: ``native`` tool calling or the
    #: ``json-text`` fallback (None until the first proposal).
    tool_protocol: str | None = None
    #: The last step's tool calls and their results, as the messages the next proposal
    #: request ends with (the providers' tool-result messages).
    exchange: list[dict[str, object]] = Field(default_factory=list)
    pending: PendingCall | None = None
    stop_reason: StopReason | None = None
    message: str = ""


@dataclass
class Deps:
    """What a run uses, injected. ``judge`` is an in-process Judge or a JudgeClient.

    ``chain`` is the network's client (live balance, free reads; it connects only when
    read); ``wallet`` signs paid calls; ``meter`` (default ``wallet.meter``) reports
    spent + reserved for the spend cap. ``profile`` is the profile applied (None: the
    default for where the model runs) and ``limits`` the values resolved from it with any
    overrides (None: the profile's own); the run records the profile by name, or
    ``custom`` when an override changed one of its values (agent.loop.limits.run_limits).
    """

    model: Model
    registry: ToolRegistry
    store: RunStore
    network: Network
    chain: ChainClient
    judge: AgentJudge | None = None
    wallet: AgentWallet | None = None
    wallet_address: str | None = None
    meter: SpendView | None = None
    free_policy: FreeReadPolicy | None = None
    limits: Limits | None = None
    profile: str | None = None
    http: httpx.AsyncClient | None = None
    allowlist: tuple[str, ...] = ()
    extras: dict[str, object] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    on_event: Callable[[str, str, dict[str, object]], None] | None = None


def jsonable(value: object) -> object:
    """JSON-safe copy of a payload; bytes become ``{"__bytes__": hex}`` (reversible)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return {"__bytes__": bytes(value).hex()}
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def unjsonable(value: object) -> object:
    if isinstance(value, dict):
        if set(value) == {"__bytes__"}:
            return bytes.fromhex(value["__bytes__"])
        return {k: unjsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unjsonable(v) for v in value]
    return value
