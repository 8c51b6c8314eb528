"""The work queue ends a task with a stop reason of the one StopReason type.

A run's own stops are proven by the loop tests; these are the three the queue writes for
a task whose run did not return (agent.loop.result.QUEUE_STOPS).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import get_args

from agent.loop.result import QUEUE_STOPS, STOP_REASONS, AgentResult, StopReason
from agent.queue import QueuedTask, TaskQueue
from agent.worker import Worker
from wallet.recovery import RunRecovery


def _nothing_moved(task: QueuedTask) -> RunRecovery:
    return RunRecovery(task.id, (), (), (), (), ())


def test_queue_stops_are_stop_reasons_with_a_description() -> None:
    assert QUEUE_STOPS <= set(get_args(StopReason))
    assert all(STOP_REASONS[reason].startswith("(queue)") for reason in QUEUE_STOPS)


def test_a_run_that_raises_ends_worker_error_with_the_error_in_the_note(tmp_path: Path) -> None:
    queue = TaskQueue(tmp_path / "nib.db")
    task_id = queue.submit("what is the base fee?")

    async def explode(task: QueuedTask) -> AgentResult:
        raise RuntimeError("the store was lost")

    worker = Worker(queue, explode, _nothing_moved, name="w1", poll_s=0.01)
    asyncio.run(worker.run(drain=True))
    row = queue.get(task_id)
    assert (row.status, row.stop_reason) == ("stopped", "worker-error")
    assert "RuntimeError: the store was lost" in row.note


def test_a_task_whose_workers_died_too_often_is_closed(tmp_path: Path) -> None:
    now = [1000.0]
    queue = TaskQueue(tmp_path / "nib.db", lease_s=30.0, clock=lambda: now[0])
    task_id = queue.submit("what is the base fee?")
    assert queue.claim("dead-worker") is not None  # its first and last attempt
    now[0] += 31.0  # the lease ran out

    async def never(task: QueuedTask) -> AgentResult:
        raise AssertionError("a closed task is not run again")

    worker = Worker(queue, never, _nothing_moved, name="w2", poll_s=0.01, max_attempts=1)
    asyncio.run(worker.run(drain=True))
    row = queue.get(task_id)
    assert (row.status, row.stop_reason) == ("closed", "worker-died-too-often")
