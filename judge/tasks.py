"""Task registrations: the limits the judge applies to a task, set once by the user.

A task is registered with the judge once (from the user's configuration or command
line, with the judge's admin token), never per request by the agent: its spend cap,
per-call cap, approval threshold, the addresses it may pay, the seller origins it
may buy from, and the payments its text orders (mandates, judge/mandates.py). Every ruling for the task takes its limits from here, whatever the
request says; a second registration of the same id with other limits is refused.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit

from judge._store import Store
from judge.errors import JudgeRequestInvalid, TaskRegistrationConflict
from judge.fingerprint import (
    TOKEN_DOMAIN_FIELDS,
    transaction_fingerprint,
    typed_data_fingerprint,
)
from judge.mandates import Mandate
from judge.mcp_terms import SELLER_READ_S, NoOffers, OfferedTerms, mcp_tool_of
from judge.request import WIRE_NAMES, PaidCallRequest
from judge.storage import Database, Location, Migration, Tx, cell_int
from judge.terms import Terms, payload_terms

if TYPE_CHECKING:
    from judge.seller_terms import SellerTerms

TASKS = "judge_tasks"
#: Bearer tokens the judge issued, by their SHA-256 (never the token itself): a task
#: token lets its holder act for that one task; a worker token lets its holder claim the
#: task tokens of tasks registered as queued.
TOKENS = "judge_task_tokens"
#: Tasks registered by ``nib submit`` for a worker (the ones a worker token may claim).
QUEUED = "judge_queued_tasks"
#: A token's kinds.
TASK_TOKEN, WORKER_TOKEN = "task", "worker"


def _origin(url: str) -> str:
    parts = urlsplit(url.strip())
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else ""


@dataclass(frozen=True)
class TaskLimits:
    """One task's registered limits (atomic USDC units; addresses lower-cased).

    ``recipients``: every address a payment of this task may go to (direct transfers
    and sellers' payTo). ``sellers``: the origins x402 purchases may be made from.
    ``approval_threshold_atomic``: at or above it a human must approve; ``None`` never
    escalates. On the wire and in the table the limits keep their earlier names
    (judge.request.WIRE_NAMES).
    ``mandates``: the payments the task's own text orders (read from it at registration by
    :func:`judge.mandates.mandates_in`); each recipient is also one of ``recipients``.
    """

    task_id: str
    spend_cap_atomic: int
    per_call_cap_atomic: int
    approval_threshold_atomic: int | None
    recipients: tuple[str, ...]
    sellers: tuple[str, ...]
    mandates: tuple[Mandate, ...] = ()
    #: ``text_digest(text, spend_cap_atomic)`` of the task the user submitted ("": not bound, a
    #: run whose text never leaves the user's command): a worker runs a queued task only
    #: when the text it found digests to this.
    text_digest: str = ""

    def __post_init__(self) -> None:
        if not self.task_id or len(self.task_id) > 200:
            raise JudgeRequestInvalid(
                f"found task_id={self.task_id!r}; expected 1-200 characters; fix: use the run id."
            )
        for name in ("spend_cap_atomic", "per_call_cap_atomic"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise JudgeRequestInvalid(
                    f"found {name}={value!r}; expected an int >= 0 in atomic USDC units; "
                    "fix: 1 USDC = 1_000_000."
                )
        threshold = self.approval_threshold_atomic
        if threshold is not None and (
            isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0
        ):
            raise JudgeRequestInvalid(
                f"found approval_threshold_atomic={threshold!r}; expected an int >= 0 or None."
            )
        object.__setattr__(
            self, "recipients", tuple(sorted({str(a).lower() for a in self.recipients}))
        )
        sellers = tuple(sorted({_origin(str(s)) for s in self.sellers}))
        if "" in sellers:
            raise JudgeRequestInvalid(
                f"found sellers={self.sellers!r}; expected URLs with a scheme and host; "
                "fix: list sellers as http(s)://host:port."
            )
        object.__setattr__(self, "sellers", sellers)
        object.__setattr__(self, "mandates", tuple(self.mandates))
        unpaid = [m.recipient for m in self.mandates if m.recipient not in self.recipients]
        if unpaid:
            raise JudgeRequestInvalid(
                f"found mandates to {', '.join(unpaid)} that are not registered recipients; "
                "expected every ordered payment's recipient among recipients; fix: register "
                "the addresses the task names as recipients."
            )

    def to_wire(self) -> dict[str, object]:
        """The task on the wire, its limits under their wire names (WIRE_NAMES)."""
        wire = {field: name for name, field in WIRE_NAMES.items()}
        return {**{wire.get(k, k): v for k, v in asdict(self).items()},
                "recipients": list(self.recipients), "sellers": list(self.sellers),
                "mandates": [m.to_wire() for m in self.mandates]}  # fmt: skip

    @classmethod
    def from_wire(cls, data: Mapping[str, object]) -> TaskLimits:
        # The casts name what the wire should carry; __post_init__ checks every value's
        # type and range and refuses what is not (JudgeRequestInvalid naming the field).
        data = {WIRE_NAMES.get(k, k): v for k, v in data.items()}  # either name reads
        try:
            return cls(
                task_id=str(data["task_id"]),
                spend_cap_atomic=cast(int, data["spend_cap_atomic"]),
                per_call_cap_atomic=cast(int, data["per_call_cap_atomic"]),
                approval_threshold_atomic=cast("int | None", data.get("approval_threshold_atomic")),
                recipients=tuple(cast(Iterable[str], data.get("recipients") or ())),
                sellers=tuple(cast(Iterable[str], data.get("sellers") or ())),
                mandates=tuple(
                    Mandate.from_wire(m)
                    for m in cast(Iterable[Mapping[str, object]], data.get("mandates") or ())
                ),
                text_digest=str(data.get("text_digest") or ""),
            )
        except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
            raise JudgeRequestInvalid(
                f"found a malformed task registration ({type(exc).__name__}: {exc}); expected "
                "the fields of judge.tasks.TaskLimits; fix: send TaskLimits.to_wire()."
            ) from exc

    def seller_allowed(self, url: str | None) -> bool:
        return url is not None and _origin(url) in self.sellers


MIGRATIONS: list[Migration] = [
    Migration(
        1,
        "task registrations",
        (
            f"""CREATE TABLE IF NOT EXISTS {TASKS} (
                task_id TEXT PRIMARY KEY,
                spend_cap {{int}} NOT NULL,
                per_call_cap {{int}} NOT NULL,
                approval_threshold {{int}},
                recipients TEXT NOT NULL,
                sellers TEXT NOT NULL,
                registered_at {{real}} NOT NULL
            )""",
        ),
    ),
    Migration(
        2,
        "task and worker tokens (their hashes), tasks queued for a worker",
        (
            f"""CREATE TABLE IF NOT EXISTS {TOKENS} (
                token_hash TEXT PRIMARY KEY,
                kind TEXT NOT NULL,
                task_id TEXT,
                issued_at {{real}} NOT NULL
            )""",
            f"""CREATE TABLE IF NOT EXISTS {QUEUED} (
                task_id TEXT PRIMARY KEY,
                queued_at {{real}} NOT NULL
            )""",
        ),
    ),
    Migration(
        3,
        "the payments a task's text orders (mandates), as JSON",
        (f"ALTER TABLE {TASKS} ADD COLUMN mandates TEXT",),
    ),
    Migration(
        4,
        "the digest of a task's text and cap, bound at registration (a queued task's text)",
        (f"ALTER TABLE {TASKS} ADD COLUMN text_digest TEXT NOT NULL DEFAULT ''",),
    ),
]


def text_digest(text: str, spend_cap_atomic: int) -> str:
    """What binds a task's text and spend cap to its registration: SHA-256 of both."""
    return hashlib.sha256(json.dumps([text, spend_cap_atomic]).encode()).hexdigest()


