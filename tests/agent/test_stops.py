"""One test per stop reason that needs no money: each drives the real loop with the
scripted model and asserts the reason, a non-empty answer, partial, steps and the
attempted fingerprints. Money-moving stops live in test_loop_paid.py (real Anvil)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from _loop_support import BlockArgs, FactTool, FlakyTool, call, checklist, make_deps
from pydantic import BaseModel

from agent.errors import ModelUnavailable, PermanentToolError, ToolError
from agent.eval.suite import churn_streak
from agent.loop.limits import Limits
from agent.loop.result import QUEUE_STOPS, STOP_REASONS, AgentResult
from agent.loop.run import run_task
from agent.models.scripted import ScriptedModel
from agent.tools.base import Observation, Quote, Tool, ToolContext
from agent.tools.x402.protocol import RequirementRefused, UnpayableTerms, X402ProtocolError
from judge.fingerprint import call_fingerprint

BASE_FEE = FactTool("base_fee", {"base_fee_gwei": "1.5"})
GAS = FactTool("gas_price", {"gas_price_gwei": "2.0"})


def fp(tool: str, **args: Any) -> str:
    return call_fingerprint(tool, args)


def run(tmp_path: Path, replies: dict[str, list[Any]], tools: list[Any], **kw: Any) -> AgentResult:
    model = ScriptedModel(replies)
    deps = make_deps(tmp_path, model, tools, **kw)
    result = asyncio.run(run_task("What are the base fee and gas price on the devnet?", deps))
    assert result.answer.strip(), "the answer is never empty"
    return result


def block_tool(name: str = "block_info", summary: Any = None) -> FactTool:
    return FactTool(
        name,
        lambda a: {"block_number": str(a.block)},
        args_model=BlockArgs,
        summary=summary or (lambda a: f"block {a.block} has {a.block % 7} txs"),
    )


def test_every_stop_reason_has_a_description() -> None:
    assert len(STOP_REASONS) == 32 and all(STOP_REASONS.values())


FEE_AND_GAS = checklist(("base fee gwei", "base_fee_gwei"), ("gas price gwei", "gas_price_gwei"))


@pytest.mark.parametrize(
    ("finish", "reply"),
    [
        ("done-signal", {"action": "done", "answer": "1.5 gwei"}),
        ("finish-tool", {"action": "submit_answer", "answer": "1.5 gwei", "evidence": ["e1"]}),
    ],
)
def test_a_finish_with_an_item_uncovered_is_cannot_plan_naming_it(
    tmp_path: Path, finish: str, reply: dict[str, Any]
) -> None:
    r = run(
        tmp_path, {"checklist": [FEE_AND_GAS], "propose": [call("base_fee"), reply]}, [BASE_FEE]
    )
    assert (r.stop_reason, r.finished, r.partial, r.exit_code) == ("cannot-plan", False, True, 1)
    assert r.message == f"{finish}, but not answered: gas price gwei (no evidence)"
    assert r.answer.splitlines() == [
        "1.5 gwei",
        "gas price gwei: not answered (no evidence was gathered for it)",
    ]
    assert [line.grade for line in r.lines] == ["observed", "not-answered"]


@pytest.mark.parametrize(
    ("finish", "reply"),
    [
        ("done-signal", {"action": "done", "answer": "1.5 gwei"}),
        ("finish-tool", {"action": "submit_answer", "answer": "1.5 gwei", "evidence": ["e1"]}),
    ],
)
def test_a_finish_with_an_empty_checklist_is_unbacked(
    tmp_path: Path, finish: str, reply: dict[str, Any]
) -> None:
    # The checklist reply did not parse: nothing says what the answer must hold.
    r = run(tmp_path, {"checklist": ["not json"], "propose": [call("base_fee"), reply]}, [BASE_FEE])
    assert (r.stop_reason, r.finished, r.exit_code) == ("unbacked-answer", False, 1)
    assert r.message.startswith(f"{finish}, but the checklist is empty")


def test_done_without_text_synthesises_from_evidence(tmp_path: Path) -> None:
    r = run(tmp_path, {"propose": [call("base_fee"), {"action": "done"}]}, [BASE_FEE])
    assert r.stop_reason == "unbacked-answer" and "base_fee_gwei 1.5 [e1]" in r.answer


def test_finish_tool_validates_evidence_ids(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        {
            "checklist": [FEE_AND_GAS],
            "propose": [
                call("base_fee"),
                {"action": "submit_answer", "answer": "1.5 gwei", "evidence": ["e9"]},
                {"action": "submit_answer", "answer": "Base fee is 1.5 gwei", "evidence": ["e1"]},
            ],
        },
        [BASE_FEE],
    )
    assert (r.stop_reason, r.steps) == ("cannot-plan", 3)  # accepted, but gas price is missing
    assert r.answer.splitlines()[0] == "Base fee is 1.5 gwei"
    assert r.attempted == [fp("base_fee")]
    assert r.evidence[0].facts == {"base_fee_gwei": "1.5"}


def test_asserted_line_prevents_evidence_covered(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        {
            "checklist": [checklist(("base fee gwei", "base_fee_gwei"))],
            "propose": [call("base_fee")],
            "synthesize": ["Base fee: 1.5 gwei [e1]\nGas price: 42 gwei"],
        },
        [BASE_FEE],
    )
    assert (r.stop_reason, r.finished, r.exit_code) == ("unbacked-answer", False, 1)
    assert r.message.startswith("evidence-covered, but 1 answer line(s) hold values")
    assert [line.grade for line in r.lines] == ["observed", "asserted"]
    assert r.provenance == "asserted"


def test_every_covered_answer_line_is_observed_and_the_run_finishes(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        {
            "checklist": [checklist(("base fee gwei", "base_fee_gwei"))],
            "propose": [call("base_fee")],
            "synthesize": ["Base fee: 1.5 gwei [e1]"],
        },
        [BASE_FEE],
    )
    assert (r.stop_reason, r.finished, r.exit_code) == ("evidence-covered", True, 0)
    assert [(line.grade, line.evidence) for line in r.lines] == [("observed", ["e1"])]
    assert r.provenance == "observed"


def test_evidence_covered(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        {
            "checklist": [
                checklist(("base fee gwei", "base_fee_gwei"), ("gas price gwei", "gas_price_gwei"))
            ],
            "propose": [
                {
                    "action": "batch",
                    "calls": [{"tool": "base_fee", "args": {}}, {"tool": "gas_price", "args": {}}],
                }
            ],
            "synthesize": ["Base fee 1.5 gwei [e1], gas price 2.0 gwei [e2]."],
        },
        [BASE_FEE, GAS],
    )
    assert (r.stop_reason, r.finished, r.partial, r.steps) == ("evidence-covered", True, False, 1)
    assert r.answer == "Base fee 1.5 gwei [e1], gas price 2.0 gwei [e2]."
    assert r.attempted == [fp("base_fee"), fp("gas_price")]


def test_no_novelty(tmp_path: Path) -> None:
    same = FactTool(
        "block_info",
        {"transfer_count": "0"},
        args_model=BlockArgs,
        summary="chain idle: no new transactions",
    )
    r = run(
        tmp_path,
        {"propose": [call("block_info", block=n) for n in (1, 2, 3)]},
        [same],
        limits=Limits(streak_length=6),
    )
    assert (r.stop_reason, r.finished, r.partial, r.steps) == ("no-novelty", False, True, 3)
    assert r.attempted == [fp("block_info", block=n, detail="short") for n in (1, 2, 3)]


def test_streak_exhausted(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        {"propose": [call("block_info", block=n) for n in (10, 21, 32, 43)]},
        [block_tool()],
    )
    assert (r.stop_reason, r.finished, r.partial, r.steps) == ("streak-exhausted", False, True, 4)
    assert len(r.attempted) == 4 and "block 43" in r.answer


class _AddressArgs(BaseModel):
    address: str


def test_a_streak_that_covers_a_new_item_each_step_is_progress_not_churn(tmp_path: Path) -> None:
    """Five balance reads with one tool, each covering an item of its own (a sum over five
    addresses, read one a step): the streak detector (streak_length=4) counts only
    successes that cover nothing new, so the run ends covered. On the loop before this
    test it stopped streak-exhausted after the fourth read, the fifth 'not answered'."""
    addresses = [f"0x{n:040x}" for n in range(1, 6)]
    balance = FactTool(
        "usdc_balance", lambda a: {"usdc_balance": f"{int(a.address, 16)}.00 USDC"},
        args_model=_AddressArgs,
        summary=lambda a: f"USDC balance of {a.address}: {int(a.address, 16)}.00 USDC",
    )
    items = {"items": [{"text": f"USDC balance of {a}", "kind": "usdc_balance",
                        "params": {"address": a}} for a in addresses]}
    r = run(
        tmp_path,
        {"checklist": [items], "propose": [call("usdc_balance", address=a) for a in addresses]},
        [balance],
    )
    assert (r.stop_reason, r.finished, r.steps) == ("evidence-covered", True, 5)


def test_executed_duplicate_nudges_once_then_stops(tmp_path: Path) -> None:
    model = ScriptedModel({"propose": [call("base_fee"), call("base_fee"), call("base_fee")]})
    deps = make_deps(tmp_path, model, [BASE_FEE])
    r = asyncio.run(run_task("base fee?", deps))
    assert (r.stop_reason, r.finished, r.partial, r.steps) == ("executed-duplicate", False, True, 3)
    assert r.attempted == [fp("base_fee")] and r.answer
    nudges = deps.store.events(r.run_id, "nudge")
    assert len(nudges) == 1 and nudges[0]["data"]["earlier_step"] == 1
    # the third proposal saw the nudge naming the earlier step
    assert "already ran at step 1" in model.calls_for("propose")[2].messages[1]["content"]


def test_oscillation(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        {"propose": [call("base_fee"), call("gas_price"), call("base_fee"), call("gas_price")]},
        [BASE_FEE, GAS],
    )
    assert (r.stop_reason, r.finished, r.partial, r.steps) == ("oscillation", False, True, 4)
    assert r.attempted == [fp("base_fee"), fp("gas_price")]


def test_skip_loop(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        {"propose": [call("web_search", q="fees"), call("base_fee", extra=1), call("nonexistent")]},
        [BASE_FEE],
    )
    assert (r.stop_reason, r.finished, r.partial, r.steps) == ("skip-loop", False, True, 3)
    assert r.attempted == []
    assert "last skipped: " in r.message and "nonexistent" in r.message, r.message


class GroupedFailureTool(FlakyTool):
    """Fails as httpx's anyio connect does on a port past 65535: the socket's error wrapped
    in a task group's ExceptionGroup ("unhandled errors in a TaskGroup")."""

    async def run(self, args: Any, ctx: ToolContext) -> Observation:
        self.calls += 1
        raise ExceptionGroup(
            "unhandled errors in a TaskGroup", [OverflowError("connect(): port must be 0-65535.")]
        )


