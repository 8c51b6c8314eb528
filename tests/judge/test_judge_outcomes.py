"""Outcomes held until their payment settles (judge.outcomes): a non-delivery whose
authorization was undecided when its run ended is held, counted once the chain shows the
payment settled (the judge's own read), never before and never twice."""

from __future__ import annotations

from decimal import Decimal

import pytest

from judge.calibration import BetaCalibrator
from judge.errors import JudgeConfigError, OutcomeRefused
from judge.fingerprint import call_fingerprint, fingerprint
from judge.outcomes import Outcomes
from judge.records import VerdictRecord, VerdictRecords
from judge.verdict import Verdict, VerdictSigner

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
SELLER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
SUBJECT = "pay_http@http://seller.test"
PRICE = 50_000


def _approved(signer: VerdictSigner, records: VerdictRecords, *, consumed: bool = True,
              nonce: int = 1) -> Verdict:
    """An approval of a 0.05 USDC purchase of gas stats from SUBJECT, paid with an
    EIP-3009 authorization (and consumed by a wallet, unless not ``consumed``)."""
    verdict = signer.issue(
        decision="approve", call_fingerprint=call_fingerprint("pay_http", {"n": nonce}),
        payload_fingerprint=fingerprint({"x402": nonce}), amount=PRICE, asset=USDC,
        recipient=SELLER, chain_id=31337, p=Decimal("0.4"), ev=Decimal(1), reason="test",
        ttl_s=60, task_id="task-1",
    )
    records.issued(verdict, subject=SUBJECT, facts=("gas_stats",), task_id="task-1",
                   authorization=f"0xagent:0x{nonce:064x}")
    if consumed:
        records.consume(verdict)
    return verdict


class Chain:
    """The judge's read of the chain, as a switch: has the authorization settled?"""

    def __init__(self) -> None:
        self.settled = False
        self.asked: list[str] = []

    def __call__(self, rec: VerdictRecord) -> bool:
        self.asked.append(rec.id)
        return self.settled


def test_a_held_non_delivery_counts_once_and_only_once_its_payment_settled(
    signer: VerdictSigner,
) -> None:
    records, calibrator, chain = VerdictRecords(), BetaCalibrator(), Chain()
    outcomes = Outcomes(records, calibrator, paid=chain)
    verdict = _approved(signer, records)
    outcomes.hold(verdict.id, "Gas stats", "row-1")
    outcomes.hold(verdict.id, "gas_stats", "row-1")  # held again: the same one
    [held] = outcomes.held()
    assert (held.verdict_id, held.fact_kind, held.spend_id) == (verdict.id, "gas_stats", "row-1")

    # Not settled on chain: nothing counts, and it stays held.
    assert outcomes.file_held(held) == "not-settled"
    assert calibrator.counts(SUBJECT, "gas_stats") == (0, 0) and outcomes.held() == [held]
    # Settled: one paid-not-delivered outcome of full weight (0.05 USDC), this task's own.
    chain.settled = True
    assert outcomes.file_held(held) == "filed"
    assert calibrator.counts(SUBJECT, "gas_stats") == (0, 1)
    assert calibrator.non_deliveries(SUBJECT, "gas_stats") == 1
    assert records.lost_to("task-1", SUBJECT) and outcomes.held() == []
    # Filed again (a second reconcile that still had it), or held again: nothing more.
    assert outcomes.file_held(held) == "refused"
    with pytest.raises(OutcomeRefused, match="already recorded"):
        outcomes.hold(verdict.id, "gas_stats", "row-1")
    assert calibrator.counts(SUBJECT, "gas_stats") == (0, 1) and outcomes.held() == []


def test_an_outcome_reported_meanwhile_is_not_counted_again(signer: VerdictSigner) -> None:
    records, calibrator, chain = VerdictRecords(), BetaCalibrator(), Chain()
    outcomes = Outcomes(records, calibrator, paid=chain)
    verdict = _approved(signer, records)
    outcomes.hold(verdict.id, "gas_stats", "row-1")
    chain.settled = True
    outcomes.record(verdict.id, "gas_stats", False, "paid-not-delivered")
    [held] = outcomes.held()
    assert outcomes.file_held(held) == "refused"
    assert calibrator.counts(SUBJECT, "gas_stats") == (0, 1) and outcomes.held() == []


def test_only_a_consumed_approvals_coverable_fact_kind_is_held(signer: VerdictSigner) -> None:
    records = VerdictRecords()
    outcomes = Outcomes(records, BetaCalibrator(), paid=Chain())
    unused = _approved(signer, records, consumed=False, nonce=2)
    with pytest.raises(OutcomeRefused, match=f"found a non-delivery held for verdict {unused.id}, "
                       "but it is a approve verdict no wallet consumed"):
        outcomes.hold(unused.id, "gas_stats", "row-2")
    verdict = _approved(signer, records, nonce=3)
    with pytest.raises(OutcomeRefused, match="'token_factsheet' is not one the call could cover"):
        outcomes.hold(verdict.id, "token_factsheet", "row-3")
    with pytest.raises(OutcomeRefused, match="this judge never issued it"):
        outcomes.hold("0" * 32, "gas_stats", "row-4")
    assert outcomes.held() == []


def test_a_held_outcome_is_never_filed_without_a_read_of_the_chain(
    signer: VerdictSigner,
) -> None:
    records = VerdictRecords()
    outcomes = Outcomes(records, BetaCalibrator())
    verdict = _approved(signer, records)
    outcomes.hold(verdict.id, "gas_stats", "row-1")
    [held] = outcomes.held()
    with pytest.raises(JudgeConfigError, match="expected Outcomes built with paid="):
        outcomes.file_held(held)
    assert outcomes.held() == [held]
