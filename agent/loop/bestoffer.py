"""Best offer: before the judge rules on a purchase, the same question is quoted (free)
at the other allowlisted sellers whose offers cover the same missing items, and the judge
rules on the one with the highest EV. A seller the task names is never swapped: then only
the proposed call is judged. A seller the task distrusts (``RunContext.distrusted_sellers``,
the rule the offline planner follows too) is never an alternative; chosen by the model, it
is still judged. An offer only compared is quoted within ALTERNATIVE_QUOTE_S
or dropped: a seller stalling its 402 does not hold a purchase from another.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.interrupts import gather_within, within
from agent.loop.context import RunContext
from agent.loop.gates import Admitted
from agent.tools.base import Quote
from agent.tools.x402.offers import allowlisted_sellers, call_inputs, offer_call
from judge.fingerprint import call_fingerprint

__all__ = ["ALTERNATIVE_QUOTE_S", "MAX_ALTERNATIVES", "BestOffer", "Quoted"]

#: At most this many other offers are quoted for one purchase.
MAX_ALTERNATIVES = 3
#: Seconds an alternative's quote (an unpaid read of its 402) may take. An offer that is
#: only compared must not hold the purchase: a seller answers its 402 in well under a
#: second (a few hundred ms over the internet), and a seller that stalls it would
#: otherwise hold every purchase it is compared in for the run's response deadline.
ALTERNATIVE_QUOTE_S = 3.0


@dataclass(frozen=True, slots=True)
class Quoted:
    """One offer put to the judge: the admitted call and its free quote."""

    call: Admitted
    quote: Quote


class BestOffer:
    """Finds and quotes one run's alternative offers for a proposed purchase."""

    def __init__(self, run: RunContext) -> None:
        self.run = run

    async def alternatives(self, call: Admitted, quote: Quote) -> list[Quoted]:
        """Quotes of other sellers' offers for the missing items ``call`` would cover, asked
        together and each within ALTERNATIVE_QUOTE_S; one not quoted (an error, or no quote
        in time) is no alternative, said with ``offer.unquoted``."""
        run = self.run
        offers = self._candidates(call, quote)
        quoted = await gather_within(
            *(within(alt.tool.quote(alt.args, run.tools), ALTERNATIVE_QUOTE_S)
              for _, alt in offers)
        )
        out: list[Quoted] = []
        for (resource, alt), got in zip(offers, quoted, strict=True):
            if isinstance(got, Quote):
                out.append(Quoted(alt, got))
                continue
            error = (
                f"no quote within {ALTERNATIVE_QUOTE_S:g} s (an offer only compared is given "
                "no longer); dropped from the comparison"
                if isinstance(got, TimeoutError) else str(got)[:300]
            )
            run.emit("offer.unquoted", {"step": run.state.step, "resource": resource,
                                        "error": error})
        return out

    def _candidates(self, call: Admitted, quote: Quote) -> list[tuple[str, Admitted]]:
        """The other allowlisted sellers' offers (resource, admitted call) to quote."""
        run = self.run
        book = call.tool.offer_book()
        seller = quote.seller
        if book is None or not seller or quote.amount == 0:
            return []
        if run.tools.task_sellers:  # the task chose its seller
            return []
        missing = {i.kind for i in run.checklist.missing if i.kind}
        kinds = [k for k in call.tool.facts_for(call.args) if k in missing]
        inputs = call_inputs(call.tool.name, call.norm)
        allowed = allowlisted_sellers(run.tools.allowlist)
        # A seller this task distrusts (it took a payment of this run and did not deliver,
        # or a lesson shown to the task says it did not) is never swapped in: the judge's p
        # for it may barely have moved, and a cheap price would then win on EV.
        seen: set[str] = {seller, *run.distrusted_sellers()}
        out: list[tuple[str, Admitted]] = []
        for offer in (o for k in kinds for o in book.for_kind(k)):
            if len(out) >= MAX_ALTERNATIVES:
                break
            if offer.seller in seen or offer.seller not in allowed:
                continue
            found = offer_call(offer, inputs, kinds)
            if found is None:
                continue
            name, raw = found
            tool = run.deps.registry.get(name)
            if tool is None or tool.kind != "paid":
                continue
            seen.add(offer.seller)
            try:
                args = tool.parse_args(raw)
            except Exception as exc:  # an offer we cannot call is no alternative
                run.emit("offer.unquoted", {"step": run.state.step, "resource": offer.resource,
                                            "error": str(exc)[:300]})
                continue
            norm = args.model_dump(mode="json")
            alt = Admitted(tool, args, norm, call_fingerprint(tool.name, norm))
            if alt.fingerprint not in run.state.executed:
                out.append((offer.resource, alt))
        return out
