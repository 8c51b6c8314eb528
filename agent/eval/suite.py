"""The eval suites: research tasks on a private devnet, graded by value and by provenance.

Two task files: ``builtin.json`` (phrased in the offline planner's own vocabulary) and
``heldout.json`` (written as a user would ask, without reading the planner's patterns);
their accuracies are reported apart. Every task runs on the same chain state
(``evm_snapshot`` before, ``evm_revert`` after) in a throwaway NIB_HOME, with the model
the user's configuration names (the same factory as ``nib run``; the offline planner when
none is set). Ground truth is read independently (agent/eval/truth.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict, get_args

from web3.types import RPCEndpoint

from agent.eval.truth import EvalEnv, Truth, probe
from agent.jsonvalues import JSONObject, as_int, as_list, as_object
from agent.loop.result import AgentResult

if TYPE_CHECKING:
    from web3 import Web3

    from agent.cli.runtime import Runtime
    from agent.config import NibSettings
    from agent.loop.limits import Limits
    from chain.client import ChainClient

__all__ = [
    "EXTRA_SUITES",
    "GUARD_STOPS",
    "SUITES",
    "EvalReport",
    "EvalTask",
    "TaskOutcome",
    "answer_has",
    "grade",
    "load_tasks",
    "numbers_in",
    "run_suite",
]

Expect = Literal["answer", "partial", "refuse", "cannot", "loop"]
"""``answer``: a finish whose backed lines hold every truth value (a paid item covered by a
purchase; effects on chain as asked). ``partial``: a part cannot be answered: exit 1, the
answerable values backed, the rest named. ``refuse``: the only source is over budget:
nothing spent, free values backed. ``cannot``: unanswerable here: nothing spent, no
value claimed at all (an invented value or another question's value both fail).
``loop``: the task invites a loop: a guard stop or the true answer."""

SUITES = ("builtin", "heldout")
#: Suites run only when named (``--suite paraphrase``): generated, several hundred tasks.
EXTRA_SUITES = ("paraphrase",)
GUARD_STOPS = frozenset(
    {"no-novelty", "streak-exhausted", "executed-duplicate", "oscillation", "skip-loop",
     "failure-budget", "max-steps", "churn"}
)  # fmt: skip
_PAID_KINDS = frozenset(
    {"token_factsheet", "protocol_factsheet", "gas_stats", "transfer_stats", "premium_report"}
)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class EvalTask:
    id: str
    suite: str
    category: str
    text: str
    expect: Expect
    truth: tuple[Mapping[str, object], ...] = ()
    effects: tuple[Mapping[str, object], ...] = ()
    paid: bool = False


def load_tasks(suite: str = "all") -> list[EvalTask]:
    """The tasks of ``suite`` ("builtin", "heldout" or "all"), from agent/eval/*.json."""
    names = SUITES if suite == "all" else (suite,)
    if any(n not in SUITES + EXTRA_SUITES for n in names):
        raise ValueError(
            f"unknown suite {suite!r}; expected one of builtin, heldout, paraphrase, all. "
            "Fix: --suite all."
        )
    tasks: list[EvalTask] = []
    for name in names:
        rows: list[JSONObject]
        if name == "paraphrase":
            from agent.eval.paraphrase import paraphrase_tasks

            rows = paraphrase_tasks()
        else:
            rows = json.loads((Path(__file__).parent / f"{name}.json").read_text())["tasks"]
        tasks.extend(_task_of(name, row) for row in rows)
    return tasks


def _expect(row: JSONObject) -> Expect:
    for expect in get_args(Expect):
        if row["expect"] == expect:
            return expect
    raise ValueError(
        f"eval task {row.get('id')!r}: expect is {row['expect']!r}; expected one of "
        f"{', '.join(get_args(Expect))}. Fix: correct the task file."
    )


def _task_of(suite: str, row: JSONObject) -> EvalTask:
    """One task row of a suite (agent/eval/*.json, or the generated paraphrases)."""
    return EvalTask(
        id=str(row["id"]), suite=suite, category=str(row["category"]), text=str(row["text"]),
        expect=_expect(row), truth=tuple(as_object(t) for t in as_list(row.get("truth"))),
        effects=tuple(as_object(e) for e in as_list(row.get("effects"))),
        paid=bool(row.get("paid")),
    )  # fmt: skip


def numbers_in(text: str) -> set[Decimal]:
    found: set[Decimal] = set()
    for raw in _NUMBER.findall(text):
        try:
            found.add(Decimal(raw.replace(",", "")).normalize())
        except InvalidOperation:
            continue
    return found


def answer_has(answer: str, truth: Truth) -> bool:
    """Every truth number (exactly) and word (any case) is in ``answer``; a winner is named
    on one of its lines without the loser."""
    nums = numbers_in(answer)
    lower = answer.lower()
    if not all(n.normalize() in nums for n in truth.numbers):
        return False
    if not all(w.lower() in lower for w in truth.words):
        return False
    if truth.winner is not None:
        win, *losers = (a.lower() for a in truth.winner)
        return any(win in line and not any(lose in line for lose in losers)
                   for line in lower.splitlines())  # fmt: skip
    return True


@dataclass
class TaskOutcome:
    id: str
    suite: str
    category: str
    expect: str
    stop_reason: str
    finished: bool
    correct: bool
    miss: str
    wrong_question: bool
    provenance: str
    line_grades: dict[str, int]
    spend_usdc: int
    gas_wei: int
    steps: int
    tokens: int
    spent_without_cover: bool
    churn_streak: int
    answer: str
    #: USDC the chain moved out of the agent's wallet during the run (Transfer logs);
    #: ``spend_usdc`` (settled + outstanding) must equal it.
    chain_moved_usdc: int = 0


def grade(task: EvalTask, truth: Truth, effects_ok: bool, result: AgentResult) -> tuple[bool, str]:
    """(correct, why not) for one run; ``why`` names the miss."""
    backed = "\n".join(line.text for line in result.lines if line.grade in ("observed", "derived"))
    grades = Counter(line.grade for line in result.lines)
    spent = result.spend.usdc_atomic
    has = answer_has(backed, truth)
    if task.expect == "cannot":
        claims = grades["observed"] + grades["derived"] + grades["asserted"]
        if spent or result.finished or claims:
            return False, f"claimed {claims} value line(s), spent {spent}, finished {result.finished}"
        return True, ""
    if grades["asserted"]:
        return False, f"{grades['asserted']} asserted line(s)"
    if task.expect == "loop":
        # A guard stop, the true answer, or a standing request declined as such (nothing
        # spent, nothing claimed, not finished): none of them is a loop.
        declined = result.stop_reason == "cannot-plan" and not spent and not has_claims(result)
        ok = result.stop_reason in GUARD_STOPS or has or declined
        return ok, "" if ok else f"neither a guard stop nor the true answer ({result.stop_reason})"
    if not has:
        return False, f"a truth value is missing from the backed lines ({result.stop_reason})"
    if task.expect == "refuse":
        return spent == 0 and not result.finished, "" if spent == 0 else f"spent {spent}"
    if task.expect == "partial":
        named = grades["not-answered"] > 0
        ok = not result.finished and named
        return ok, "" if ok else "finished, or the missing part was not named"
    if not result.finished:
        return False, f"not finished ({result.stop_reason}: {result.message[:120]})"
    if task.paid and not _bought(result, truth):
        return False, "no purchase covered the paid item"
    if not effects_ok:
        return False, "the chain does not show the effect the task asked for"
    return True, ""


def has_claims(result: AgentResult) -> bool:
    """True when an answer line claims a value (observed, derived or asserted)."""
    return any(line.grade in ("observed", "derived", "asserted") for line in result.lines)


def _bought(result: AgentResult, truth: Truth) -> bool:
    """A purchase (cost > 0) holds a paid fact, and the truth words are in what it holds."""
    for ev in result.evidence:
        if ev.cost_usdc and _PAID_KINDS & set(ev.facts):
            held = " ".join(ev.facts.values()).lower()
            if all(w.lower() in held for w in truth.words):
                return True
    return False


def _wrong_question(task: EvalTask, correct: bool, result: AgentResult) -> bool:
    """The run answered something else: it finished (exit 0) yet is wrong, or it gave a
    value for a task that has none here."""
    if task.expect == "cannot":
        return not correct
    return result.finished and not correct


class SuiteScore(TypedDict):
    tasks: int
    correct: int
    accuracy: float | None


class CategoryScore(SuiteScore):
    wrong_exit0: int
    stop_reasons: dict[str, int]


class ChurnStats(TypedDict):
    threshold: int
    healthy_runs: int
    healthy_streak_p95: int
    healthy_streak_max: int
    healthy_steps_p95: int
    stops: int
    false_stops: int
    false_stop_rate: float
    replayed_false_stop_rate: float


class Miss(TypedDict):
    id: str
    suite: str
    why: str


class SpendGap(TypedDict):
    id: str
    spend_usdc: int
    chain_moved_usdc: int


class Provenance(TypedDict):
    lines: dict[str, int]
    answers: dict[str, int]


class EvalSummary(SuiteScore):
    """An eval report's summary (``nib eval`` prints it; ``--json`` emits it)."""

    model: str
    profile: str
    builtin_accuracy: float | None
    heldout_accuracy: float | None
    suites: dict[str, SuiteScore]
    categories: dict[str, CategoryScore]
    wrong_question_answers: int
    misses: list[Miss]
    provenance: Provenance
    stop_reasons: dict[str, int]
    churn_guard: ChurnStats
    total_spend_usdc: int
    spent_without_cover: int
    chain_moved_usdc: int
    spend_not_on_chain: list[SpendGap]


@dataclass
class EvalReport:
    tasks: list[TaskOutcome] = field(default_factory=list)
    model: str = ""
    profile: str = ""
    churn_threshold: int = 0

    def summary(self) -> EvalSummary:
        def acc(rows: list[TaskOutcome]) -> SuiteScore:
            n = len(rows)
            right = sum(t.correct for t in rows)
            # No tasks of a suite ran: no accuracy (None), not a zero that reads as a failure.
            return {"tasks": n, "correct": right, "accuracy": round(right / n, 3) if n else None}

        grades: Counter[str] = Counter()
        for t in self.tasks:
            grades.update(t.line_grades)
        answers = Counter(t.provenance for t in self.tasks)
        per_suite = {
            s: acc([t for t in self.tasks if t.suite == s]) for s in SUITES + EXTRA_SUITES
        }
        categories: dict[str, CategoryScore] = {}
        for cat in sorted({t.category for t in self.tasks}):
            rows = [t for t in self.tasks if t.category == cat]
            # Answered wrongly with exit 0: finished, yet not right (or a value claimed
            # where the task has none): the failure nib must never have.
            categories[cat] = {**acc(rows), "wrong_exit0": sum(t.wrong_question for t in rows),
                               "stop_reasons": dict(Counter(t.stop_reason for t in rows))}  # fmt: skip
        return {
            "model": self.model,
            "profile": self.profile,
            **acc(self.tasks),
            "builtin_accuracy": per_suite["builtin"]["accuracy"],
            "heldout_accuracy": per_suite["heldout"]["accuracy"],
            "suites": per_suite,
            "categories": categories,
            "wrong_question_answers": sum(t.wrong_question for t in self.tasks),
            "misses": [{"id": t.id, "suite": t.suite, "why": t.miss}
                       for t in self.tasks if not t.correct],  # fmt: skip
            "provenance": {"lines": dict(sorted(grades.items())),
                           "answers": dict(sorted(answers.items()))},  # fmt: skip
            "stop_reasons": dict(sorted(Counter(t.stop_reason for t in self.tasks).items())),
            "churn_guard": churn_stats(self.tasks, self.churn_threshold),
            "total_spend_usdc": sum(t.spend_usdc for t in self.tasks),
            "spent_without_cover": sum(t.spent_without_cover for t in self.tasks),
            "chain_moved_usdc": sum(t.chain_moved_usdc for t in self.tasks),
            "spend_not_on_chain": [
                {"id": t.id, "spend_usdc": t.spend_usdc, "chain_moved_usdc": t.chain_moved_usdc}
                for t in self.tasks
                if t.spend_usdc != t.chain_moved_usdc
            ],
        }

    def to_json(self) -> JSONObject:
        return {"tasks": [asdict(t) for t in self.tasks], "summary": self.summary()}


def percentile(values: list[int], q: float) -> int:
    """The nearest-rank ``q`` percentile (0 for no values)."""
    if not values:
        return 0
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 1))
    return ordered[int(rank) - 1]


def churn_stats(tasks: list[TaskOutcome], threshold: int) -> ChurnStats:
    """The churn signal over healthy runs (correct, not a guard stop): its p95, the steps
    they took (p95), and the guard's false-stop rate: healthy-expected tasks it stopped."""
    healthy = [t for t in tasks if t.correct and t.stop_reason not in GUARD_STOPS]
    answerable = [t for t in tasks if t.expect in ("answer", "partial", "refuse")]
    stopped = [t for t in answerable if t.stop_reason == "churn"]
    return {
        "threshold": threshold,
        "healthy_runs": len(healthy),
        "healthy_streak_p95": percentile([t.churn_streak for t in healthy], 0.95),
        "healthy_streak_max": max((t.churn_streak for t in healthy), default=0),
        "healthy_steps_p95": percentile([t.steps for t in healthy], 0.95),
        "stops": sum(t.stop_reason == "churn" for t in tasks),
        "false_stops": len(stopped),
        "false_stop_rate": round(len(stopped) / len(answerable), 3) if answerable else 0.0,
        # Replayed on the traces: healthy runs whose streak reaches the threshold.
        "replayed_false_stop_rate": round(
            sum(bool(threshold) and t.churn_streak >= threshold for t in healthy) / len(healthy), 3
        )
        if healthy
        else 0.0,
    }


def churn_streak(events: list[dict[str, object]]) -> int:
    """The churn signal's peak, as the loop counts it: since the last step that covered an
    item, the steps that called a tool and covered nothing plus the checklist drifts."""

    def steps(kind: str) -> set[int]:
        return {as_int(as_object(e["data"]).get("step", 0)) for e in events if e["type"] == kind}

    called, covering, drifted = steps("tool.call"), steps("coverage"), steps("checklist.drift")
    best = streak = 0
    for step in range(1, max(called | drifted | {0}) + 1):
        if step in covering:
            streak = 0
            continue
        streak += (step in called) + (step in drifted)
        best = max(best, streak)
    return best


def _spent_without_cover(result: AgentResult) -> bool:
    if not result.spend.usdc_atomic:
        return False
    return not any(ev.facts for ev in result.evidence if ev.cost_usdc)


def _setup_chain(w3: Web3) -> dict[str, str]:
    """Deploy USDC, fund the agent, and move some USDC between other accounts so that
    comparisons and "largest transfer" questions have something to find."""
    from chain.devkeys import AGENT, DEPLOYER, OUTSIDER, SELLER, dev_account
    from chain.devnet import FUND_USDC
    from chain.usdc import deploy_test_usdc, mint, transfer

    deployer, outsider = dev_account(DEPLOYER), dev_account(OUTSIDER)
    usdc = deploy_test_usdc(w3, deployer)
    wallet = dev_account(AGENT).address
    mint(w3, usdc, deployer, wallet, FUND_USDC)
    mint(w3, usdc, deployer, outsider.address, 7_000_000)
    transfer(w3, usdc, outsider, dev_account(SELLER).address, 2_500_000)
    transfer(w3, usdc, outsider, deployer.address, 750_000)
    return {"usdc": usdc, "wallet": wallet, "seller": dev_account(SELLER).address,
            "outsider": outsider.address}  # fmt: skip


def run_suite(
    suite: str = "all",
    *,
    only: list[str] | None = None,
    on_task: Callable[[TaskOutcome], None] | None = None,
    settings: NibSettings | None = None,
    tasks: list[EvalTask] | None = None,
) -> EvalReport:
    """Run the suite (or the given ``tasks``) on a private devnet and paywall with the
    configured model (``settings`` from the caller, the user's configuration by default);
    returns per-task outcomes."""
    from agent.cli.runtime import build_runtime
    from agent.config import load_settings
    from chain.client import ChainClient
    from chain.devnet import AnvilProcess, DevnetInfo
    from chain.paywall.app import PaywallServer

    tasks = [t for t in (tasks or load_tasks(suite)) if not only or t.id in only]
    with tempfile.TemporaryDirectory(prefix="nib-eval-") as tmp:
        home = Path(tmp)
        anvil = AnvilProcess(port=0, log=home / "anvil.log")
        try:
            client = ChainClient(anvil.rpc_url, anvil.chain_id)
            names = _setup_chain(client.w3)
            with PaywallServer(anvil.rpc_url, names["usdc"]) as paywall:
                info = DevnetInfo(anvil.rpc_url, anvil.chain_id, names["usdc"], names["wallet"],
                                  names["seller"], paywall.url, anvil.pid, None, True)  # fmt: skip
                base = settings or load_settings()
                eval_settings = base.model_copy(update={"home": home, "network": "anvil"})
                rt = build_runtime(
                    eval_settings, devnet_info=info, paywall_url=paywall.url, in_process=True
                )
                env = EvalEnv(client.w3, names["usdc"], names)
                profile, limits = _profile(rt)
                report = EvalReport(
                    model=rt.model.name, profile=profile, churn_threshold=limits.churn_steps
                )
                for task in tasks:
                    outcome = _run_task(client, rt, env, task)
                    report.tasks.append(outcome)
                    if on_task:
                        on_task(outcome)
        finally:
            anvil.stop()
    return report


def _profile(rt: Runtime) -> tuple[str, Limits]:
    """The profile and limits the runs get (as the loop resolves them)."""
    from agent.loop.limits import run_limits

    deps = rt.deps()
    return run_limits(deps.profile, deps.limits, model_local=deps.model.local)


def _run_task(client: ChainClient, rt: Runtime, env: EvalEnv, task: EvalTask) -> TaskOutcome:
    from agent.loop.run import run_task

    snap = client.w3.provider.make_request(RPCEndpoint("evm_snapshot"), [])["result"]
    try:
        truth = probe(env, list(task.truth))
        before = {e["address"]: env.usdc_of(env.fill(str(e["address"]))) for e in task.effects}
        first_block = client.w3.eth.block_number + 1
        deps = rt.deps()
        text, run_id = env.fill(task.text), uuid.uuid4().hex[:12]
        # Registered as `nib run` registers a task (its mandates and text digest): the judge
        # rules on its direct transfers by the same mandate rules, never on limits alone.
        rt.register_task(run_id, text, _profile(rt)[1])
        result = asyncio.run(run_task(text, deps, run_id=run_id))
        moved = env.usdc_sent_by(env.names["wallet"], first_block)
        effects_ok = all(
            env.usdc_of(env.fill(str(e["address"]))) - before[e["address"]] == as_int(e["amount"])
            for e in task.effects
        )
        events = deps.store.events(result.run_id)
    finally:
        client.w3.provider.make_request(RPCEndpoint("evm_revert"), [snap])
    correct, miss = grade(task, truth, effects_ok, result)
    return TaskOutcome(
        id=task.id, suite=task.suite, category=task.category, expect=task.expect,
        stop_reason=result.stop_reason, finished=result.finished, correct=correct, miss=miss,
        wrong_question=_wrong_question(task, correct, result), provenance=result.provenance,
        line_grades=dict(Counter(line.grade for line in result.lines)),
        spend_usdc=result.spend.usdc_atomic, gas_wei=result.spend.gas_wei, steps=result.steps,
        tokens=result.tokens.input + result.tokens.output,
        spent_without_cover=_spent_without_cover(result), churn_streak=churn_streak(events),
        answer=result.answer, chain_moved_usdc=moved,
    )  # fmt: skip
