"""The judge's held non-deliveries, settled from the ledger (wallet.held_outcomes): a held
outcome is filed only once its own row (one paid under its verdict) is settled, dropped
once that row can never move money, and kept while it is pending."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from test_wallet_meter import ONE, SELLER, USDC, FakeVerdict

from chain.devkeys import JUDGE, dev_account
from judge.calibration import BetaCalibrator
from judge.fingerprint import call_fingerprint, fingerprint
from judge.outcomes import Outcomes
from judge.records import VerdictRecords
from judge.verdict import VerdictSigner
from wallet.held_outcomes import file_held_outcomes
from wallet.meter import SpendMeter

PRICE = 50_000
SUBJECT = "pay_http@http://seller.test"


def test_a_held_outcome_follows_its_own_row_only(tmp_path: Path) -> None:
    db = tmp_path / "services.db"
    records, meter, calibrator = VerdictRecords(db), SpendMeter(db), BetaCalibrator(db)
    outcomes = Outcomes(records, calibrator, paid=lambda rec: True)  # the chain: settled
    signer = VerdictSigner(dev_account(JUDGE))
    rows: dict[str, str] = {}
    verdicts: dict[str, str] = {}
    for n, fate in enumerate(("settled", "cancelled", "signed", "lied", "missing")):
        verdict = signer.issue(
            decision="approve", call_fingerprint=call_fingerprint("pay_http", {"n": n}),
            payload_fingerprint=fingerprint({"x402": n}), amount=PRICE, asset=USDC,
            recipient=SELLER, chain_id=31337, p=Decimal("0.4"), ev=Decimal(1), reason="t",
            ttl_s=60, task_id="task-1")
        records.issued(verdict, subject=SUBJECT, facts=(f"kind_{n}",), task_id="task-1",
                       authorization=f"0xagent:0x{n:064x}")
        records.consume(verdict)
        res = meter.reserve("task-1", FakeVerdict(id=verdict.id), PRICE, ONE, 10 * ONE)
        meter.mark_signed(res, auth_nonce=f"0x{n:064x}", valid_before=2_000_000_000)
        if fate == "settled":
            meter.settle(res, "0x" + "aa" * 32)
        elif fate == "cancelled":
            meter.cancel(res, "0x" + "bb" * 32, 0, "cancelled on chain")
        rows[fate], verdicts[fate] = res.id, verdict.id
    for n, fate in enumerate(rows):
        # "lied": the task names the settled row, paid under another verdict than its own.
        named = {"lied": rows["settled"], "missing": "e" * 32}.get(fate, rows[fate])
        outcomes.hold(verdicts[fate], f"kind_{n}", named)

    assert file_held_outcomes(meter.ledger, outcomes) == (f"{verdicts['settled']}:kind_0",)
    assert calibrator.counts(SUBJECT, "kind_0") == (0, 1)
    assert all(calibrator.counts(SUBJECT, f"kind_{n}") == (0, 0) for n in range(1, 5))
    # Only the pending one is still held; a second pass counts nothing more.
    assert [h.verdict_id for h in outcomes.held()] == [verdicts["signed"]]
    assert file_held_outcomes(meter.ledger, outcomes) == ()
    assert calibrator.counts(SUBJECT, "kind_0") == (0, 1)
