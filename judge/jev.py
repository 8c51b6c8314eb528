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
from decimal import ROUND_HALF_EVEN, Decimal, localcontext

from judge.calibration import (
    MIN_P_TO_PAY,
    NEW_SELLER_PRIOR,
    BetaCalibrator,
    CalibrationReport,
    Calibrator,
    Delivery,
    calibration_subject,
    check_outcome,
    fact_key,
)
from judge.errors import (
    GrantRefused,
    JudgeConfigError,
    JudgeRequestInvalid,
    VerdictExpired,
    VerdictRevoked,
)
from judge.fingerprint import call_fingerprint
from judge.mandates import FactReader, mandate_for, rule_on_mandate, unordered
from judge.payto import TermsOf
from judge.policy import FreeDecision, FreeReadPolicy
from judge.records import Grant, Standing, VerdictRecord, VerdictRecords
from judge.request import PaidCallRequest
from judge.tasks import TaskLimits, TaskRegistry, bind
from judge.verdict import (
    DEFAULT_TTL_S,
    Decision,
    Verdict,
    VerdictSigner,
    verify_verdict,
)

Emit = Callable[[str, dict[str, object]], None]
USDC_DECIMALS = 6


#: A ruling: decision, p, EV (atomic USDC) and the reason in words.
Ruling = tuple[Decision, Decimal, Decimal, str]


def _coverable(req: PaidCallRequest) -> list[str]:
    """Fact keys of the missing items the tool declares it can provide."""
    tool_keys = {fact_key(f) for f in req.tool_facts}
    return [fact_key(m) for m in req.missing if fact_key(m) in tool_keys]


def format_usdc(amount: int | Decimal, decimals: int = USDC_DECIMALS) -> str:
    """Atomic units as a human amount with at least 2 decimals: 400000 -> '0.40'."""
    if type(amount) is int:  # exact without Decimal: whole and fractional digits
        whole, frac = divmod(abs(amount), 10**decimals)
        digits = str(frac).rjust(decimals, "0").rstrip("0").ljust(2, "0")
        return f"{'-' if amount < 0 else ''}{whole}.{digits}"
    value = (Decimal(amount).scaleb(-decimals)).quantize(
        Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_EVEN
    )
    if value == 0:
        value = abs(value)  # no "-0.00"
    text = format(value, "f")
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0").ljust(2, "0")
    return f"{whole}.{frac}"


#: An outcome counts one more pseudo-outcome per whole OUTCOME_WEIGHT_UNIT it paid, up to
#: OUTCOME_MAX_WEIGHT: what moves a shared p is paid for (a payment under the unit counts
#: once; with one outcome per task, seller and fact kind, each needs a task the user ran).
OUTCOME_WEIGHT_UNIT = 1_000_000
OUTCOME_MAX_WEIGHT = 10


def outcome_weight(paid: int) -> int:
    """The pseudo-outcomes an outcome of a payment of ``paid`` atomic units counts for."""
    return min(OUTCOME_MAX_WEIGHT, 1 + max(paid, 0) // OUTCOME_WEIGHT_UNIT)


def _authorization_key(payload: Mapping[str, object] | None) -> str | None:
    """``payer:nonce`` of an EIP-3009 authorization payload (what finds its settlement on
    chain), else None."""
    message = (payload or {}).get("message")
    if not isinstance(message, Mapping) or "nonce" not in message or "from" not in message:
        return None
    return f"{str(message['from']).lower()}:{str(message['nonce']).lower()}"


def _fmt_p(p: Decimal) -> str:
    text = format(p, "f")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.rstrip('0').ljust(2, '0')}"



