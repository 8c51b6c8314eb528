"""A transfer waiting its turn never starves the transfer it waits for, on a real Anvil.

The flake of `test_concurrency.py::test_ten_concurrent_transfers_have_no_nonce_errors`
(a fresh-clone CI run, under load): ten runs on one wallet each quote a nonce, and a
transfer above a number not yet sent waits for it (wallet.broadcast, up to ORDER_WAIT_S).
The wait held one of the event loop's worker threads (``asyncio.to_thread``: at most
cpu + 4 of them, six on two cores), so once the waiting transfers held them all, the run
holding the lowest number had no thread left to sign and send it: the first waiters gave
up ("... has nonce 3, but the chain's next number ... is 2 and 2 were handed out and not
sent within 30 s"). Here the lowest number's run is held back a moment (its nonce check
sleeps on the event loop, holding no thread) and the pool is made small, so the others
are waiting before it comes back: every run must still pay, in order, with no failure.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fault_support import CAP_PER_TASK, GAS, RECEIPT, SELLER_ADDR, TIP, build_agent, buyer_model

import wallet.broadcast as broadcast
from agent.loop.limits import Limits
from agent.tools.transfer import UsdcTransferTool
from chain.paywall.app import PaywallServer
from tests._services import Composition

RUNS = 6
POOL = 3  # fewer worker threads than transfers waiting their turn


def test_transfers_waiting_their_turn_leave_threads_for_the_one_they_wait_for(
    tmp_path: Any, chain: Any, paywall: PaywallServer, composition: Composition,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(broadcast, "ORDER_WAIT_S", 6.0)  # the old failure shows in 6 s, not 30
    take = UsdcTransferTool._take_nonce
    held_back: list[int] = []

    async def lowest_comes_back_late(self: Any, wallet: Any, nonce: int, held: bool, ctx: Any) -> None:
        if not held_back:
            held_back.append(nonce)
            await asyncio.sleep(2.0)  # the others quote, sign and start waiting meanwhile
        await take(self, wallet, nonce, held, ctx)

    monkeypatch.setattr(UsdcTransferTool, "_take_nonce", lowest_comes_back_late)
    agent = build_agent(
        tmp_path / "nib.db", chain.rpc_url, chain.usdc, buyer_model(paywall.url, (GAS, RECEIPT)),
        allowlist=(paywall.url,), paywall_url=paywall.url,
        limits=Limits(spend_cap_atomic=CAP_PER_TASK, max_steps=8, max_consecutive_failures=8),
        composition=composition,
    )

    async def all_runs() -> list[Any]:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(POOL))
        return await asyncio.gather(*(
            agent.run(f"Research task {i}; send 0.01 USDC to {SELLER_ADDR}.") for i in range(RUNS)
        ))

    results = asyncio.run(all_runs())
    failed = [e["data"]["summary"] for r in results for e in agent.store.events(r.run_id, "tool.call")
              if not e["data"]["ok"]]  # fmt: skip
    assert failed == [], failed
    assert [r.stop_reason for r in results] == ["evidence-covered"] * RUNS, [r.message for r in results]
    tips = [t for t in agent.transfers_from_agent() if t.value == TIP]
    assert len({t.tx_hash for t in tips}) == RUNS and held_back
    assert agent.nonces()["in_flight"] == [] and agent.nonces()["free"] == []
