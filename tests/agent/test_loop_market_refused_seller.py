"""A seller that took a payment and did not deliver, in a market run with the offline
planner: the run stops promptly, nothing more goes to that seller, and a later run shown
the lesson buys from another seller.

An outside tester, against ``nib devnet up``, saw the offline planner propose the same
refused purchase again and again (10 steps, 3 re-plans, ``max-steps``) after the loop had
refused the seller for the rest of the run; saw a market task move on to the next offer
of the same failing seller; and saw a later run, shown the lesson "Seller ... failed to
deliver a paid request; do not buy from it.", buy from it again. Real parts: sellers
built with the official x402 package, a discovery facilitator listing them, the real
wallet and judge, Anvil; request logs read at the seller, balances read from the chain.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _loop_support import paid_deps, usdc_balance

from agent.cli.runtime import settled_on
from agent.loop.lessons import TEMPLATES
from agent.loop.limits import Limits
from agent.loop.run import run_task
from agent.models.offline import OfflinePlanner
from agent.models.scripted import ScriptedModel
from agent.tools.discover import DiscoverTool
from agent.tools.x402.offers import OfferBook, seller_of
from agent.tools.x402.pay_http import PayHttpTool
from chain.client import ChainClient
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
from judge.payto import advertised_terms
from judge.verdict import VerdictSigner
from wallet.ledger import Ledger

AGENT_ADDR = dev_account(AGENT).address
_SHEET = "Token fact sheet: issuer, launch year, decimals, standard and mainnet address"
#: Cheaper than atlas on both of its offers, so the market lists it first; it declares full
#: fact sheets and answers without a fact (the devnet's ``bargain``, with a second offer).
SHODDY = MarketSeller(
    "shoddy", "overclaims", OUTSIDER,
    (PaidRoute("GET /tokens", 5_000, f"{_SHEET} (?symbol=USDC). Shoddy data."),
     PaidRoute("POST /lookup", 6_000, f"{_SHEET}; JSON body {{symbol}}. Shoddy data.")),
)
TASK = "Who issues USDC? Buy its token fact sheet from a seller in the market."
#: Wide guards, as the tester's run had: what must stop the run is the planner and the
#: skip detector, not a failure budget or the step limit.
LIMITS = Limits(max_steps=12, max_consecutive_failures=10, churn_steps=0)
_PAYMENT_HEADERS = (b"payment-signature", b"x-payment")


@pytest.fixture(scope="module")
def shoddy_market(anvil: Any, market: dict[str, str]) -> Iterator[dict[str, Any]]:
    """Two discovery facilitators (settling through the market's): ``both`` lists shoddy and
    atlas, ``alone`` shoddy only; ``requests`` logs every request shoddy is sent (method,
    path, whether it carried a payment). With ``state["refuse_paid"]`` shoddy keeps the
    payment it is sent, settles nothing and answers its 402 again."""
    requests: list[tuple[str, str, bool]] = []
    state = {"refuse_paid": False}
    app = create_seller_app(SHODDY, market["facilitator"], anvil.usdc, rpc_url=anvil.rpc_url)

    async def logged(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or ())
            paid = any(h in headers for h in _PAYMENT_HEADERS)
            requests.append((scope["method"], scope["path"], paid))
            if paid and state["refuse_paid"]:
                kept = [(k, v) for k, v in scope["headers"] if k not in _PAYMENT_HEADERS]
                scope = {**scope, "headers": kept}
        await app(scope, receive, send)

    with AppServer(create_facilitator_app(anvil.rpc_url), name="both") as both, \
            AppServer(create_facilitator_app(anvil.rpc_url), name="alone") as alone, \
            AppServer(logged, name="shoddy") as srv:
        register_with(both.url, SHODDY, srv.url)
        register_with(both.url, seller_named("atlas"), market["atlas"])
        register_with(alone.url, SHODDY, srv.url)
        yield {"requests": requests, "both": both.url, "alone": alone.url, "url": srv.url,
               "state": state}


def _deps(
    tmp_path: Path, chain: Any, market: dict[str, str], shop: dict[str, Any], *,
    listing: str = "both", model: Any = None,
) -> Any:  # fmt: skip
    """The market run's deps (one SQLite file per ``tmp_path``: lessons carry over)."""
    book = OfferBook()
    deps = paid_deps(tmp_path, chain, model or OfflinePlanner(), limits=LIMITS,
                     extra_tools=(DiscoverTool(book), PayHttpTool(offers=book)))
    return dataclasses.replace(deps, allowlist=(shop["url"], market["atlas"]),
                               extras={"discovery_urls": shop[listing]})


def _balances(chain: Any) -> dict[str, int]:
    return {a: usdc_balance(chain, a) for a in (SHODDY.pay_to, ATLAS, AGENT_ADDR)}


def _paid_to(deps: Any, run_id: str) -> list[tuple[str, int, str]]:
    rows = Ledger(deps.wallet.meter.store).rows(run_id)
    return [(row.status, row.amount, row.recipient.lower()) for row in rows]


ATLAS = seller_named("atlas").pay_to


def _paid_verdicts(deps: Any, run_id: str) -> list[dict[str, Any]]:
    verdicts = (e["data"] for e in deps.store.events(run_id, "verdict"))
    return [v for v in verdicts if v["kind"] == "paid"]


def _asked(log: list[tuple[str, str, bool]]) -> tuple[list[str], list[str]]:
    """The paths shoddy was asked unpaid (the agent's quote and the judge's read of its
    402, each path once) and the paths it was sent a payment for (every one)."""
    unpaid = [p for _m, p, paid in log if not paid and p != "/catalog"]
    return list(dict.fromkeys(unpaid)), [p for _m, p, paid in log if paid]


def test_after_a_seller_failed_to_deliver_its_other_offer_is_not_proposed_another_sellers_is(
    tmp_path: Path, chain: Any, market: dict[str, str], shoddy_market: dict[str, Any]
) -> None:
    """shoddy is the cheapest, is approved, takes 0.005 USDC and delivers nothing. Before,
    the planner proposed shoddy's next offer (POST /lookup), which the loop refused, and
    only then atlas; now the next proposal is atlas's: three steps, nothing more to shoddy."""
    log: list[tuple[str, str, bool]] = shoddy_market["requests"]
    log.clear()
    before = _balances(chain)
    deps = _deps(tmp_path, chain, market, shoddy_market)
    r = asyncio.run(run_task(TASK, deps))

    assert (r.stop_reason, r.finished, r.steps) == ("evidence-covered", True, 3), r.answer
    assert "Circle" in r.answer
    proposed = [e["data"].get("args", {}).get("url", "") for e in
                deps.store.events(r.run_id, "proposal") if e["data"].get("tool") == "pay_http"]
    assert [u.startswith(shoddy_market["url"]) for u in proposed] == [True, False], proposed
    assert deps.store.events(r.run_id, "gate.skip") == []
    # shoddy was asked once unpaid (the quote) and paid once: no request for its other offer.
    assert _asked(log) == (["/tokens"], ["/tokens"]), log
    assert _paid_to(deps, r.run_id) == [
        ("settled", 5_000, SHODDY.pay_to.lower()), ("settled", 10_000, ATLAS.lower())]
    after = _balances(chain)
    assert after[SHODDY.pay_to] == before[SHODDY.pay_to] + 5_000
    assert after[ATLAS] == before[ATLAS] + 10_000
    assert after[AGENT_ADDR] == before[AGENT_ADDR] - 15_000


def test_a_purchase_the_loop_refuses_again_and_again_ends_the_run_as_a_skip_loop(
    tmp_path: Path, chain: Any, market: dict[str, str], shoddy_market: dict[str, Any]
) -> None:
    """A stubborn model proposes shoddy's sheet again (under other queries) after shoddy
    took its payment and delivered nothing. Each is refused before anything runs (``seller-failed-delivery``);
    before, each refusal reset the skip counter, so the run churned to ``max-steps`` (12
    here); now the refusals count: ``skip-loop`` after ``max_consecutive_skips``."""
    log: list[tuple[str, str, bool]] = shoddy_market["requests"]
    log.clear()
    before = _balances(chain)
    url = f"{shoddy_market['url']}/tokens?symbol=USDC"
    buy = {"action": "call", "tool": "pay_http",
           "args": {"url": url, "covers": ["token_factsheet"]}}
    # Then the same purchase under other queries: other calls, one seller.
    again = [{"action": "call", "tool": "pay_http",
              "args": {"url": f"{url}&try={i}", "covers": ["token_factsheet"]}}
             for i in range(12)]  # fmt: skip
    model = ScriptedModel({
        "checklist": [{"items": [{"text": "USDC issuer", "kind": "token_factsheet"}]}],
        "propose": [buy, *again],
    })
    deps = _deps(tmp_path, chain, market, shoddy_market, model=model)
    r = asyncio.run(run_task(f"Who issues USDC? Buy the token fact sheet at {url}", deps))

    limit = LIMITS.max_consecutive_skips
    assert (r.stop_reason, r.steps) == ("skip-loop", 1 + limit), r.message
    skips = [e["data"]["why"] for e in deps.store.events(r.run_id, "gate.skip")]
    assert skips == ["seller-failed-delivery"] * limit, skips
    assert f"{limit} skipped proposals in a row" in r.message, r.message
    # One quote and one payment went to shoddy; no later quote or authorization.
    assert _asked(log) == (["/tokens"], ["/tokens"]), log
    assert [e["data"]["step"] for e in deps.store.events(r.run_id, "quote")] == [1]
    assert _paid_to(deps, r.run_id) == [("settled", 5_000, SHODDY.pay_to.lower())]
    assert _balances(chain)[SHODDY.pay_to] == before[SHODDY.pay_to] + 5_000


def test_a_run_shown_that_a_seller_did_not_deliver_buys_from_another_seller(
    tmp_path: Path, chain: Any, market: dict[str, str], shoddy_market: dict[str, Any]
) -> None:
    """The first run finds only shoddy, pays it, gets nothing and ends ``cannot-plan``
    without asking shoddy again, leaving the lesson "Seller ... failed to deliver a paid
    request; do not buy from it.". The second, the same task with atlas listed too, is shown
    that lesson: before, it bought from shoddy again (the cheapest); now it proposes atlas,
    and shoddy gets no request at all."""
    log: list[tuple[str, str, bool]] = shoddy_market["requests"]
    log.clear()
    before = _balances(chain)
    first_deps = _deps(tmp_path, chain, market, shoddy_market, listing="alone")
    first = asyncio.run(run_task(TASK, first_deps))
    assert (first.stop_reason, first.finished, first.steps) == ("cannot-plan", False, 3), (
        first.answer)
    assert _asked(log) == (["/tokens"], ["/tokens"]), log
    lesson = TEMPLATES["not-delivered"].format(origin=seller_of(shoddy_market["url"]))

    log.clear()
    deps = _deps(tmp_path, chain, market, shoddy_market)
    r = asyncio.run(run_task(TASK, deps))
    assert [e["data"]["shown"] for e in deps.store.events(r.run_id, "lesson")] == [[lesson]]
    assert (r.stop_reason, r.finished) == ("evidence-covered", True), r.answer
    proposed = [e["data"]["args"]["url"] for e in deps.store.events(r.run_id, "proposal")
                if e["data"].get("tool") == "pay_http"]  # fmt: skip
    assert proposed == [f"{market['atlas']}/tokens?symbol=USDC"], proposed
    assert [p for _m, p, paid in log if paid] == [], log
    assert _paid_to(deps, r.run_id) == [("settled", 10_000, ATLAS.lower())]
    after = _balances(chain)
    assert after[SHODDY.pay_to] == before[SHODDY.pay_to] + 5_000  # the first run's payment
    assert after[ATLAS] == before[ATLAS] + 10_000


def test_a_listed_seller_outside_the_allowlist_is_never_proposed(
    tmp_path: Path, chain: Any, market: dict[str, str], shoddy_market: dict[str, Any]
) -> None:
    """Discovery lists shoddy (cheapest) and atlas; the run's allowlist names atlas only.
    Before, the planner proposed shoddy, the loop refused it (not allowlisted), and with
    the market's other steps the run could end ``churn`` (a facilitator also lists the
    sellers it settles for, so such listings appear without the user asking). Now the
    first purchase proposed is atlas's, and shoddy is never asked."""
    log: list[tuple[str, str, bool]] = shoddy_market["requests"]
    log.clear()
    deps = dataclasses.replace(_deps(tmp_path, chain, market, shoddy_market),
                               allowlist=(market["atlas"],))
    r = asyncio.run(run_task(TASK, deps))

    assert (r.stop_reason, r.finished) == ("evidence-covered", True), r.answer
    proposed = [e["data"].get("args", {}).get("url", "") for e in
                deps.store.events(r.run_id, "proposal") if e["data"].get("tool") == "pay_http"]
    assert proposed and all(u.startswith(market["atlas"]) for u in proposed), proposed
    assert _asked(log) == ([], []), log
    assert _paid_to(deps, r.run_id) == [("settled", 10_000, ATLAS.lower())]


def _judge(tmp_path: Path, chain: Any, *, reads_chain: bool) -> Judge:
    """The judge as ``nib judge serve`` builds it (``reads_chain``: it reads sellers' 402s
    and counts outcomes only for authorizations settled on chain), or the plain in-process
    one."""
    parts: dict[str, Any] = (
        {"terms_of": advertised_terms,
         "payment_settled": settled_on(ChainClient(chain.rpc_url, chain.chain_id))}
        if reads_chain else {})
    return Judge(VerdictSigner(dev_account(JUDGE)), BetaCalibrator(str(tmp_path / "nib.db")),
                 allowed_assets={chain.chain_id: [chain.usdc]}, **parts)


@pytest.mark.parametrize("planner", ["model", "offline"])
def test_a_seller_a_lesson_distrusts_is_never_swapped_in_for_the_chosen_one(
    tmp_path: Path, chain: Any, market: dict[str, str], shoddy_market: dict[str, Any],
    planner: str,
) -> None:
    """An outside tester's run: the model, shown "Seller X failed to deliver a paid request;
    do not buy from it.", chose atlas; the loop quoted X as an alternative and the judge,
    whose p for X had barely moved (cheap payments weigh a tenth of an outcome), swapped
    X in on its lower price: paid for nothing again. Here the judge has no outcome for
    shoddy at all (its p is a new seller's, like atlas's) and shoddy is half atlas's price,
    so on EV alone it would win. Now a seller the task distrusts is no alternative: shoddy
    is not even asked for its 402, and only atlas is paid (ledger and chain)."""
    log: list[tuple[str, str, bool]] = shoddy_market["requests"]
    log.clear()
    before = _balances(chain)
    lesson = TEMPLATES["not-delivered"].format(origin=seller_of(shoddy_market["url"]))
    atlas_url = f"{market['atlas']}/tokens?symbol=USDC"
    model = OfflinePlanner() if planner == "offline" else ScriptedModel({
        "checklist": [{"items": [{"text": "USDC issuer", "kind": "token_factsheet"}]}],
        "propose": [
            {"action": "call", "tool": "discover", "args": {"query": "token fact sheet"}},
            {"action": "call", "tool": "pay_http",
             "args": {"url": atlas_url, "covers": ["token_factsheet"]}},
        ],
    })
    deps = _deps(tmp_path, chain, market, shoddy_market, model=model)
    deps.store.add_lesson("an-earlier-run", TASK, "churn", lesson)
    r = asyncio.run(run_task(TASK, deps))

    assert [e["data"]["shown"] for e in deps.store.events(r.run_id, "lesson")] == [[lesson]]
    assert (r.stop_reason, r.finished) == ("evidence-covered", True), r.answer
    proposed = [e["data"]["args"]["url"] for e in deps.store.events(r.run_id, "proposal")
                if e["data"].get("tool") == "pay_http"]  # fmt: skip
    assert proposed == [atlas_url], proposed
    quoted = [e["data"]["recipient"].lower() for e in deps.store.events(r.run_id, "quote")]
    assert quoted == [ATLAS.lower()], quoted
    [verdict] = _paid_verdicts(deps, r.run_id)
    assert (verdict["decision"], verdict["offers_compared"]) == ("approve", 1), verdict
    assert _asked(log) == ([], []), log
    assert _paid_to(deps, r.run_id) == [("settled", 10_000, ATLAS.lower())]
    after = _balances(chain)
    assert after[SHODDY.pay_to] == before[SHODDY.pay_to]
    assert after[ATLAS] == before[ATLAS] + 10_000
    assert after[AGENT_ADDR] == before[AGENT_ADDR] - 10_000


def test_the_models_own_choice_of_a_distrusted_seller_still_goes_to_the_judge(
    tmp_path: Path, chain: Any, market: dict[str, str], shoddy_market: dict[str, Any]
) -> None:
    """Distrust keeps a seller out of the alternatives; it is no ban. A model that chooses
    shoddy despite the lesson has its call quoted and judged (atlas compared beside it),
    and the judge's ruling stands."""
    log: list[tuple[str, str, bool]] = shoddy_market["requests"]
    log.clear()
    lesson = TEMPLATES["not-delivered"].format(origin=seller_of(shoddy_market["url"]))
    shoddy_url = f"{shoddy_market['url']}/tokens?symbol=USDC"
    model = ScriptedModel({
        "checklist": [{"items": [{"text": "USDC issuer", "kind": "token_factsheet"}]}],
        "propose": [
            {"action": "call", "tool": "discover", "args": {"query": "token fact sheet"}},
            {"action": "call", "tool": "pay_http",
             "args": {"url": shoddy_url, "covers": ["token_factsheet"]}},
            {"action": "done"},
        ],
    })
    deps = _deps(tmp_path, chain, market, shoddy_market, model=model)
    deps.store.add_lesson("an-earlier-run", TASK, "churn", lesson)
    r = asyncio.run(run_task(TASK, deps))

    lessons = (e["data"] for e in deps.store.events(r.run_id, "lesson"))
    shown = [e["shown"] for e in lessons if "shown" in e]
    assert shown == [[lesson]], shown
    quoted = [e["data"]["recipient"].lower() for e in deps.store.events(r.run_id, "quote")]
    assert quoted == [SHODDY.pay_to.lower(), ATLAS.lower()], quoted
    verdicts = _paid_verdicts(deps, r.run_id)
    assert [v["offers_compared"] for v in verdicts] == [2], verdicts
    assert _asked(log)[0] == ["/tokens"], log


@pytest.mark.parametrize("reads_chain", [True, False], ids=["service-judge", "in-process-judge"])
def test_a_cancelled_non_delivery_reports_no_outcome_and_the_delivery_after_it_does(
    tmp_path: Path, chain: Any, market: dict[str, str], shoddy_market: dict[str, Any],
    reads_chain: bool,
) -> None:
    """shoddy (cheapest) keeps the signed payment, settles nothing and asks to be paid
    again; the wallet cancels the authorization on chain. An outside tester saw
    ``judge.outcome.error OutcomeRefused`` after every such non-delivery: the agent
    reported an outcome for a payment that never settled, which the judge reading the
    chain refuses (and a judge that does not read it counted as a miss). Now no outcome
    is reported for it; atlas's delivery after it is still recorded."""
    log: list[tuple[str, str, bool]] = shoddy_market["requests"]
    log.clear()
    before = _balances(chain)
    book = OfferBook()
    deps = paid_deps(tmp_path, chain, OfflinePlanner(), limits=LIMITS,
                     judge=_judge(tmp_path, chain, reads_chain=reads_chain),
                     extra_tools=(DiscoverTool(book), PayHttpTool(offers=book)))
    deps = dataclasses.replace(deps, allowlist=(shoddy_market["url"], market["atlas"]),
                               extras={"discovery_urls": shoddy_market["both"]})
    shoddy_market["state"]["refuse_paid"] = True
    try:
        r = asyncio.run(run_task(TASK, deps))
    finally:
        shoddy_market["state"]["refuse_paid"] = False

    assert (r.stop_reason, r.finished) == ("evidence-covered", True), r.answer
    [failed] = [e["data"] for e in deps.store.events(r.run_id, "seller.not_delivered")]
    assert (failed["seller"], failed["paid"], failed["status"]) == (
        seller_of(shoddy_market["url"]), False, "cancelled"), failed
    assert deps.store.events(r.run_id, "judge.outcome.error") == []
    outcomes = list(deps.store.db.query("SELECT tool, covered FROM judge_outcomes"))
    assert outcomes == [{"tool": f"pay_http@{seller_of(market['atlas'])}", "covered": 1}]
    assert _asked(log)[1] == ["/tokens"], log
    assert _paid_to(deps, r.run_id) == [
        ("cancelled", 5_000, SHODDY.pay_to.lower()), ("settled", 10_000, ATLAS.lower())]
    after = _balances(chain)
    assert after[SHODDY.pay_to] == before[SHODDY.pay_to]
    assert after[ATLAS] == before[ATLAS] + 10_000
    assert after[AGENT_ADDR] == before[AGENT_ADDR] - 10_000
