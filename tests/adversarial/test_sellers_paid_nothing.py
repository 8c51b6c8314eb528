"""Sellers that take the money and do not deliver, against the real loop, wallet and judge.

Each seller here is allowlisted and built with the official x402 package on Anvil; after
the buyer's payment it cheats: it settles the authorization and answers 402 again,
redirects to another origin, sends 2 MB, drips its answer a byte at a time, answers
without the fact it sold, or keeps the authorization without settling (to settle it
later). The model is stubborn: it proposes the same purchase again and again. What must
hold: at most one authorization is signed per (run, seller); a seller that took money
for nothing is never paid again in the run; an authorization left unused is cancelled on
chain (``cancelAuthorization``) so the seller cannot settle it later; and the balances,
the ledger and ``nib audit reconcile`` agree.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import replace
from typing import Any

import pytest
from adv_harness import (
    ADVERSARIAL_LIMITS,
    AGENT_ADDR,
    OUTSIDER_ADDR,
    PRICE,
    SELLER_ADDR,
    STALL_DEADLINE_S,
    Harness,
    build_harness,
)
from fastapi import FastAPI
from fastapi.responses import Response
from sellers import serve

from agent.loop.result import AgentResult
from agent.models.scripted import ScriptedModel
from chain.usdc import usdc_contract
from tests._services import Composition
from wallet.reconcile import reconcile

GAS = {"items": [{"text": "gas stats", "kind": "gas_stats"}]}
DONE = {"action": "done"}
#: How often the stubborn model proposes the same purchase in one run.
PROPOSALS = 4


def stubborn_run(
    tmp_path: Any, chain: Any, url: str, composition: Composition, **limits: Any
) -> tuple[Harness, AgentResult]:
    """One run whose model proposes buying ``url``'s gas stats PROPOSALS times, each time
    under another query (another resource of the same seller: the one-live-authorization
    rule alone would not stop a second payment)."""
    pays = [
        {"action": "call", "tool": "pay_http", "args": {"url": f"{url}/analytics/gas?try={i}"}}
        for i in range(PROPOSALS)
    ]
    model = ScriptedModel({"checklist": [GAS], "propose": [*pays, DONE]})
    h = build_harness(
        tmp_path, chain, model, allowlist=(url,), paywall_url=url,
        limits=replace(ADVERSARIAL_LIMITS, **limits), composition=composition,
    )
    h.extra["before"] = {w: h.balance(w) for w in (AGENT_ADDR, SELLER_ADDR, OUTSIDER_ADDR)}
    return h, h.run("Buy the gas stats.")


def signed_in(h: Harness, result: AgentResult) -> list[dict[str, Any]]:
    return h.events(result.run_id, "wallet.signed")


def paid_to_seller(h: Harness) -> int:
    """USDC that left the agent for the seller since the harness was built (chain logs),
    checked against both balances."""
    before = h.extra["before"]
    moved = sum(t.value for t in h.transfers_from_agent() if t.recipient == SELLER_ADDR)
    assert h.balance(SELLER_ADDR) - before[SELLER_ADDR] == moved
    assert before[AGENT_ADDR] - h.balance(AGENT_ADDR) == moved
    assert h.balance(OUTSIDER_ADDR) == before[OUTSIDER_ADDR]
    return int(moved)


def reconciles(h: Harness) -> Any:
    report = reconcile(h.db, h.client, h.usdc, AGENT_ADDR, h.start_block + 1)
    assert report.clean, report.to_dict()
    return report


def authorization_state(h: Harness, nonce: str) -> bool:
    token = usdc_contract(h.client.w3, h.usdc)
    return bool(token.functions.authorizationState(AGENT_ADDR, bytes.fromhex(nonce[2:])).call())


@contextlib.contextmanager
def elsewhere() -> Any:
    """Another origin that serves the data to anyone and counts who came."""
    hits: list[str] = []
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/{path:path}")
    def anything(path: str) -> Response:
        hits.append(path)
        return Response(b'{"kind":"gas_stats","facts":{"base_fee_gwei":"9"}}',
                        media_type="application/json")

    with serve(app) as url:
        yield url, hits


# ----------------------------------------------------------- settle, then do not deliver

NO_FACT = {"kind": "gas_stats", "facts": {}, "note": "nothing you asked for"}

TAKE_AND_CHEAT = {
    "402-again": ({"paid_mode": "402-but-settle"}, "answered 402"),
    "redirect": ({"paid_mode": "redirect-but-settle"}, "redirect"),
    "oversized": ({"paid_mode": "huge-body"}, "exceeds"),
    "drip": ({"paid_mode": "drip-but-settle", "drip_s": 1.0}, f"{STALL_DEADLINE_S:g} s"),
    "no-fact": ({"body": NO_FACT}, "covered none"),
}


@pytest.mark.parametrize("case", list(TAKE_AND_CHEAT))
def test_a_seller_that_takes_the_money_and_does_not_deliver_is_paid_once(
    case: str, tmp_path: Any, chain: Any, seller_factory: Any, composition: Composition
) -> None:
    options, why = TAKE_AND_CHEAT[case]
    with elsewhere() as (other, hits):
        seller, url = seller_factory(price=PRICE, redirect_to=other + "/analytics/gas",
                                     **options)
        started = time.monotonic()
        h, result = stubborn_run(tmp_path, chain, url, composition,
                                 response_deadline_s=STALL_DEADLINE_S)
        took = time.monotonic() - started
    # One authorization, once settled by the seller: the money moved once, for nothing.
    assert len(signed_in(h, result)) == 1, signed_in(h, result)
    assert len({p["payload"]["authorization"]["nonce"] for p in seller.log.payments}) == 1
    assert paid_to_seller(h) == PRICE
    [row] = h.ledger()
    assert row.status == "settled", row
    # The wallet saw the purchase abandoned after payment; a body without the fact is a
    # failed delivery only the run can see (its event and the judge's outcome say so).
    assert ("paid for nothing" in row.note) is (case != "no-fact"), row
    assert not any("gas_stats" in e.facts for e in result.evidence) and result.partial
    # The run recorded the failed delivery, and refused the seller from then on (free).
    [failed] = h.events(result.run_id, "seller.not_delivered")
    assert failed["data"]["seller"] == url and why in failed["data"]["why"], failed
    skips = [e["data"]["feedback"] for e in h.events(result.run_id, "gate.skip")]
    assert skips and all("did not deliver" in s and url in s for s in skips), skips
    assert hits == []  # a redirect after payment is never followed
    if case == "drip":
        assert took < 60  # the drip would take minutes; the deadline cut it at 3 s
    # The judge counted the settled non-delivery for this seller's gas stats as one failed
    # outcome (what every task reads of it; the reporting run pays it no more).
    from judge.calibration import BetaCalibrator, calibration_subject

    calibrator, subject = BetaCalibrator(str(h.db)), calibration_subject("pay_http", url)
    assert calibrator.counts(subject, "gas_stats") == (0, 1)
    assert calibrator.non_deliveries(subject, "gas_stats") == 1
    report = reconciles(h)
    assert [m.ledger_id for m in report.matched] == [row.id]
    assert result.spend.settled_atomic == PRICE


def test_a_seller_that_did_not_deliver_is_not_contacted_again_in_the_run(
    tmp_path: Any, chain: Any, seller_factory: Any, composition: Composition
) -> None:
    """Proposed again after it took the money for nothing, the seller is refused from the
    call's arguments before any request: no unpaid read of its 402, neither the quote's
    nor the judge's read ahead, and no verdict."""
    seller, url = seller_factory(price=PRICE, paid_mode="402-but-settle")
    h, result = stubborn_run(tmp_path, chain, url, composition)
    [paid] = [i for i, r in enumerate(seller.log.requests) if r["paid"]]
    assert seller.log.requests[paid + 1:] == [], seller.log.requests
    [failed] = h.events(result.run_id, "seller.not_delivered")
    assert failed["data"]["seller"] == url, failed
    # The first purchase was quoted and judged once; the later ones were neither.
    assert len(h.events(result.run_id, "quote")) == 1
    assert len(h.events(result.run_id, "verdict")) == 1
    skips = [e["data"] for e in h.events(result.run_id, "gate.skip")]
    assert len(skips) == PROPOSALS - 1, skips
    assert all(s["why"] == "seller-failed-delivery" and s["seller"] == url for s in skips)
    assert all(f"{url} was paid and did not deliver earlier in this run" in s["feedback"]
               for s in skips), skips
    assert paid_to_seller(h) == PRICE
    reconciles(h)