def _price_limits(req: PaidCallRequest) -> tuple[tuple[str, int, str], ...]:
    """The limits a price must fit, each with the setting that changes it (named in the
    refusal, so the user sees which limit refused and how to raise it)."""
    return (
        ("the per-call cap", req.per_call_cap,
         "`nib run --per-call-cap`, or per_call_cap_usdc in [limits]"),
        ("remaining budget", req.remaining_budget, "`nib run --max-spend` sets the task's cap"),
        ("wallet balance", req.balance, "fund the wallet; `nib wallet balance` shows it"),
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
        if value_per_item is not None and (
            isinstance(value_per_item, bool)
            or not isinstance(value_per_item, int)
            or value_per_item <= 0
        ):
            raise JudgeConfigError(
                f"found value_per_item={value_per_item!r}; expected a positive int in atomic "
                "units or None; fix: leave it unset to use spend cap / checklist size."
            )
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
        self._fact_of = fact_of
        self._token_domain = token_domain
        self._payment_settled = payment_settled
        self._require_task = require_task
        #: Reads the offers a seller's own 402 states (judge.payto): with it, a registered
        #: seller origin admits exactly those terms (payTo, amount, asset, chain).
        self._terms_of = terms_of
        self._lock = threading.Lock()
        #: Free reads allowed over the wire, per (task, tool): the judge's own count.
        self._free_reads: dict[tuple[str, str], int] = {}
        self._deciding = threading.Lock()  # a task's budget is read and spent atomically

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
        with self._deciding:
            return self._decide(request)

    def _bound(self, offer: PaidCallRequest) -> PaidCallRequest | str:
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
            return offer  # the in-process composition for tests: the request's limits
        unknown = self._unknown_asset(offer)  # before anything is read from the chain for it
        if unknown is not None:
            return unknown
        balance = None
        if self._balance_of is not None:
            balance = self._balance_of(offer.asset)
        committed = self.records.committed(limits.task_id, self._clock())
        return bind(offer, limits, committed=committed, balance=balance,
                    terms_of=self._terms_of, token_domain=self._token_domain)

    def _granted(self, offer: PaidCallRequest) -> Grant | None:
        """A human's unused grant for exactly this registered task's payload, when its
        price is at or above the registered approval threshold (see :meth:`grant`)."""
        threshold = offer.approval_threshold
        if offer.task_id is None or threshold is None or offer.price < threshold:
            return None
        return self.records.open_grant(offer.task_id, offer.payload_fingerprint)

    def _decide(self, request: PaidCallRequest) -> Verdict:
        head = self._bound(request)
        decision: Decision
        grant = None
        if isinstance(head, str):
            req = request
            decision, p, ev, reason = "refuse", Decimal(0), -Decimal(request.price), head
        else:
            grant = self._granted(head) if head is not request else None
            if grant is not None:
                # The human ruled on the escalation; every other rule still applies.
                head = replace(head, approval_threshold=None)
            alternatives = tuple(
                b for b in (self._bound(a) for a in request.alternatives) if not isinstance(b, str)
            )
            if alternatives or request.alternatives:
                head = replace(head, alternatives=alternatives)
            req, (decision, p, ev, reason) = self._best(head)
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
            task_cap=req.spend_cap if req.task_id is not None else None,
        )
        self.records.issued(
            verdict,
            subject=calibration_subject(req.tool, req.seller),
            facts=tuple(_coverable(req)),
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

    def _best(
        self, request: PaidCallRequest
    ) -> tuple[PaidCallRequest, Ruling]:
        """The offer to rule on: the proposed call, or among it and its alternatives the
        payable one (approve or escalate) with the highest EV, ties to the proposed call
        then the lower price. The reason names every other offer and why it lost."""
        if not request.alternatives:
            return request, self._rule(request)
        offers = (request, *request.alternatives)
        rulings = [(offer, self._rule(offer)) for offer in offers]
        payable = [r for r in rulings if r[1][0] in ("approve", "escalate")]
        pool = payable or [rulings[0]]
        best = max(pool, key=lambda r: (r[1][2], r[0] is request, -r[0].price))
        lost = []
        for offer, (decision, _p, ev, why) in rulings:
            if offer is best[0]:
                continue
            name = offer.seller or offer.tool
            if decision in ("approve", "escalate"):
                lost.append(f"{name} at {format_usdc(offer.price)} USDC lost on EV {format_usdc(ev)}")
            else:
                lost.append(f"{name} at {format_usdc(offer.price)} USDC {decision}d: {why}")
        winner, (decision, p, ev, why) = best
        name = winner.seller or winner.tool
        return winner, (
            decision,
            p,
            ev,
            f"best of {len(offers)} offers is {name} at {format_usdc(winner.price)} USDC: {why}; "
            f"alternatives: {'; '.join(lost)}",
        )

    def _rule(self, req: PaidCallRequest) -> Ruling:
        """The judge's rules in the order they apply, the first that decides wins: nothing
        missing (answer); a chain, asset or recipient it may not pay (refuse); a payment the
        task's text orders (its mandate); else the call's expected value."""
        if not req.missing:
            size = req.checklist_size if req.checklist_size is not None else len(req.covered)
            return (
                "answer",
                Decimal(0),
                Decimal(0),
                f"nothing on the checklist is missing ({len(req.covered)} of {size} items "
                "covered): the history suffices to answer; no payment needed",
            )
        unpayable = self._unpayable(req)
        if unpayable is not None:
            return "refuse", Decimal(0), -Decimal(req.price), unpayable
        ordered = self._ordered(req)
        if ordered is not None:
            return ordered
        return self._on_value(req)

    def _unpayable(self, req: PaidCallRequest) -> str | None:
        """Why the judge may not pay this at all (its chain, asset or recipient), else None."""
        unknown = self._unknown_asset(req)
        if unknown is not None:
            return unknown
        known = req.known_recipients
        if known is not None and req.recipient.lower() not in {a.lower() for a in known}:
            return (
                f"unknown recipient {req.recipient}: this call may pay only the "
                f"{len(known)} address{'' if len(known) == 1 else 'es'} the task names or the "
                "user allowlisted; fix: name the recipient in the task or add it to the "
                "allowlist"
            )
        return None

    def _unknown_asset(self, req: PaidCallRequest) -> str | None:
        """Why the chain or asset is not one the judge pays in (an authorization's asset is
        its EIP-712 verifyingContract), else None."""
        if req.chain_id not in self._allowed:
            allowed_chains = ", ".join(str(c) for c in sorted(self._allowed)) or "none"
            return (
                f"unknown chain {req.chain_id}: the judge pays only on chains "
                f"{allowed_chains}; fix: quote on an allowed chain or configure allowed_assets"
            )
        assets = self._allowed[req.chain_id]
        if req.asset.lower() not in assets:
            return (
                f"unknown asset {req.asset} on chain {req.chain_id} (for an authorization, its "
                f"EIP-712 verifyingContract): allowed assets are "
                f"{', '.join(sorted(assets)) or 'none'}; fix: pay in the configured USDC"
            )
        return None

    def _on_value(self, req: PaidCallRequest) -> Ruling:
        """The ruling on expected value: p (calibrated per tool at its seller) x the value
        of the missing items it covers, less the price; then caps, the seller's pay floor
        and the approval threshold."""
        coverable = _coverable(req)
        if not coverable:
            return (
                "refuse",
                Decimal(0),
                -Decimal(req.price),
                f"{req.tool} covers none of the missing items ({', '.join(req.missing)}); it "
                f"provides {', '.join(req.tool_facts) or 'nothing declared'}: a payment that "
                "covers nothing still missing is refused",
            )
        subject = calibration_subject(req.tool, req.seller)
        p, ev, sums = self._expected_value(req, subject, coverable)
        price = format_usdc(req.price)
        for limit_name, limit, fix in _price_limits(req):
            if req.price > limit:
                return ("refuse", p, ev, f"price {price} USDC exceeds {limit_name} "
                        f"{format_usdc(limit)} USDC (fix: {fix})")
        lost = self._non_deliveries(subject, coverable) if req.seller is not None else ""
        if req.seller is not None and p < MIN_P_TO_PAY:
            return (
                "refuse",
                p,
                ev,
                f"p {_fmt_p(p)} for {req.seller or req.tool} is below the {_fmt_p(MIN_P_TO_PAY)} "
                "a seller must keep to be paid (its purchases have not covered what it "
                f"offered{lost}): {sums}",
            )
        if ev <= 0:
            return "refuse", p, ev, f"expected value {format_usdc(ev)} USDC is not positive: {sums}"
        if req.approval_threshold is not None and req.price >= req.approval_threshold:
            return (
                "escalate",
                p,
                ev,
                f"price {price} USDC is at or above the approval threshold "
                f"{format_usdc(req.approval_threshold)} USDC: a human must approve "
                f"(EV {format_usdc(ev)} USDC = {sums})",
            )
        return ("approve", p, ev, f"EV {format_usdc(ev)} USDC > 0: {sums}{lost}")

    def _expected_value(
        self, req: PaidCallRequest, subject: str, coverable: list[str]
    ) -> tuple[Decimal, Decimal, str]:
        """``(p, ev, sums)``: the best calibrated p over the items the call covers (a new
        seller starts at NEW_SELLER_PRIOR), EV = p x value - price, and the sum in words."""
        prior = req.declared_coverage
        if prior is None and req.seller is not None:
            prior = NEW_SELLER_PRIOR
        p = max(self.calibrator.p(subject, fact_key(m), prior) for m in coverable)
        size = req.checklist_size or (len(req.missing) + len(req.covered))
        per_item = self._value_per_item or req.spend_cap // max(size, 1)
        value = per_item * len(coverable)
        with localcontext() as ctx:
            ctx.prec = 80  # p has 6 decimals and amounts are ints: this is exact
            ev = p * value - req.price
        sums = (
            f"p {_fmt_p(p)} x value {format_usdc(value)} USDC ({len(coverable)} missing "
            f"item{'s' if len(coverable) != 1 else ''} x {format_usdc(per_item)} USDC) "
            f"- price {format_usdc(req.price)} USDC"
        )
        return p, ev, sums

    def _non_deliveries(self, subject: str, kinds: list[str]) -> str:
        """'; it took payment without delivering N times' when the seller has, else ''.

        One failed purchase is recorded under every fact kind it was paid for, so the
        count is the largest per kind, not their sum (a two-item sheet is one payment)."""
        n = max((self.calibrator.non_deliveries(subject, fact_key(k)) for k in kinds), default=0)
        if not n:
            return ""
        times = "once" if n == 1 else f"{n} times"
        return (
            f"; it took payment without delivering {times} before, and its calibrated p "
            "carries that"
        )

    def _ordered(self, req: PaidCallRequest) -> Ruling | None:
        """The ruling on a direct transfer the task's registered text orders (a mandate,
        judge/mandates.py): on the user's order, its condition read by the judge from the
        chain, within caps, budget, balance and threshold. None: no mandate matches, the
        call is judged on expected value like any other."""
        limits = self.tasks.get(req.task_id) if req.task_id else None
        if limits is None or req.seller is not None or "domain" in (req.payload or {}):
            return None  # unregistered, or an x402 purchase: no order to carry out
        mandate = mandate_for(limits.mandates, req.recipient, req.price)
        if mandate is None:
            reason = unordered(limits.mandates, req.recipient, req.price)
            # Another amount to an ordered recipient widens the order: never judged on EV.
            return None if reason is None else ("refuse", Decimal(0), -Decimal(req.price), reason)
        cond = mandate.condition
        value = None
        if cond is not None and cond.fact != "unreadable" and self._fact_of is not None:
            value = self._fact_of(cond)
        used = self.records.approved_to(limits.task_id, req.recipient, req.price, self._clock())
        decision, reason = rule_on_mandate(
            mandate, fact_value=value, price_limits=_price_limits(req),
            approval_threshold=req.approval_threshold, used=used,
        )  # fmt: skip
        if decision == "refuse":
            return decision, Decimal(0), -Decimal(req.price), reason
        return decision, Decimal(1), Decimal(0), reason  # the user's order is the value

    # -- verdict lifecycle -------------------------------------------------------------

    def grant(self, verdict_id: str, *, by: str = "admin", task_id: str | None = None) -> Grant:
        """A human approves the escalated payment ``verdict_id`` (the admin path only).

        The next ruling on exactly that payload for its registered task is made without
        the approval threshold (EV, caps, budget, balance and recipients still apply), and
        the approve verdict it yields is tied to the grant; the pre-signing re-check
        refuses an approval at or above the threshold that carries no grant.
        """
        rec = self.records.get(verdict_id)
        if rec is not None and task_id is not None and rec.task_id != task_id:
            raise GrantRefused(
                f"found a grant for verdict {verdict_id} of task {rec.task_id!r}; expected a "
                f"verdict of task {task_id!r}. Fix: grant the verdict the run is waiting on."
            )
        if rec is not None and self.tasks.get(rec.task_id) is None:
            raise GrantRefused(
                f"found a grant for verdict {verdict_id} of task {rec.task_id!r}, which is not "
                "registered with this judge; expected an escalation of a registered task. "
                "Fix: in-process runs are approved with `nib approve RUN` alone."
            )
        granted = self.records.grant(verdict_id, by=by)
        if self._emit is not None:
            self._emit("judge.granted", granted.to_wire())
        return granted

    def _needs_grant(self, rec: VerdictRecord) -> bool:
        if rec.decision != "approve" or not rec.task_id:
            return False
        limits = self.tasks.get(rec.task_id)
        threshold = None if limits is None else limits.approval_threshold
        return threshold is not None and rec.amount >= threshold

    def revoke(self, verdict_id: str) -> None:
        """Revoke a verdict: :meth:`recheck` refuses it from now on (unless already used)."""
        self.records.revoke(verdict_id)
        if self._emit is not None:
            self._emit("judge.revoked", {"verdict_id": verdict_id})

    def rotate(self, signer: VerdictSigner) -> None:
        """Trust a new judge key from now on; verdicts signed by the old key stop standing."""
        with self._lock:
            old, self._signer = self._signer.address, signer
        if self._emit is not None:
            self._emit("judge.rotated", {"old": old, "new": signer.address})

    def recheck(self, verdict: Verdict) -> None:
        """MOVES MONEY (gate): the wallet's pre-signing re-check; consumes the verdict.

        Raises unless ``verdict`` still stands (intact, signed by the current key,
        unexpired, issued here with exactly these terms, not revoked) and was never
        consumed; then records its single consumption. A second re-check of the same
        verdict, from this wallet or any other, raises VerdictConsumed.
        """
        verify_verdict(verdict, verdict.judge)  # intact: the signature recovers to its judge
        signer = verdict.judge
        with self._lock:
            current = self._signer.address
        if signer.lower() != current.lower():
            raise VerdictRevoked(
                f"verdict {verdict.id} is signed by {signer}, but the judge's current key is "
                f"{current}; expected a verdict from the current key. Fix: request a fresh "
                "verdict."
            )
        now = self._clock()
        if verdict.is_expired(now):
            raise VerdictExpired(
                f"verdict {verdict.id}: expired at {verdict.expires_at}, now {int(now)}; "
                "expected now < expires_at. Fix: request a fresh verdict."
            )
        self.records.consume(verdict, needs_grant=self._needs_grant)
        if self._emit is not None:
            self._emit("judge.consumed", {"verdict_id": verdict.id})

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
        ``paid-not-delivered`` (the seller took the money and delivered nothing usable)
        is weighed so the seller's p for that kind falls below the pay floor at once.
        """
        check_outcome(covered, delivery)
        rec = self.records.take_outcome(verdict_id, fact_key(fact_kind), paid=self._payment_settled)
        self.calibrator.record(rec.subject, fact_key(fact_kind), rec.p, covered,
                               weight=outcome_weight(rec.amount), delivery=delivery)
        if self._emit is not None:
            self._emit(
                "judge.outcome",
                {
                    "verdict_id": verdict_id,
                    "subject": rec.subject,
                    "fact_kind": fact_key(fact_kind),
                    "p_used": rec.p,
                    "covered": covered,
                    "delivery": delivery,
                },
            )

    def calibration(self) -> CalibrationReport:
        return self.calibrator.report()
