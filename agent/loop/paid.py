"""The money-moving step: quote, spend-cap projection, the judge, then execution.

The model never moves money. A paid call is quoted for free, projected against the
spend cap (spent + reserved + price + gas) before the judge is asked, and executed
only under the judge's approving verdict, which the wallet re-checks against the exact
payload before signing. ``approve``/``deny`` of an escalated call resume here.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import asdict
from typing import Any

from agent.loop.core import RunCore, Stop, literal_args
from agent.loop.result import usdc_display
from agent.loop.state import PendingCall, jsonable, unjsonable
from agent.tools.base import Observation, Quote, Tool

__all__ = ["PaidSteps"]


class PaidSteps(RunCore):
    """Paid-call steps of a run (mixed into the loop's run driver)."""

    async def paid(self, tool: Tool, args: Any, norm: dict[str, Any], fp: str) -> None:
        """Quote -> spend-cap projection -> judge -> (pause | refuse | execute)."""
        try:
            quote = await tool.quote(args, self.ctx)
        except Exception as exc:
            self._raise_if_dependency(exc)
            self.learn(tool, norm, fp, Observation.failure(tool.name, f"quote failed: {exc}"))
            return
        handed = False  # True once execute() owns the quote; else abandon() gives it back
        try:
            self.emit(
                "quote",
                {
                    "step": self.state.step,
                    "tool": tool.name,
                    "amount": quote.amount,
                    "recipient": quote.recipient,
                    "asset": quote.asset,
                    "payload_fingerprint": quote.payload_fingerprint,
                },
            )
            if quote.amount == 0 and quote.meta.get("free"):
                # The seller answered without asking for payment: nothing to judge or sign.
                handed = True
                self.learn(tool, norm, fp, await tool.execute(quote, None, self.ctx))
                return
            self.check_spend(quote)
            verdict = await self.judge_decide(tool, norm, fp, quote, human_approved=False)
            self._emit_verdict(tool, verdict, p=verdict.p, ev=verdict.ev)
            if verdict.decision == "answer":
                raise Stop("judge-answered", f"judge: {verdict.reason}")
            if verdict.decision == "refuse":
                self._skip(
                    "judge-refused",
                    f"the judge refused {tool.name}: {verdict.reason}",
                    tool=tool.name,
                    args=literal_args(norm),
                    fingerprint=fp,
                )
                self._add_history(tool.name, norm, "refused", verdict.reason)
                return
            if verdict.decision == "escalate":
                # The held quote is re-checked on approval (its nonce may be reused meanwhile).
                self.state.pending = PendingCall(
                    step=self.state.step,
                    tool=tool.name,
                    args=norm,
                    fingerprint=fp,
                    quote=jsonable(asdict(quote)),
                    verdict=verdict.model_dump(mode="json"),
                )
                raise Stop(
                    "awaiting-approval",
                    f"{tool.name} for {usdc_display(quote.amount)} needs a human: "
                    f"{verdict.reason}. Run `nib approve {self.state.run_id}` or "
                    f"`nib deny {self.state.run_id}`.",
                )
            handed = True
            await self.execute_paid(tool, norm, fp, quote, verdict)
        finally:
            if not handed:
                await self.abandon(tool, quote)

    async def abandon(self, tool: Tool, quote: Quote) -> None:
        """``quote`` will not be executed: let the tool give back what quoting reserved.

        Advisory for the run's outcome: a failing hook is audited, never raised over the
        stop or refusal that got us here.
        """
        try:
            await tool.abandon(quote, self.ctx)
        except Exception as exc:
            self.emit(
                "tool.abandon.error",
                {
                    "step": self.state.step,
                    "tool": tool.name,
                    "payload_fingerprint": quote.payload_fingerprint,
                    "error": f"{type(exc).__name__}: {exc}",
                },
            )

    def _emit_verdict(self, tool: Tool, verdict: Any, **extra: Any) -> None:
        """Audit one paid-call verdict (the judge's ruling, its id and the amount)."""
        self.emit(
            "verdict",
            {
                "step": self.state.step,
                "tool": tool.name,
                "kind": "paid",
                "decision": verdict.decision,
                "reason": verdict.reason,
                "verdict_id": verdict.id,
                "amount": verdict.amount,
                **extra,
            },
        )

    def check_spend(self, quote: Quote) -> None:
        """Projected spend (spent + reserved + this price + its gas) must fit the cap."""
        gas = 0
        payload = quote.payload
        if "gas" in payload and "maxFeePerGas" in payload:
            gas = int(payload["gas"]) * int(payload["maxFeePerGas"])
        gas = int(quote.meta.get("max_gas_wei", gas))
        committed = self.spend_committed()
        projected = committed + quote.amount + self.limits.gas_as_usdc(gas)
        if projected > self.limits.spend_cap_usdc:
            raise Stop(
                "cost-budget",
                f"{quote.tool} would bring spend to {usdc_display(projected)} "
                f"(committed {usdc_display(committed)} + price {usdc_display(quote.amount)} "
                f"+ gas), over spend_cap_usdc={usdc_display(self.limits.spend_cap_usdc)}; "
                "nothing was signed. Raise the cap to allow it.",
            )

    def judge_request(
        self, tool: Tool, norm: dict[str, Any], fp: str, quote: Quote, *, human_approved: bool
    ) -> Any:
        """The judge's view of one paid call: price, budgets, balance, checklist, history.

        A human-approved call is asked without an approval threshold: the human has ruled
        on the escalation, and the judge still checks EV, caps, budget and balance.
        """
        from judge.jev import CallRecord, PaidCallRequest

        cl = self.checklist
        by_evidence: dict[str, list[str]] = {}
        for item in cl.covered:
            by_evidence.setdefault(item.evidence_id or "", []).append(item.kind or item.text)
        costs = {e.id: e.cost_usdc for e in self.state.evidence}
        history = tuple(
            CallRecord(
                h["tool"],
                h["outcome"] == "ok",
                tuple(by_evidence.get(h.get("evidence_id") or "", ())),
                costs.get(h.get("evidence_id") or "", 0),
            )
            for h in self.state.history
            if h["tool"] and h["outcome"] in ("ok", "failed")
        )
        committed = self.spend_committed()
        return PaidCallRequest(
            tool=tool.name,
            args=norm,
            call_fingerprint=fp,
            payload_fingerprint=quote.payload_fingerprint,
            price=quote.amount,
            asset=quote.asset,
            recipient=quote.recipient,
            chain_id=quote.chain_id,
            remaining_budget=max(0, self.limits.spend_cap_usdc - committed),
            balance=self.balance or 0,
            per_call_cap=self.limits.per_call_cap_usdc,
            spend_cap=self.limits.spend_cap_usdc,
            approval_threshold=None if human_approved else self.limits.approval_threshold_usdc,
            missing=tuple(i.kind or i.text for i in cl.missing),
            covered=tuple(i.kind or i.text for i in cl.covered),
            tool_facts=tuple(tool.facts_for(tool.args_model.model_validate(norm))),
            history=history,
            checklist_size=len(cl.items),
            # Direct transfers only: x402 sellers are allowlisted by URL, their payTo is
            # theirs to choose (pay_http gates the seller, the judge the price).
            known_recipients=self.ctx.known_recipients() if quote.kind == "transfer" else None,
        )

    async def _call_judge(self, method: str, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self.deps.judge, method)
        try:
            if inspect.iscoroutinefunction(fn):
                return await fn(*args, **kwargs)
            return await asyncio.to_thread(fn, *args, **kwargs)
        except Exception as exc:
            self._raise_if_dependency(exc)
            raise

    async def judge_decide(
        self, tool: Tool, norm: dict[str, Any], fp: str, quote: Quote, *, human_approved: bool
    ) -> Any:
        if self.deps.judge is None:
            raise Stop(
                "judge-unreachable",
                "no judge is wired, so no money can move. Fix: "
                "configure the judge (in-process key or NIB_JUDGE_URL).",
            )
        request = self.judge_request(tool, norm, fp, quote, human_approved=human_approved)
        return await self._call_judge("decide", request)

    async def execute_paid(
        self, tool: Tool, norm: dict[str, Any], fp: str, quote: Quote, verdict: Any
    ) -> None:
        try:
            self.check_deadline()
        except Stop:
            await self.abandon(tool, quote)
            raise
        try:
            obs = await tool.execute(quote, verdict, self.ctx)
        except BaseException as exc:
            # Gives back only what execute did not take over (e.g. a refusal before it
            # claimed the nonce); whatever the wallet signed stays the wallet's.
            await self.abandon(tool, quote)
            if not isinstance(exc, Exception):
                raise
            code = getattr(exc, "code", None)
            if code == "verdict-void":
                raise Stop("verdict-void", f"{exc}") from exc
            if code in ("cap-exceeded", "insufficient-balance"):
                raise Stop("cost-budget", f"{exc}") from exc
            self._raise_if_dependency(exc)
            obs = Observation.failure(tool.name, f"{type(exc).__name__}: {exc}")
        missing_before = tuple(i.kind or i.text for i in self.checklist.missing)
        self.learn(tool, norm, fp, obs)
        await self.record_outcome(tool, norm, verdict, missing_before)

    async def record_outcome(
        self, tool: Tool, norm: dict[str, Any], verdict: Any, missing_before: tuple[str, ...]
    ) -> None:
        """Tell the judge, per missing item the tool could cover, whether the call covered
        it (its calibration data). Advisory: a failure here is logged, not fatal."""
        from judge.calibration import fact_key

        judge = self.deps.judge
        if judge is None or not hasattr(judge, "record_outcome"):
            return
        keys = {fact_key(f) for f in tool.facts_for(tool.args_model.model_validate(norm))}
        still = {i.kind or i.text for i in self.checklist.missing}
        for item in missing_before:
            if fact_key(item) not in keys:
                continue
            try:
                await self._call_judge(
                    "record_outcome", tool.name, fact_key(item), verdict.p, item not in still
                )
            except Stop:
                raise
            except Exception as exc:  # calibration data is advisory
                self.emit("judge.outcome.error", {"error": f"{type(exc).__name__}: {exc}"})

    async def approved(self, pending: PendingCall) -> None:
        """Execute a human-approved held call under a fresh judge-signed approve verdict.

        The human's approval lifts only the approval threshold: the judge re-decides the
        exact held payload (EV, caps, budget, live balance) and signs a new verdict, and
        the wallet still checks that verdict against the payload before signing.
        """
        tool = self.deps.registry.get(pending.tool)
        if tool is None:
            raise Stop("approval-denied", f"{pending.tool} is no longer wired; cannot execute.")
        quote = Quote(**unjsonable(pending.quote))
        # The pause gave the quote's reservations back; the tool re-checks them on execute
        # (a transfer whose nonce was reused meanwhile is refused as a stale quote).
        handed = False
        try:
            self.check_deadline()
            await self.self_model()  # fresh balance for the judge; chain outage stops here
            self.check_spend(quote)
            verdict = await self.judge_decide(
                tool, pending.args, pending.fingerprint, quote, human_approved=True
            )
            self._emit_verdict(tool, verdict, human_approved=True)
            if verdict.decision == "answer":
                raise Stop("judge-answered", f"judge: {verdict.reason}")
            if verdict.decision != "approve":
                self._skip(
                    "judge-refused",
                    f"a human approved {tool.name} but the judge refused it: {verdict.reason}",
                    tool=tool.name,
                    args=literal_args(pending.args),
                    fingerprint=pending.fingerprint,
                )
                self._add_history(tool.name, pending.args, "refused", verdict.reason)
                return
            handed = True
            await self.execute_paid(tool, pending.args, pending.fingerprint, quote, verdict)
        finally:
            if not handed:
                await self.abandon(tool, quote)