# ----------------------------------------------------------- keep it, settle it later


def test_an_authorization_a_seller_keeps_is_cancelled_on_chain_before_it_can_settle(
    tmp_path: Any, chain: Any, seller_factory: Any, composition: Composition
) -> None:
    # The seller answers 500 to the paid request and keeps the signed authorization, to
    # settle it whenever it likes before validBefore. The wallet cancels it on chain.
    seller, url = seller_factory(price=PRICE, paid_mode="500-again")
    h, result = stubborn_run(tmp_path, chain, url, composition)
    assert len(signed_in(h, result)) == 1
    [row] = h.ledger()
    assert row.status == "cancelled" and row.tx_hash, row
    assert authorization_state(h, str(row.auth_nonce))  # used or cancelled: dead
    receipt = h.client.w3.eth.get_transaction_receipt(row.tx_hash)
    token = usdc_contract(h.client.w3, h.usdc)
    [cancelled] = token.events.AuthorizationCanceled().process_receipt(receipt)
    assert cancelled.args.authorizer == AGENT_ADDR
    assert "0x" + bytes(cancelled.args.nonce).hex() == row.auth_nonce
    # The cancel's gas is metered like any spend: in the wallet's gas rows and the run's.
    from wallet.ledger import Ledger

    [gas] = [g for g in Ledger(h.db).gas_rows(result.run_id) if g.spend_id == row.id]
    assert gas.tx_hash == row.tx_hash and gas.wei > 0
    assert result.spend.gas_wei >= gas.wei
    # Later, the seller tries to take the money: its transferWithAuthorization reverts.
    with pytest.raises(Exception, match="used or canceled"):
        seller.submit_authorization(seller.log.payments[0]["payload"])
    assert paid_to_seller(h) == 0
    report = reconciles(h)
    assert report.matched == () and [r.id for r in report.unmatched_ledger] == [row.id]
    # Every word of it says nothing was paid (the call's summary said "was paid").
    [call] = [e["data"] for e in h.events(result.run_id, "tool.call") if not e["data"]["ok"]]
    assert f"{url} did not deliver (nothing paid): it answered 500" in call["summary"]
    skips = [e["data"]["feedback"] for e in h.events(result.run_id, "gate.skip")]
    assert skips and all(f"{url} did not deliver (nothing paid) earlier in this run"
                         in s and "was paid and" not in s for s in skips), skips


