"""The judge's per-decision reads answer from an index or a running count, never a scan,
on SQLite and PostgreSQL: every statement of decide, re-check (consume) and outcome is
EXPLAINed. Calibration counts are moved when an outcome is recorded and read by key:
with records on (as ``nib run`` builds the judge), writing each verdict's record cleared
a cache of counts, so every decision recounted every stored outcome (7 decisions/s at a
million outcomes)."""

from __future__ import annotations

from pathlib import Path

from test_judge_tasks import SELLER, TASK, USDC, authorization, request

from judge.calibration import BetaCalibrator
from judge.jev import Judge
from judge.records import VerdictRecords
from judge.storage import open_database
from judge.tasks import TaskRegistry
from judge.verdict import VerdictSigner
from tests._plans import recording


def _judge(signer: VerdictSigner, location: str | Path) -> tuple[Judge, object]:
    db = open_database(location)
    judge = Judge(
        signer, BetaCalibrator(db), allowed_assets={31337: [USDC]},
        balance_of=lambda asset: 50_000_000, records=VerdictRecords(db), tasks=TaskRegistry(db),
        require_task=True,
    )
    judge.register_task(TASK)
    return judge, db


def _paid(n: int) -> object:
    return request(authorization(SELLER, 10_000, nonce=n))


def test_decide_consume_and_outcome_read_no_whole_table(
    signer: VerdictSigner, store_location: str | Path
) -> None:
    judge, db = _judge(signer, store_location)
    for n in range(30):  # a history of verdicts, consumptions and outcomes to scan
        v = judge.decide(_paid(n))
        judge.recheck(v)
        judge.record_outcome(v.id, "gas_stats", n % 3 == 0)
    with recording(db) as [log]:  # type: ignore[list-item]
        verdict = judge.decide(_paid(100))
        assert verdict.decision == "approve", verdict.reason
        judge.recheck(verdict)
        judge.record_outcome(verdict.id, "gas_stats", True)
    assert log.touching("judge_verdicts") and log.touching("judge_outcome_counts")
    assert log.full_scans() == []
    with recording(db) as [report]:  # type: ignore[list-item]
        assert judge.calibration()["n"] == 31
    # `nib judge calibration` reads the counts (ten bins per subject), not the outcomes.
    assert report.touching("judge_outcomes") == [] and report.touching("judge_outcome_counts")


def test_a_decision_never_recounts_the_outcomes(signer: VerdictSigner, tmp_path: Path) -> None:
    """Decisions interleaved with the verdict records they write (the shape that emptied
    the old cache): not one statement of theirs reads the outcomes table, and p still
    follows each new outcome."""
    judge, db = _judge(signer, tmp_path / "nib.db")
    for n in range(20):
        v = judge.decide(_paid(n))
        judge.recheck(v)
        judge.record_outcome(v.id, "gas_stats", True)
    with recording(db) as [log]:  # type: ignore[list-item]
        ps = [judge.decide(_paid(100 + n)).p for n in range(10)]
    assert log.touching("judge_verdicts"), "the records were not written"
    assert log.touching("judge_outcomes") == []
    assert len(set(ps)) == 1
    last = judge.decide(_paid(200))
    judge.recheck(last)
    judge.record_outcome(last.id, "gas_stats", False)
    assert judge.decide(_paid(201)).p < ps[0]


def test_consuming_waits_for_the_disk_unless_the_wallet_syncs_after(
    signer: VerdictSigner, store_location: str | Path
) -> None:
    """A judge whose wallet keeps its ledger in the same database and syncs its reservation
    after the re-check (nib run's and nib services up's composition) consumes without its
    own wait for the disk; any other judge syncs the consumption itself."""
    from judge.verdict import Verdict

    for shared in (False, True):
        db = open_database(store_location)
        records = VerdictRecords(db, wallet_syncs_after=shared)
        judge = Judge(signer, BetaCalibrator(db), allowed_assets={31337: [USDC]},
                      balance_of=lambda asset: 50_000_000, records=records,
                      tasks=TaskRegistry(db), require_task=True)
        judge.register_task(TASK)
        verdict: Verdict = judge.decide(_paid(300 + shared))
        with recording(db) as [log]:  # type: ignore[list-item]
            judge.recheck(verdict)
        assert log.commits() == [not shared]
        assert records.standing(verdict.id, verdict.payload_fingerprint) == "consumed"
