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
#: Ledger row ids as the wallet writes them (uuid4 hex).
ROW = {n: f"{n:032x}" for n in range(1, 5)}


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
    outcomes.hold(verdict.id, "Gas stats", ROW[1])
    outcomes.hold(verdict.id, "gas_stats", ROW[1])  # held again: the same one
    [held] = outcomes.held()
    assert (held.verdict_id, held.fact_kind, held.spend_id) == (verdict.id, "gas_stats", ROW[1])

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
        outcomes.hold(verdict.id, "gas_stats", ROW[1])
    assert calibrator.counts(SUBJECT, "gas_stats") == (0, 1) and outcomes.held() == []


def test_an_outcome_reported_meanwhile_is_not_counted_again(signer: VerdictSigner) -> None:
    records, calibrator, chain = VerdictRecords(), BetaCalibrator(), Chain()
    outcomes = Outcomes(records, calibrator, paid=chain)
    verdict = _approved(signer, records)
    outcomes.hold(verdict.id, "gas_stats", ROW[1])
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
        outcomes.hold(unused.id, "gas_stats", ROW[2])
    verdict = _approved(signer, records, nonce=3)
    with pytest.raises(OutcomeRefused, match="'token_factsheet' is not one the call could cover"):
        outcomes.hold(verdict.id, "token_factsheet", ROW[3])
    with pytest.raises(OutcomeRefused, match="this judge never issued it"):
        outcomes.hold("0" * 32, "gas_stats", ROW[4])
    assert outcomes.held() == []


def test_a_held_outcome_is_never_filed_without_a_read_of_the_chain(
    signer: VerdictSigner,
) -> None:
    records = VerdictRecords()
    outcomes = Outcomes(records, BetaCalibrator())
    verdict = _approved(signer, records)
    outcomes.hold(verdict.id, "gas_stats", ROW[1])
    [held] = outcomes.held()
    with pytest.raises(JudgeConfigError, match="expected Outcomes built with paid="):
        outcomes.file_held(held)
    assert outcomes.held() == [held]


@pytest.mark.parametrize(
    ("verdict_id", "fact_kind", "spend_id", "found"),
    [(None, "gas_stats", ROW[1], "the ledger row id"),  # the verdict's own id, see below
     ("v\x00x", "gas_stats", ROW[1], "the verdict id"),
     ("ok", "gas_stats", "r" * 60_000, "the ledger row id"),
     ("ok", "gas_stats", None, "the ledger row id"),
     ("ok", "gas_stats", 12345, "the ledger row id"),
     ("ok", ["gas_stats"], ROW[1], "the fact kind"),
     ("ok", "k" * 201, ROW[1], "the fact kind"),
     ("ok", "gas\x00stats", ROW[1], "the fact kind")],
    ids=["own-verdict-bad-row", "nul-verdict", "huge-row", "null-row", "int-row", "list-kind",
         "long-kind", "nul-kind"],
)  # fmt: skip
def test_a_hold_no_record_could_store_is_refused_before_any_is_read(
    signer: VerdictSigner, verdict_id: object, fact_kind: object, spend_id: object, found: str,
) -> None:
    """The outside attacker's F3-F5 (round 17): one purchase held 3000 fact kinds each with a
    60 KB row id (700 MB, reconcile 3 s -> 44 s), a NUL gave PostgreSQL's 500, and a list or
    a null was made text and stored."""
    records, calibrator, chain = VerdictRecords(), BetaCalibrator(), Chain()
    outcomes = Outcomes(records, calibrator, paid=chain)
    verdict = _approved(signer, records)
    shown = verdict.id if verdict_id in (None, "ok") else verdict_id
    with pytest.raises(OutcomeRefused, match=found):
        outcomes.hold(shown, fact_kind, spend_id if verdict_id is not None else "not-a-row")  # type: ignore[arg-type]
    assert outcomes.held() == []


def test_a_request_names_a_bounded_number_of_facts() -> None:
    """What a verdict's record holds per verdict (and what may be held for it) is bounded:
    the attacker's verdict named 3000 fact kinds."""
    from judge.errors import JudgeRequestInvalid
    from judge.jev import PaidCallRequest
    from judge.request import MAX_NAME_CHARS, MAX_NAMES

    base = dict(tool="pay_http", args={}, call_fingerprint="0x" + "1" * 64,
                payload_fingerprint="0x" + "2" * 64, price=1, asset=USDC, recipient=SELLER,
                chain_id=31337, remaining_budget=10, balance=10, per_call_cap_atomic=10,
                spend_cap_atomic=10)  # fmt: skip
    PaidCallRequest(**base, tool_facts=tuple(f"k{n}" for n in range(MAX_NAMES)))  # type: ignore[arg-type]
    with pytest.raises(JudgeRequestInvalid, match="at most 32 fact kinds"):
        PaidCallRequest(**base, tool_facts=tuple(f"k{n}" for n in range(MAX_NAMES + 1)))  # type: ignore[arg-type]
    with pytest.raises(JudgeRequestInvalid, match="at most 200 characters"):
        PaidCallRequest(**base, missing=("k" * (MAX_NAME_CHARS + 1),))  # type: ignore[arg-type]
