"""One task's seller cannot hold another task's decisions, from the attacker's position.

The judge reads an allowlisted seller's own 402 (HTTP, judge.payto; MCP, judge.mcp_terms)
before it approves a purchase. A seller that stalls its answer (a hostile seller, or one
an attacker slowed down) used to be read inside the judge's decision lock, so every other
task's decision waited for it (up to 10 s per transport). The judge now reads before the
lock (judge.seller_terms): the stalled read delays only the decision that names it, and
that decision is still ruled on terms read for it (refused once the read gives up). The
read itself is bounded in time and size, whatever the seller trickles or floods.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Response
from fastapi.responses import StreamingResponse
from test_judge_payto import _402
from test_judge_tasks import USDC, authorization, request

from judge.admission import PER_CALLER_IN_FLIGHT
from judge.fingerprint import call_fingerprint
from judge.jev import Judge
from judge.mcp_terms import SELLER_READ_S
from judge.payto import advertised_terms
from judge.service import JudgeClient, JudgeServer
from judge.tasks import TaskLimits
from judge.verdict import Verdict, VerdictSigner
from tests._support import serve

PAY_TO = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
TOKEN = "judge-admin-token"
#: The hostile seller holds its answer this long; the other task's decision must come back
#: well within it (generous margins: the machine is shared and loaded).
STALL_S = 20.0
OTHER_DECISION_WITHIN_S = 5.0
#: An honest seller whose 402 takes this long: past the judge client's 1 s read of any
#: other answer, well within a decision's bound (an outside tester's seller, round 9).
SLOW_S = 1.5


@pytest.fixture(scope="module")
def sellers() -> Iterator[dict[str, Any]]:
    """An honest x402 seller (``honest``) and a hostile one (``stalling``) that holds its
    402 (``/data``) and its MCP endpoint (``/mcp``) for STALL_S, trickles a body
    (``/trickle``) or floods one (``/flood``)."""
    release = threading.Event()
    state: dict[str, Any] = {"reads": 0, "flooded": 0}
    honest, hostile = FastAPI(), FastAPI()

    @honest.get("/data")
    def data() -> Response:
        return _402(PAY_TO)

    @honest.get("/slow")
    async def slow() -> Response:  # honest, but its 402 takes SLOW_S
        await asyncio.sleep(SLOW_S)
        return _402(PAY_TO)

    async def stall() -> Response:
        state["reads"] += 1
        deadline = time.monotonic() + STALL_S
        while time.monotonic() < deadline and not release.is_set():
            await asyncio.sleep(0.1)
        return _402(PAY_TO)

    hostile.add_api_route("/data", stall, methods=["GET"])
    hostile.add_api_route("/mcp", stall, methods=["GET", "POST"])

    @hostile.get("/trickle")
    def trickle() -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            for _ in range(int(3 * STALL_S)):  # a byte a second: no read ever times out
                yield b" "
                await asyncio.sleep(1)
        return StreamingResponse(body(), status_code=402)

    @hostile.get("/flood")
    def flood() -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            for _ in range(int(100 * STALL_S)):  # 128 MB, 64 KiB every 10 ms
                state["flooded"] += 1
                yield b" " * 65_536
                await asyncio.sleep(0.01)
        return StreamingResponse(body(), status_code=402)

    with serve(honest) as good, serve(hostile) as bad:
        state.update(honest=good, stalling=bad)
        try:
            yield state
        finally:
            release.set()


def _service_judge(signer: VerdictSigner, sellers: dict[str, Any]) -> tuple[Judge, str, str]:
    """The services' judge with two registered tasks: ``victim`` buys from the honest
    seller, ``attacker`` from the stalling one; their task tokens."""
    judge = Judge(signer, allowed_assets={31337: [USDC]}, balance_of=lambda asset: 5_000_000,
                  require_task=True, terms_of=advertised_terms)
    tokens = []
    for task, seller in (("victim", sellers["honest"]), ("attacker", sellers["stalling"])):
        judge.register_task(TaskLimits(task_id=task, spend_cap_atomic=1_000_000, per_call_cap_atomic=500_000,
                                       approval_threshold_atomic=None, recipients=(), sellers=(seller,)))
        tokens.append(judge.tasks.issue_token("task", task))
    return judge, tokens[0], tokens[1]


def _buy(task: str, seller: str, nonce: int, **mcp: str) -> Any:
    tool, args = ("pay_mcp", {"server": seller, "tool": "sheet", **mcp}) if mcp else (
        "pay_http", {"url": seller + "/data"})
    return request(authorization(PAY_TO, 10_000, nonce), tool=tool, args=args, seller=seller,
                   task_id=task, call_fingerprint=call_fingerprint(tool, args))


@pytest.mark.parametrize("over", ["http", "mcp"])
def test_a_stalling_seller_holds_only_its_own_tasks_decision(
    sellers: dict[str, Any], signer: VerdictSigner, over: str
) -> None:
    """Through the real judge service: while the attacker's seller holds its 402 (or its
    MCP answer) for STALL_S, to as many of the attacker task's decisions as the judge
    lets one task have in flight, the victim task's purchase is approved within
    OTHER_DECISION_WITHIN_S (on the old code it waited the judge's whole 10 s read). The
    attacker's own decisions are refused: nothing was read for them."""
    judge, victim, attacker = _service_judge(signer, sellers)
    mcp = {"transport": "streamable-http"} if over == "mcp" else {}
    stalled: list[Verdict] = []
    sellers["reads"] = 0
    with JudgeServer(judge, token=TOKEN) as srv:
        def held(nonce: int) -> None:
            with JudgeClient(srv.url, trusted_judge=judge.address, token=attacker,
                             timeout_s=3 * STALL_S) as client:
                stalled.append(client.decide(_buy("attacker", sellers["stalling"], nonce, **mcp)))

        threads = [threading.Thread(target=held, args=(n,), daemon=True)
                   for n in range(10, 10 + PER_CALLER_IN_FLIGHT)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while sellers["reads"] < PER_CALLER_IN_FLIGHT:
            assert time.monotonic() < deadline, f"the judge read the stalling seller {sellers['reads']} times"
            time.sleep(0.05)
        with JudgeClient(srv.url, trusted_judge=judge.address, token=victim,
                         timeout_s=3 * STALL_S) as client:
            started = time.monotonic()
            verdict = client.decide(_buy("victim", sellers["honest"], 2))
            took = time.monotonic() - started
        assert verdict.decision == "approve", verdict.reason
        assert took < OTHER_DECISION_WITHIN_S, (
            f"the victim's decision took {took:.1f} s while another task's seller stalled")
        for thread in threads:
            thread.join(3 * STALL_S)
    expected = ("could not read the tool's payment terms" if mcp
                else "no whole answer within the judge's 10 s read")
    assert len(stalled) == PER_CALLER_IN_FLIGHT
    for refused in stalled:
        assert refused.decision == "refuse" and expected in refused.reason, refused.reason


def test_the_402_read_is_bounded_in_time_and_size(sellers: dict[str, Any]) -> None:
    """A 402 whose body trickles a byte a second (no single read ever times out) is given
    up within the read's 10 s, not after the seller's 60 s; a 402 that floods 128 MB is
    read no further than its first 64 KB, at once (the old read took all of it, at least
    STALL_S)."""
    started = time.monotonic()
    assert advertised_terms(sellers["stalling"] + "/trickle") == ()
    took = time.monotonic() - started
    # Ended at the read's bound (SELLER_READ_S), not at the seller's pace.
    assert took < SELLER_READ_S + 4, f"the read of a trickling 402 took {took:.1f} s"
    started = time.monotonic()
    assert advertised_terms(sellers["stalling"] + "/flood") == ()
    took = time.monotonic() - started
    assert took < STALL_S / 2, (
        f"the read of a flooding 402 took {took:.1f} s ({sellers['flooded']} chunks of 64 KiB sent)")


def test_the_mcp_read_is_bounded_in_size() -> None:
    """An MCP seller that floods its answer (an event stream of 200 MB) is read no further
    than 1 MB: it gets to send what the sockets buffer before the judge stops reading (the
    old read took all 200 MB within its 10 s), and the purchase is refused as unread."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    from judge.mcp_terms import McpTermsUnread, McpTool

    sent = {"chunks": 0}

    async def flood(_request: Any) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            for _ in range(3_200):  # 64 KiB events
                sent["chunks"] += 1
                yield b"data: " + b"x" * 65_536 + b"\n\n"
                await asyncio.sleep(0)
        return StreamingResponse(body(), media_type="text/event-stream")

    with serve(Starlette(routes=[Route("/mcp", flood, methods=["GET", "POST"])])) as url:
        with pytest.raises(McpTermsUnread):
            McpTool(url, "sheet", {}, "streamable-http").offered_terms()
        time.sleep(1)  # what the seller pushed before the judge's read stopped
    assert sent["chunks"] < 400, f"the judge's read took {sent['chunks']} chunks of 64 KiB"


def test_a_slow_seller_is_waited_for_and_a_stalling_one_refused_never_a_judge_outage(
    sellers: dict[str, Any], signer: VerdictSigner
) -> None:
    """With the client as ``nib run`` makes it (default timeouts): a seller that answers
    its 402 in 1.5 s is bought from, and one that stalls is refused by the judge once its
    read gives up. On the old code both stopped the run judge-unreachable after 1 s, with
    a message telling the user to restart a judge that was healthy."""
    judge, victim, attacker = _service_judge(signer, sellers)
    slow = request(authorization(PAY_TO, 10_000, 40), tool="pay_http",
                   args={"url": sellers["honest"] + "/slow"}, seller=sellers["honest"],
                   task_id="victim", call_fingerprint=call_fingerprint(
                       "pay_http", {"url": sellers["honest"] + "/slow"}))
    with JudgeServer(judge, token=TOKEN) as srv:
        with JudgeClient(srv.url, trusted_judge=judge.address, token=victim) as client:
            assert client.decide(slow).decision == "approve"
        with JudgeClient(srv.url, trusted_judge=judge.address, token=attacker) as client:
            started = time.monotonic()
            refused = client.decide(_buy("attacker", sellers["stalling"], 41))
            took = time.monotonic() - started
    # Said as a stall, not as a wrong address (outside testers read it so).
    assert refused.decision == "refuse", refused.reason
    assert "could not read seller" in refused.reason, refused.reason
    assert "no whole answer within the judge's 10 s read" in refused.reason, refused.reason
    assert "retry once the seller answers" in refused.reason, refused.reason  # a stall, said so
    assert "asks to be paid at" not in refused.reason, refused.reason
    assert took < STALL_S, f"the refusal took {took:.1f} s"