def token_hash(token: str) -> str:
    """What the judge keeps of a token it issued."""
    return hashlib.sha256(token.encode()).hexdigest()


class TaskRegistry:
    """The judge's table of registered tasks (nib's database, or memory)."""

    def __init__(
        self,
        db: Location | Database | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = Store(db, component="judge.tasks", migrations=MIGRATIONS)
        self._clock = clock
        #: Registered limits already read (registrations never change): a decision looks
        #: its task up several times, and the re-check again.
        self._known: dict[str, TaskLimits | None] = {}
        self._known_lock = threading.Lock()
        #: A registry on a database of its own in this process's memory (the in-process
        #: judge's: ``nib run --in-process``, tests, benchmarks) sees every registration,
        #: so it keeps "not registered" too; one on a shared database must ask again.
        self._private = db is None
        self._registrations = 0  # registrations made here: a "not registered" read before one is stale

    def register(self, limits: TaskLimits) -> TaskLimits:
        """Register ``limits`` once; the same limits again are a no-op, others are refused."""
        with self._store.transaction() as conn:
            existing = self._get(conn, limits.task_id)
            if existing is not None:
                if existing != limits:
                    raise TaskRegistrationConflict(
                        f"task {limits.task_id} is already registered with {existing}; found a "
                        f"second registration with {limits}; expected limits set once. Fix: "
                        "register a new task id for new limits."
                    )
                return existing
            conn.execute(
                f"INSERT INTO {TASKS} (task_id, spend_cap, per_call_cap, approval_threshold, "
                "recipients, sellers, registered_at, mandates, text_digest) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    limits.task_id,
                    limits.spend_cap_atomic,
                    limits.per_call_cap_atomic,
                    limits.approval_threshold_atomic,
                    ",".join(limits.recipients),
                    ",".join(limits.sellers),
                    self._clock(),
                    json.dumps([m.to_wire() for m in limits.mandates]),
                    limits.text_digest,
                ),
            )
        with self._known_lock:
            self._registrations += 1
            self._known.pop(limits.task_id, None)
        return limits

    def issue_token(self, kind: str, task_id: str | None = None) -> str:
        """A new bearer token of ``kind`` (for ``task_id``); only its hash is kept, so it
        holds across a restart of the judge and the records never reveal it."""
        token = secrets.token_hex(32)
        self._store.execute(
            f"INSERT INTO {TOKENS} (token_hash, kind, task_id, issued_at) VALUES (?, ?, ?, ?)",
            (token_hash(token), kind, task_id, self._clock()),
        )
        return token

    def token_scope(self, token: str) -> tuple[str, str | None] | None:
        """(kind, task id) of a token this judge issued, else None."""
        rows = self._store.query(
            f"SELECT kind, task_id FROM {TOKENS} WHERE token_hash = ?", (token_hash(token),)
        )
        if not rows:
            return None
        task = rows[0]["task_id"]
        return str(rows[0]["kind"]), None if task is None else str(task)

    def mark_queued(self, task_id: str) -> None:
        """Record that ``task_id`` was registered for a worker (``nib submit``)."""
        with self._store.transaction() as conn:
            if conn.one(f"SELECT task_id FROM {QUEUED} WHERE task_id = ?", (task_id,)) is None:
                conn.execute(f"INSERT INTO {QUEUED} (task_id, queued_at) VALUES (?, ?)",
                             (task_id, self._clock()))

    def queued(self, task_id: str) -> bool:
        return bool(self._store.query(f"SELECT task_id FROM {QUEUED} WHERE task_id = ?", (task_id,)))

    def get(self, task_id: str) -> TaskLimits | None:
        """The registered limits (a plain read: registrations never change, and the
        judge's re-check asks while it holds the judge's write lock)."""
        known = self._known.get(task_id, _UNREAD)
        if known is not _UNREAD:
            return known  # type: ignore[return-value]
        seen = self._registrations
        rows = self._store.query(f"SELECT {_COLUMNS} FROM {TASKS} WHERE task_id = ?", (task_id,))
        if not rows and not self._private:
            return None  # not kept: another process may register the task later
        limits = _limits(tuple(rows[0].values())) if rows else None
        with self._known_lock:
            if limits is None and seen != self._registrations:
                return None  # registered meanwhile: not kept
            if len(self._known) >= KNOWN_TASKS:
                self._known.pop(next(iter(self._known)), None)  # the oldest read first
            self._known[task_id] = limits
        return limits

    @staticmethod
    def _get(conn: Tx, task_id: str) -> TaskLimits | None:
        row = conn.one(f"SELECT {_COLUMNS} FROM {TASKS} WHERE task_id = ?", (task_id,))
        return None if row is None else _limits(row)