def test_a_settlement_that_wins_the_race_with_the_cancel_is_paid_for_nothing(
    tmp_path: Any, chain: Any, seller_factory: Any, composition: Composition
) -> None:
    # The seller answers 500, then settles the authorization before the wallet's cancel
    # lands (here: right away, before it answers). The cancel finds it used: the row is
    # settled, counted as paid for nothing, and the seller is not paid again.
    seller, url = seller_factory(price=PRICE, paid_mode="500-but-settle")
    h, result = stubborn_run(tmp_path, chain, url, composition)
    assert len(signed_in(h, result)) == 1
    [row] = h.ledger()
    assert row.status == "settled" and "paid for nothing" in row.note, row
    assert row.tx_hash == seller.settled_txs[0]
    assert paid_to_seller(h) == PRICE
    report = reconciles(h)
    assert [m.ledger_id for m in report.matched] == [row.id]


# ----------------------------------------------------------- across many runs

RUNS = 20


def test_over_twenty_runs_a_seller_that_settles_and_never_delivers_is_paid_by_three(
    tmp_path: Any, chain: Any, seller_factory: Any, service_forks: Any
) -> None:
    # Twenty runs, each needing the same fact from the same seller, which takes every
    # payment and answers 402. Each run that pays it reports the settled non-delivery,
    # which every task reads as one failed outcome (one task's word moves a shared p by
    # one outcome at most, so no task can take an honest seller under the floor for the
    # others): after three runs its p for gas stats is below the pay floor (0.40 -> 0.27
    # -> 0.20 -> 0.16), and every later run is refused before anything is signed, the
    # reason naming why. Run
    # with the judge and wallet as their own processes (the default composition) only:
    # the in-process one takes the same code path, twenty runs are long enough once.
    composition = Composition("services", chain, forks=service_forks)
    seller, url = seller_factory(price=PRICE, paid_mode="402-but-settle")
    pay = {"action": "call", "tool": "pay_http", "args": {"url": url + "/analytics/gas"}}

    def model() -> ScriptedModel:
        return ScriptedModel({"checklist": [GAS], "propose": [pay, pay, DONE]})

    results = []
    try:
        h = build_harness(tmp_path, chain, model(), allowlist=(url,), paywall_url=url,
                          limits=ADVERSARIAL_LIMITS, composition=composition)
        h.extra["before"] = {w: h.balance(w) for w in (AGENT_ADDR, SELLER_ADDR, OUTSIDER_ADDR)}
        for i in range(RUNS):
            h.deps.model = model()
            results.append(h.run(f"Buy the gas stats ({i + 1} of {RUNS})."))
    finally:
        composition.close()

    signed = [e for r in results for e in signed_in(h, r)]
    assert [len(signed_in(h, r)) for r in results[:3]] == [1, 1, 1]
    assert len(signed) == 3 and len(seller.log.payments) == 3
    assert paid_to_seller(h) == 3 * PRICE  # the figure: three payments of 0.05 USDC in 20 runs
    for later in results[3:]:
        verdicts = [e["data"] for e in h.events(later.run_id, "verdict")
                    if e["data"].get("kind") == "paid"]
        assert verdicts and all(v["decision"] == "refuse" for v in verdicts), verdicts
        assert all("below the" in v["reason"] and "took payment without delivering 3 times"
                   in v["reason"] for v in verdicts), verdicts[0]["reason"]
    reconciles(h)


