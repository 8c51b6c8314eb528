"""A worker: runs queued tasks, N at a time, and recovers the tasks of workers that died.

Each task runs as one asyncio task (runs are asyncio end to end), under a lease the
worker renews from a thread (so a busy event loop cannot starve it). A task whose lease
the worker lost (a recoverer took it) is cancelled here.

Recovery, run by every worker between claims: a task whose lease ran out belongs to a
dead worker. Its money state is recovered first (``wallet.recovery.recover_run``:
unsigned reservations released, unbroadcast transfers failed, nonces given back); then
the task is queued again when nothing of it was paid or may still be paid, and closed
otherwise, with a named reason (``STOP_DIED_AFTER_PAYMENT``, ``STOP_DIED_TOO_OFTEN``),
so a paid call in flight is never paid twice.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.loop.result import AgentResult, StopReason
from agent.queue import QueuedTask, TaskQueue
from judge.storage import process_identity

if TYPE_CHECKING:
    from agent.store import RunStore
    from wallet.recovery import RunRecovery

__all__ = [
    "STOP_DIED_AFTER_PAYMENT",
    "STOP_DIED_TOO_OFTEN",
    "STOP_WORKER_ERROR",
    "Worker",
    "WorkerSummary",
]

log = logging.getLogger(__name__)

#: The queue's stop reasons (described in agent.loop.result.STOP_REASONS).
STOP_DIED_AFTER_PAYMENT: StopReason = "worker-died-after-payment"
STOP_DIED_TOO_OFTEN: StopReason = "worker-died-too-often"
STOP_WORKER_ERROR: StopReason = "worker-error"

Execute = Callable[[QueuedTask], Awaitable[AgentResult]]
RecoverMoney = Callable[[QueuedTask], "RunRecovery"]


@dataclass
class WorkerSummary:
    """What one ``Worker.run`` did: task ids by outcome."""

    worker: str
    finished: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)


class Worker:
    """Claims queued tasks and runs ``execute`` on each, up to ``concurrency`` at once."""

    def __init__(
        self,
        queue: TaskQueue,
        execute: Execute,
        recover_money: RecoverMoney,
        *,
        store: RunStore | None = None,
        concurrency: int = 1,
        name: str | None = None,
        poll_s: float = 0.25,
        max_attempts: int = 3,
    ) -> None:
        if concurrency < 1:
            raise ValueError(
                f"concurrency must be >= 1; got {concurrency}. Fix: pass --concurrency 1 or more."
            )
        self.queue = queue
        self.execute = execute
        self.recover_money = recover_money
        self.store = store
        self.concurrency = concurrency
        self.name = name or process_identity()
        self.poll_s = poll_s
        self.max_attempts = max_attempts
        self._active: dict[str, asyncio.Task[None]] = {}

    async def run(self, *, drain: bool = False, stop: asyncio.Event | None = None) -> WorkerSummary:
        """Work until ``stop`` is set, or, with ``drain``, until no task is queued, running
        or being recovered anywhere (so a dead worker's task is waited for and recovered)."""
        summary = WorkerSummary(self.name)
        halt = threading.Event()
        loop = asyncio.get_running_loop()
        beat = threading.Thread(
            target=self._heartbeat, args=(loop, halt), name="nib-worker-lease", daemon=True
        )
        beat.start()
        try:
            while not (stop is not None and stop.is_set()):
                await asyncio.to_thread(self._recover, summary)
                while len(self._active) < self.concurrency:
                    task = await asyncio.to_thread(self.queue.claim, self.name)
                    if task is None:
                        break
                    self._active[task.id] = asyncio.create_task(self._one(task, summary))
                if drain and not self._active and await asyncio.to_thread(self.queue.open_work) == 0:
                    break
                if self._active:
                    await asyncio.wait(
                        list(self._active.values()),
                        timeout=self.poll_s,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                else:
                    await asyncio.sleep(self.poll_s)
        finally:
            halt.set()
            for pending in self._active.values():
                pending.cancel()
            if self._active:
                await asyncio.gather(*self._active.values(), return_exceptions=True)
        return summary

    async def _one(self, task: QueuedTask, summary: WorkerSummary) -> None:
        try:
            result = await self.execute(task)
            finished, reason, note = bool(result.finished), result.stop_reason, ""
        except asyncio.CancelledError:
            log.warning("task %s cancelled: %s lost its lease", task.id, self.name)
            raise
        except Exception as exc:  # the run must end in the queue, whatever happened
            log.exception("task %s raised", task.id)
            finished, reason = False, STOP_WORKER_ERROR
            note = f"{STOP_WORKER_ERROR}: {type(exc).__name__}: {exc}"[:300]
        finally:
            self._active.pop(task.id, None)
        if await asyncio.to_thread(
            self.queue.finish, task.id, self.name, finished=finished, stop_reason=reason, note=note
        ):
            (summary.finished if finished else summary.stopped).append(task.id)

    def _heartbeat(self, loop: asyncio.AbstractEventLoop, halt: threading.Event) -> None:
        while not halt.wait(self.queue.lease_s / 3):
            try:
                lost = self.queue.renew(list(self._active), self.name)
            except Exception:  # a blip: the next beat retries well inside the lease
                log.exception("renewing leases failed")
                continue
            for task_id in lost:
                running = self._active.get(task_id)
                if running is not None:
                    loop.call_soon_threadsafe(running.cancel)

    def _recover(self, summary: WorkerSummary) -> None:
        for task in self.queue.take_abandoned(self.name):
            why = f"worker {task.worker} died (lease expired)"
            recovery = self.recover_money(task)
            note = (
                f"{why}; released {len(recovery.released)}, failed {len(recovery.failed)} "
                f"unbroadcast, {len(recovery.pending)} pending, {len(recovery.settled)} "
                f"settled, nonces back {list(recovery.nonces)}"
            )
            if recovery.money_moved_or_may_move:
                self.queue.close(task.id, STOP_DIED_AFTER_PAYMENT, note)
            elif task.attempts >= self.max_attempts:
                self.queue.close(task.id, STOP_DIED_TOO_OFTEN, note)
            else:
                self.queue.requeue(task.id, note)
            if self.store is not None:
                self.store.close_died(task.id, why)
                self.store.event(task.id, "worker.recovered", {"worker": task.worker,
                                                                "by": self.name, "note": note})
            summary.recovered.append(task.id)
            log.warning("recovered task %s: %s", task.id, note)