def test_a_tool_failure_in_an_exception_group_is_named_by_its_cause(tmp_path: Path) -> None:
    r = run(tmp_path, {"propose": [call("grouped")] * 3}, [GroupedFailureTool("grouped")])
    assert r.stop_reason == "failure-budget", r.message
    assert "OverflowError: connect(): port must be 0-65535." in r.message, r.message
    assert "TaskGroup" not in r.message + r.answer, r.message


def test_failure_budget(tmp_path: Path) -> None:
    flaky = FlakyTool(failures=5)
    r = run(tmp_path, {"propose": [call("flaky")] * 3}, [flaky])
    assert (r.stop_reason, r.finished, r.partial, r.steps) == ("failure-budget", False, True, 3)
    assert r.attempted == [fp("flaky")] * 3 and flaky.calls == 3


def test_failed_call_is_retryable(tmp_path: Path) -> None:
    flaky = FlakyTool(failures=1)
    r = run(
        tmp_path,
        {
            "propose": [
                call("flaky"),
                call("flaky"),
                {"action": "submit_answer", "answer": "42", "evidence": ["e1"]},
            ]
        },
        [flaky],
    )
    assert (r.stop_reason, r.steps) == ("unbacked-answer", 3)  # no checklist backs "42"
    assert r.attempted == [fp("flaky"), fp("flaky")] and flaky.calls == 2