#: Registered tasks whose limits a judge keeps in memory once read (the oldest goes first).
KNOWN_TASKS = 4096
_UNREAD = object()

_COLUMNS = (
    "task_id, spend_cap, per_call_cap, approval_threshold, recipients, sellers, mandates, "
    "text_digest"
)


def _limits(row: tuple[object, ...]) -> TaskLimits:
    threshold = row[3]
    return TaskLimits(
        task_id=str(row[0]),
        spend_cap_atomic=cell_int(row[1]),
        per_call_cap_atomic=cell_int(row[2]),
        approval_threshold_atomic=None if threshold is None else cell_int(threshold),
        recipients=tuple(a for a in str(row[4]).split(",") if a),
        sellers=tuple(s for s in str(row[5]).split(",") if s),
        mandates=tuple(Mandate.from_wire(m) for m in json.loads(str(row[6] or "[]"))),
        text_digest=str(row[7] or ""),
    )


def bind(
    offer: PaidCallRequest, limits: TaskLimits, *, committed: int, balance: int | None,
    terms_of: SellerTerms | None = None,
    token_domain: Callable[[str], tuple[str, str]] | None = None,
) -> PaidCallRequest | str:
    """``offer`` with the task's registered limits in place of the request's, or the
    reason it cannot be paid at all.

    The judge rules on the payload itself: its fingerprint is recomputed, and its amount,
    recipient, asset and chain must be the offer's. A direct transfer's recipient must be
    registered; an x402 purchase must come from a registered seller origin and, when the
    judge reads sellers' 402s (``terms_of``, the services), pay exactly an offer (payTo,
    amount, asset, chain) the named seller's own 402 for the resource states, registered or not (its outcomes are credited
    to that seller; the payload binds the address, so a later change voids the verdict),
    as read for this decision before the judge's decision lock (judge.seller_terms).
    Without ``terms_of`` (in-process) a purchase pays a registered recipient. The remaining budget is the
    cap less what the judge itself approved for the task (consumed, or still live);
    ``balance`` is what the judge read from the chain (``None``: keep the request's);
    ``token_domain`` reads a token's own EIP-712 ``(name, version)`` from the chain: an
    authorization under any other domain is refused.
    """
    refusal = _refusal(offer, limits, terms_of) or _domain_refusal(offer, token_domain)
    if refusal is not None:
        return refusal
    return replace(
        offer,
        per_call_cap_atomic=limits.per_call_cap_atomic,
        spend_cap_atomic=limits.spend_cap_atomic,
        approval_threshold_atomic=limits.approval_threshold_atomic,
        remaining_budget=max(0, limits.spend_cap_atomic - committed),
        balance=offer.balance if balance is None else balance,
        # Past _refusal the recipient is registered or the payTo the seller's 402 states.
        known_recipients=tuple(sorted({*limits.recipients, offer.recipient.lower()})),
        alternatives=(),
    )


