"""From a verdict to a reservation: the run a payment is booked under, every verdict
check in order, one payment per resource at a time, the judge's re-check, then the spend
reserved against the run's cap and the live balance. A refusal is emitted
(``wallet.refused``) and raised; nothing is reserved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from chain.errors import ChainError
from judge.storage import MutexTimeout
from judge.verdict import Verdict
from wallet.checks import VerdictChecks, ask_recheck
from wallet.core import ChainReads, WalletCore, refusal_event
from wallet.errors import AuthorizationOutstanding, SpendRefused, TaskMismatch
from wallet.ledger import SpendKind
from wallet.meter import Reservation
from wallet.terms import Terms

__all__ = ["RESOURCE_TURN_S", "Authorizer", "turn_of"]


def turn_of(run_id: str, recipient: str, resource: str) -> str:
    """The mutex one payment of ``run_id`` (a task) for ``resource`` paying ``recipient``
    holds from its live-authorization check to its reservation."""
    return f"wallet-resource:{run_id}:{recipient.lower()}:{resource}"


#: The longest a purchase waits for another payment of the same resource to be reserved.
RESOURCE_TURN_S = 30.0


class Authorizer:
    """Turns an approving, matching, fresh, unused verdict into a reservation."""

    def __init__(
        self, core: WalletCore, trusted_judge: str, recheck: Callable[[Verdict], None] | None
    ) -> None:
        self._core = core
        self.checks = VerdictChecks(core, trusted_judge)
        #: The judge's pre-signing re-check (it consumes the verdict).
        self.recheck = recheck
        #: Refuse verdicts issued to no registered task (the wallet service sets it: its
        #: callers name no run and no cap, so the verdict's task is the only one).
        self.require_task = False

    def booked_under(
        self, verdict: Verdict | None, run_id: str, spend_cap_atomic: int, kind: str
    ) -> tuple[str, int]:
        """The run and cap a payment is booked under: the task the verdict was issued to
        and its registered cap, never what the caller names (the verdict's signature is
        checked before anything is reserved). A caller naming another run is refused,
        both named; a verdict without a task (an in-process judge ruling on unregistered
        requests) keeps the caller's."""
        if isinstance(verdict, Verdict) and verdict.task_id is None and self.require_task:
            try:  # a forged one is refused as such first, in the audit trail too
                self.checks.verdict(verdict)
            except SpendRefused as exc:
                raise self.refuse(exc, run_id, verdict, kind) from None
            raise self.refuse(TaskMismatch(
                f"found verdict {verdict.id} issued to no registered task; expected a verdict "
                "the judge issued to a task it registered: the wallet service books every "
                "payment under its verdict's task. Fix: register the task (nib run does).",
                verdict_id=verdict.id), run_id, verdict, kind)
        if not isinstance(verdict, Verdict) or verdict.task_id is None:
            return run_id, spend_cap_atomic
        if run_id and run_id != verdict.task_id:
            raise self.refuse(TaskMismatch.between(run_id, verdict.id, verdict.task_id),
                              run_id, verdict, kind)
        return verdict.task_id, spend_cap_atomic if verdict.task_cap is None else verdict.task_cap

    def authorize(
        self,
        payload: dict[str, object],
        verdict: Verdict | None,
        *,
        run_id: str,
        spend_cap_atomic: int,
        kind: SpendKind,
        fingerprint_of: Callable[[Mapping[str, object]], str],
        terms_of: Callable[[dict[str, object]], Terms],
        gas_hold_of: Callable[[], int] | None = None,
        resource: str | None = None,
        authorization_of: Callable[[dict[str, object]], tuple[str, int]] | None = None,
    ) -> Reservation:
        """Run every check in order; return the reservation or raise (and emit) a refusal.

        ``authorization_of`` (typed data): the reservation is written as signed with the
        authorization's nonce and validBefore (see SpendMeter.reserve)."""
        core = self._core
        try:
            reads = ChainReads(core, head_time=isinstance(payload.get("message"), Mapping))
            checked = self.checks.verdict(verdict)
            self.checks.fingerprint(checked, payload, fingerprint_of)
            self.checks.fresh(checked)
            self.checks.terms(checked, payload, terms_of)
            with self._resource_turn(checked, run_id, resource):
                if resource is not None:
                    # Before the judge's re-check consumes the verdict, so a purchase that
                    # must wait for its task's earlier payment can still use it afterwards.
                    self._no_live_authorization(checked, run_id, resource)
                # The last check before the verdict is consumed: the chain's clock is read
                # while the checks above run (a refusal here still leaves the verdict unused).
                self.checks.window(checked, payload, reads.head_time)
                ask_recheck(self.recheck, checked)
                balance = reads.balance()
                gas_hold = gas_hold_of() if gas_hold_of is not None else 0
                return core.meter.reserve(
                    run_id,
                    checked,
                    checked.amount,
                    spend_cap_atomic,
                    balance,
                    kind=kind,
                    gas_hold=gas_hold,
                    resource=resource,
                    authorization=authorization_of(payload) if authorization_of else None,
                )
        except SpendRefused as exc:
            self.refuse(exc, run_id, verdict, kind)
            raise
        except ChainError as exc:
            core.emit(
                "wallet.refused",
                {**refusal_event(run_id, verdict, kind), "code": "chain-error", "reason": str(exc)},
            )
            raise

    def refuse(
        self, exc: SpendRefused, run_id: str, verdict: Verdict | None, kind: str
    ) -> SpendRefused:
        """Emit ``wallet.refused`` for ``exc``; return it for the caller to raise."""
        self._core.emit(
            "wallet.refused",
            {**refusal_event(run_id, verdict, kind), "code": exc.code, "reason": exc.reason},
        )
        return exc

    @contextmanager
    def _resource_turn(self, verdict: Verdict, run_id: str, resource: str | None) -> Iterator[None]:
        """One payment at a time per task, payTo and ``resource`` (see ``turn_of``) from
        the live-authorization check to the reservation, across threads, worker processes
        and machines (the wallet database's mutex). Without it two processes of a task
        could both find the resource free, both have their verdicts consumed by the judge's
        re-check, and the loser be refused by the reservation with its verdict spent. A
        wait past the limit is refused before the verdict is used."""
        if resource is None:
            yield
            return
        db = self._core.meter.store.db
        try:
            with db.mutex(turn_of(run_id, verdict.recipient, resource), timeout_s=RESOURCE_TURN_S):
                yield
        except MutexTimeout:
            raise AuthorizationOutstanding(
                f"Another payment for {resource} did not finish within {RESOURCE_TURN_S:g} s; "
                "expected one payment per resource at a time. Nothing was signed and the "
                "verdict is unused. Fix: retry once the other payment has settled.",
                ledger_id="",
                valid_before=None,
                verdict_id=verdict.id,
            ) from None

    def _no_live_authorization(self, verdict: Verdict, run_id: str, resource: str) -> None:
        """AuthorizationOutstanding when the verdict's task has a live authorization for
        ``resource`` paying the verdict's payTo. The rule is bound to what the verdict
        proves (its task, its payTo), so a task's rows, under whatever resource name it
        gives, never hold up another task's purchase."""
        live = self._core.meter.ledger.live_for(resource, runs=(run_id,), recipient=verdict.recipient)
        if live is not None:
            raise AuthorizationOutstanding(
                f"An authorization for {resource} is still live (ledger row {live.id}, "
                f"{live.status}, {live.amount} atomic units, valid until {live.valid_before}); "
                "expected none, since a second one could let the seller settle both. Nothing "
                "was signed and the verdict is unused. Fix: wait until it settles or expires "
                "(`nib audit reconcile`); a retry re-sends the same authorization.",
                ledger_id=live.id,
                valid_before=live.valid_before,
                verdict_id=verdict.id,
            )
