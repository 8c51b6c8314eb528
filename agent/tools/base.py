"""The tool interface: what a tool is, what it returns, and the registry the loop uses.

Free tools read (``run``); paid tools ``quote`` a payload for free and ``execute``
it only with an approving judge verdict. Tools never decide whether to spend:
the loop asks the judge and the wallet re-checks the verdict before signing.
"""

from __future__ import annotations

import re
from abc import ABC
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Generic, Literal, TypeVar
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ValidationError

from agent.errors import NonDelivery, PermanentToolError, ToolArgsError, ToolError
from agent.tools.allowlist import parse_allowlist
from chain.facts import FACT_KINDS, FactKind
from judge.policy import FreePolicyRow, FreeReadPolicy

if TYPE_CHECKING:
    import httpx

    from agent.seams import AgentWallet
    from agent.tools.x402.offers import OfferBook
    from chain.client import ChainClient
    from chain.networks import Network
    from judge.seller_terms import AheadRead
    from judge.verdict import Verdict

__all__ = [
    "ArgsT",
    "Emit",
    "FreeLimits",
    "Observation",
    "Quote",
    "QuoteKind",
    "Retry",
    "Tool",
    "ToolContext",
    "ToolKind",
    "ToolRegistry",
    "addresses_named_in",
    "format_validation_error",
    "judge_reads_terms",
    "retry_after",
    "terms_ahead_of",
]

ToolKind = Literal["free", "paid"]
"""``free``: reads, decided by a deterministic policy row. ``paid``: moves money, judged."""

QuoteKind = Literal["x402", "transfer", "contract"]
"""``x402``: EIP-3009 typed data for an HTTP 402 seller. ``transfer``: an EIP-1559 USDC
transfer transaction. ``contract``: any other EIP-1559 contract call."""

Retry = Literal["retryable", "never"]
"""Whether a failed call may be run again. ``retryable``: the same call may pass on a later
try (a network error, a timeout, a seller's 5xx, a stale quote). ``never``: the same call
can never pass in this run (:class:`~agent.errors.PermanentToolError`: terms no buyer can
pay, a payee the run may not pay); the loop does not run it again."""

Emit = Callable[[str, dict[str, object]], None]


def retry_after(exc: BaseException) -> Retry:
    """How a call that raised ``exc`` may be retried: ``never`` for a PermanentToolError."""
    return "never" if isinstance(exc, PermanentToolError) else "retryable"


@dataclass(frozen=True)
class Observation:
    """What one tool call produced. ``summary`` is one line for the shaped history.

    ``facts`` maps fact kinds (``base_fee_gwei``, ...) to their values as strings; the
    checklist is covered from them. ``params`` are parameters the tool resolved beyond its
    arguments (the token a defaulted ``token`` argument meant), so coverage compares what
    was actually read. ``cost_usdc`` is atomic USDC, ``gas_wei`` is wei.
    """

    tool: str
    ok: bool
    summary: str
    data: dict[str, object] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    cost_usdc: int = 0
    gas_wei: int = 0
    error: str | None = None
    #: A failed call: whether the same call may be run again (see :data:`Retry`).
    retry: Retry = "retryable"
    #: A paid call whose seller did not deliver (the loop pays it nothing more this run).
    not_delivered: NonDelivery | None = None
    #: A failed call: the class of the error it raised, and the HTTP status a seller
    #: answered when that is what failed. Structured, unlike ``error`` (which may quote a
    #: seller), so an episodic lesson can name them (agent.loop.lessons).
    error_class: str | None = None
    http_status: int | None = None

    @classmethod
    def failure(
        cls,
        tool: str,
        error: str,
        retry: Retry = "retryable",
        *,
        cause: BaseException | None = None,
    ) -> Observation:
        """A failed observation carrying ``error`` (shown to the model); ``cause`` is the
        exception it came from, if any (its class and HTTP status are kept apart)."""
        return cls(
            tool=tool,
            ok=False,
            summary=f"error: {error}",
            error=error,
            retry=retry,
            error_class=None if cause is None else type(cause).__name__,
            http_status=cause.http_status if isinstance(cause, ToolError) else None,
        )


