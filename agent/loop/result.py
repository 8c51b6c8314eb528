"""The one result every run returns, whatever stopped it, and the named stop reasons.

A caller can always tell a finish from a budget stop from a dependency outage, gets
the work done so far (never an empty answer), and sees what was attempted and spent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from chain.money import format_usdc

if TYPE_CHECKING:
    from wallet.meter import RunSpend

__all__ = [
    "DEPENDENCY_STOPS",
    "PROCESS_DIED",
    "QUEUE_STOPS",
    "AnswerGrade",
    "AnswerLine",
    "LineGrade",
    "FINISHED_STOPS",
    "STOP_REASONS",
    "AgentResult",
    "EvidenceItem",
    "SpendSummary",
    "StopReason",
    "TokenSummary",
    "backstop_answer",
]

StopReason = Literal[
    "done-signal",
    "finish-tool",
    "judge-answered",
    "evidence-covered",
    "no-novelty",
    "streak-exhausted",
    "executed-duplicate",
    "oscillation",
    "skip-loop",
    "failure-budget",
    "proposal-lost",
    "model-stopped",
    "llm-unreachable",
    "judge-unreachable",
    "wallet-unreachable",
    "chain-unreachable",
    "max-steps",
    "deadline",
    "cost-budget",
    "token-budget",
    "verdict-void",
    "awaiting-approval",
    "approval-denied",
    "interrupted",
    "internal-error",
    "cannot-plan",
    "unbacked-answer",
    "churn",
    "process-died",
    "worker-died-after-payment",
    "worker-died-too-often",
    "worker-error",
]

#: One line per stop reason: when it fires. The run returns the first that fires.
STOP_REASONS: dict[str, str] = {
    "done-signal": "the model said done and every checklist item is covered (a finish)",
    "finish-tool": "a submit_answer citing known evidence ids, every item covered (a finish)",
    "judge-answered": "the judge ruled the history sufficient and every item is covered",
    "evidence-covered": "every checklist item was matched by a fact in the observations",
    "no-novelty": "consecutive near-identical observations: nothing new is coming in",
    "streak-exhausted": "the same tool succeeded over and over without covering anything new",
    "executed-duplicate": "an already-executed call was proposed again after one nudge",
    "oscillation": "the recent proposals form a cycle (A,B,A,B): going round in circles",
    "skip-loop": "proposals were skipped (refused, invalid, duplicate) repeatedly in a row",
    "failure-budget": "consecutive tool failures reached the failure budget",
    "proposal-lost": "no valid proposal twice in a row (malformed even after the retry)",
    "model-stopped": "the model replied with neither a tool call nor a finish: stopped, not done",
    "llm-unreachable": "the model provider is silent or refuses; the fix is named in message",
    "judge-unreachable": "the judge did not answer; no money moves without it",
    "wallet-unreachable": "the wallet service did not answer; nothing is signed without it",
    "chain-unreachable": "the RPC node did not answer; nothing is signed blind",
    "max-steps": "the step budget is used up",
    "deadline": "the wall-clock budget is used up",
    "cost-budget": "the next paid call would cross the spend cap (USDC + gas); not made",
    "token-budget": "the next model request would cross the token budget; not sent",
    "verdict-void": "the payload changed after approval; the wallet refused to sign",
    "awaiting-approval": "paused for a human decision on a paid call; state saved, resumable",
    "approval-denied": "a human denied the paused paid call; the run ends with what it has",
    "interrupted": "Ctrl-C or task cancellation: no further call is made; the run row is closed",
    "internal-error": "an unexpected error (a bug, named in the message) ended the run; the "
    "run row is closed and the money state is whatever the ledger says",
    "cannot-plan": "a finish with checklist items uncovered: the answer names each part not "
    "answered and why (partial)",
    "unbacked-answer": "a finish whose answer holds asserted lines, or with an empty checklist: "
    "no evidence backs it (partial)",
    "churn": "steps in a row called tools or spent without covering a checklist item, plus "
    "re-read checklists that asked for other facts (drift): the wrong path (threshold from "
    "eval traces)",
    "process-died": "the run's process died (killed, crashed, power lost) before it could "
    "return; a reader of the run store found it gone and closed the row (status died)",
    "worker-died-after-payment": "(queue) a worker died after the task's money moved or while "
    "it may still move: the task is closed, not run again, so nothing is paid twice",
    "worker-died-too-often": "(queue) workers died running the task max_attempts times: the "
    "task is closed, not tried again",
    "worker-error": "(queue) the run raised instead of returning a result (a bug or a lost "
    "database); the queue row's note names the error",
}

#: The one stop no run returns itself: a reader writes it for a run whose process is gone.
PROCESS_DIED = "process-died"

#: Stops the work queue writes for a task whose run did not return one (no run returns
#: these; ``agent.worker`` does).
QUEUE_STOPS: frozenset[StopReason] = frozenset(
    {"worker-died-after-payment", "worker-died-too-often", "worker-error"}
)
#: Stops that count as a finish (exit 0, answer not partial).
FINISHED_STOPS: frozenset[str] = frozenset(
    {"done-signal", "finish-tool", "judge-answered", "evidence-covered"}
)
#: Stops caused by a dependency (model, judge, wallet, chain) that did not answer: nothing
#: about the task itself was decided, so a paused run hit by one stays paused; the
#: result's ``message`` names the human fix. The one list (the loop kept a second one
#: without the wallet, so a wallet outage ended an approved paused run).
DEPENDENCY_STOPS: frozenset[StopReason] = frozenset(
    {"llm-unreachable", "judge-unreachable", "wallet-unreachable", "chain-unreachable"}
)

assert set(STOP_REASONS) == set(get_args(StopReason)), "every stop reason needs a description"


class EvidenceItem(BaseModel):
    """One successful observation the answer may cite, by id (``e1``, ``e2``, ...)."""

    model_config = ConfigDict(frozen=True)

    id: str
    step: int
    tool: str
    args: dict[str, object]
    summary: str
    facts: dict[str, str] = Field(default_factory=dict)
    params: dict[str, str] = Field(default_factory=dict)
    cost_usdc: int = 0
    #: A bounded typed excerpt of what a purchase returned (``{"type": "json", "fields":
    #: {...}}`` or ``{"type": "text", "text": ...}``), the data this evidence cites.
    excerpt: dict[str, object] | None = None
    #: What a discovery listed, every offer (``resource``, ``method``, ``tool``, ``price``,
    #: ``kinds``, ``allowlisted``): the summary above is cut to one line and names only the
    #: first few, so a planner choosing the next offer reads these.
    offers: list[dict[str, object]] | None = None


LineGrade = Literal["observed", "derived", "asserted", "not-answered", "note"]
"""How one answer line was reached. ``observed``: a tool result holds its values.
``derived``: computed from observed values (the computation is shown). ``asserted``: it
claims values no evidence holds. ``not-answered``: it names a part that was not answered.
``note``: a heading or the run's own message, claiming nothing."""

