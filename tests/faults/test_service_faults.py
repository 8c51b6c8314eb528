"""The wallet as its own process fails mid-run: the run stops with wallet-unreachable and
the fix, and nothing is signed after it (ledger and chain agree). The same paid path
runs through the wallet service before the failure, on a real Anvil and paywall.

In-process, the wallet service is a thread of the test over the in-process wallet and
judge, and it is stopped; with services, the forked wallet service (beside the judge
service) is SIGKILLed."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from fault_support import (
    AGENT_ADDR,
    GAS,
    GAS_PRICE,
    SELLER_ADDR,
    TRANSFERS,
    Provider,
    build_agent,
    checklist,
    pay,
)

from agent.models.openai_compat import OpenAICompatModel
from chain.paywall.app import PaywallServer
from tests._services import Composition
from wallet.service import WalletClient, WalletServer


def test_wallet_service_dying_mid_run_stops_with_wallet_unreachable(
    tmp_path: Any, chain: Any, paywall: PaywallServer, composition: Composition
) -> None:
    stops: list[Callable[[], None]] = []

    def kill_then_propose() -> dict[str, Any]:
        stops[0]()  # the wallet service dies after the first purchase
        return pay(paywall.url + "/analytics/transfers")

    provider = Provider(
        [checklist(GAS, TRANSFERS), pay(paywall.url + "/analytics/gas"), kill_then_propose]
    )
    model = OpenAICompatModel(model="gpt-test", base_url="http://llm.test/v1",
                              api_key="sk-test", transport=provider.transport)
    agent = build_agent(tmp_path / "nib.db", chain.rpc_url, chain.usdc, model,
                        allowlist=(paywall.url,), paywall_url=paywall.url,
                        composition=composition)
    server = None
    if composition.services:
        stops.append(composition.kill_wallet)
    else:
        server = WalletServer(agent.wallet, tmp_path / "home").start()  # type: ignore[arg-type]
        stops.append(server.stop)
        remote = WalletClient(server.socket_path, timeout_s=5)
        agent.deps = dataclasses.replace(agent.deps, wallet=remote, meter=remote.meter)
    try:
        before = agent.balance(AGENT_ADDR)
        result = asyncio.run(agent.run("Gas and transfer stats?"))
    finally:
        if server is not None:
            server.stop()
    assert (result.stop_reason, result.partial) == ("wallet-unreachable", True), result.message
    assert "`nib services up`" in result.message
    # A stopped service refuses the next request unread: nothing was signed. After a
    # SIGKILL the kernel may release the dead service's socket a moment later, so the next
    # request can still be written into it: then the client cannot know and says so.
    outcomes = ("nothing was signed",) + (("its answer is unknown",) if composition.services else ())
    assert any(o in result.message for o in outcomes), result.message
    [row] = agent.ledger()
    assert (row.status, row.amount) == ("settled", GAS_PRICE)
    logs = agent.transfers_from_agent()
    assert [(t.recipient, t.value) for t in logs] == [(SELLER_ADDR, GAS_PRICE)]
    assert agent.balance(AGENT_ADDR) == before - GAS_PRICE