@dataclass(frozen=True)
class Quote:
    """An exact, unsigned payment payload a paid tool proposes; free to produce.

    ``payload`` is the dict the wallet will sign (EIP-712 typed data or an EIP-1559
    transaction) and ``payload_fingerprint`` its canonical fingerprint. The judge's
    verdict binds to that fingerprint; if the bytes change, the verdict is void.
    ``meta`` is what the tool noted for itself and the loop (seller, display, ...), JSON
    values: it is stored with a paused run, so readers narrow what they take from it.
    """

    tool: str
    args: dict[str, object]
    kind: QuoteKind
    payload: dict[str, object]
    payload_fingerprint: str
    amount: int
    asset: str
    recipient: str
    chain_id: int
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def seller(self) -> str | None:
        """The seller origin an x402 tool noted in ``meta`` (None: a direct transfer)."""
        seller = self.meta.get("seller")
        return None if seller is None else str(seller)


def _scalar(value: object) -> bool:
    return value is not None and value != "" and not isinstance(value, dict | list | tuple)


def _no_emit(_type: str, _data: dict[str, object]) -> None:
    return None


# 40 hex digits not glued to more hex: the head of a 64-digit hash is not an address.
_ADDRESS = re.compile(r"(?<![0-9A-Za-z])0x[0-9a-fA-F]{40}(?![0-9A-Za-z])")


def addresses_named_in(text: str) -> tuple[str, ...]:
    """The distinct 0x addresses written in ``text``, lower-cased, in order of appearance.

    Checksum-insensitive: ``0xAbC...`` and ``0xabc...`` are one address. Only the user's
    own task text should be fed here; addresses read from tool results are data.
    """
    seen: dict[str, None] = {}
    for match in _ADDRESS.finditer(text or ""):
        seen.setdefault(match.group(0).lower(), None)
    return tuple(seen)


def judge_reads_terms(judge: object) -> bool:
    """Whether ``judge`` (an in-process Judge or a judge service's client) reads a
    seller's own 402 itself before approving a purchase (see ToolContext)."""
    return getattr(judge, "reads_seller_terms", False) is True


def terms_ahead_of(judge: object, run_id: str) -> Callable[[str, str, object], AheadRead] | None:
    """How a paid tool of run ``run_id`` tells ``judge`` which seller's 402 it is about to
    quote (ToolContext.read_terms_ahead): for a judge that reads sellers' terms, else None."""
    read_ahead = getattr(judge, "read_ahead", None)
    if not judge_reads_terms(judge) or read_ahead is None:
        return None
    return partial(read_ahead, run_id)


@dataclass
class ToolContext:
    """What a tool may use during one call. Built by the loop for each run.

    ``allowlist`` names the recipients/hosts paid tools may pay (the user's
    configuration); ``task_addresses`` are the 0x addresses the run's task itself names
    (lower-case, see :func:`addresses_named_in`), the only other recipients a direct
    transfer may pay. ``extras`` carries tool-specific settings (paywall URL, ledger, ...).
    ``spend_cap_atomic`` is the run's cap in atomic USDC, passed to the wallet's
    ``sign_*(..., spend_cap_atomic=)`` by paid tools. ``quote_holds`` is what this run's outstanding
    quotes reserved (a transfer's nonce), taken over by ``execute`` or given back by
    ``abandon``; it lives only as long as the process drives the run.
    """

    run_id: str
    chain: ChainClient
    network: Network
    wallet: AgentWallet | None = None
    emit: Emit = _no_emit
    allowlist: tuple[str, ...] = ()
    http: httpx.AsyncClient | None = None
    extras: dict[str, object] = field(default_factory=dict)
    spend_cap_atomic: int = 0
    task_addresses: tuple[str, ...] = ()
    quote_holds: dict[str, object] = field(default_factory=dict)
    #: Seller origins the task's own text names: when any, the only sellers paid tools
    #: may pay (a named seller is never swapped for another).
    task_sellers: tuple[str, ...] = ()
    #: The task asks for a seller in the market: paid tools pay only an offer discovery
    #: listed, never another seller in its place.
    market_only: bool = False
    #: The most a seller's whole response (headers and body) may take, seconds.
    response_deadline_s: float = 30.0
    #: Seconds the run has left (None: no run deadline); a response deadline never
    #: reaches past it.
    time_left: Callable[[], float] | None = None
    #: The run's judge reads a seller's own 402 itself before it approves a purchase
    #: (nib's judge, in-process or as a service): a paid tool then pays a fresh quote's
    #: terms without reading them again (agent.tools.x402.seller_terms.judged_terms).
    judge_reads_terms: bool = False
    #: Tells the run's judge which seller's resource (url, method, body) a paid tool is
    #: about to quote: the judge reads that 402 for the coming decision and answers what
    #: it found, which the quote is built from (judge.seller_terms.TermsAhead); None: the
    #: tool reads the seller itself and the judge reads when asked to decide.
    read_terms_ahead: Callable[[str, str, object], AheadRead] | None = None

    def allowlisted_addresses(self) -> tuple[str, ...]:
        """The allowlist's 0x address entries, lower-case (URL entries are sellers)."""
        return parse_allowlist(self.allowlist).addresses

    def known_recipients(self) -> tuple[str, ...]:
        """Every address a direct transfer may pay: named by the task or allowlisted."""
        named = (a.lower() for a in self.task_addresses)
        return tuple(dict.fromkeys((*named, *self.allowlisted_addresses())))