# ----------------------------------------------------------- the run stops mid-payment


def test_an_authorization_in_flight_when_the_run_stops_is_cancelled(
    tmp_path: Any, chain: Any, seller_factory: Any, composition: Composition
) -> None:
    # The seller sits on the paid request (to settle it later, once the buyer has given
    # up); the run's wall clock runs out meanwhile. The run stops with 'deadline', and
    # the purchase it abandoned is cancelled on chain before the run returns.
    # The seller holds the request until the run has returned (at most 25 s), so the
    # test's teardown does not wait out a fixed sleep.
    returned = threading.Event()
    seller, url = seller_factory(price=PRICE, paid_mode="500-again",
                                 on_paid=lambda _s: returned.wait(25.0))
    try:
        h, result = stubborn_run(tmp_path, chain, url, composition, wall_clock_s=10.0,
                                 response_deadline_s=60.0)
    finally:
        returned.set()
    assert result.stop_reason == "deadline", result.message
    [row] = h.ledger()
    assert row.status == "cancelled" and "the run stopped" in row.note, row
    assert authorization_state(h, str(row.auth_nonce))
    with pytest.raises(Exception, match="used or canceled"):
        seller.submit_authorization(seller.log.payments[0]["payload"])
    assert paid_to_seller(h) == 0
    reconciles(h)


# ----------------------------------------------------------- undecided when the run ends


def cancel_as_the_agent(h: Harness, nonce: str) -> None:
    """Void the agent's authorization ``nonce`` on chain (its own EIP-3009
    ``CancelAuthorization``, relayed by DEPLOYER): it can never be used after this."""
    from eth_account import Account

    from chain.devkeys import AGENT, DEPLOYER, dev_account
    from chain.usdc import cancel_authorization_typed_data, token_domain

    w3, raw = h.client.w3, bytes.fromhex(nonce.removeprefix("0x"))
    name, version = token_domain(w3, h.usdc)
    typed = cancel_authorization_typed_data(
        name=name, version=version, chain_id=h.client.chain_id(), verifying_contract=h.usdc,
        authorizer=AGENT_ADDR, nonce=raw)
    sig = Account.sign_typed_data(dev_account(AGENT).key, full_message=typed)
    relayer = dev_account(DEPLOYER)
    fn = usdc_contract(w3, h.usdc).get_function_by_signature(
        "cancelAuthorization(address,bytes32,uint8,bytes32,bytes32)"
    )(AGENT_ADDR, raw, sig.v, sig.r.to_bytes(32, "big"), sig.s.to_bytes(32, "big"))
    tx = fn.build_transaction({"from": relayer.address, "chainId": w3.eth.chain_id,
                               "nonce": w3.eth.get_transaction_count(relayer.address, "pending")})
    sent = w3.eth.send_raw_transaction(relayer.sign_transaction(tx).raw_transaction)
    assert w3.eth.wait_for_transaction_receipt(sent, timeout=30)["status"] == 1


