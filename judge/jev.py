"""The JEV judge: an expected-value decision for every money-moving call.

p = calibrated probability that the call yields at least one still-missing checklist
item; value = value per missing item x the missing items the tool can cover;
EV = p x value - price, exact Decimal arithmetic on atomic units. The judge signs
its ruling as a :class:`~judge.verdict.Verdict` with its own key.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from decimal import Decimal
from functools import partial

from judge.balances import BalanceReads, BalancesAhead
from judge.calibration import (
    BetaCalibrator,
    CalibrationReport,
    Calibrator,
    Delivery,
    calibration_subject,
)
from judge.errors import (
    JudgeConfigError,
    JudgeRequestInvalid,
)
from judge.fingerprint import call_fingerprint
from judge.mandates import FactReader
from judge.outcomes import Outcomes, outcome_weight
from judge.payto import TermsOf
from judge.policy import FreeDecision, FreeReadPolicy
from judge.recheck import RecheckGate
from judge.records import Grant, Standing, VerdictRecord, VerdictRecords
from judge.request import PaidCallRequest
from judge.ruling import USDC_DECIMALS, Rules, coverable_facts, format_usdc
from judge.seller_terms import AheadRead, Compared, SellerTerms, TermsAhead
from judge.tasks import TaskLimits, TaskRegistry, bind, may_read_ahead, read_terms, unbound
from judge.verdict import (
    DEFAULT_TTL_S,
    Decision,
    Verdict,
    VerdictSigner,
)

__all__ = ["USDC_DECIMALS", "Judge", "PaidCallRequest", "format_usdc", "outcome_weight"]

Emit = Callable[[str, dict[str, object]], None]


def _authorization_key(payload: Mapping[str, object] | None) -> str | None:
    """``payer:nonce`` of an EIP-3009 authorization payload (what finds its settlement on
    chain), else None."""
    message = (payload or {}).get("message")
    if not isinstance(message, Mapping) or "nonce" not in message or "from" not in message:
        return None
    return f"{str(message['from']).lower()}:{str(message['nonce']).lower()}"


def _assets_to_read(request: PaidCallRequest, tasks: TaskRegistry, rules: Rules) -> list[str]:
    """The assets of ``request``'s offers for registered tasks that the judge allows: the
    balances a decision reads (an unknown asset is refused before anything is read)."""
    return [o.asset for o in (request, *request.alternatives) if o.task_id is not None
            and tasks.get(o.task_id) is not None and rules.unknown_asset(o) is None]


def _read_offers(request: PaidCallRequest, read: TermsOf,
                check: Callable[[PaidCallRequest, SellerTerms], None]
                ) -> tuple[SellerTerms, dict[int, str]]:
    """The terms the checks (``check``) of ``request`` and its alternatives ask for, read
    with ``read``: the proposed offer's within the full read, the alternatives' beside it
    within COMPARED_READ_S (:class:`~judge.seller_terms.Compared`); and by index, why each
    alternative whose terms were not read in time is dropped from the comparison."""
    terms = SellerTerms.reading(read)
    compared = (Compared(read, [partial(check, a) for a in request.alternatives])
                if request.alternatives else None)
    check(request, terms)
    unread = compared.taken(terms) if compared is not None else {}
    return terms.sealed(), unread


def _read_terms(request: PaidCallRequest, ahead: TermsAhead | None, tasks: TaskRegistry,
                require_task: bool) -> tuple[SellerTerms | None, dict[int, str]]:
    """The sellers' terms ``request``'s checks ask for, read now or ahead (``ahead``: None
    when the judge reads no terms), before the decision lock (judge.seller_terms); and why
    each alternative dropped was not read."""
    if ahead is None:
        return None, {}
    return _read_offers(request, ahead.reader(request.task_id or ""),
                        partial(_read_offer, tasks, require_task))


def _read_offer(tasks: TaskRegistry, require_task: bool, offer: PaidCallRequest,
                terms: SellerTerms) -> None:
    limits = tasks.get(offer.task_id) if offer.task_id is not None else None
    if limits is not None or not require_task:
        read_terms(offer, limits, terms)


def _compared_offers(request: PaidCallRequest, unread: Mapping[int, str],
                    bound: Callable[[PaidCallRequest], PaidCallRequest | str]
                    ) -> tuple[tuple[PaidCallRequest, ...], list[str]]:
    """``request``'s alternatives the judge may compare (``bound`` like the proposed offer;
    none whose terms were not read for this decision), and each one dropped, named with
    why (the verdict's reason counts and names them)."""
    kept: list[PaidCallRequest] = []
    dropped: list[str] = []
    for i, alt in enumerate(request.alternatives):
        offer = unread.get(i) or bound(alt)
        if isinstance(offer, str):
            dropped.append(f"{alt.seller or alt.tool} at {format_usdc(alt.price)} USDC: {offer}")
        else:
            kept.append(offer)
    return tuple(kept), dropped


def _check_value_per_item(value_per_item: int | None) -> None:
    if value_per_item is not None and (
        isinstance(value_per_item, bool)
        or not isinstance(value_per_item, int)
        or value_per_item <= 0
    ):
        raise JudgeConfigError(
            f"found value_per_item={value_per_item!r}; expected a positive int in atomic "
            "units or None; fix: leave it unset to use spend cap / checklist size."
        )


class Judge:
    """The in-process JEV judge. Holds the judge key (through its VerdictSigner).

    ``allowed_assets`` maps chain id -> token addresses the judge will pay in; any
    other chain or asset is refused. ``value_per_item`` (atomic units) overrides the
    default value of a missing item, ``spend_cap // checklist_size``. ``records`` is the
    judge's record of issued verdicts (in memory unless given): single use and outcomes
    are enforced there, where the verdicts were issued.
    """

    def __init__(
        self,
        signer: VerdictSigner,
        calibrator: Calibrator | None = None,
        *,
        allowed_assets: Mapping[int, Iterable[str]],
        value_per_item: int | None = None,
        ttl_s: int = DEFAULT_TTL_S,
        clock: Callable[[], float] = time.time,
        free_policy: FreeReadPolicy | None = None,
        emit: Emit | None = None,
        records: VerdictRecords | None = None,
        tasks: TaskRegistry | None = None,
        balance_of: Callable[[str], int] | None = None,
        token_domain: Callable[[str], tuple[str, str]] | None = None,
        payment_settled: Callable[[VerdictRecord], bool] | None = None,
        require_task: bool = False,
        terms_of: TermsOf | None = None,
        fact_of: FactReader | None = None,
    ) -> None:
        _check_value_per_item(value_per_item)
        self._signer = signer
        self.calibrator: Calibrator = calibrator if calibrator is not None else BetaCalibrator()
        self._allowed = {
            int(chain): frozenset(a.lower() for a in assets)
            for chain, assets in allowed_assets.items()
        }
        self._value_per_item = value_per_item
        self._ttl_s = ttl_s
        self._clock = clock
        self.free_policy = free_policy if free_policy is not None else FreeReadPolicy()
        self._emit = emit
        self.records = records if records is not None else VerdictRecords(clock=clock)
        self.tasks = tasks if tasks is not None else TaskRegistry(clock=clock)
        self._balance_of = balance_of
        self._balances_ahead = BalancesAhead(balance_of)
        self._token_domain = token_domain
        #: Outcomes taken into calibration: counted only for payments ``payment_settled``
        #: proves (when given), or held until then (judge.outcomes).
        self.outcomes = Outcomes(self.records, self.calibrator, paid=payment_settled, emit=emit,
                                 clock=clock)
        self._require_task = require_task
        #: Reads the offers a seller's own 402 states (judge.payto): with it, a registered
        #: seller origin admits exactly those terms (payTo, amount, asset, chain).
        self.reads_seller_terms = terms_of is not None  # before approving a purchase
        self._ahead = TermsAhead(terms_of) if terms_of is not None else None
        self._lock = threading.Lock()
        #: Free reads allowed over the wire, per (task, tool): the judge's own count.
        self._free_reads: dict[tuple[str, str], int] = {}
        self._deciding = threading.Lock()  # a task's budget is read and spent atomically
        self.gate = RecheckGate(
            self.records, self.tasks, current_key=self._current_key, clock=clock, emit=emit
        )
        self.rules = Rules(
            self.calibrator, allowed=self._allowed, value_per_item=value_per_item,
            tasks=self.tasks, records=self.records, clock=clock, fact_of=fact_of,
        )

    def __repr__(self) -> str:
        return f"Judge(address={self.address}, chains={sorted(self._allowed)})"

    @property
    def address(self) -> str:
        """The address verdicts must be signed by to be trusted now."""
        return self._signer.address

    # -- free reads -------------------------------------------------------------------

    def decide_free(self, tool: str, calls_so_far: int) -> FreeDecision:
        """In-process: a ruling on the run's own count (the caller is the run itself)."""
        return self.free_policy.decide_free(tool, calls_so_far)

    def count_free(self, task_id: str, tool: str) -> FreeDecision:
        """A free read asked for over the wire: ruled on the judge's own count of the task's
        reads of ``tool``, never a count the caller sends; an allowed read counts one."""
        with self._lock:
            n = self._free_reads.get((task_id, tool), 0)
            decision = self.free_policy.decide_free(tool, n)
            if decision.allowed:
                self._free_reads[(task_id, tool)] = n + 1
        return decision

    # -- paid calls ------------------------------------------------------------------

    def register_task(self, limits: TaskLimits) -> TaskLimits:
        """Register a task's limits, once (see :mod:`judge.tasks`)."""
        registered = self.tasks.register(limits)
        if self._emit is not None:
            self._emit("judge.task", limits.to_wire())
        return registered

    def decide(self, request: PaidCallRequest) -> Verdict:
        """Rule on one money-moving call; every ruling is a signed verdict.

        For a registered task the limits, the remaining budget and the balance are the
        judge's own, and the payload itself is checked (see :func:`judge.tasks.bind`).
        """
        for offer in (request, *request.alternatives):
            expected = call_fingerprint(offer.tool, offer.args)
            if expected != offer.call_fingerprint:
                raise JudgeRequestInvalid(
                    f"found call_fingerprint {offer.call_fingerprint}; expected {expected} for "
                    f"{offer.tool} with these args; fix: compute it with judge.call_fingerprint."
                )
        balances = BalanceReads(self._balance_of, _assets_to_read(request, self.tasks, self.rules),
                                self._balances_ahead.take(request.task_id))
        # Outside the lock: a stalling seller or a slow node holds only this decision, and an
        # offer only compared holds it for COMPARED_READ_S at most (dropped: ``unread``).
        terms, unread = _read_terms(request, self._ahead, self.tasks, self._require_task)
        balances.ready()
        with self._deciding:
            return self._decide(request, terms, balances, unread)

    def read_ahead(self, task_id: str, url: str, method: str = "GET", body: object = None) -> AheadRead:
        """The 402 at ``url`` read now for ``task_id``'s coming decision, for the agent to
        quote (:meth:`judge.seller_terms.TermsAhead.read`, :func:`judge.tasks.may_read_ahead`)."""
        limits = self.tasks.get(task_id)
        allowed = may_read_ahead(limits, self._require_task, url, method)
        if allowed and limits is not None:  # the balance its decision reads, read meanwhile
            self._balances_ahead.start(task_id, (a for assets in self._allowed.values() for a in assets))
        ahead = self._ahead if allowed else None
        return ahead.read(task_id, url, method, body) if ahead else AheadRead(started=False)

    def _bound(self, offer: PaidCallRequest, terms: SellerTerms | None,
               balances: BalanceReads) -> PaidCallRequest | str:
        limits = self.tasks.get(offer.task_id) if offer.task_id is not None else None
        if limits is None:
            if self._require_task:
                return (
                    f"task {offer.task_id!r} is not registered with this judge; it rules only "
                    "on registered tasks; fix: register the task (nib run does it from your "
                    "configuration; a queued task is not registered with the judge unless "
                    "`nib submit` ran with the services up: `nib submit` it again with the "
                    "services up) and send its id"
                )
            return unbound(offer, terms)  # in-process: the request's limits, the seller's terms
        unknown = self.rules.unknown_asset(offer)  # before anything is read from the chain for it
        if unknown is not None:
            return unknown
        balance = balances.of(offer.asset)
        committed = self.records.committed(limits.task_id, self._clock())
        return bind(offer, limits, committed=committed, balance=balance,
                    terms_of=terms, token_domain=self._token_domain)

    def _granted(self, offer: PaidCallRequest) -> Grant | None:
        """A human's unused grant for exactly this registered task's payload, when its
        price is at or above the registered approval threshold (see :meth:`grant`)."""
        threshold = offer.approval_threshold_atomic
        if offer.task_id is None or threshold is None or offer.price < threshold:
            return None
        return self.records.open_grant(offer.task_id, offer.payload_fingerprint)

    def _decide(self, request: PaidCallRequest, terms: SellerTerms | None,
                balances: BalanceReads, unread: Mapping[int, str]) -> Verdict:
        head = self._bound(request, terms, balances)
        decision: Decision
        grant = None
        if isinstance(head, str):
            req = request
            decision, p, ev, reason = "refuse", Decimal(0), -Decimal(request.price), head
        else:
            grant = self._granted(head) if head is not request else None
            if grant is not None:
                # The human ruled on the escalation; every other rule still applies.
                head = replace(head, approval_threshold_atomic=None)
            alternatives, dropped = _compared_offers(
                request, unread, lambda a: self._bound(a, terms, balances))
            if alternatives or request.alternatives:
                head = replace(head, alternatives=alternatives)
            req, (decision, p, ev, reason) = self.rules.best(head)
            if dropped:
                reason = (f"{reason}; dropped from the comparison ({len(dropped)} of "
                          f"{1 + len(request.alternatives)} offers): {'; '.join(dropped)}")
            if grant is not None and decision == "approve" and req is head:
                reason = f"granted by {grant.granted_by} ({grant.id}): {reason}"
            else:
                grant = None
        verdict = self._signer.issue(
            decision=decision,
            call_fingerprint=req.call_fingerprint,
            payload_fingerprint=req.payload_fingerprint,
            amount=req.price,
            asset=req.asset,
            recipient=req.recipient,
            chain_id=req.chain_id,
            p=p,
            ev=ev,
            reason=reason,
            ttl_s=self._ttl_s,
            now=self._clock(),
            task_id=req.task_id,
            task_cap=req.spend_cap_atomic if req.task_id is not None else None,
        )
        self.records.issued(
            verdict,
            subject=calibration_subject(req.tool, req.seller),
            facts=tuple(coverable_facts(req)),
            task_id=req.task_id or "",
            grant=grant,
            authorization=_authorization_key(req.payload),
        )
        if self._emit is not None:
            self._emit(
                "judge.verdict",
                {
                    "verdict_id": verdict.id,
                    "decision": verdict.decision,
                    "tool": req.tool,
                    "call_fingerprint": verdict.call_fingerprint,
                    "payload_fingerprint": verdict.payload_fingerprint,
                    "amount": verdict.amount,
                    "p": verdict.p,
                    "ev": verdict.ev,
                    "reason": verdict.reason,
                },
            )
        return verdict


    # -- verdict lifecycle -------------------------------------------------------------

    def grant(self, verdict_id: str, *, by: str = "admin", task_id: str | None = None) -> Grant:
        """A human approves the escalated payment ``verdict_id`` (the admin path only);
        see :meth:`judge.recheck.RecheckGate.grant`."""
        return self.gate.grant(verdict_id, by=by, task_id=task_id)

    def revoke(self, verdict_id: str) -> None:
        """Revoke a verdict: :meth:`recheck` refuses it from now on (unless already used)."""
        self.records.revoke(verdict_id)
        if self._emit is not None:
            self._emit("judge.revoked", {"verdict_id": verdict_id})

    def _current_key(self) -> str:
        with self._lock:
            return self._signer.address

    def rotate(self, signer: VerdictSigner) -> None:
        """Trust a new judge key from now on; verdicts signed by the old key stop standing."""
        with self._lock:
            old, self._signer = self._signer.address, signer
        if self._emit is not None:
            self._emit("judge.rotated", {"old": old, "new": signer.address})

    def recheck(self, verdict: Verdict) -> None:
        """MOVES MONEY (gate): the wallet's pre-signing re-check; consumes the verdict
        (see :meth:`judge.recheck.RecheckGate.recheck`)."""
        self.gate.recheck(verdict)

    def verdict_standing(
        self, verdict_id: str, payload_fingerprint: str | None, task_id: str | None = None
    ) -> Standing:
        """Was ``verdict_id`` issued here for ``payload_fingerprint``, and consumed once?"""
        return self.records.standing(verdict_id, payload_fingerprint, task_id)

    # -- calibration --------------------------------------------------------------------

    def record_outcome(
        self,
        verdict_id: str,
        fact_kind: str,
        covered: bool,
        delivery: Delivery = "delivered",
    ) -> None:
        """Record whether an executed approved call covered a missing item (calibration).

        The subject (tool, at its seller) and the p used come from the judge's own record of the verdict, never
        from the caller; outcomes for verdicts not issued and consumed here, for fact
        kinds the call could not cover, or a second time, raise OutcomeRefused.
        It weighs what was paid (:func:`outcome_weight`, one outcome at most).
        ``paid-not-delivered`` (the seller took the money and delivered nothing usable)
        weighs the same for every task, and the reporting task pays that seller no more.
        """
        self.outcomes.record(verdict_id, fact_kind, covered, delivery)

    def hold_outcome(self, verdict_id: str, fact_kind: str, spend_id: str) -> None:
        """Hold a ``paid-not-delivered`` outcome of ``verdict_id`` for ``fact_kind`` whose
        payment (ledger row ``spend_id``) was undecided when the run ended: the wallet
        could neither cancel the authorization nor find it used or expired. Nothing is
        counted now; once the seller settles it, ``nib audit reconcile`` files it
        (:meth:`judge.outcomes.Outcomes.file_held`, which reads the chain itself) and it
        counts as any settled non-delivery, once. OutcomeRefused as for an outcome."""
        self.outcomes.hold(verdict_id, fact_kind, spend_id)

    def calibration(self) -> CalibrationReport:
        return self.calibrator.report()