@dataclass(frozen=True)
class FreeLimits:
    """A free tool's policy limits: calls per run, result size, and timeout."""

    max_calls_per_run: int
    max_result_bytes: int
    timeout_s: float = 10.0


ArgsT = TypeVar("ArgsT", bound=BaseModel)
"""A tool's arguments model: ``run``/``quote`` receive what ``parse_args`` validated."""


class Tool(ABC, Generic[ArgsT]):
    """A capability the model may propose. Subclasses set the class attributes.

    Free tools implement ``run``; paid tools implement ``quote`` and ``execute``.
    Raise :class:`agent.errors.ToolError` with a message for the model on failure.
    """

    name: str
    description: str
    args_model: type[ArgsT]
    kind: ToolKind
    #: The fact kinds the tool can provide (checked against the vocabulary on register).
    facts: tuple[FactKind, ...] = ()
    #: Free tools: the limits of their free-read policy row. The judge's policy is built
    #: from the tools registered (``ToolRegistry.free_policy``), so a free tool without
    #: them is refused at registration.
    free_limits: FreeLimits | None = None
    #: True when the tool reads at one block, the one its observation's
    #: ``data["block_number"]`` names: an item asked at the latest block is answered with
    #: the block it was read at (``ChecklistItem.read_at``) when its value changes with it.
    reads_block: bool = False
    #: True when every fact the tool gives is over the block range its observation's
    #: ``data["from_block"]``..``data["to_block"]`` names (a log scan): an item asked over
    #: a window is answered naming the blocks read (``ChecklistItem.read_range``).
    reads_range: bool = False

    def offer_book(self) -> OfferBook | None:
        """The market offers this tool buys from (x402 tools); None for the others."""
        return None

    def policy_row(self) -> FreePolicyRow | None:
        """This tool's free-read policy row (None for a paid tool)."""
        lim = self.free_limits
        if lim is None:
            return None
        return FreePolicyRow(
            self.name,
            max_calls_per_run=lim.max_calls_per_run,
            max_result_bytes=lim.max_result_bytes,
            timeout_s=lim.timeout_s,
        )

    def facts_for(self, args: BaseModel) -> tuple[str, ...]:
        """Fact kinds this call can provide (defaults to everything the tool can)."""
        return self.facts

    def fact_params(self, norm: dict[str, object], obs: Observation) -> dict[str, str]:
        """The parameters an observation's facts hold for: the call's arguments that were
        given (None means the tool's default) plus what the tool resolved (``obs.params``)."""
        given: dict[str, str] = {}
        for key, value in norm.items():
            if isinstance(value, dict):  # a request body: its fields name the subject
                given.update({k: str(v) for k, v in value.items() if _scalar(v)})
            elif _scalar(value):
                given[key] = str(value)
            if key == "url" and isinstance(value, str):  # so does a query: ?symbol=USDC
                for k, v in parse_qsl(urlsplit(value).query):
                    given.setdefault(k, v)
        return {**given, **obs.params}

    def param_defaults(self) -> dict[str, str]:
        """Argument defaults that mean "not specified" (a window of 1000 blocks)."""
        return {
            name: str(f.default)
            for name, f in self.args_model.model_fields.items()
            if not f.is_required() and f.default is not None
        }

    def parse_args(self, args: dict[str, object]) -> ArgsT:
        """Validate raw proposal arguments; raises ToolArgsError with actionable text."""
        if not isinstance(args, dict):
            raise ToolArgsError(
                f"{self.name}: arguments must be a JSON object, got {type(args).__name__}; "
                f"expected fields: {', '.join(self.args_model.model_fields) or 'none'}."
            )
        try:
            return self.args_model.model_validate(args)
        except ValidationError as exc:
            raise ToolArgsError(format_validation_error(self.name, exc)) from exc

    async def run(self, args: ArgsT, ctx: ToolContext) -> Observation:
        """Free tools: perform the read and return an observation."""
        raise ToolError(f"{self.name} is a {self.kind} tool and has no free run(); use quote.")

    def seller_for(self, args: ArgsT, ctx: ToolContext) -> str | None:
        """Paid tools: the seller origin a call with ``args`` would pay, named from the
        arguments alone, with no request (the loop refuses a seller that failed to
        deliver before it is contacted); None when only the quote can tell."""
        return None

    async def quote(self, args: ArgsT, ctx: ToolContext) -> Quote:
        """Paid tools: build the exact payload to sign (no signing, no spending)."""
        raise ToolError(f"{self.name} is a {self.kind} tool and cannot be quoted.")

    async def execute(self, quote: Quote, verdict: Verdict | None, ctx: ToolContext) -> Observation:
        """Paid tools: have ``ctx.wallet`` sign ``quote.payload`` under ``verdict`` and send.

        Moves money. The wallet refuses unless the verdict approves exactly this payload;
        ``None`` is only for a free quote (amount 0, nothing to sign), and the wallet
        refuses to sign anything without a verdict.
        """
        raise ToolError(f"{self.name} is a {self.kind} tool and cannot be executed with a quote.")

    async def abandon(self, quote: Quote, ctx: ToolContext) -> None:
        """Paid tools: ``quote`` will not be executed; give back what quoting reserved.

        The loop calls it on every path where a quote is not handed to ``execute``
        (spend cap, judge refuse/answer/escalate, a human's deny, an exception) and
        after ``execute`` raised. Must be idempotent and must never give back anything
        ``execute`` already handed to the wallet. The default holds nothing.
        """
        return None

    def shown_for(self, task: str) -> bool:
        """Whether a model working on ``task`` is shown this tool (its schema costs every
        request context): every tool is, but one that serves only tasks naming something."""
        return True

    def describe(self) -> dict[str, object]:
        """The prompt-facing description: name, kind, facts, description, args schema."""
        return {
            "name": self.name,
            "kind": self.kind,
            "facts": list(self.facts),
            "description": self.description,
            "args": _args_schema(self.args_model),
        }


