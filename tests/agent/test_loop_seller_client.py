"""A run asks sellers through one kept-alive client: the quote's 402, the terms re-read
before paying and the paid request of every purchase reuse a connection, instead of a
new client (and TCP connection) per request, which `nib run` paid and the bench did not
(bench/roundtrip.py hands the tools one client). The client keeps no cookie a seller
sets, as a client per request kept none."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from _loop_support import call, make_deps
from fastapi import FastAPI, Request, Response
from pydantic import BaseModel, ConfigDict

from agent.loop.run import run_task
from agent.models.scripted import ScriptedModel
from agent.tools.base import FreeLimits, Observation, Tool, ToolContext
from agent.tools.x402.fetch import fetch
from tests._support import serve


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _AskSeller(Tool):
    """A free tool that asks the seller at ``url`` three times through the run's context,
    as a purchase does (the quote's 402, the terms re-read, the paid request)."""

    name = "ask_seller"
    description = "test tool: three requests to a seller"
    kind = "free"
    free_limits = FreeLimits(max_calls_per_run=10, max_result_bytes=65_536)
    args_model = _Args
    facts = ("base_fee_gwei",)

    def __init__(self, url: str) -> None:
        self.url = url

    async def run(self, args: Any, ctx: ToolContext) -> Observation:
        for _ in range(3):
            resp = await fetch(ctx, self.url)
            assert resp.status_code == 200, resp.text
        facts = {"base_fee_gwei": "1.5"}
        return Observation(tool=self.name, ok=True, summary="ok", data=facts, facts=facts)


def test_a_runs_requests_to_a_seller_reuse_one_connection_and_carry_no_cookie(
    tmp_path: Path,
) -> None:
    seen: list[tuple[int, str | None]] = []
    app = FastAPI()

    @app.get("/data")
    def data(request: Request) -> Response:
        assert request.client is not None
        seen.append((request.client.port, request.headers.get("cookie")))
        resp = Response("{}", media_type="application/json")
        resp.set_cookie("visit", str(len(seen)))
        return resp

    with serve(app) as url:
        tool = _AskSeller(url + "/data")
        model = ScriptedModel({"propose": [call("ask_seller"), {
            "action": "submit_answer", "answer": "done", "evidence": ["e1"]}]})
        deps = make_deps(tmp_path, model, [tool])
        asyncio.run(run_task("ask the seller", deps))
    assert len(seen) == 3, seen
    assert {port for port, _ in seen} == {seen[0][0]}, f"expected one connection, got {seen}"
    assert [cookie for _, cookie in seen] == [None] * 3
