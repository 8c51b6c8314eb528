"""Two processes of one task buying the same resource take turns at the wallet: the second
waits while the first is between its live-authorization check and its reservation, so it
is refused (if at all) before the judge's re-check uses its verdict, and pays with that
same verdict once the first payment is over. The rule is per task and payTo: another
task's live authorization for the resource holds nothing up. Wallets on separate
connections stand in for the processes; SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _wallet_support import ONE_USDC, approve, quote

from judge.verdict import Verdict, VerdictSigner
from wallet.errors import AuthorizationOutstanding

RESOURCE = "http://seller.test/datasets/token/USDC"


def test_a_second_buyer_waits_for_the_resource_and_keeps_its_verdict(
    chain: Any, make_wallet: Any, judge_signer: VerdictSigner, store_location: str | Path
) -> None:
    inside, go_on = threading.Event(), threading.Event()
    rechecked: list[str] = []

    def slow_judge(verdict: Verdict) -> None:  # the first buyer's re-check takes a while
        inside.set()
        assert go_on.wait(30)

    first = make_wallet(db_path=store_location, recheck=slow_judge)
    second = make_wallet(db_path=store_location, recheck=lambda v: rechecked.append(v.id))
    payload_a, payload_b = quote(chain), quote(chain)
    verdict_b = approve(judge_signer, payload_b)
    signed_a: list[Any] = []
    outcome_b: list[BaseException | None] = []

    def buy_a() -> None:
        signed_a.append(first.sign_typed_data(
            payload_a, approve(judge_signer, payload_a), run_id="run-a", spend_cap_atomic=ONE_USDC,
            resource=RESOURCE,
        ))

    def buy_b() -> None:
        try:
            second.sign_typed_data(payload_b, verdict_b, run_id="run-a", spend_cap_atomic=ONE_USDC,
                                   resource=RESOURCE)
            outcome_b.append(None)
        except BaseException as exc:  # noqa: BLE001 - inspected below
            outcome_b.append(exc)

    a = threading.Thread(target=buy_a)
    a.start()
    assert inside.wait(30)
    b = threading.Thread(target=buy_b)
    b.start()
    time.sleep(0.5)  # long enough for b to have passed a check it was not made to wait at
    assert rechecked == [] and outcome_b == []  # waiting for its turn, verdict untouched
    go_on.set()
    a.join(30)
    b.join(30)
    # Its turn came with the first authorization live: refused before the re-check.
    [refused] = outcome_b
    assert isinstance(refused, AuthorizationOutstanding) and rechecked == []
    # The first one is over (as the wallet finds once it expired unused).
    first.meter.fail(signed_a[0].reservation, "the seller refused; it expired unused")
    second.sign_typed_data(payload_b, verdict_b, run_id="run-a", spend_cap_atomic=ONE_USDC, resource=RESOURCE)
    assert rechecked == [verdict_b.id]  # the same verdict paid, once


def test_another_tasks_live_authorization_for_the_resource_holds_nothing_up(
    chain: Any, make_wallet: Any, judge_signer: VerdictSigner, store_location: str | Path
) -> None:
    squatter, buyer = make_wallet(db_path=store_location), make_wallet(db_path=store_location)
    payload_a, payload_b = quote(chain), quote(chain)
    squatter.sign_typed_data(payload_a, approve(judge_signer, payload_a), run_id="run-a",
                             spend_cap_atomic=ONE_USDC, resource=RESOURCE)
    assert buyer.live_authorization(RESOURCE, ["run-b"]) is None
    signed = buyer.sign_typed_data(payload_b, approve(judge_signer, payload_b), run_id="run-b",
                                   spend_cap_atomic=ONE_USDC, resource=RESOURCE)
    assert signed.run_id == "run-b" and buyer.live_authorization(RESOURCE, ["run-b"]) is not None


def test_a_turn_not_given_within_the_limit_refuses_before_the_verdict_is_used(
    chain: Any, make_wallet: Any, judge_signer: VerdictSigner, store_location: str | Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import wallet.authorize as authorize

    monkeypatch.setattr(authorize, "RESOURCE_TURN_S", 0.2)
    rechecked: list[str] = []
    holder = make_wallet(db_path=store_location)
    waiting = make_wallet(db_path=store_location, recheck=lambda v: rechecked.append(v.id))
    payload = quote(chain)
    verdict = approve(judge_signer, payload)
    # Another process of the task is mid-payment on the resource (holds its turn) for
    # longer than the limit.
    other = holder.meter.store.db
    with other.mutex(authorize.turn_of("r", verdict.recipient, RESOURCE)):
        done = threading.Event()
        errors: list[BaseException] = []

        def buy() -> None:
            try:
                waiting.sign_typed_data(payload, verdict, run_id="r", spend_cap_atomic=ONE_USDC,
                                        resource=RESOURCE)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
            done.set()

        threading.Thread(target=buy).start()
        assert done.wait(30)
    [err] = errors
    assert isinstance(err, AuthorizationOutstanding) and "did not finish within" in str(err)
    assert rechecked == [] and waiting.meter.ledger.rows() == []


def test_an_authorization_that_ends_while_the_chain_is_asked_is_not_live(
    chain: Any, make_wallet: Any, judge_signer: VerdictSigner, store_location: str | Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A buyer asking whether the resource is held must not be handed a row that the run
    owning it settled or failed while the chain was being read (a slow read on a loaded
    machine): that buyer would refuse to pay for a resource no one holds any more."""
    import wallet.settlement as settlement

    owner = make_wallet(db_path=store_location)
    buyer = make_wallet(db_path=store_location)
    payload = quote(chain)
    held = owner.sign_typed_data(payload, approve(judge_signer, payload), run_id="run-a",
                                 spend_cap_atomic=ONE_USDC, resource=RESOURCE)
    real_used_in = settlement.authorization_used_in

    def read_then_owner_ends(*args: Any) -> str | None:
        found = real_used_in(*args)  # the real chain: not used yet
        if found is None and owner.spend_row(held.ledger_id).status == "signed":
            owner.meter.fail(held.reservation, "it expired unused")  # meanwhile, the owner's
        return found

    monkeypatch.setattr(settlement, "authorization_used_in", read_then_owner_ends)
    assert buyer.live_authorization(RESOURCE) is None
    again = quote(chain)
    buyer.sign_typed_data(again, approve(judge_signer, again), run_id="run-b", spend_cap_atomic=ONE_USDC,
                          resource=RESOURCE)  # its turn: nothing is live
    live = buyer.live_authorization(RESOURCE)
    assert live is not None and live.run_id == "run-b" and live.status == "signed"