def _same_origin(a: str, b: str) -> bool:
    """Whether two URLs are on one origin (scheme, host, port; default ports filled in)."""
    def key(url: str) -> tuple[str, str, int | None]:
        parts = urlsplit(url.strip())
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
        return parts.scheme.lower(), (parts.hostname or "").lower(), port

    return key(a)[1] != "" and key(a) == key(b)


def read_terms(offer: PaidCallRequest, limits: TaskLimits | None, terms_of: SellerTerms) -> None:
    """Read into ``terms_of`` the sellers' terms the checks of ``offer`` ask for (those of
    :func:`bind` for a registered task's ``limits``, of :func:`unbound` for none), so that
    the judge reads before its decision lock and rules under it on what it read."""
    if "primaryType" not in (offer.payload or {}):
        return  # no x402 authorization: no seller's terms to read (a direct transfer)
    if limits is not None:
        _refusal(offer, limits, terms_of)
    else:
        unbound(offer, terms_of)


def may_read_ahead(limits: TaskLimits | None, require_task: bool, url: str, method: str) -> bool:
    """Whether the judge reads the 402 at ``url`` ahead of a decision of the task whose
    ``limits`` are given (None: not registered): an http(s) GET or POST of a seller the
    task may pay; any seller for an unregistered task when the judge rules on those (the
    in-process composition), none when it does not (the service)."""
    if method not in ("GET", "POST") or not url.startswith(("http://", "https://")):
        return False
    if limits is None:
        return not require_task
    return limits.seller_allowed(url)


