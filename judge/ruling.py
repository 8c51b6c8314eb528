"""How the judge rules on one paid call, and on the best of several offers.

The rules in the order they apply, the first that decides wins: nothing missing
(answer); a chain, asset or recipient the judge may not pay (refuse); a payment the
task's registered text orders (its mandate); else the call's expected value,
EV = p x value - price, exact Decimal arithmetic on atomic units, then the caps, the
seller's pay floor and the approval threshold.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Context, Decimal

from judge.amounts import USDC_DECIMALS, format_usdc
from judge.calibration import (
    MIN_P_TO_PAY,
    NEW_SELLER_PRIOR,
    Calibrator,
    calibration_subject,
    fact_key,
)
from judge.mandates import FactReader, mandate_for, rule_on_mandate, unordered
from judge.records import VerdictRecords
from judge.request import PaidCallRequest
from judge.tasks import TaskRegistry
from judge.verdict import Decision

__all__ = ["USDC_DECIMALS", "Rules", "Ruling", "coverable_facts", "format_usdc"]


#: The arithmetic of EV: p has 6 decimals and amounts are ints, so 80 digits are exact
#: (one context made once; entering a local context per decision cost 3 us of ~130).
_EXACT = Context(prec=80)

#: A ruling: decision, p, EV (atomic USDC) and the reason in words.
Ruling = tuple[Decision, Decimal, Decimal, str]


def coverable_facts(req: PaidCallRequest) -> list[str]:
    """Fact keys of the missing items the tool declares it can provide."""
    tool_keys = {fact_key(f) for f in req.tool_facts}
    return [fact_key(m) for m in req.missing if fact_key(m) in tool_keys]


def _fmt_p(p: Decimal) -> str:
    text = format(p, "f")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.rstrip('0').ljust(2, '0')}"


def _price_limits(req: PaidCallRequest) -> tuple[tuple[str, int, str], ...]:
    """The limits a price must fit, each with the setting that changes it (named in the
    refusal, so the user sees which limit refused and how to raise it)."""
    return (
        ("the per-call cap", req.per_call_cap_atomic,
         "`nib run --per-call-cap`, or per_call_cap_atomic in [limits]"),
        ("remaining budget", req.remaining_budget, "`nib run --max-spend` sets the task's cap"),
        ("wallet balance", req.balance, "fund the wallet; `nib wallet balance` shows it"),
    )

class Rules:
    """The judge's rules over one request (and its alternatives); they sign nothing."""

    def __init__(
        self,
        calibrator: Calibrator,
        *,
        allowed: dict[int, frozenset[str]],
        value_per_item: int | None,
        tasks: TaskRegistry,
        records: VerdictRecords,
        clock: Callable[[], float],
        fact_of: FactReader | None,
    ) -> None:
        self.calibrator = calibrator
        self._allowed = allowed
        self._value_per_item = value_per_item
        self.tasks = tasks
        self.records = records
        self._clock = clock
        self._fact_of = fact_of

    def best(
        self, request: PaidCallRequest
    ) -> tuple[PaidCallRequest, Ruling]:
        """The offer to rule on: the proposed call, or among it and its alternatives the
        payable one (approve or escalate) with the highest EV, ties to the proposed call
        then the lower price. The reason names every other offer and why it lost."""
        if not request.alternatives:
            return request, self.rule(request)
        offers = (request, *request.alternatives)
        rulings = [(offer, self.rule(offer)) for offer in offers]
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

    def rule(self, req: PaidCallRequest) -> Ruling:
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
        unknown = self.unknown_asset(req)
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

    def unknown_asset(self, req: PaidCallRequest) -> str | None:
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
        coverable = coverable_facts(req)
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
        if req.seller is not None and req.task_id and self.records.lost_to(req.task_id, subject):
            return ("refuse", p, ev, f"{req.seller} took this task's payment without delivering "
                    f"(a settled purchase the task reported): this task does not pay it again; "
                    f"its p for every task is {_fmt_p(p)}{lost}")
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
        if req.approval_threshold_atomic is not None and req.price >= req.approval_threshold_atomic:
            return (
                "escalate",
                p,
                ev,
                f"price {price} USDC is at or above the approval threshold "
                f"{format_usdc(req.approval_threshold_atomic)} USDC: a human must approve "
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
        per_item = self._value_per_item or req.spend_cap_atomic // max(size, 1)
        value = per_item * len(coverable)
        ev = _EXACT.subtract(_EXACT.multiply(p, value), req.price)
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
        chain, within caps, budget, balance and threshold. A task registered with its text
        (``nib run``, ``nib submit``: its ``text_digest``) pays by direct transfer only what
        that text orders: a direct transfer buys nothing a checklist could value, so an
        address the task names as a subject is never paid on the agent's say-so. None: no
        mandate matches a task registered by its limits alone, judged on expected value."""
        limits = self.tasks.get(req.task_id) if req.task_id else None
        if limits is None or req.seller is not None or "domain" in (req.payload or {}):
            return None  # unregistered, or an x402 purchase: no order to carry out
        mandate = mandate_for(limits.mandates, req.recipient, req.price)
        if mandate is None:
            # Another amount to an ordered recipient widens the order: never judged on EV.
            reason = unordered(limits.mandates, req.recipient, req.price)
            if reason is None and limits.text_digest:
                reason = (f"found a direct transfer of {format_usdc(req.price)} USDC to "
                          f"{req.recipient.lower()}; the task's text orders no payment to it "
                          "(an order says 'send 0.10 USDC to 0x...'). A direct transfer buys "
                          "nothing, so only the task's words can order one")  # fmt: skip
            return None if reason is None else ("refuse", Decimal(0), -Decimal(req.price), reason)
        cond = mandate.condition
        value = None
        if cond is not None and cond.fact != "unreadable" and self._fact_of is not None:
            value = self._fact_of(cond)
        used = self.records.approved_to(limits.task_id, req.recipient, req.price, self._clock())
        decision, reason = rule_on_mandate(
            mandate, fact_value=value, price_limits=_price_limits(req),
            approval_threshold_atomic=req.approval_threshold_atomic, used=used,
        )  # fmt: skip
        if decision == "refuse":
            return decision, Decimal(0), -Decimal(req.price), reason
        return decision, Decimal(1), Decimal(0), reason  # the user's order is the value
