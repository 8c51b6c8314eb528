"""Sellers that took a payment of this run and did not deliver: found after each paid
call (the tool says so, or the settled answer covered none of the items it was bought
for), audited, and never paid again in the run (refused before it is contacted when the
call's arguments name it, else before the judge is asked).
"""

from __future__ import annotations

from agent.errors import NonDelivery
from agent.loop.context import RunContext, literal_args
from agent.tools.base import Observation, Quote, Tool
from judge.calibration import fact_key

__all__ = ["NonDeliveryWatch"]


class NonDeliveryWatch:
    """One run's record of sellers that were paid and did not deliver."""

    def __init__(self, run: RunContext) -> None:
        self.run = run

    def refuse_failed(
        self, tool: Tool, norm: dict[str, object], fp: str, seller: str | None
    ) -> bool:
        """Refuse (free, before the judge) paying ``seller`` when it took a payment of this
        run and did not deliver: it is paid at most once for nothing. The loop asks before
        quoting when the tool names the seller from its arguments (the seller then gets no
        request, nor does the judge), else after the quote."""
        found = self.run.state.failed_sellers.get(seller) if seller else None
        if found is None:
            return False
        reason = (
            f"{seller} {found}; nib never pays a seller again in a run once it failed to "
            "deliver, so this call was "
            "not put to the judge and nothing was signed. Fix: use another seller, or "
            "continue without this data."
        )
        self.run.skip("seller-failed-delivery", f"{tool.name}: {reason}", tool=tool.name,
                      args=literal_args(norm), fingerprint=fp, seller=seller)
        self.run.add_history(tool.name, norm, "refused", reason)
        return True

    def check(
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
        # What is said of the seller later is said as it was found: paid or not.
        st.failed_sellers[failed.seller] = (
            f"{failed.said()} earlier in this run (step {st.step}: {failed.why})"[:300])
        self.run.emit("seller.not_delivered", {"step": st.step, "tool": tool.name,
                                               "url": norm.get("url"), **failed.as_dict()})
        return failed
