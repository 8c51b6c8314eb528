"""The wallet's pre-signing re-check of a verdict, and the human grants it requires.

A verdict stands when it is intact, signed by the judge's current key, unexpired,
issued here with exactly these terms, not revoked, and never consumed; the re-check
consumes it, once. An approval at or above a registered task's approval threshold
stands only with a human's grant (the admin path).
"""

from __future__ import annotations

from collections.abc import Callable

from judge.errors import GrantRefused, VerdictExpired, VerdictRevoked
from judge.records import Grant, VerdictRecord, VerdictRecords
from judge.tasks import TaskRegistry
from judge.verdict import Verdict, verify_verdict

__all__ = ["RecheckGate"]

Emit = Callable[[str, dict[str, object]], None]


class RecheckGate:
    """Grants and the single-use re-check, over the judge's records and tasks."""

    def __init__(
        self,
        records: VerdictRecords,
        tasks: TaskRegistry,
        *,
        current_key: Callable[[], str],
        clock: Callable[[], float],
        emit: Emit | None,
    ) -> None:
        self.records = records
        self.tasks = tasks
        self._current_key = current_key
        self._clock = clock
        self._emit = emit

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
        threshold = None if limits is None else limits.approval_threshold_atomic
        return threshold is not None and rec.amount >= threshold

    def recheck(self, verdict: Verdict) -> None:
        """MOVES MONEY (gate): the wallet's pre-signing re-check; consumes the verdict.

        Raises unless ``verdict`` still stands (intact, signed by the current key,
        unexpired, issued here with exactly these terms, not revoked) and was never
        consumed; then records its single consumption. A second re-check of the same
        verdict, from this wallet or any other, raises VerdictConsumed.
        """
        verify_verdict(verdict, verdict.judge)  # intact: the signature recovers to its judge
        signer = verdict.judge
        current = self._current_key()
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
