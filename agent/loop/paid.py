"""The money-moving step: quote, spend-cap projection, the judge, then execution.

The model never moves money. A paid call is quoted for free, projected against the
spend cap (spent + reserved + price + gas) before the judge is asked, and executed
only under the judge's approving verdict, which the wallet re-checks against the exact
payload before signing. ``approve``/``deny`` of an escalated call resume here.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import asdict
from typing import NoReturn

from agent.errors import DeliveryFailed, NonDelivery
from agent.loop.bestoffer import BestOffer, Quoted
from agent.loop.budget import BudgetGate
from agent.loop.context import RunContext, literal_args
from agent.loop.gates import Admitted
from agent.loop.learning import Learning
from agent.loop.selfmodel import SelfModelReader
from agent.loop.state import PendingCall, jsonable, unjsonable
from agent.loop.stop import Stop, dependency_stop, raise_if_dependency
from agent.seams import AgentJudge
from agent.tools.base import Observation, Quote, Tool
from chain.money import format_usdc
from judge.calibration import Delivery, fact_key
from judge.request import CallRecord, PaidCallRequest
from judge.verdict import Verdict
from wallet.errors import CapExceeded, InsufficientBalance, VerdictVoid

__all__ = ["ApprovalDeferred", "PaidStep"]


class ApprovalDeferred(Exception):
    """Internal: a dependency failed before an approved held call was executed, so
    nothing was decided or signed; the run goes back to waiting for the approval."""

    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.reason)
        self.stop = stop


class PaidStep:
    """One run's paid calls: quote, cap, judge, then pause, refuse or execute."""

    def __init__(
        self,
        run: RunContext,
        budget: BudgetGate,
        learning: Learning,
        self_model: SelfModelReader,
    ) -> None:
        self.run = run
        self.budget = budget
        self.learning = learning
        self.self_model = self_model
        self.best_offer = BestOffer(run)

    async def run_call(self, call: Admitted) -> None:
        """Quote -> spend-cap projection -> judge -> (pause | refuse | execute)."""
        run, tool, norm, fp = self.run, call.tool, call.norm, call.fingerprint
        try:
            quote = await self.budget.bounded("the quote", tool.quote(call.args, run.tools))
        except Stop:
            raise
        except Exception as exc:
            raise_if_dependency(exc)
            self.learning.record(
                tool, norm, fp, Observation.failure(tool.name, f"quote failed: {exc}")
            )
            return
        held = [Quoted(call, quote)]  # every quote not handed to execute() is abandoned
        try:
            self._emit_quote(tool, quote)
            if quote.amount == 0 and quote.meta.get("free"):
                # The seller answered without asking for payment: nothing to judge or sign.
                held = []
                self.learning.record(tool, norm, fp, await tool.execute(quote, None, run.tools))
                return
            if self._failed_seller(tool, norm, fp, quote):
                return
            self.budget.check_before_paid(quote)
            held += await self.best_offer.alternatives(call, quote)
            for alt in held[1:]:
                self._emit_quote(alt.call.tool, alt.quote)
            verdict = await self._decide(
                tool, norm, fp, quote, human_approved=False, alternatives=held[1:]
            )
            chosen = next(
                (q for q in held if q.quote.payload_fingerprint == verdict.payload_fingerprint),
                held[0],
            )
            tool, norm, fp, quote = (
                chosen.call.tool,
                chosen.call.norm,
                chosen.call.fingerprint,
                chosen.quote,
            )
            self._emit_verdict(tool, verdict, p=verdict.p, ev=verdict.ev, offers_compared=len(held))
            if verdict.decision == "answer":
                raise Stop("judge-answered", f"judge: {verdict.reason}")
            if verdict.decision == "refuse":
                self._refused(tool, norm, fp, f"the judge refused {tool.name}", verdict.reason)
                return
            if chosen.quote.amount and len(held) > 1:
                self.budget.check_before_paid(quote)  # the winner's price against the cap
            if verdict.decision == "escalate":
                self._hold(tool, norm, fp, quote, verdict)
            held.remove(chosen)
            await self._execute(tool, norm, fp, quote, verdict)
        finally:
            for left in held:
                await self.abandon(left.call.tool, left.quote)

    async def approved(self, pending: PendingCall) -> None:
        """Execute a human-approved held call under a fresh judge-signed approve verdict.

        The human's approval lifts only the approval threshold: the judge re-decides the
        exact held payload (EV, caps, budget, live balance) and signs a new verdict, and
        the wallet still checks that verdict against the payload before signing.
        """
        tool = self.run.deps.registry.get(pending.tool)
        if tool is None:
            raise Stop("approval-denied", f"{pending.tool} is no longer wired; cannot execute.")
        quote = Quote(**unjsonable(pending.quote))
        # The pause gave the quote's reservations back; the tool re-checks them on execute
        # (a transfer whose nonce was reused meanwhile is refused as a stale quote).
        handed = False
        try:
            self.budget.check_deadline()
            await self.self_model.read()  # fresh balance for the judge; chain outage stops here
            self.budget.check_before_paid(quote)
            verdict = await self._decide(
                tool, pending.args, pending.fingerprint, quote, human_approved=True
            )
            self._emit_verdict(tool, verdict, human_approved=True)
            if verdict.decision == "answer":
                raise Stop("judge-answered", f"judge: {verdict.reason}")
            if verdict.decision != "approve":
                why = f"a human approved {tool.name} but the judge refused it"
                self._refused(tool, pending.args, pending.fingerprint, why, verdict.reason)
                return
            handed = True
            await self._execute(tool, pending.args, pending.fingerprint, quote, verdict)
        except Exception as exc:
            # An outage before the call was handed to the tool (a Stop, or a dependency's
            # error raised where no step translated it) defers the approval.
            stop = dependency_stop(exc)
            if not handed and stop is not None:
                raise ApprovalDeferred(stop) from exc
            raise
        finally:
            if not handed:
                await self.abandon(tool, quote)

    async def abandon(self, tool: Tool, quote: Quote) -> None:
        """``quote`` will not be executed: let the tool give back what quoting reserved.

        Advisory for the run's outcome: a failing hook is audited, never raised over the
        stop or refusal that got us here.
        """
        try:
            await tool.abandon(quote, self.run.tools)
        except Exception as exc:
            self.run.emit(
                "tool.abandon.error",
                {
                    "step": self.run.state.step,
                    "tool": tool.name,
                    "payload_fingerprint": quote.payload_fingerprint,
                    "error": f"{type(exc).__name__}: {exc}",
                },
            )

    def _failed_seller(self, tool: Tool, norm: dict[str, object], fp: str, quote: Quote) -> bool:
        """Refuse (free, before the judge) paying a seller that took a payment of this run
        and did not deliver: it is paid at most once for nothing."""
        seller = quote.meta.get("seller")
        why = self.run.state.failed_sellers.get(str(seller)) if seller else None
        if why is None:
            return False
        reason = (
            f"{seller} did not deliver after it was paid earlier in this run ({why}); nib "
            "never pays a seller again in a run once it failed to deliver, so this call was "
            "not put to the judge and nothing was signed. Fix: use another seller, or "
            "continue without this data."
        )
        self.run.skip("seller-failed-delivery", f"{tool.name}: {reason}", tool=tool.name,
                      args=literal_args(norm), fingerprint=fp, seller=seller)
        self.run.add_history(tool.name, norm, "refused", reason)
        return True

    def _emit_quote(self, tool: Tool, quote: Quote) -> None:
        self.run.emit(
            "quote",
            {
                "step": self.run.state.step,
                "tool": tool.name,
                "amount": quote.amount,
                "recipient": quote.recipient,
                "asset": quote.asset,
                "payload_fingerprint": quote.payload_fingerprint,
                **({"seller": quote.meta["seller"]} if quote.meta.get("seller") else {}),
            },
        )

    def _emit_verdict(self, tool: Tool, verdict: Verdict, **extra: object) -> None:
        """Audit one paid-call verdict (the judge's ruling, its id and the amount)."""
        self.run.emit(
            "verdict",
            {
                "step": self.run.state.step,
                "tool": tool.name,
                "kind": "paid",
                "decision": verdict.decision,
                "reason": verdict.reason,
                "verdict_id": verdict.id,
                "amount": verdict.amount,
                **extra,
            },
        )

    def _refused(self, tool: Tool, norm: dict[str, object], fp: str, what: str, reason: str) -> None:
        self.run.skip(
            "judge-refused",
            f"{what}: {reason}",
            tool=tool.name,
            args=literal_args(norm),
            fingerprint=fp,
        )
        self.run.add_history(tool.name, norm, "refused", reason)

    def _hold(
        self, tool: Tool, norm: dict[str, object], fp: str, quote: Quote, verdict: Verdict
    ) -> NoReturn:
        """Escalated: keep the exact quote and verdict in the state and pause for a human.
        The held quote is re-checked on approval (its nonce may be reused meanwhile)."""
        st = self.run.state
        st.pending = PendingCall(
            step=st.step,
            tool=tool.name,
            args=norm,
            fingerprint=fp,
            quote=jsonable(asdict(quote)),
            verdict=verdict.model_dump(mode="json"),
        )
        raise Stop(
            "awaiting-approval",
            f"{tool.name} for {format_usdc(quote.amount)} needs a human: "
            f"{verdict.reason}. Run `nib approve {st.run_id}` or `nib deny {st.run_id}`.",
        )

    def _request(
        self, tool: Tool, norm: dict[str, object], fp: str, quote: Quote, *, human_approved: bool
    ) -> PaidCallRequest:
        """The judge's view of one paid call: price, budgets, balance, checklist, history.

        A human-approved call is asked without an approval threshold: the human has ruled
        on the escalation, and the judge still checks EV, caps, budget and balance.
        """
        run, limits = self.run, self.run.limits
        cl = run.checklist
        by_evidence: dict[str, list[str]] = {}
        for item in cl.covered:
            by_evidence.setdefault(item.evidence_id or "", []).append(item.kind or item.text)
        costs = {e.id: e.cost_usdc for e in run.state.evidence}
        history = tuple(
            CallRecord(
                h["tool"],
                h["outcome"] == "ok",
                tuple(by_evidence.get(h.get("evidence_id") or "", ())),
                costs.get(h.get("evidence_id") or "", 0),
            )
            for h in run.state.history
            if h["tool"] and h["outcome"] in ("ok", "failed")
        )
        committed = self.budget.spend_committed()
        return PaidCallRequest(
            tool=tool.name,
            args=norm,
            call_fingerprint=fp,
            payload_fingerprint=quote.payload_fingerprint,
            price=quote.amount,
            asset=quote.asset,
            recipient=quote.recipient,
            chain_id=quote.chain_id,
            remaining_budget=max(0, limits.spend_cap_usdc - committed),
            balance=run.balance or 0,
            per_call_cap=limits.per_call_cap_usdc,
            spend_cap=limits.spend_cap_usdc,
            approval_threshold=None if human_approved else limits.approval_threshold_usdc,
            missing=tuple(i.kind or i.text for i in cl.missing),
            covered=tuple(i.kind or i.text for i in cl.covered),
            tool_facts=tuple(tool.facts_for(tool.args_model.model_validate(norm))),
            history=history,
            checklist_size=len(cl.items),
            # Direct transfers only: x402 sellers are allowlisted by URL, their payTo is
            # theirs to choose (pay_http gates the seller, the judge the price).
            known_recipients=run.tools.known_recipients() if quote.kind == "transfer" else None,
            # Who is paid for the data: the judge keeps p per (seller, fact kind).
            seller=quote.meta.get("seller"),
            # A judge with this task registered rules on the payload itself, under the
            # task's registered limits (the fields above are then only the agent's view).
            task_id=run.state.run_id,
            payload=quote.payload,
        )

    def _judge(self) -> AgentJudge:
        judge = self.run.deps.judge
        if judge is None:
            raise Stop(
                "judge-unreachable",
                "no judge is wired, so no money can move. Fix: "
                "configure the judge (in-process key or NIB_JUDGE_URL).",
            )
        return judge

    async def _decide(
        self,
        tool: Tool,
        norm: dict[str, object],
        fp: str,
        quote: Quote,
        *,
        human_approved: bool,
        alternatives: Sequence[Quoted] = (),
    ) -> Verdict:
        """The judge's verdict on one paid call, or on the best of it and its quoted
        ``alternatives`` (asked off the event loop: the judge may be a service across
        HTTP); an unreachable judge stops the run."""
        judge = self._judge()
        request = self._request(tool, norm, fp, quote, human_approved=human_approved)
        if alternatives:
            others = tuple(
                self._request(
                    a.call.tool, a.call.norm, a.call.fingerprint, a.quote, human_approved=False
                )
                for a in alternatives
            )
            request = dataclasses.replace(request, alternatives=others)
        try:
            return await self.budget.bounded(
                "the judge's ruling", asyncio.to_thread(judge.decide, request)
            )
        except Stop:
            raise
        except Exception as exc:
            raise_if_dependency(exc)
            raise

    async def _execute(
        self, tool: Tool, norm: dict[str, object], fp: str, quote: Quote, verdict: Verdict
    ) -> None:
        try:
            self.budget.check_deadline()
        except Stop:
            await self.abandon(tool, quote)
            raise
        try:
            obs = await self.budget.bounded(
                f"the paid call {tool.name}", tool.execute(quote, verdict, self.run.tools)
            )
        except BaseException as exc:
            # Gives back only what execute did not take over (e.g. a refusal before it
            # claimed the nonce); whatever the wallet signed stays the wallet's.
            await self.abandon(tool, quote)
            if not isinstance(exc, Exception) or isinstance(exc, Stop):
                raise
            if isinstance(exc, VerdictVoid):
                raise Stop("verdict-void", f"{exc}") from exc
            if isinstance(exc, CapExceeded | InsufficientBalance):
                raise Stop("cost-budget", f"{exc}") from exc
            raise_if_dependency(exc)
            obs = Observation.failure(tool.name, f"{type(exc).__name__}: {exc}")
            if isinstance(exc, DeliveryFailed):
                obs = dataclasses.replace(obs, not_delivered=exc.delivery)
        missing_before = tuple(i.kind or i.text for i in self.run.checklist.missing)
        self.learning.record(tool, norm, fp, obs)
        failed = self._delivery(tool, norm, quote, obs, missing_before)
        await self._record_outcome(tool, norm, verdict, missing_before, failed)

    def _delivery(
        self,
        tool: Tool,
        norm: dict[str, object],
        quote: Quote,
        obs: Observation,
        missing_before: tuple[str, ...],
    ) -> NonDelivery | None:
        """Whether a paid call's seller failed to deliver: the tool says so (an error after
        payment), or its settled answer covered none of the missing items it was bought
        for (a body without the fact paid for). Such a seller is recorded, audited and
        never paid again in this run."""
        seller = quote.meta.get("seller")
        failed = obs.not_delivered
        if failed is None and seller and obs.ok and obs.cost_usdc > 0:
            keys = {fact_key(f) for f in tool.facts_for(tool.args_model.model_validate(norm))}
            bought = {m for m in missing_before if fact_key(m) in keys}
            still = {i.kind or i.text for i in self.run.checklist.missing}
            if bought and bought <= still:
                why = f"its paid answer covered none of {', '.join(sorted(bought))}"
                failed = NonDelivery(str(seller), why, paid=True, status="settled")
        if failed is None:
            return None
        st = self.run.state
        st.failed_sellers[failed.seller] = f"step {st.step}: {failed.why}"[:300]
        self.run.emit("seller.not_delivered", {"step": st.step, "tool": tool.name,
                                               "url": norm.get("url"), **failed.as_dict()})
        return failed

    async def _record_outcome(
        self,
        tool: Tool,
        norm: dict[str, object],
        verdict: Verdict,
        missing_before: tuple[str, ...],
        failed: NonDelivery | None = None,
    ) -> None:
        """Tell the judge, per missing item the tool could cover, whether the call covered
        it (its calibration data; the judge files it under the tool, at its seller, from
        its own record of the verdict). A seller that took the money and did not deliver
        is reported as such (``paid-not-delivered``): the judge weighs it as strong
        evidence. Advisory: a failure here is logged, not fatal."""
        judge = self.run.deps.judge
        if judge is None:
            return
        keys = {fact_key(f) for f in tool.facts_for(tool.args_model.model_validate(norm))}
        still = {i.kind or i.text for i in self.run.checklist.missing}
        delivery: Delivery = "paid-not-delivered" if failed and failed.paid else "delivered"
        for item in missing_before:
            if fact_key(item) not in keys:
                continue
            covered = item not in still
            try:
                await asyncio.to_thread(
                    judge.record_outcome, verdict.id, fact_key(item), covered, delivery
                )
            except Exception as exc:
                raise_if_dependency(exc)
                # Calibration data is advisory: anything else is audited, not fatal.
                self.run.emit("judge.outcome.error", {"error": f"{type(exc).__name__}: {exc}"})
