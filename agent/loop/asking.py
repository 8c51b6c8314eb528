"""The judge's side of one paid call: the request it rules on (price, budgets, balance,
checklist, history), its verdict (asked off the event loop: the judge may be a service
across HTTP), and afterwards what the call covered, for its calibration.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from agent.errors import NonDelivery
from agent.loop.bestoffer import Quoted
from agent.loop.budget import BudgetGate
from agent.loop.context import RunContext
from agent.loop.stop import Stop, raise_if_dependency
from agent.seams import AgentJudge
from agent.tools.base import Quote, Tool
from judge.calibration import Delivery, fact_key
from judge.request import CallRecord, PaidCallRequest
from judge.verdict import Verdict

__all__ = ["JudgeAsk"]


class JudgeAsk:
    """Asks the run's judge to rule on paid calls and tells it what they covered."""

    def __init__(self, run: RunContext, budget: BudgetGate) -> None:
        self.run = run
        self.budget = budget

    async def decide(
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

    async def record_outcome(
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
        evidence. A payment that never settled (the wallet cancelled the authorization or
        it expired unused) is not reported: outcomes count only for payments settled on
        chain, and the judge refuses any other (``OutcomeRefused``), which would read as a
        fault in every such trace. One still undecided (the wallet could not end the
        authorization) is held by the judge instead, and counted as ``paid-not-delivered``
        only if the seller settles it later (``nib audit reconcile`` files it). Advisory:
        a failure here is logged, not fatal."""
        judge = self.run.deps.judge
        # The undecided payment's ledger row: where reconcile later finds it settled.
        held = failed.spend_id if failed is not None and failed.outcome == "undecided" else None
        if judge is None or (failed is not None and not failed.paid and held is None):
            return
        keys = {fact_key(f) for f in tool.facts_for(tool.args_model.model_validate(norm))}
        still = {i.kind or i.text for i in self.run.checklist.missing}
        delivery: Delivery = "paid-not-delivered" if failed and failed.paid else "delivered"
        # One outcome per fact kind (the judge keeps one per verdict and kind): two items
        # of a kind bought by one call count as covered when either was.
        covered_by_kind: dict[str, bool] = {}
        for item in missing_before:
            key = fact_key(item)
            if key in keys:
                covered_by_kind[key] = covered_by_kind.get(key, False) or item not in still
        for key, covered in covered_by_kind.items():
            try:
                if held is not None:
                    await asyncio.to_thread(judge.hold_outcome, verdict.id, key, held)
                else:
                    await asyncio.to_thread(judge.record_outcome, verdict.id, key, covered,
                                            delivery)
            except Exception as exc:
                raise_if_dependency(exc)
                # Calibration data is advisory: anything else is audited, not fatal.
                self.run.emit("judge.outcome.error", {"error": f"{type(exc).__name__}: {exc}"})

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
                h.tool,
                h.outcome == "ok",
                tuple(by_evidence.get(h.evidence_id or "", ())),
                costs.get(h.evidence_id or "", 0),
            )
            for h in run.history()
            if h.tool and h.outcome in ("ok", "failed", "failed-for-good")
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
            remaining_budget=max(0, limits.spend_cap_atomic - committed),
            balance=run.balance or 0,
            per_call_cap_atomic=limits.per_call_cap_atomic,
            spend_cap_atomic=limits.spend_cap_atomic,
            approval_threshold_atomic=None if human_approved else limits.approval_threshold_atomic,
            missing=tuple(i.kind or i.text for i in cl.missing),
            covered=tuple(i.kind or i.text for i in cl.covered),
            tool_facts=tuple(tool.facts_for(tool.args_model.model_validate(norm))),
            history=history,
            checklist_size=len(cl.items),
            # Direct transfers only: x402 sellers are allowlisted by URL, their payTo is
            # theirs to choose (pay_http gates the seller, the judge the price).
            known_recipients=run.tools.known_recipients() if quote.kind == "transfer" else None,
            # Who is paid for the data: the judge keeps p per (seller, fact kind).
            seller=quote.seller,
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