AnswerGrade = Literal["observed", "derived", "asserted", "none"]
"""The whole answer's grade: its weakest claim (``none`` when no line claims anything)."""


class AnswerLine(BaseModel):
    """One line of the answer with its provenance and the evidence ids it cites."""

    model_config = ConfigDict(frozen=True)

    text: str
    grade: LineGrade
    evidence: list[str] = Field(default_factory=list)


class SpendSummary(BaseModel):
    """Money the run moved or may still move, from the wallet's meter (never a sum of
    successful calls): ``usdc_atomic`` = ``settled_atomic`` (proven on chain) +
    ``outstanding_atomic`` (reserved or signed: a seller may still settle it); gas in wei.
    ``source``: ``ledger`` (the wallet's record) or ``run`` (the wallet was unreachable when
    the run ended: only what this run saw settle; ``nib runs``/``nib show`` read the ledger)."""

    usdc_atomic: int = 0
    gas_wei: int = 0
    usdc_display: str = "0.00 USDC"
    settled_atomic: int = 0
    outstanding_atomic: int = 0
    source: Literal["ledger", "run"] = "ledger"

    @classmethod
    def from_meter(cls, usage: RunSpend) -> SpendSummary:
        """A run's spend from the meter's ``usage(run_id)`` (settled, reserved, gas_wei)."""
        total = int(usage.settled) + int(usage.reserved)
        return cls(
            usdc_atomic=total,
            gas_wei=int(usage.gas_wei),
            usdc_display=format_usdc(total),
            settled_atomic=int(usage.settled),
            outstanding_atomic=int(usage.reserved),
        )


class TokenSummary(BaseModel):
    """Model tokens the run used; ``estimated`` when any count came from agent.loop.tokens."""

    input: int = 0
    output: int = 0
    estimated: bool = False


class AgentResult(BaseModel):
    """What every exit returns. ``answer`` is never empty; ``partial`` when not finished."""

    run_id: str
    task: str
    stop_reason: StopReason
    finished: bool
    partial: bool
    answer: str = Field(min_length=1)
    lines: list[AnswerLine] = Field(default_factory=list)
    provenance: AnswerGrade = "none"
    evidence: list[EvidenceItem] = Field(default_factory=list)
    steps: int
    attempted: list[str] = Field(default_factory=list)
    spend: SpendSummary = Field(default_factory=SpendSummary)
    tokens: TokenSummary = Field(default_factory=TokenSummary)
    elapsed_s: float = 0.0
    message: str = ""
    profile: str = ""

    @property
    def exit_code(self) -> int:
        """0 finished, 1 stopped without finishing (the CLI's contract)."""
        return 0 if self.finished else 1


def backstop_answer(
    task: str,
    checklist: Sequence[Mapping[str, object]],
    evidence: list[EvidenceItem],
    reason: str,
    message: str,
) -> str:
    """The deterministic answer when no synthesis is available: the evidence, extracted."""
    lines = [f"Stopped ({reason}) before a final answer to: {task}"]
    covered = [i for i in checklist if i.get("covered")]
    for item in covered:
        lines.append(f"- {item['text']}: {item['value']} [{item['evidence_id']}]")
    for ev in evidence:
        lines.append(f"- {ev.tool}: {ev.summary} [{ev.id}]")
    if not covered and not evidence:
        lines.append("No evidence was gathered.")
    if message:
        lines.append(message)
    return "\n".join(lines)
