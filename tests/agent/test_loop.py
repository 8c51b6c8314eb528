"""The loop's turn, piece by piece: self-model, gates, batches, re-plan, lessons, events."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from _loop_support import BlockArgs, FactTool, call, checklist, make_deps
from pydantic import BaseModel, ConfigDict

import agent
from agent.loop.limits import Limits
from agent.loop.run import PendingCall, RunState, run_task
from agent.loop.state import jsonable as _jsonable
from agent.loop.state import unjsonable as _unjsonable
from agent.models.scripted import ScriptedModel
from agent.store import EVENT_TYPES, RunStore
from agent.tools.base import FreeLimits, Observation, Tool, ToolContext
from judge.fingerprint import call_fingerprint

BASE_FEE = FactTool("base_fee", {"base_fee_gwei": "1.5"})
SUBMIT = {"action": "submit_answer", "answer": "done", "evidence": ["e1"]}


def test_public_api_is_sorted_and_importable() -> None:
    assert agent.__all__ == sorted(agent.__all__)
    assert all(hasattr(agent, name) for name in agent.__all__)


class TickingChain:
    """A chain double whose USDC balance changes on every read."""

    def __init__(self) -> None:
        self.reads = 0

    def token_balance(self, token: str, address: str) -> int:
        self.reads += 1
        return 5_000_000 + self.reads


def test_self_model_is_fresh_every_turn(tmp_path: Path) -> None:
    chain = TickingChain()
    from chain.networks import get_network

    net = get_network("anvil", usdc="0x5FbDB2315678afecb367f032d93F642f64180aa3")
    model = ScriptedModel({"propose": [call("base_fee"), SUBMIT]})
    deps = make_deps(
        tmp_path,
        model,
        [BASE_FEE],
        chain=chain,
        network=net,
        wallet_address="0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    )
    r = asyncio.run(run_task("base fee?", deps))
    assert r.stop_reason == "unbacked-answer" and chain.reads == 2
    prompts = [c.messages[1]["content"] for c in model.calls_for("propose")]
    assert "balance 5.000001 USDC" in prompts[0] and "balance 5.000002 USDC" in prompts[1]
    assert "steps" in prompts[1] and "tools wired now: base_fee (free)" in prompts[0]
    snaps = [e["data"] for e in deps.store.events(r.run_id, "selfmodel")]
    assert [s["steps_left"] for s in snaps] == [6, 5]
    assert snaps[0]["chain_id"] == 31337 and snaps[0]["wallet_balance_usdc"] == 5_000_001


def test_reordered_arguments_are_the_same_call(tmp_path: Path) -> None:
    tool = FactTool("block_info", lambda a: {"block_number": str(a.block)}, args_model=BlockArgs)
    model = ScriptedModel(
        {
            "propose": [
                {"action": "call", "tool": "block_info", "args": {"block": 7, "detail": "full"}},
                {"action": "call", "tool": "block_info", "args": {"detail": "full", "block": 7}},
                SUBMIT,
            ]
        }
    )
    deps = make_deps(tmp_path, model, [tool])
    r = asyncio.run(run_task("block 7?", deps))
    assert r.stop_reason == "unbacked-answer" and len(tool.calls) == 1
    assert r.attempted == [call_fingerprint("block_info", {"detail": "full", "block": 7})]
    assert deps.store.events(r.run_id, "nudge")[0]["data"]["earlier_step"] == 1


def test_unknown_tool_and_bad_args_are_refused_free_with_feedback(tmp_path: Path) -> None:
    model = ScriptedModel(
        {"propose": [call("nope"), call("base_fee", bogus=1), call("base_fee"), SUBMIT]}
    )
    deps = make_deps(tmp_path, model, [BASE_FEE])
    r = asyncio.run(run_task("fees?", deps))
    assert r.stop_reason == "unbacked-answer" and r.steps == 4
    feedback = [c.messages[1]["content"] for c in model.calls_for("propose")]
    assert "tool 'nope' is not wired; wired tools: base_fee" in feedback[1]
    assert "base_fee: invalid arguments (bogus: Extra inputs are not permitted)" in feedback[2]
    assert [e["data"]["why"] for e in deps.store.events(r.run_id, "gate.skip")] == [
        "unknown-tool",
        "invalid-args",
    ]


class BarrierTool(Tool):
    """Succeeds only if all ``n`` calls are in flight at once (proves concurrency)."""

    kind = "free"
    free_limits = FreeLimits(max_calls_per_run=10, max_result_bytes=65_536)
    facts = ("block_timestamp",)

    class Args(BaseModel):
        model_config = ConfigDict(extra="forbid")
        i: int

    args_model = Args

    def __init__(self, n: int) -> None:
        self.name, self.description, self.n = "stamp", "barrier", n
        self.started = 0
        self.all_in = asyncio.Event()

    async def run(self, args: Any, ctx: ToolContext) -> Observation:
        self.started += 1
        if self.started == self.n:
            self.all_in.set()
        await asyncio.wait_for(self.all_in.wait(), timeout=5)
        return Observation(self.name, True, f"t{args.i}", facts={"block_timestamp": str(args.i)})


def test_batch_of_three_free_calls_runs_concurrently(tmp_path: Path) -> None:
    tool = BarrierTool(3)
    batch = {"action": "batch", "calls": [{"tool": "stamp", "args": {"i": i}} for i in range(3)]}
    model = ScriptedModel({"propose": [batch, SUBMIT]})
    deps = make_deps(tmp_path, model, [tool])
    r = asyncio.run(run_task("three stamps", deps))
    assert r.stop_reason == "unbacked-answer" and r.steps == 2
    assert [e.summary for e in r.evidence] == ["t0", "t1", "t2"]


def test_batch_over_three_is_refused(tmp_path: Path) -> None:
    batch = {"action": "batch", "calls": [{"tool": "base_fee", "args": {}}] * 4}
    model = ScriptedModel({"propose": [batch, call("base_fee"), SUBMIT]})
    deps = make_deps(tmp_path, model, [BASE_FEE])
    r = asyncio.run(run_task("fees", deps))
    assert r.stop_reason == "unbacked-answer"
    assert deps.store.events(r.run_id, "gate.skip")[0]["data"]["why"] == "batch-too-large"


def test_free_policy_row_limits_calls(tmp_path: Path) -> None:
    from judge.policy import FreePolicyRow, FreeReadPolicy

    tool = FactTool("block_info", lambda a: {"block_number": str(a.block)}, args_model=BlockArgs)
    model = ScriptedModel(
        {"propose": [call("block_info", block=1), call("block_info", block=2), SUBMIT]}
    )
    policy = FreeReadPolicy([FreePolicyRow("block_info", max_calls_per_run=1)])
    deps = make_deps(tmp_path, model, [tool], free_policy=policy)
    r = asyncio.run(run_task("blocks", deps))
    assert r.stop_reason == "unbacked-answer" and len(tool.calls) == 1
    skip = deps.store.events(r.run_id, "gate.skip")[0]["data"]
    assert skip["why"] == "policy" and "the limit is 1" in skip["feedback"]


def test_replan_every_third_step(tmp_path: Path) -> None:
    tool = FactTool(
        "block_info",
        lambda a: {"block_number": str(a.block)},
        args_model=BlockArgs,
        summary=lambda a: f"block {a.block} mined by 0x{a.block:040x}",
    )
    model = ScriptedModel(
        {
            "propose": [call("block_info", block=n) for n in (1, 2, 3)] + [SUBMIT],
            "replan": ["Read block 4 next, then answer."],
        }
    )
    deps = make_deps(tmp_path, model, [tool], limits=Limits(streak_length=6))
    r = asyncio.run(run_task("blocks", deps))
    assert r.stop_reason == "unbacked-answer" and len(model.calls_for("replan")) == 1
    assert "Plan: Read block 4 next" in model.calls_for("propose")[3].messages[1]["content"]
    assert deps.store.events(r.run_id, "replan")[0]["data"]["step"] == 3


def test_checklist_focus_names_first_uncovered_item(tmp_path: Path) -> None:
    gas = FactTool("gas_price", {"gas_price_gwei": "2"})
    model = ScriptedModel(
        {
            "checklist": [
                checklist(("base fee gwei", "base_fee_gwei"), ("gas price gwei", "gas_price_gwei"))
            ],
            "propose": [call("base_fee"), call("gas_price")],
        }
    )
    deps = make_deps(tmp_path, model, [BASE_FEE, gas])
    r = asyncio.run(run_task("fees", deps))
    assert r.stop_reason == "evidence-covered" and len(model.calls_for("checklist")) == 1
    prompts = [c.messages[1]["content"] for c in model.calls_for("propose")]
    assert "Focus now: c1 base fee gwei" in prompts[0]
    assert "Focus now: c2 gas price gwei" in prompts[1]


def test_lessons_are_distilled_and_shown_to_similar_tasks(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "nib.db")
    first = ScriptedModel({"propose": ["hmm"], "lesson": ["Call base_fee first, then finish."]})
    r1 = asyncio.run(
        run_task(
            "What is the base fee on the devnet?",
            make_deps(tmp_path, first, [BASE_FEE], store=store),
        )
    )
    assert r1.stop_reason == "model-stopped"
    # One candidate (how the run stopped): the model is not asked, its words are not kept.
    assert store.lessons()[0]["lesson"] == (
        "A similar run stopped with model-stopped at step 1, 0 of 0 checklist items covered."
    )
    assert first.calls_for("lesson") == []
    second = ScriptedModel(
        {"checklist": [checklist(("base fee gwei", "base_fee_gwei"))], "propose": [call("base_fee")]}
    )
    r2 = asyncio.run(
        run_task(
            "What is the devnet base fee now?", make_deps(tmp_path, second, [BASE_FEE], store=store)
        )
    )
    assert r2.finished
    assert "stopped with model-stopped" in second.calls_for("propose")[0].messages[1]["content"]
    unrelated = ScriptedModel({"propose": [call("base_fee"), SUBMIT]})
    asyncio.run(
        run_task(
            "Transfer 5 USDC to the seller", make_deps(tmp_path, unrelated, [BASE_FEE], store=store)
        )
    )
    assert "Lessons" not in unrelated.calls_for("propose")[0].messages[1]["content"]


class BrokenLessons(RunStore):
    def lessons(self, limit: int = 200) -> list[dict[str, Any]]:
        raise OSError("disk on fire")

    def add_lesson(self, *args: Any) -> None:
        raise OSError("disk on fire")


def test_lesson_failures_never_break_a_run(tmp_path: Path) -> None:
    store = BrokenLessons(tmp_path / "nib.db")
    model = ScriptedModel({"propose": ["no json here"]})
    r = asyncio.run(run_task("base fee?", make_deps(tmp_path, model, [BASE_FEE], store=store)))
    assert r.stop_reason == "model-stopped" and r.answer
    errors = [e["data"]["op"] for e in store.events(r.run_id, "lesson.error")]
    assert errors == ["read", "write"]


def test_events_are_typed_json_and_cover_the_turn(tmp_path: Path) -> None:
    model = ScriptedModel({"propose": [call("base_fee"), SUBMIT]})
    deps = make_deps(tmp_path, model, [BASE_FEE])
    r = asyncio.run(run_task("base fee?", deps))
    evs = deps.store.events(r.run_id)
    types = [e["type"] for e in evs]
    assert [e["seq"] for e in evs] == list(range(1, len(evs) + 1))
    for needed in (
        "run.start",
        "checklist",
        "selfmodel",
        "model.call",
        "proposal",
        "verdict",
        "tool.call",
        "stop",
    ):
        assert needed in types
    assert set(types) <= set(EVENT_TYPES)
    call_ev = next(e["data"] for e in evs if e["type"] == "tool.call")
    assert call_ev["cost_usdc"] == 0 and call_ev["summary"] == "base_fee_gwei 1.5"
    row = deps.store.run(r.run_id)
    assert row["status"] == "stopped" and json.loads(row["result"])["stop_reason"] == "unbacked-answer"


def test_result_is_json_and_answer_backstop_never_empty(tmp_path: Path) -> None:
    model = ScriptedModel(
        {"propose": [call("base_fee"), "stop"], "synthesize": [""]}
    )  # synthesis returns nothing: backstop
    r = asyncio.run(run_task("base fee?", make_deps(tmp_path, model, [BASE_FEE])))
    assert r.stop_reason == "model-stopped" and r.partial
    assert r.answer.startswith("Stopped (model-stopped) before a final answer")
    assert "base_fee: base_fee_gwei 1.5 [e1]" in r.answer
    again = agent.AgentResult.model_validate_json(r.model_dump_json())
    assert again == r and r.tokens.estimated and r.tokens.input > 0


def test_run_state_round_trips_bytes_in_a_pending_quote() -> None:
    quote = {"payload": {"message": {"nonce": b"\x01" * 32}}, "amount": 5}
    state = RunState(
        run_id="r",
        task="t",
        profile="cost-optimized",
        limits=Limits().as_dict(),
        pending=PendingCall(
            step=1, tool="pay_http", args={}, fingerprint="0x", quote=_jsonable(quote), verdict={}
        ),
    )
    again = RunState.model_validate_json(state.model_dump_json())
    assert again == state and _unjsonable(again.pending.quote) == quote  # type: ignore[union-attr]


def test_default_profile_follows_model_location(tmp_path: Path) -> None:
    local = ScriptedModel({"propose": ["stop"]}, local=True)
    r = asyncio.run(run_task("x", make_deps(tmp_path, local, [BASE_FEE])))
    assert r.profile == "local-guarded"
    hosted = ScriptedModel({"propose": ["stop"]})
    r = asyncio.run(run_task("x", make_deps(tmp_path, hosted, [BASE_FEE])))
    assert r.profile == "cost-optimized"
    explicit = ScriptedModel({"propose": ["stop"]}, local=True)
    r = asyncio.run(
        run_task("x", make_deps(tmp_path, explicit, [BASE_FEE], profile="quality-first"))
    )
    assert r.profile == "quality-first"


def test_many_runs_share_one_process(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "nib.db")

    async def many() -> list[Any]:
        runs = []
        for _ in range(5):
            model = ScriptedModel({"propose": [call("base_fee"), SUBMIT]})
            runs.append(run_task("fees", make_deps(tmp_path, model, [BASE_FEE], store=store)))
        return await asyncio.gather(*runs)

    results = asyncio.run(many())
    assert {r.stop_reason for r in results} == {"unbacked-answer"}
    assert len({r.run_id for r in results}) == 5


def test_scripted_model_callable_faults_and_usage() -> None:
    from agent.errors import ModelUnavailable
    from agent.models.base import ModelRequest

    seen: list[str] = []

    def reply(req: ModelRequest) -> str:
        seen.append(req.purpose)
        return '{"action":"done"}'

    m = ScriptedModel(reply)
    out = asyncio.run(m.complete(ModelRequest("propose", [{"role": "user", "content": "hi"}])))
    assert out.text == '{"action":"done"}' and out.usage.estimated and seen == ["propose"]
    assert m.input_tokens == out.usage.input_tokens > 0

    faulty = ScriptedModel({"propose": ["{}", ModelUnavailable("rate-limit", "wait 60 s")]})
    req = ModelRequest("propose", [{"role": "user", "content": "x"}])
    asyncio.run(faulty.complete(req))
    try:
        asyncio.run(faulty.complete(req))
    except ModelUnavailable as exc:
        assert exc.kind == "rate-limit" and "wait 60 s" in str(exc)
    else:
        raise AssertionError("the scripted fault was not raised")


class BuyTool(Tool):
    """A paid tool that is never executed here: it only has to be refused in a batch."""

    kind = "paid"
    facts = ("gas_stats",)

    class Args(BaseModel):
        model_config = ConfigDict(extra="forbid")
        item: str

    args_model = Args
    name, description = "buy", "buys a report"


def test_refused_calls_are_audited_with_their_literal_arguments(tmp_path: Path) -> None:
    huge = {"blob": "x" * 5_000}
    batch = {
        "action": "batch",
        "calls": [
            {"tool": "base_fee", "args": {}},
            {"tool": "buy", "args": {"item": "gas", "to": "0xabc"}},
            {"tool": "ghost", "args": {"n": 1}},
        ],
    }
    model = ScriptedModel(
        {"propose": [call("nope", to="0x" + "12" * 20, amount=5), call("nope", **huge), batch,
                     SUBMIT]}
    )
    deps = make_deps(tmp_path, model, [BASE_FEE, BuyTool()])
    r = asyncio.run(run_task("fees?", deps))
    assert r.stop_reason == "unbacked-answer"
    skips = [e["data"] for e in deps.store.events(r.run_id, "gate.skip")]
    assert [(s["why"], s["tool"]) for s in skips] == [
        ("unknown-tool", "nope"),
        ("unknown-tool", "nope"),
        ("paid-in-batch", "buy"),
        ("unknown-tool", "ghost"),
    ]
    assert skips[0]["args"] == {"to": "0x" + "12" * 20, "amount": 5}
    assert skips[1]["args"]["truncated"] is True
    assert skips[1]["args"]["chars"] == len(json.dumps(huge))
    assert skips[1]["args"]["json"] == json.dumps(huge)[:2_000]
    assert skips[2]["args"] == {"item": "gas", "to": "0xabc"}
    assert skips[3]["args"] == {"n": 1}
    proposals = [e["data"] for e in deps.store.events(r.run_id, "proposal")]
    # Every proposed call, including the refused ones, with its arguments as proposed.
    assert proposals[0]["calls"] == [{"tool": "nope", "args": skips[0]["args"]}]
    assert proposals[0]["args"] == skips[0]["args"]
    assert proposals[2]["calls"] == [{"tool": c["tool"], "args": c["args"]} for c in batch["calls"]]
    # Bounded: the call's args appear twice (``args`` for one call, and ``calls``), each cut.
    assert len(json.dumps(proposals[1])) < 2 * 2_000 + 500


def test_literal_args_are_json_safe() -> None:
    from agent.loop.context import literal_args

    assert literal_args({"a": [1, 2], "b": None}) == {"a": [1, 2], "b": None}
    assert literal_args({"when": b"\x00"}) == {"when": "b'\\x00'"}
    assert literal_args({"k": "é" * 10}, limit=5) == {
        "truncated": True, "chars": len(json.dumps({"k": "é" * 10}, ensure_ascii=False)),
        "json": '{"k":',
    }