def unbound(offer: PaidCallRequest, terms_of: SellerTerms | None) -> PaidCallRequest | str:
    """``offer`` of a task registered nowhere (the in-process composition: ``nib run
    --in-process``, tests, benchmarks), ruled on the request's own limits; but when the
    judge reads sellers' terms (``terms_of``), an x402 purchase pays exactly an offer the
    named seller's own 402 states, as a registered task's must (the seller's origin is
    admitted by the agent's allowlist: no registration names one), else the reason."""
    if terms_of is None or "primaryType" not in (offer.payload or {}):
        return offer
    seller = offer.seller or str(offer.args.get("url") or "")
    named = TaskLimits(task_id=(offer.task_id or "unregistered")[:200], spend_cap_atomic=0,
                       per_call_cap_atomic=0, approval_threshold_atomic=None, recipients=(),
                       sellers=(seller,) if _origin(seller) else ())
    return _refusal(offer, named, terms_of) or offer


def _payee_refusal(offer: PaidCallRequest, terms: Terms, terms_of: SellerTerms) -> str | None:
    """Why an x402 purchase does not pay the seller it names what it asks, else None.

    Outcomes of a purchase are credited to the seller it names, so the judge approves one
    only when it pays exactly an offer that seller's own 402 states (read by the judge
    now): the resource must be an http(s) URL (or MCP server) on the named seller's
    origin, and the payload must pay that offer's payTo its amount, in its asset, on its
    chain (a 1-unit payment to the seller's real payTo would otherwise buy a calibration
    outcome for almost nothing). An MCP tool's 402 is read over MCP (judge.mcp_terms)."""
    mcp = mcp_tool_of(offer.args)
    url = mcp.server if mcp is not None else offer.args.get("url")
    seller = offer.seller or (url if isinstance(url, str) else "")
    recipient = terms.recipient
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return (
            f"the purchase names seller {seller!r} and pays {recipient}, but no http(s) "
            "resource or MCP server whose 402 the judge can read, so it cannot check that "
            "the seller asks to be paid at that address; expected an x402 purchase of an "
            "http(s) resource or MCP tool; fix: buy through pay_http or pay_mcp"
        )
    if not _same_origin(seller, url):
        return (
            f"the purchase names seller {seller!r} but buys {url} (another origin); "
            "expected the resource on the seller's own origin; fix: name the seller whose "
            "resource is bought"
        )
    if mcp is not None:
        return mcp.refusal(offer, recipient, terms_of.mcp)
    asked = terms_of(url, str(offer.args.get("method") or "GET"), offer.args.get("body"))
    pays = OfferedTerms(recipient.lower(), terms.amount, terms.asset.lower(), terms.chain_id)
    if pays in asked:
        return None
    if not asked:
        # Said as what it is (an outside tester read a stall as a wrong address).
        why = asked.why if isinstance(asked, NoOffers) else "it stated no offer"
        stalled = isinstance(asked, NoOffers) and asked.stalled
        expected, fix = ((f"a 402 within the judge's {SELLER_READ_S:g} s read",
                          "retry once the seller answers, or buy from another seller")
                         if stalled else
                         ("a 402 stating an exact offer on a chain and asset the judge allows",
                          "buy from another seller, or from this one once it offers such terms"))
        return (
            f"the judge could not read seller {seller}'s terms for {url} ({why}), so it "
            f"cannot check that the payload's payTo {recipient} is the seller's; nothing "
            f"was approved; expected {expected}; fix: {fix}"
        )
    if recipient.lower() not in {a.pay_to for a in asked}:
        named = ", ".join(sorted({a.pay_to for a in asked}))
        return (
            f"the payload pays {recipient}, but seller {seller}'s own 402 for {url} asks to be "
            f"paid at {named}; "
            "a payment to another address would be credited to a seller it did not pay; "
            "expected the payTo the seller's 402 states; fix: pay the payTo of the seller's "
            "current 402 offer"
        )
    return (
        f"the payload pays {pays}, but seller {seller}'s own 402 for {url} asks "
        f"{'; or '.join(str(a) for a in asked)}; a payment on other terms would be credited "
        "to the seller as a purchase at its price; expected exactly the payTo, amount, asset "
        "and chain the seller's 402 states; fix: pay the seller's current 402 offer as stated"
    )