class UrlArgs(BaseModel):
    url: str


DONE = {"action": "done"}


class TermsTool(Tool):
    """A paid tool whose quote always raises ``error`` (a seller's terms, as read)."""

    kind = "paid"
    facts = ("gas_stats",)
    args_model = UrlArgs
    name, description = "buy_terms", "buys gas stats from a seller"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.quotes = 0

    async def quote(self, args: Any, ctx: ToolContext) -> Quote:
        self.quotes += 1
        raise self.error


class RefusingRead(FlakyTool):
    """A free read that always raises ``error``."""

    def __init__(self, error: Exception) -> None:
        super().__init__("refusing_read", failures=0)
        self.error = error

    async def run(self, args: Any, ctx: ToolContext) -> Observation:
        self.calls += 1
        raise self.error


SELLER_URL = "http://seller.test/analytics/gas"
OFFERED = ["exact on eip155:84532 in 0x5a5a for 50000 to 0xseller"]
FOR_GOOD = [
    UnpayableTerms(
        "requirement maxTimeoutSeconds is 5; expected more than 15 s: an authorization valid "
        "for no longer expires before the seller can settle it"
    ),
    RequirementRefused("no-matching-requirement", "the seller offers nothing we can pay", OFFERED),
    RequirementRefused("price-above-limit", "the cheapest matching requirement costs", OFFERED),
    PermanentToolError("buy_terms: seller http://seller.test:80 is not on the allowlist"),
]
FOR_GOOD_IDS = ["window-too-short", "asset-or-network", "price-above-limit", "not-allowlisted"]
TRANSIENT = [
    ToolError("pay_http: http://seller.test/analytics/gas answered HTTP 503 to an unpaid request"),
    ToolError("pay_http: no whole response (headers and body) within 30 s"),
    X402ProtocolError("PAYMENT-REQUIRED header of the 402 is not base64-encoded UTF-8"),
]
TRANSIENT_IDS = ["seller-5xx", "seller-timeout", "garbled-402"]
GAS_STATS = checklist(("gas stats", "gas_stats"))


