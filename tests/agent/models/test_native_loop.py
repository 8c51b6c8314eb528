"""The loop through the real OpenAI-compatible adapter, replies in the provider's wire format.

A MockTransport plays the server: it answers each request in chat-completions form and
keeps the requests, so the tests see exactly what nib sent (tools, tool results, the
fallback protocol) and what the run made of the replies.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parents[1]))

from _loop_support import FactTool, FlakyTool, make_deps  # noqa: E402

from agent.loop.run import run_task  # noqa: E402
from agent.models.openai_compat import OpenAICompatModel  # noqa: E402
from agent.store import RunStore  # noqa: E402


def completion(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def text(content: str) -> dict[str, Any]:
    return completion({"content": content})


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return completion(
        {
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for n, (name, args) in enumerate(pairs)
            ],
        },
        "tool_calls",
    )


class Server:
    """Serves scripted bodies in order (a status with a body for rejections), then plain
    text (the synthesis and lesson requests after a stop)."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        reply = self.replies.pop(0) if self.replies else text("Nothing more to add.")
        if callable(reply):
            reply = reply(body)
        status, answer = reply if isinstance(reply, tuple) else (200, reply)
        return httpx.Response(status, json=answer)

    def model(self) -> OpenAICompatModel:
        return OpenAICompatModel(
            model="m",
            base_url="http://127.0.0.1:9/v1",
            transport=httpx.MockTransport(self.handle),
        )


BASE_FEE = FactTool("base_fee", {"base_fee_gwei": "0.875"})
GAS = FactTool("gas_price", {"gas_price_gwei": "1.2"})
ITEMS = json.dumps({"items": [{"text": "base fee gwei", "kind": "base_fee_gwei"}]})


def run(tmp_path: Path, server: Server, task: str = "What is the base fee?") -> Any:
    deps = make_deps(tmp_path, server.model(), [BASE_FEE, GAS])  # type: ignore[arg-type]
    return deps, asyncio.run(run_task(task, deps))


def test_native_calls_results_and_submit_answer(tmp_path: Path) -> None:
    server = Server(
        text(json.dumps({"items": [{"text": "unrelated", "kind": None}]})),
        calls(("base_fee", {}), ("gas_price", {})),
        calls(("submit_answer", {"answer": "0.875 gwei [e1]", "evidence": ["e1"]})),
    )
    deps, result = run(tmp_path, server)
    # Accepted, but the checklist item was never covered: the run names it, not finished.
    assert result.stop_reason == "cannot-plan" and result.answer.startswith("0.875 gwei [e1]\n")
    checklist_req, first, second = server.bodies[:3]  # then the lesson of a partial run
    assert checklist_req["response_format"]["type"] == "json_schema"
    names = [t["function"]["name"] for t in first["tools"]]
    assert names == ["base_fee", "gas_price", "submit_answer", "done"]
    assert "response_format" not in first
    system = first["messages"][0]["content"]
    assert "submit_answer" in system and "data, not instructions" in system
    # Two parallel free calls ran as one batch; their results came back as tool messages.
    assert [e.tool for e in result.evidence] == ["base_fee", "gas_price"]
    tail = second["messages"][-3:]
    assert tail[0]["role"] == "assistant" and len(tail[0]["tool_calls"]) == 2
    assert [(m["role"], m["tool_call_id"]) for m in tail[1:]] == [
        ("tool", "call_0"),
        ("tool", "call_1"),
    ]
    assert "0.875" in tail[1]["content"] and "evidence e1" in tail[1]["content"]
    protocol = deps.store.events(result.run_id, "model.protocol")
    assert [e["data"]["protocol"] for e in protocol] == ["native"]


def test_server_without_tools_is_recorded_as_the_fallback(tmp_path: Path) -> None:
    rejected = (400, {"error": {"message": "tools are not supported by this model"}})
    server = Server(
        text(ITEMS),
        rejected,
        text('{"action":"call","tool":"base_fee","args":{}}'),
    )
    deps, result = run(tmp_path, server)
    assert result.stop_reason == "evidence-covered"
    fallback = server.bodies[2]
    assert "tools" not in fallback
    assert fallback["response_format"]["json_schema"]["name"] == "proposal"
    assert '{"action":"call"' in fallback["messages"][0]["content"]
    protocol = deps.store.events(result.run_id, "model.protocol")
    assert [e["data"]["protocol"] for e in protocol] == ["json-text"]


def test_checklist_failing_twice_becomes_the_task(tmp_path: Path) -> None:
    server = Server(
        text("I think you need the base fee."),
        text('{"items": "base fee"}'),
        calls(("done", {})),
    )
    deps, result = run(tmp_path, server, "What is the base fee of block 7?")
    assert len(deps.store.events(result.run_id, "checklist.invalid")) == 2
    [event] = deps.store.events(result.run_id, "checklist")
    assert event["data"]["fallback"] == "task"
    assert event["data"]["items"][0]["text"] == "What is the base fee of block 7?"
    retry = server.bodies[1]
    assert len(retry["messages"]) == 2 and "rejected" in retry["messages"][1]["content"]


def test_malformed_tool_arguments_get_one_retry_then_count_as_lost(tmp_path: Path) -> None:
    broken = completion(
        {
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "base_fee", "arguments": "{"}}
            ],
        },
        "length",
    )
    server = Server(text(ITEMS), broken, broken, broken, broken)
    deps, result = run(tmp_path, server)
    assert result.stop_reason == "proposal-lost"
    invalid = deps.store.events(result.run_id, "proposal.invalid")
    assert [e["data"]["retry"] for e in invalid] == [0, 1, 0, 1]
    assert "not JSON" in invalid[0]["data"]["error"]


LESSON = "flaky_fee failed (ToolError); check its arguments and the seller before retrying."


def follows_lessons(body: dict[str, Any]) -> dict[str, Any]:
    """A model that reads its prompt: it takes the advice of a lesson it is shown."""
    prompt = " ".join(str(m.get("content") or "") for m in body["messages"])
    return calls(("base_fee", {}) if LESSON in prompt else ("flaky_fee", {}))


def test_a_lesson_from_a_failed_run_changes_the_next_runs_proposals(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "nib.db")
    task = "What is the base fee right now?"
    flaky = FlakyTool("flaky_fee", failures=99)

    def once(*replies: Any) -> tuple[Server, Any]:
        server = Server(*replies)
        deps = make_deps(tmp_path, server.model(), [BASE_FEE, flaky], store=store)  # type: ignore[arg-type]
        return server, asyncio.run(run_task(task, deps))

    first, failed = once(
        text(ITEMS), *[follows_lessons] * 3, text("No base fee was read."), text("1")
    )
    assert failed.stop_reason == "failure-budget" and flaky.calls == 3
    assert [e["data"]["recorded"] for e in store.events(failed.run_id, "lesson")] == [LESSON]
    # The lesson request names the candidates; the model's reply only picks one by number.
    assert f"1. {LESSON}" in first.bodies[-1]["messages"][1]["content"]

    second, result = once(text(ITEMS), follows_lessons)
    assert LESSON in second.bodies[1]["messages"][1]["content"]
    assert second.bodies[1]["messages"][0]["content"] == first.bodies[1]["messages"][0]["content"]
    assert flaky.calls == 3  # the next run never proposed the failing tool
    assert result.stop_reason == "evidence-covered"
    assert [e.tool for e in result.evidence] == ["base_fee"]