def _domain_refusal(
    offer: PaidCallRequest, token_domain: Callable[[str], tuple[str, str]] | None
) -> str | None:
    """Why an authorization's EIP-712 domain is not its token's (name, version, chain id,
    verifying contract), else None."""
    domain = (offer.payload or {}).get("domain")
    if token_domain is None or not isinstance(domain, Mapping):
        return None
    try:
        name, version = token_domain(offer.asset)
    except Exception as exc:  # the verifying contract is no token, or the chain did not answer
        return (
            f"the authorization's EIP-712 verifyingContract {offer.asset} answered no token "
            f"domain ({type(exc).__name__}); expected the token's own contract; fix: build the "
            "authorization under the token's own domain (chain.usdc.token_domain)"
        )
    found = (domain.get("name"), str(domain.get("version")), str(domain.get("chainId")),
             str(domain.get("verifyingContract")).lower(), sorted(domain))
    expected = (name, version, str(offer.chain_id), offer.asset.lower(),
                sorted(TOKEN_DOMAIN_FIELDS))
    if found != expected:
        return (
            f"the authorization's EIP-712 domain (name, version, chainId, verifyingContract, "
            f"its fields) "
            f"is {found}, the token on chain signs under {expected}; the token would reject "
            "it and the signature would hold the cap until it expires; fix: build the "
            "authorization under the token's own domain (chain.usdc.token_domain)"
        )
    return None


def _refusal(
    offer: PaidCallRequest, limits: TaskLimits, terms_of: SellerTerms | None = None
) -> str | None:
    """Why ``offer`` cannot be paid under ``limits`` (no payload, a fingerprint or terms
    that are not the payload's, a recipient or seller not registered), else None."""
    if offer.payload is None:
        return (
            "the request carries no payload: with a registered task the judge rules only on "
            "the payload itself; fix: send the quoted payload with the request"
        )
    payload = dict(offer.payload)
    try:
        is_typed = "primaryType" in payload
        found = typed_data_fingerprint(payload) if is_typed else transaction_fingerprint(payload)
        terms = payload_terms(payload)
    except JudgeRequestInvalid as exc:
        return f"the payload is not payable: {exc}"
    if found != offer.payload_fingerprint:
        return (
            f"the payload's fingerprint is {found}, the request names "
            f"{offer.payload_fingerprint}; fix: send the payload the fingerprint was taken from"
        )
    named = (offer.price, offer.recipient.lower(), offer.asset.lower(), offer.chain_id)
    actual = (terms.amount, terms.recipient.lower(), terms.asset.lower(), terms.chain_id)
    if named != actual:
        return (
            f"the request names (amount, recipient, asset, chain) {named}, the payload pays "
            f"{actual}; fix: describe the payload as it is"
        )
    seller = offer.seller or str(offer.args.get("url") or "")
    if is_typed and not limits.seller_allowed(seller):
        return (
            f"seller {_origin(seller) or seller!r} is not registered for task "
            f"{limits.task_id} (registered: {', '.join(limits.sellers) or 'none'}); fix: add "
            "its origin to NIB_SELLER_ALLOWLIST before the run"
        )
    if is_typed and terms_of is not None:
        return _payee_refusal(offer, terms, terms_of)
    if terms.recipient.lower() not in limits.recipients:
        return (
            f"recipient {terms.recipient} is not registered for task {limits.task_id} (it may "
            f"pay {len(limits.recipients)} address{'' if len(limits.recipients) == 1 else 'es'}"
            "); fix: name the address in the task, or add it to NIB_SELLER_ALLOWLIST, "
            "before the run"
        )
    return None