def _proposed_twice(tmp_path: Path, error: Exception) -> tuple[TermsTool, ScriptedModel, Any, Any]:
    """A run whose model proposes the same purchase twice, its quote raising ``error``."""
    buy = TermsTool(error)
    model = ScriptedModel(
        {"checklist": [GAS_STATS], "propose": [call("buy_terms", url=SELLER_URL)] * 2 + [DONE]}
    )
    deps = make_deps(tmp_path, model, [buy])
    return buy, model, deps, asyncio.run(run_task("Buy the gas stats.", deps))


@pytest.mark.parametrize("error", FOR_GOOD, ids=FOR_GOOD_IDS)
def test_a_paid_call_refused_for_good_is_not_run_again_and_the_model_is_told_why(
    tmp_path: Path, error: Exception
) -> None:
    # An outside tester's seller with maxTimeoutSeconds 5: refused at the quote, then the
    # loop quoted the same purchase again as if the refusal were transient.
    buy, model, deps, r = _proposed_twice(tmp_path, error)
    assert buy.quotes == 1, "the same call was quoted again after a refusal no retry fixes"
    assert r.attempted == [fp("buy_terms", url=SELLER_URL)] and r.steps == 3
    feedback = model.calls_for("propose")[1].messages[1]["content"]
    assert "buy_terms failed: quote failed: " in feedback
    assert "this exact call can never pass in this run: retrying it will not help" in feedback
    [skip] = [e["data"] for e in deps.store.events(r.run_id, "gate.skip")]
    assert (skip["why"], skip["earlier_step"]) == ("failed-for-good", 1)
    assert skip["feedback"].startswith(
        "buy_terms with these exact arguments failed at step 1 for a reason retrying cannot "
        f"fix: quote failed: {str(error)[:40]}"
    )
    assert "Proposing it again will not help and it is not run again" in skip["feedback"]
    assert "failed at step 1 for a reason" in model.calls_for("propose")[2].messages[1]["content"]


