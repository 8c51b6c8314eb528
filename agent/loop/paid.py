"""The money-moving step: quote, spend-cap projection, the judge, then execution.

The model never moves money. A paid call is quoted for free, projected against the
spend cap (spent + reserved + price + gas) before the judge is asked, and executed
only under the judge's approving verdict, which the wallet re-checks against the exact
payload before signing. ``approve``/``deny`` of an escalated call resume here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from typing import NoReturn

from agent.errors import DeliveryFailed
from agent.interrupts import innermost
from agent.loop.asking import JudgeAsk
from agent.loop.bestoffer import BestOffer, Quoted
from agent.loop.budget import BudgetGate
from agent.loop.context import RunContext, literal_args
from agent.loop.gates import Admitted
from agent.loop.learning import Learning
from agent.loop.nondelivery import NonDeliveryWatch
from agent.loop.selfmodel import SelfModelReader
from agent.loop.state import PendingCall, jsonable
from agent.loop.stop import Stop, dependency_stop, raise_if_dependency
from agent.tools.base import Observation, Quote, Tool, retry_after
from chain.money import format_usdc
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
        self.ask = JudgeAsk(run, budget)
        self.sellers = NonDeliveryWatch(run)

    async def run_call(self, call: Admitted) -> None:
        """(Refuse a seller that failed to deliver) -> quote -> spend-cap projection ->
        judge -> (pause | refuse | execute)."""
        run, tool, norm, fp = self.run, call.tool, call.norm, call.fingerprint
        try:
            # A seller that failed to deliver earlier in this run is refused before it is
            # contacted: quoting reads its 402 and has the judge read it too.
            if self.sellers.refuse_failed(tool, norm, fp, tool.seller_for(call.args, run.tools)):
                return
            run.state.consecutive_skips = 0  # a tool runs: the seller is asked for its terms
            quote = await self.budget.bounded("the quote", tool.quote(call.args, run.tools))
        except Stop:
            raise
        except Exception as exc:
            raise_if_dependency(exc)
            cause = innermost(exc)
            failed = Observation.failure(
                tool.name, f"quote failed: {cause}", retry_after(exc), cause=cause
            )
            self.learning.record(tool, norm, fp, failed)
            return
        held = [Quoted(call, quote)]  # every quote not handed to execute() is abandoned
        try:
            self._emit_quote(tool, quote)
            if quote.amount == 0 and quote.meta.get("free"):
                # The seller answered without asking for payment: nothing to judge or sign.
                held = []
                self.learning.record(tool, norm, fp, await tool.execute(quote, None, run.tools))
                return
            if self.sellers.refuse_failed(tool, norm, fp, quote.seller):
                return  # a tool that names its seller only in the quote
            self.budget.check_before_paid(quote)
            held += await self.best_offer.alternatives(call, quote)
            for alt in held[1:]:
                self._emit_quote(alt.call.tool, alt.quote)
            verdict = await self.ask.decide(
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
        quote = pending.held_quote()
        # The pause gave the quote's reservations back; the tool re-checks them on execute
        # (a transfer whose nonce was reused meanwhile is refused as a stale quote).
        handed = False
        try:
            self.budget.check_deadline()
            await self.self_model.read()  # fresh balance for the judge; chain outage stops here
            self.budget.check_before_paid(quote)
            verdict = await self.ask.decide(
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
            cause = innermost(exc)  # a task group's wrapping names no cause
            obs = Observation.failure(
                tool.name, f"{type(cause).__name__}: {cause}", retry_after(exc), cause=cause
            )
            if isinstance(exc, DeliveryFailed):
                obs = dataclasses.replace(obs, not_delivered=exc.delivery)
        missing_before = tuple(i.kind or i.text for i in self.run.checklist.missing)
        self.learning.record(tool, norm, fp, obs)
        failed = self.sellers.check(tool, norm, quote, obs, missing_before)
        await self.ask.record_outcome(tool, norm, verdict, missing_before, failed)
