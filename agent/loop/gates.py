"""The gates a proposed call passes before anything runs: the tool is wired, its
arguments parse, paid calls come alone and only once every part of the task is read,
and an executed call (or one that failed for good) is not run twice.

A call refused here costs nothing: it is audited and the model is told why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import BaseModel

from agent.errors import ToolArgsError
from agent.loop.context import RunContext, literal_args
from agent.loop.proposal import Call
from agent.loop.stop import Stop
from agent.tools.base import Tool
from judge.fingerprint import call_fingerprint
from judge.mandates import withheld_by

__all__ = ["Admitted", "Gates"]


@dataclass(frozen=True, slots=True)
class Admitted:
    """A call that passed the gates: the tool, its parsed and normalised arguments,
    and the call's fingerprint (tool name + normalised arguments)."""

    tool: Tool
    args: BaseModel
    norm: dict[str, object]
    fingerprint: str


class Gates:
    """Admits or skips one run's proposed calls."""

    def __init__(self, run: RunContext) -> None:
        self.run = run

    def admit(self, call: Call, *, in_batch: bool = False) -> Admitted | None:
        """Unknown tool, a paid call in a batch, invalid arguments: skipped (None)."""
        run = self.run
        registry = run.deps.registry
        tool = registry.get(call.tool)
        if tool is None:
            run.skip(
                "unknown-tool",
                f"tool {call.tool!r} is not wired; wired tools: "
                f"{', '.join(registry.names()) or 'none'}. Propose one of them.",
                tool=call.tool,
                args=literal_args(call.args),
            )
            return None
        if in_batch and tool.kind != "free":
            run.skip(
                "paid-in-batch",
                f"{tool.name} moves money and cannot be batched; propose it alone as a call.",
                tool=tool.name,
                args=literal_args(call.args),
            )
            return None
        try:
            args = tool.parse_args(call.args)
        except ToolArgsError as exc:
            run.skip("invalid-args", str(exc), tool=tool.name, args=literal_args(call.args))
            return None
        norm = args.model_dump(mode="json")
        return Admitted(tool, args, norm, call_fingerprint(tool.name, norm))

    def task_read(self, call: Admitted) -> bool:
        """The unread-task gate: a call that moves money runs only once every part of the
        task is read. A part the planner marked unanswerable may be the one that forbids,
        takes back, conditions or schedules the payment ("Do not send ...", "never mind",
        "tomorrow"), so nothing is paid while one is left; nor on a task whose words forbid,
        take back or branch a payment (judge/mandates.py ``withheld_by``), whatever the
        planner read. The call is skipped, naming why."""
        unread = [i for i in self.run.checklist.items if i.unanswerable]
        word = withheld_by(self.run.state.task)
        if not unread and word is None:
            return True
        why = (f"the task says {word!r}: nothing is paid on a task that says not to pay, "
               "takes an order back, branches one or puts it off" if word else
               f"part of the task is not read: {unread[0].text!r} ({unread[0].unanswerable})")
        self.run.skip(
            "task-not-read",
            f"{call.tool.name} moves money, but {why}. Nothing is paid until every part of "
            "the task is read and none withholds the payment; answer what is free and name "
            "the rest.",
            tool=call.tool.name,
            args=literal_args(call.norm),
        )
        return False

    def fresh(self, call: Admitted) -> bool:
        """The duplicate gate: a call that failed for good is skipped, saying why; an
        executed call is skipped with one nudge, then stops the run."""
        run, st = self.run, self.run.state
        tool, norm, fp = call.tool, call.norm, call.fingerprint
        if fp in st.failed_for_good:
            self._failed_for_good(call)
            return False
        if fp not in st.executed:
            return True
        earlier = st.executed[fp]
        if st.nudged.get(fp, 0) >= run.limits.duplicate_nudges:
            raise Stop(
                "executed-duplicate",
                f"{tool.name} {json.dumps(norm, sort_keys=True)} was executed at "
                f"step {earlier} and proposed again after a nudge.",
            )
        st.nudged[fp] = st.nudged.get(fp, 0) + 1
        note = (
            f"{tool.name} with these exact arguments already ran at step {earlier}; its "
            f"result is in the history. Use it or try something different."
        )
        run.skip(
            "executed-duplicate",
            note,
            tool=tool.name,
            args=literal_args(norm),
            fingerprint=fp,
            earlier_step=earlier,
        )
        run.emit("nudge", {"step": st.step, "fingerprint": fp, "earlier_step": earlier})
        run.add_history(tool.name, norm, "skipped", f"duplicate of step {earlier}")
        return False

    def _failed_for_good(self, call: Admitted) -> None:
        """Skip a call that already failed for a reason no retry can fix, naming it: the
        run does not spend a quote (or a step's budget) on an answer known in advance."""
        run, st = self.run, self.run.state
        tool, norm, fp = call.tool, call.norm, call.fingerprint
        failed = st.failed_for_good[fp]
        run.skip(
            "failed-for-good",
            f"{tool.name} with these exact arguments failed at step {failed.step} for a reason "
            f"retrying cannot fix: {failed.why.rstrip('.')}. Proposing it again will not help and it is "
            "not run again; change what made it fail (e.g. another seller or other "
            "arguments) or answer without it.",
            tool=tool.name,
            args=literal_args(norm),
            fingerprint=fp,
            earlier_step=failed.step,
        )
        run.add_history(tool.name, norm, "skipped", f"failed for good at step {failed.step}")