def judge_outcomes(h: Harness) -> Any:
    """The judge's outcomes as `nib audit reconcile` files them: the judge's record (its
    service's database, or the in-process judge's own), its calibration, and the chain
    read as the judge reads it (agent.cli.runtime.settled_on)."""
    from agent.cli.runtime import settled_on
    from judge.calibration import BetaCalibrator
    from judge.jev import Judge
    from judge.outcomes import Outcomes
    from judge.records import VerdictRecords

    records = h.judge.records if isinstance(h.judge, Judge) else VerdictRecords(h.db)
    return Outcomes(records, BetaCalibrator(str(h.db)), paid=settled_on(h.client))


@pytest.mark.parametrize("later", ["settled", "cancelled", "expired"])
def test_a_non_delivery_undecided_when_the_run_ends_counts_once_if_the_seller_settles_it(
    later: str, tmp_path: Any, chain: Any, seller_factory: Any, composition: Composition
) -> None:
    # The seller answers 500 and keeps the authorization; the wallet has no ETH for the
    # cancel's gas, so it cannot end it: the row stays signed when the run ends, and the
    # run holds its non-delivery with the judge (nothing counted).
    # Later the seller settles it (or it is cancelled, or it expires unused); reconcile
    # then files the held outcome with the judge, which reads the chain itself: the
    # seller's calibration counts one paid-not-delivered outcome, once, only if paid.
    from judge.calibration import BetaCalibrator, calibration_subject

    seller, url = seller_factory(price=PRICE, paid_mode="500-again")
    chain.rpc("anvil_setBalance", [AGENT_ADDR, "0x0"])
    h, result = stubborn_run(tmp_path, chain, url, composition)
    [row] = h.ledger()
    assert row.status == "signed" and "cancel not sent" in row.note, row
    [failed] = h.events(result.run_id, "seller.not_delivered")
    assert (failed["data"]["paid"], failed["data"]["status"]) == (False, "signed"), failed
    assert h.events(result.run_id, "judge.outcome.error") == []
    outcomes = judge_outcomes(h)
    [held] = outcomes.held()
    assert (held.verdict_id, held.fact_kind, held.spend_id) == (row.verdict_id, "gas_stats", row.id)
    calibrator, subject = BetaCalibrator(str(h.db)), calibration_subject("pay_http", url)
    assert calibrator.counts(subject, "gas_stats") == (0, 0)

    clock = time.time
    if later == "settled":
        seller.submit_authorization(seller.log.payments[0]["payload"])
    elif later == "cancelled":
        cancel_as_the_agent(h, str(row.auth_nonce))
    else:
        assert row.valid_before is not None
        now = int(h.client.block_timestamp("latest"))
        chain.rpc("evm_increaseTime", [row.valid_before - now + 1])
        chain.rpc("evm_mine")
        clock = lambda: float(row.valid_before or 0) + 1  # noqa: E731 - the wall clock, past it too

    paid = PRICE if later == "settled" else 0
    for first in (True, False):  # reconcile again: nothing counted a second time
        report = reconcile(h.db, h.client, h.usdc, AGENT_ADDR, h.start_block + 1, clock=clock,
                           outcomes=outcomes)
        assert report.clean, report.to_dict()
        filed = (f"{row.verdict_id}:gas_stats",) if first and paid else ()
        assert report.outcomes_filed == filed, report.to_dict()
        assert calibrator.counts(subject, "gas_stats") == ((0, 1) if paid else (0, 0))
        assert calibrator.non_deliveries(subject, "gas_stats") == (1 if paid else 0)
        assert outcomes.held() == []
    [row] = h.ledger()
    assert row.status == {"settled": "settled", "cancelled": "cancelled", "expired": "failed"}[later]
    assert paid_to_seller(h) == paid
