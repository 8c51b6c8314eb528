"""`nib audit reconcile`'s one line says what the ledger's rows with no transfer mean
(outside tester 13: authorizations the wallet had cancelled on chain were printed as
"unmatched in ledger 4" beside `clean: true`, which a user reads as a discrepancy)."""

from __future__ import annotations

from agent.cli.commands.audit import _ledger_only
from wallet.ledger import SpendRow
from wallet.reconcile import ReconcileReport


def _row(rid: str, status: str) -> SpendRow:
    return SpendRow(rid, "run", None, None, "x402", "0xusdc", 1_000, "0xseller", 31337, status,
                    None, None, 0.0, 0.0, "")


def test_rows_closed_with_nothing_moved_are_said_apart_from_pending_ones() -> None:
    report = ReconcileReport(
        wallet="0xw", asset="0xusdc", from_block=0, to_block=9, matched=(),
        unmatched_onchain=(), resolved=(),
        unmatched_ledger=(_row("a", "cancelled"), _row("b", "failed"), _row("c", "signed"),
                          _row("d", "settled")),
    )
    assert _ledger_only(report) == (
        "in ledger only: 1 pending, 1 settled outside these blocks, 2 closed with nothing moved")
    closed = ReconcileReport(wallet="0xw", asset="0xusdc", from_block=0, to_block=9, matched=(),
                             unmatched_onchain=(), resolved=(),
                             unmatched_ledger=(_row("a", "cancelled"),))
    assert closed.clean and _ledger_only(closed).startswith("in ledger only: 0 pending")