@pytest.mark.parametrize("error", TRANSIENT, ids=TRANSIENT_IDS)
def test_a_paid_call_that_failed_transiently_stays_retryable(
    tmp_path: Path, error: Exception
) -> None:
    buy, model, deps, r = _proposed_twice(tmp_path, error)
    assert buy.quotes == 2 and r.attempted == [fp("buy_terms", url=SELLER_URL)] * 2
    assert deps.store.events(r.run_id, "gate.skip") == []
    assert "(failures are retryable; fix the cause first)" in (
        model.calls_for("propose")[1].messages[1]["content"]
    )


def test_a_free_call_refused_for_good_is_not_run_again(tmp_path: Path) -> None:
    read = RefusingRead(PermanentToolError("refusing_read: 0x00 is not a contract"))
    model = ScriptedModel({"propose": [call("refusing_read")] * 2 + [DONE]})
    deps = make_deps(tmp_path, model, [read])
    r = asyncio.run(run_task("Is 0x00 a contract?", deps))
    assert read.calls == 1 and r.attempted == [fp("refusing_read")]
    [skip] = [e["data"] for e in deps.store.events(r.run_id, "gate.skip")]
    assert (skip["why"], skip["earlier_step"]) == ("failed-for-good", 1)


def test_proposal_lost(tmp_path: Path) -> None:
    model = ScriptedModel(
        {
            "propose": [
                '{"action": "call", "tool": ',
                "{not json",
                '{"action": "fly"}',
                '{"tool": "x"}',
            ]
        }
    )
    deps = make_deps(tmp_path, model, [BASE_FEE])
    r = asyncio.run(run_task("fees?", deps))
    assert (r.stop_reason, r.finished, r.partial, r.steps) == ("proposal-lost", False, True, 2)
    assert r.attempted == [] and r.answer
    retries = model.calls_for("propose")[1]
    assert len(retries.messages) == 2 and "rejected" in retries.messages[1]["content"]
    assert len(deps.store.events(r.run_id, "proposal.invalid")) == 4


def test_model_stopped(tmp_path: Path) -> None:
    r = run(
        tmp_path, {"propose": [call("base_fee"), "I think I will look at fees later."]}, [BASE_FEE]
    )
    assert (r.stop_reason, r.finished, r.partial, r.steps) == ("model-stopped", False, True, 2)
    assert r.attempted == [fp("base_fee")] and "base_fee_gwei 1.5" in r.answer


def test_llm_unreachable(tmp_path: Path) -> None:
    err = ModelUnavailable("auth", "set NIB_OPENAI_API_KEY to a valid key")
    r = run(tmp_path, {"propose": [call("base_fee"), err]}, [BASE_FEE])
    assert (r.stop_reason, r.finished, r.partial, r.steps) == ("llm-unreachable", False, True, 1)
    assert "NIB_OPENAI_API_KEY" in r.message and "1.5" in r.answer
    assert r.attempted == [fp("base_fee")]


def test_max_steps(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        {"propose": [call("block_info", block=n, detail=str(n)) for n in range(6)]},
        [block_tool(summary=lambda a: f"block {a.block} hash 0x{a.block:064x}")],
        limits=Limits(streak_length=10, novelty_window=10),
    )
    assert (r.stop_reason, r.finished, r.partial, r.steps) == ("max-steps", False, True, 6)
    assert len(r.attempted) == 6 and "max_steps=6" in r.message


def test_deadline(tmp_path: Path) -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 100.0  # every look at the clock costs 100 s
        return now[0]

    r = run(
        tmp_path, {"propose": [call("base_fee"), call("gas_price")]}, [BASE_FEE, GAS], clock=clock
    )
    assert (r.stop_reason, r.finished, r.partial) == ("deadline", False, True)
    assert r.steps < 6 and "600 s" in r.message and r.elapsed_s >= 600


