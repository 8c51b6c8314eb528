"""The budget gate: steps, wall clock, tokens and the spend cap, checked before acting.

Checks are named for when they run (before a turn, before a model request, before a
paid call is put to the judge); each raises the stop its budget names, with the limit
and the observed value.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import TypeVar

from agent.interrupts import within
from agent.jsonvalues import as_int
from agent.loop.context import RunContext
from agent.loop.result import SpendSummary
from agent.loop.stop import Stop, raise_if_dependency
from agent.models.base import Purpose
from agent.seams import SpendView
from agent.tools.base import Quote
from chain.money import DEFAULT_ETH_PRICE_USDC, format_usdc, gas_to_usdc
from wallet.errors import WalletUnreachable

__all__ = ["BudgetGate"]


T = TypeVar("T")


class BudgetGate:
    """One run's budgets: what is used, what is left, and the checks that stop it."""

    def __init__(self, run: RunContext) -> None:
        self.run = run

    def check_before_turn(self) -> None:
        """Steps left and the deadline, before a turn starts."""
        limits = self.run.limits
        if self.run.state.step >= limits.max_steps:
            raise Stop(
                "max-steps",
                f"used all {limits.max_steps} steps (max_steps={limits.max_steps}); "
                "raise max_steps or choose the quality-first profile for deeper tasks.",
            )
        self.check_deadline()

    def check_deadline(self) -> None:
        elapsed = self.run.elapsed()
        if elapsed >= self.run.limits.wall_clock_s:
            raise Stop(
                "deadline",
                f"exceeded the wall clock of {self.run.limits.wall_clock_s:g} s "
                f"(elapsed={elapsed:.1f} s); raise wall_clock_s if the task needs longer.",
            )

    def time_left(self) -> float:
        """Seconds left before the run's wall clock is up (negative once it is)."""
        return self.run.limits.wall_clock_s - self.run.elapsed()

    async def bounded(self, what: str, call: Awaitable[T]) -> T:
        """Await ``call`` for at most the time the run has left; past it the call is
        cancelled and the run stops with ``deadline``. Money the call already committed
        stays as the wallet recorded it (a signed, unanswered authorization stays pending)."""
        left = self.time_left()
        if left <= 0:
            if inspect.iscoroutine(call):
                call.close()
            self.check_deadline()
        try:
            return await within(call, max(left, 0.001))
        except TimeoutError:
            if self.time_left() > 0:
                raise  # the call's own timeout, not the run's deadline
            raise Stop(
                "deadline",
                f"{what} was cut at the wall clock of {self.run.limits.wall_clock_s:g} s "
                f"(elapsed={self.run.elapsed():.1f} s); anything it had signed stays pending in "
                "the ledger. Raise wall_clock_s if the task needs longer.",
            ) from None

    def check_before_request(self, purpose: Purpose, needed: int) -> None:
        """The deadline, and the tokens a request of ``needed`` tokens plus its reply
        would bring the run to."""
        self.check_deadline()
        limits = self.run.limits
        projected = self.tokens_used() + needed + limits.reply_reserve_tokens
        if projected > limits.max_tokens:
            raise Stop(
                "token-budget",
                f"the next {purpose} request would cross max_tokens={limits.max_tokens} "
                f"(used={self.tokens_used()}, request~{needed}, reply reserve "
                f"{limits.reply_reserve_tokens}); not sent. Raise max_tokens to go on.",
            )

    def check_before_paid(self, quote: Quote) -> None:
        """Projected spend (spent + reserved + this price + its gas) must fit the cap."""
        gas = 0
        payload = quote.payload
        if "gas" in payload and "maxFeePerGas" in payload:
            gas = as_int(payload["gas"]) * as_int(payload["maxFeePerGas"])
        gas = as_int(quote.meta.get("max_gas_wei", gas))
        committed = self.spend_committed()
        limits = self.run.limits
        projected = committed + quote.amount + self.gas_as_usdc(gas)
        if projected > limits.spend_cap_atomic:
            raise Stop(
                "cost-budget",
                f"{quote.tool} would bring spend to {format_usdc(projected)} "
                f"(committed {format_usdc(committed)} + price {format_usdc(quote.amount)} "
                f"+ gas), over spend_cap_atomic={format_usdc(limits.spend_cap_atomic)}; "
                "nothing was signed. Raise the cap to allow it.",
            )

    def tokens_used(self) -> int:
        return self.run.state.tokens_in + self.run.state.tokens_out

    def tokens_left(self) -> int:
        return max(0, self.run.limits.max_tokens - self.tokens_used())

    def spend_committed(self) -> int:
        """USDC spent + gas (as USDC) + still-reserved, per our counters and the meter."""
        state = self.run.state
        ours = state.spend_usdc + self.gas_as_usdc(state.gas_wei)
        meter = self._meter()
        if meter is None:
            return ours
        try:
            usage = meter.usage(state.run_id)
        except Exception as exc:  # the meter may be the wallet service: an outage stops
            raise_if_dependency(exc)
            raise
        return max(ours, int(usage.committed))

    def gas_as_usdc(self, gas_wei: int) -> int:
        """Gas as atomic USDC at the wallet meter's ETH price: the one price its
        reservations use too (the default when no wallet is wired)."""
        meter = self._meter()
        price = meter.eth_price_usdc if meter is not None else DEFAULT_ETH_PRICE_USDC
        return gas_to_usdc(gas_wei, price)

    def _meter(self) -> SpendView | None:
        deps = self.run.deps
        return deps.meter or (deps.wallet.meter if deps.wallet else None)
    def spend_summary(self) -> SpendSummary:
        """The run's spend as the meter has it: settled + outstanding USDC, metered gas.

        A seller that settles and then errors, or names a bad receipt, still took (or
        may still take) the money: the meter's rows say so, a count of successes would
        not. Without a meter (no wallet) nothing can have moved beyond our counters.
        """
        state = self.run.state
        meter = self._meter()
        ours = SpendSummary(
            usdc_atomic=state.spend_usdc,
            gas_wei=state.gas_wei,
            usdc_display=format_usdc(state.spend_usdc),
            settled_atomic=state.spend_usdc,
        )
        if meter is None:
            return ours
        try:
            usage = meter.usage(state.run_id)
        except WalletUnreachable:
            # The wallet service is gone (the run stops with wallet-unreachable): what this
            # run saw settle, marked so; `nib runs`/`nib show` read the ledger once it is back.
            return ours.model_copy(update={"source": "run"})
        return SpendSummary.from_meter(usage)

    def spend_left(self) -> int:
        return max(0, self.run.limits.spend_cap_atomic - self.spend_committed())
