"""A seller that is only compared cannot hold a purchase from another seller, from the
attacker's position.

A market task buys from atlas; a second allowlisted seller, listed in discovery, is quoted
as an alternative (from the judge's own read of its 402). That seller stalls its unpaid
402, to the judge only (told apart by the judge's ``Accept-Encoding: identity``) or to
everyone. Once, the decision waited the judge's whole 10 s read for it, and the agent's
quote its 30 s response deadline (twice); now the offer is dropped, named, within a few
seconds. Real parts: sellers built with the x402 package, a facilitator listing them,
the real wallet and judge (reading sellers' 402s), Anvil; balances read from the chain.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _loop_support import paid_deps, usdc_balance

from agent.loop.bestoffer import ALTERNATIVE_QUOTE_S
from agent.loop.limits import Limits
from agent.loop.run import run_task
from agent.models.offline import OfflinePlanner
from agent.tools.discover import DiscoverTool
from agent.tools.x402.offers import OfferBook
from agent.tools.x402.pay_http import PayHttpTool
from chain.devkeys import AGENT, JUDGE, OUTSIDER, dev_account
from chain.paywall.facilitator_service import create_facilitator_app
from chain.paywall.market import (
    MarketSeller,
    PaidRoute,
    create_seller_app,
    register_with,
    seller_named,
)
from chain.paywall.serve import AppServer
from judge.calibration import BetaCalibrator
from judge.jev import Judge
from judge.mcp_terms import SELLER_READ_S
from judge.payto import advertised_terms
from judge.seller_terms import COMPARED_READ_S
from judge.verdict import VerdictSigner
from wallet.ledger import Ledger

#: The hostile seller holds an unpaid read this long: past the agent's 30 s response
#: deadline and the judge's 10 s read.
STALL_S = 40.0
#: What a stalled compared offer may add to a purchase at most, over the same run with an
#: honest one: its bound and a generous margin for a loaded machine; far below 10 s / 30 s.
ADDED_AT_MOST_S = max(ALTERNATIVE_QUOTE_S, COMPARED_READ_S) + 3.0
STALLER = MarketSeller(
    "staller", "honest", OUTSIDER,
    (PaidRoute("GET /tokens", 20_000, "Token fact sheet: issuer, launch year, decimals, "
               "standard and mainnet address (?symbol=USDC). Staller data."),),
)
TASK = "Who issues USDC? Buy its token fact sheet from a seller in the market."


@pytest.fixture(scope="module")
def stalling(anvil: Any, market: dict[str, str]) -> Iterator[dict[str, Any]]:
    """A discovery facilitator listing atlas and ``staller`` (settling through the
    market's facilitator), whose unpaid reads of its offer (``/tokens``) stall as ``state["mode"]`` says: None
    (honest), ``"judge"`` (reads sent the way the judge sends them) or ``"all"``."""
    release = threading.Event()
    state: dict[str, Any] = {"mode": None, "stalled": 0}
    app = create_seller_app(STALLER, market["facilitator"], anvil.usdc, rpc_url=anvil.rpc_url)

    async def staller(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or ()) if scope["type"] == "http" else {}
        unpaid = scope.get("path") == "/tokens" and not any(
            h in headers for h in (b"payment-signature", b"x-payment"))
        judge = headers.get(b"accept-encoding") == b"identity"
        if unpaid and (state["mode"] == "all" or (state["mode"] == "judge" and judge)):
            state["stalled"] += 1
            deadline = time.monotonic() + STALL_S
            while time.monotonic() < deadline and not release.is_set():
                await asyncio.sleep(0.05)
        await app(scope, receive, send)

    with AppServer(create_facilitator_app(anvil.rpc_url), name="discovery") as fac, \
            AppServer(staller, name="staller") as srv:
        register_with(fac.url, STALLER, srv.url)
        register_with(fac.url, seller_named("atlas"), market["atlas"])
        yield {"state": state, "discovery": fac.url, "url": srv.url}
        release.set()


def _run(
    tmp_path: Path, chain: Any, market: dict[str, str], stalling: dict[str, Any]
) -> tuple[Any, Any, float]:
    """One market task buying atlas's sheet with the staller compared: result, deps, seconds."""
    tmp_path.mkdir()
    book = OfferBook()
    judge = Judge(VerdictSigner(dev_account(JUDGE)), BetaCalibrator(str(tmp_path / "nib.db")),
                  allowed_assets={chain.chain_id: [chain.usdc]}, terms_of=advertised_terms)
    deps = paid_deps(tmp_path, chain, OfflinePlanner(), judge=judge,
                     extra_tools=(DiscoverTool(book), PayHttpTool(offers=book)))
    deps = dataclasses.replace(deps, allowlist=(market["atlas"], stalling["url"]),
                               extras={"discovery_urls": stalling["discovery"]})
    started = time.monotonic()
    r = asyncio.run(run_task(TASK, deps))
    return r, deps, time.monotonic() - started


@pytest.mark.parametrize("mode", ["judge", "all"])
def test_a_compared_seller_that_stalls_its_402_does_not_hold_the_purchase(
    tmp_path: Path, chain: Any, market: dict[str, str], stalling: dict[str, Any], mode: str
) -> None:
    atlas, staller = seller_named("atlas").pay_to, STALLER.pay_to
    state = stalling["state"]
    state["mode"] = None  # the same run with an honest staller: the time to beat
    honest, _, baseline = _run(tmp_path / "honest", chain, market, stalling)
    assert honest.finished, honest.answer
    before = usdc_balance(chain, atlas), usdc_balance(chain, staller)
    agent_before = usdc_balance(chain, dev_account(AGENT).address)
    state["mode"], state["stalled"] = mode, 0
    r, deps, took = _run(tmp_path / "stalled", chain, market, stalling)
    state["mode"] = None

    print(f"stalled to {mode}: {took:.1f} s, {baseline:.1f} s with an honest staller")
    assert (r.stop_reason, r.finished) == ("evidence-covered", True), r.answer
    assert state["stalled"] >= 1  # the staller was compared, and stalled
    assert took - baseline < ADDED_AT_MOST_S, (
        f"the purchase from atlas took {took:.1f} s, {baseline:.1f} s with an honest staller")
    verdict = deps.store.events(r.run_id, "verdict")[-1]["data"]
    assert verdict["decision"] == "approve"
    # Either way the agent's quote gave up on it (the quote is built from the judge's own
    # read, so stalling the judge's reads stalls the quote): the judge never ruled on it.
    unquoted = deps.store.events(r.run_id, "offer.unquoted")
    assert [e["data"]["resource"].startswith(stalling["url"]) for e in unquoted] == [True]
    assert f"no quote within {ALTERNATIVE_QUOTE_S:g} s" in unquoted[0]["data"]["error"]
    assert verdict["offers_compared"] == 1
    # Money moved to atlas only, read from the chain and the ledger.
    rows = Ledger(deps.wallet.meter.store).rows(r.run_id)
    assert [(row.status, row.amount, row.recipient.lower()) for row in rows] == [
        ("settled", 10_000, atlas.lower())]
    assert usdc_balance(chain, atlas) == before[0] + 10_000
    assert usdc_balance(chain, staller) == before[1]
    assert usdc_balance(chain, dev_account(AGENT).address) == agent_before - 10_000


def test_a_seller_that_stalls_the_402_it_is_bought_from_holds_the_quote_no_longer_than_the_judge(
    tmp_path: Path, chain: Any, market: dict[str, str], stalling: dict[str, Any]
) -> None:
    """The task names the staller: its quote (the agent's unpaid read) gives up at the
    judge's own read bound, once, not at the run's 30 s response deadline twice; nothing
    is paid."""
    tmp_path = tmp_path / "named"
    tmp_path.mkdir()
    book = OfferBook()
    limits = Limits(max_consecutive_failures=1, response_deadline_s=30.0)
    deps = paid_deps(tmp_path, chain, OfflinePlanner(), limits=limits,
                     extra_tools=(PayHttpTool(offers=book),))
    deps = dataclasses.replace(deps, allowlist=(stalling["url"],))
    agent_before = usdc_balance(chain, dev_account(AGENT).address)
    stalling["state"]["mode"] = "all"
    started = time.monotonic()
    try:
        task = f"Who issues USDC? Buy the token fact sheet at {stalling['url']}/tokens?symbol=USDC"
        r = asyncio.run(run_task(task, deps))
    finally:
        stalling["state"]["mode"] = None
    took = time.monotonic() - started
    assert not r.finished
    assert took < SELLER_READ_S + 5.0, f"the stalled quote held the run {took:.1f} s"
    failed = [e["data"] for e in deps.store.events(r.run_id, "tool.call") if not e["data"]["ok"]]
    assert failed and f"within {SELLER_READ_S:g} s" in str(failed[0]), failed
    assert Ledger(deps.wallet.meter.store).rows(r.run_id) == []
    assert usdc_balance(chain, dev_account(AGENT).address) == agent_before