def test_token_budget_stops_before_sending(tmp_path: Path) -> None:
    model = ScriptedModel({"propose": [call("block_info", block=n) for n in range(6)]})
    deps = make_deps(tmp_path, model, [block_tool()], limits=Limits(max_tokens=2_000))
    r = asyncio.run(run_task("fees?", deps))
    assert (r.stop_reason, r.finished, r.partial) == ("token-budget", False, True)
    sent = model.input_tokens + model.output_tokens
    assert r.tokens.input + r.tokens.output == sent <= 2_000
    assert "not sent" in r.message and r.answer


def test_chain_unreachable(tmp_path: Path) -> None:
    from chain.client import ChainClient
    from chain.networks import get_network

    dead = ChainClient("http://127.0.0.1:9", timeout_s=0.5)  # discard port: nothing listens
    net = get_network(
        "anvil", rpc_url=dead.rpc_url, usdc="0x5FbDB2315678afecb367f032d93F642f64180aa3"
    )
    r = run(
        tmp_path,
        {"propose": [call("base_fee")]},
        [BASE_FEE],
        chain=dead,
        network=net,
        wallet_address="0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    )
    assert (r.stop_reason, r.finished, r.partial, r.steps) == ("chain-unreachable", False, True, 0)
    assert "nib devnet up" in r.message and r.attempted == []


def test_every_stop_reason_is_proven_by_a_loop_test() -> None:
    # Loop tests live beside this file; the service-outage stops are proven by real runs
    # against a killed service in tests/faults.
    here = Path(__file__).parent
    files = [*here.glob("test_*.py"), *(here.parent / "faults").glob("test_*.py")]
    sources = "".join(p.read_text() for p in files if p.name != "test_limits.py")
    missing = [r for r in STOP_REASONS if f'("{r}", ' not in sources and r not in QUEUE_STOPS]
    assert missing == [], f"stop reasons without a test asserting them: {missing}"


def test_proposal_lost_names_the_limit_the_last_error_and_the_fix(tmp_path: Path) -> None:
    model = ScriptedModel({"propose": ["{not json", "{not json", '{"tool": "x"}', '{"tool": "x"}']})
    r = asyncio.run(run_task("fees?", make_deps(tmp_path, model, [BASE_FEE])))
    assert r.stop_reason == "proposal-lost"
    assert r.message == (
        "2 invalid proposals in a row (max_failed_proposals=2): the model's replies, each "
        "with its retry, were not valid proposal JSON (last error: reply JSON has no "
        '"action"; expected "call", "batch", "submit_answer" or "done"). Fix: use a model '
        "that follows JSON instructions (check NIB_MODEL and NIB_MODEL_PROVIDER), lower its "
        "temperature, or raise max_failed_proposals if it is only occasionally malformed."
    )


# ------------------------------------------------------------------ every exit is typed


def _row(tmp_path: Path, run_id: str) -> dict[str, Any]:
    from agent.store import RunStore

    row = RunStore(tmp_path / "nib.db").run(run_id)
    assert row is not None
    return row


def test_a_cancelled_run_returns_interrupted(tmp_path: Path) -> None:
    import time

    started = asyncio.Event()

    class Hanging(FactTool):
        async def run(self, args: Any, ctx: Any) -> Any:
            started.set()
            await asyncio.sleep(30)
            return await super().run(args, ctx)

    model = ScriptedModel({"propose": [call("base_fee"), {"action": "done"}]})
    deps = make_deps(tmp_path, model, [Hanging("base_fee", {"base_fee_gwei": "1.5"})])

    async def cancel_mid_call() -> AgentResult:
        task = asyncio.ensure_future(run_task("What is the base fee?", deps))
        deadline = time.monotonic() + 10
        while not started.is_set():
            assert time.monotonic() < deadline, "the tool was never called"
            await asyncio.sleep(0.01)
        task.cancel()  # what asyncio.run does to the main task on Ctrl-C
        return await task

    r = asyncio.run(cancel_mid_call())
    assert (r.stop_reason, r.finished) == ("interrupted", False)
    assert "CancelledError" in r.message and r.answer.strip()
    assert _row(tmp_path, r.run_id)["status"] != "running"


def test_a_store_error_mid_run_is_an_internal_error_naming_the_bug(tmp_path: Path) -> None:
    import sqlite3

    from agent.store import RunStore

    class FlakyStore(RunStore):
        def event(self, run_id: str, type_: str, data: dict[str, Any]) -> int:
            if type_ == "proposal":
                raise sqlite3.OperationalError("disk I/O error")
            return super().event(run_id, type_, data)

    store = FlakyStore(tmp_path / "nib.db")
    model = ScriptedModel({"propose": [call("base_fee"), {"action": "done"}]})
    r = asyncio.run(run_task("What is the base fee?", make_deps(tmp_path, model, [BASE_FEE], store=store)))
    assert (r.stop_reason, r.finished) == ("internal-error", False)
    assert "OperationalError: disk I/O error" in r.message and "nib show" in r.message
    assert _row(tmp_path, r.run_id)["status"] != "running"


def test_a_call_that_outlives_the_deadline_is_cut_and_the_run_stops_deadline(
    tmp_path: Path,
) -> None:
    import time

    class Hanging(FactTool):
        async def run(self, args: Any, ctx: Any) -> Any:
            await asyncio.sleep(30)  # a read that would outlive the run's wall clock
            return await super().run(args, ctx)

    slow = Hanging("base_fee", {"base_fee_gwei": "1.5"})
    model = ScriptedModel({"propose": [call("base_fee"), {"action": "done"}]})
    deps = make_deps(tmp_path, model, [slow], limits=Limits(wall_clock_s=1.0))
    started = time.monotonic()
    r = asyncio.run(run_task("What is the base fee?", deps))
    assert (r.stop_reason, r.finished) == ("deadline", False), r.message
    assert "base_fee was cut at the wall clock of 1 s" in r.message
    assert time.monotonic() - started < 15  # not the tool's 30 s


def test_churn_steps_that_call_without_covering_stop_the_run(tmp_path: Path) -> None:
    # Each step reads a different block: real, fresh calls, none covering the base fee.
    r = run(
        tmp_path,
        {
            "checklist": [checklist(("base fee gwei", "base_fee_gwei"))],
            "propose": [call("block_info", block=n) for n in range(1, 6)],
        },
        [block_tool()],
        limits=Limits(churn_steps=3),
    )
    assert (r.stop_reason, r.finished, r.steps) == ("churn", False, 3)
    assert r.message == (
        "3 steps in a row called tools without covering a checklist item (churn_steps=3)"
    )


def test_churn_is_off_when_its_limit_is_zero(tmp_path: Path) -> None:
    r = run(
        tmp_path,
        {
            "checklist": [checklist(("base fee gwei", "base_fee_gwei"))],
            "propose": [call("block_info", block=n) for n in range(1, 6)],
        },
        [block_tool()],
        limits=Limits(churn_steps=0, max_steps=4, streak_length=10),
    )
    assert r.stop_reason == "max-steps"


def _interrupting_thread() -> Any:
    raise KeyboardInterrupt


class _Raising(FactTool):
    """A free tool that raises ``how`` inside the run's inner tasks."""

    def __init__(self, how: str) -> None:
        super().__init__("base_fee", {"base_fee_gwei": "1.5"})
        self.how = how

    async def run(self, args: Any, ctx: Any) -> Any:
        if self.how == "tool-thread":
            return await asyncio.to_thread(_interrupting_thread)
        if self.how == "tool-gather":  # a tool's own inner tasks (pay_http, discover)
            from agent.interrupts import gather_within

            return await gather_within(asyncio.to_thread(_interrupting_thread), asyncio.sleep(0))
        raise KeyboardInterrupt if self.how == "tool" else SystemExit(3)


@pytest.mark.parametrize("where", ["model", "tool", "tool-thread", "tool-gather", "tool-exit"])
def test_a_keyboard_interrupt_inside_an_inner_task_ends_the_run_interrupted(
    tmp_path: Path, where: str
) -> None:
    """A KeyboardInterrupt (or SystemExit) raised inside a task the run awaits (a model
    call under its deadline, a free call in the batch, a thread) would leave the event
    loop past every await; the run still returns one result and closes its row."""
    if where == "model":
        model = ScriptedModel({"propose": [KeyboardInterrupt()]})
        tools = [BASE_FEE]
    else:
        model = ScriptedModel({"propose": [call("base_fee"), {"action": "done"}]})
        tools = [_Raising(where.removesuffix("-exit") if where != "tool-exit" else "exit")]
    r = asyncio.run(run_task("What is the base fee?", make_deps(tmp_path, model, tools)))
    expected = "SystemExit" if where == "tool-exit" else "KeyboardInterrupt"
    assert (r.stop_reason, r.finished, r.partial) == ("interrupted", False, True)
    assert expected in r.message and r.answer.strip()
    row = _row(tmp_path, r.run_id)
    assert (row["status"], row["stop_reason"]) == ("stopped", "interrupted")


@pytest.mark.parametrize("broken", ["run.start", "stop"])
def test_a_store_that_fails_at_the_start_or_the_close_still_returns_one_result(
    tmp_path: Path, broken: str
) -> None:
    """The first write (the run's start) and the last (its stop) fail: the run still
    returns an AgentResult naming the bug, never an exception."""
    import sqlite3

    from agent.store import RunStore

    class BrokenStore(RunStore):
        def event(self, run_id: str, type_: str, data: dict[str, Any]) -> int:
            if type_ == broken:
                raise sqlite3.OperationalError("database is locked")
            return super().event(run_id, type_, data)

    model = ScriptedModel({"propose": [call("base_fee"), {"action": "done"}]})
    deps = make_deps(tmp_path, model, [BASE_FEE], store=BrokenStore(tmp_path / "nib.db"))
    r = asyncio.run(run_task("What is the base fee?", deps))
    assert (r.stop_reason, r.finished) == ("internal-error", False) and r.answer.strip()
    assert "OperationalError: database is locked" in r.message
    if broken == "stop":
        assert "The run row could not be closed" in r.message


def test_a_run_whose_checklist_keeps_changing_stops_as_churn(tmp_path: Path) -> None:
    """Checklist drift is half of the wrong-path signal: asked again at each re-plan, the
    model asks for other facts each time, so the run stops sooner than its calls alone
    would stop it, and the message names the drift."""
    drifting = [checklist(("block count", "block_number")), checklist(("gas", "gas_price_gwei"))]
    model = ScriptedModel(
        {
            "checklist": [checklist(("base fee gwei", "base_fee_gwei")), *drifting],
            "propose": [call("block_info", block=n) for n in range(1, 6)],
        }
    )
    deps = make_deps(tmp_path, model, [block_tool()], limits=Limits(churn_steps=3, replan_every=1))
    r = asyncio.run(run_task("What is the base fee on the devnet?", deps))
    assert (r.stop_reason, r.finished, r.steps) == ("churn", False, 2)
    assert r.message == (
        "no checklist item covered while 2 step(s) called tools and the checklist, asked "
        "again, changed 1 time(s) (churn_steps=3)"
    )
    [drift] = [e["data"] for e in deps.store.events(r.run_id, "checklist.drift")]
    assert (drift["step"], drift["added"], drift["dropped"]) == (2, ["block_number"], ["base_fee_gwei"])
    assert churn_streak(deps.store.events(r.run_id)) == 3  # the eval counts it as the loop does


def test_a_checklist_asked_again_in_other_words_is_not_drift(tmp_path: Path) -> None:
    """The same facts in another order and wording: no drift, only the calls count."""
    reworded = checklist(("the gas price", "gas_price_gwei"), ("fee per gas, base", "base_fee_gwei"))
    r = run(
        tmp_path,
        {
            "checklist": [FEE_AND_GAS, reworded, reworded],
            "propose": [call("block_info", block=n) for n in range(1, 6)],
        },
        [block_tool()],
        limits=Limits(churn_steps=3, replan_every=1),
    )
    assert (r.stop_reason, r.steps) == ("churn", 3)
    assert r.message.startswith("3 steps in a row called tools without covering")