@lru_cache(maxsize=256)
def _args_schema(model: type[BaseModel]) -> dict[str, object]:
    # JSON-schema generation is slow and a model class never changes: build it once.
    return model.model_json_schema()


def format_validation_error(tool: str, exc: ValidationError) -> str:
    """One readable line per problem: field, what was wrong, the fix."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(arguments)"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return f"{tool}: invalid arguments ({'; '.join(parts)}); fix them and propose again."


class ToolRegistry:
    """Maps tool name -> Tool; the single source of which tools are wired for a run."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._described: list[dict[str, object]] | None = None
        self._policy: FreeReadPolicy | None = None
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add ``tool``. Programming errors, refused: a second tool with the same name, a
        free tool without its policy limits, a fact kind outside the vocabulary."""
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered; names must be unique.")
        if tool.kind == "free" and tool.free_limits is None:
            raise ValueError(
                f"free tool {tool.name!r} has no free-read policy row; expected free_limits "
                "on the tool. Fix: set free_limits = FreeLimits(max_calls_per_run=..., "
                "max_result_bytes=...) on its class."
            )
        unknown = [f for f in tool.facts if f not in FACT_KINDS]
        if unknown:
            raise ValueError(
                f"tool {tool.name!r} declares fact kinds {unknown} outside the vocabulary; "
                f"expected some of {sorted(FACT_KINDS)}. Fix: use a kind from chain.facts, "
                "or add the new kind there (one home)."
            )
        self._tools[tool.name] = tool
        self._described = None
        self._policy = None

    def free_policy(self) -> FreeReadPolicy:
        """The free-read policy: one row per registered free tool, from the tool itself."""
        if self._policy is None:
            rows = (t.policy_row() for t in self._tools.values())
            self._policy = FreeReadPolicy(r for r in rows if r is not None)
        return self._policy

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None when it is not wired."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Sorted names of the wired tools."""
        return sorted(self._tools)

    def describe(self) -> list[dict[str, object]]:
        """Prompt-facing descriptions of every wired tool, sorted by name (cached: JSON
        schema generation is the costliest part of building a prompt)."""
        if self._described is None:
            self._described = [self._tools[n].describe() for n in self.names()]
        return self._described

    def describe_for(self, task: str) -> list[dict[str, object]]:
        """:meth:`describe`, less the tools a model working on ``task`` is not shown
        (:meth:`Tool.shown_for`); a tool not shown is still wired and gated as any."""
        return [d for d in self.describe() if self._tools[str(d["name"])].shown_for(task)]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)
