"""Which tasks a process calling the wallet service acts for, as the wallet can prove it.

A confined agent process (``wallet.admission.Peer.confined``) may read or change only the
ledger rows of tasks it has proven it acts for, by one of two proofs:

- its task token (``prove-task``): the token whose hash the judge recorded for that task
  when the user registered it (``judge.tasks``, in the services' database), which only
  the user's side and the task's own agent process hold;
- a verdict of that task the wallet signed under for this very process (the judge's
  re-check consumed it for this process, so a verdict read elsewhere proves nothing).

A worker runs many tasks in turn in one process: each task it claims is proven with
its own token, and the process acts for all of them (they share its memory anyway).
Processes are named by pid and start time, so a later process that reuses a pid inherits
nothing. An unconfined process of the service's own user is the user (it can read the
admin token and the database) and may name any row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from wallet.admission import UNPROVEN, Peer, process_state
from wallet.errors import NotYourTask

__all__ = ["Callers"]

#: At most this many processes are remembered (the oldest gone ones are dropped first).
MAX_PROCESSES = 4096


class Callers:
    """The tasks each confined process has proven (see the module's doc)."""

    def __init__(self, task_of_token: Callable[[str], str | None] | None = None) -> None:
        self._task_of_token = task_of_token
        self._tasks: dict[tuple[int, int], set[str]] = {}
        self._lock = threading.Lock()

    def prove(self, peer: Peer, token: str) -> str:
        """The task ``token`` is the task token of, now proven for ``peer``."""
        task = self._task_of_token(token) if self._task_of_token is not None and token else None
        if task is None:
            raise NotYourTask(
                f"found a task token from process {peer.pid} that is no task token the judge "
                "issued; expected the token `nib run` or a worker received for its task. "
                "Nothing was recorded. Fix: pass the task token the judge issued."
            )
        self.bind(peer, task)
        return task

    def bind(self, peer: Peer, task: str) -> None:
        """``peer`` acts for ``task`` (it proved it)."""
        with self._lock:
            if peer.key not in self._tasks and len(self._tasks) >= MAX_PROCESSES:
                self._forget_gone()
            self._tasks.setdefault(peer.key, set()).add(task)

    def identity(self, peer: Peer) -> str:
        """Who ``peer``'s connections count for when connection slots are shared out
        (wallet.admission): the tasks a confined process proved (however many processes
        prove them), UNPROVEN for one that proved none, one of the user's processes."""
        if not peer.confined:
            return f"user process {peer.pid}"
        tasks = self.tasks_of(peer)
        return "tasks " + ",".join(sorted(tasks)) if tasks else UNPROVEN

    def tasks_of(self, peer: Peer) -> frozenset[str]:
        with self._lock:
            return frozenset(self._tasks.get(peer.key, ()))

    def may_act_on(self, peer: Peer | None, task: str) -> bool:
        """Whether ``peer`` may name a row (or the usage) of ``task``."""
        return peer is None or not peer.confined or task in self.tasks_of(peer)

    def check(self, peer: Peer | None, task: str, what: str) -> None:
        """Refuse ``what`` (a row or run of ``task``) to a confined ``peer`` that has not
        proven ``task``."""
        if self.may_act_on(peer, task):
            return
        assert peer is not None
        mine = sorted(self.tasks_of(peer)) or ["none"]
        raise NotYourTask(
            f"found a request from confined process {peer.pid} for {what}, of task {task!r}; "
            f"expected a row of a task it acts for ({', '.join(mine)}): a task is proven by "
            "its task token (prove-task) or a verdict of it the wallet signed under for this "
            "process. Nothing was read or changed. Fix: name only your own task's rows."
        )

    def live_other(self, peer: Peer | None, task: str) -> int | None:
        """The pid of a live process other than ``peer`` that acts for ``task`` (it proved
        the task or signed under it here), else None: such a task's run is not a dead
        worker's, whatever holder a recovery names."""
        with self._lock:
            keys = [k for k, tasks in self._tasks.items()
                    if task in tasks and (peer is None or k != peer.key)]
        return next((pid for pid, started in keys if process_state(pid)[0] == started), None)

    def _forget_gone(self) -> None:
        for key in [k for k in self._tasks if process_state(k[0])[0] != k[1]]:
            del self._tasks[key]
        while len(self._tasks) >= MAX_PROCESSES:  # all alive: the oldest entry goes
            del self._tasks[next(iter(self._tasks))]
