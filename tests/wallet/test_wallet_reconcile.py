"""Reconciliation of the ledger with on-chain Transfer logs, on a real Anvil."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from _wallet_support import (
    AGENT_ADDRESS,
    DIME,
    ONE_USDC,
    Events,
    approve,
    chain_time,
    quote,
    submit_authorization,
    transfer_tx,
)

from chain.client import ChainClient
from chain.devkeys import AGENT, DEPLOYER, OUTSIDER, dev_account
from chain.usdc import mint, transfer, usdc_contract
from judge.verdict import VerdictSigner
from wallet.errors import SendFailed, SettlementUnproven
from wallet.journal import verify_ledger
from wallet.reconcile import authorization_expired, reconcile
from wallet.signer import SignedTypedData, Wallet

RUN = "run-rec"


def test_transfer_outside_the_wallet_is_an_unmatched_onchain_alarm(
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
    events: Events,
) -> None:
    start = chain.w3.eth.block_number + 1
    tx = transfer_tx(chain)
    sent = wallet.send_transaction(
        wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, spend_cap_atomic=ONE_USDC)
    )
    # Same key, but not through the wallet: no verdict, no ledger row.
    rogue = transfer(
        chain.w3, chain.usdc, dev_account(AGENT), dev_account(OUTSIDER).address, ONE_USDC
    )

    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start, emit=events)
    assert [m.tx_hash for m in report.matched] == [sent.tx_hash]
    assert [(t.tx_hash, t.value, t.recipient) for t in report.unmatched_onchain] == [
        (rogue.lower(), ONE_USDC, dev_account(OUTSIDER).address)
    ]
    assert report.unmatched_ledger == () and not report.clean
    json.dumps(report.to_dict())
    assert events.named("wallet.reconciled")[0]["unmatched_onchain"][0]["value"] == ONE_USDC


def test_x402_spend_without_tx_hash_is_found_by_its_authorization_nonce(
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
) -> None:
    start = chain.w3.eth.block_number + 1
    paid, pending = quote(chain), quote(chain, value=2 * DIME)
    signed = wallet.sign_typed_data(paid, approve(judge_signer, paid), run_id=RUN, spend_cap_atomic=ONE_USDC)
    unsent = wallet.sign_typed_data(
        pending, approve(judge_signer, pending), run_id=RUN, spend_cap_atomic=ONE_USDC
    )
    tx_hash = submit_authorization(chain, signed)  # the seller settled; we never heard back

    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert [(m.ledger_id, m.tx_hash) for m in report.matched] == [(signed.ledger_id, tx_hash)]
    assert report.resolved == (signed.ledger_id,)
    assert [r.id for r in report.unmatched_ledger] == [unsent.ledger_id]
    assert report.unmatched_onchain == ()
    row = wallet.meter.ledger.get(signed.ledger_id)
    assert (row.status, row.tx_hash) == ("settled", tx_hash)
    assert wallet.meter.spent(RUN) == DIME and wallet.meter.reserved(RUN) == 2 * DIME

    again = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert again.resolved == () and len(again.matched) == 1
    # The raw read reconcile makes per row agrees with the token's ABI call.
    for one in (signed, unsent):
        assert client.authorization_state(chain.usdc, AGENT_ADDRESS, one.auth_nonce) is (
            authorization_used(chain, one)
        )
    assert authorization_used(chain, signed) and not authorization_used(chain, unsent)


# ----------------------------------------------------------------- helpers


def authorization_used(chain: Any, signed: SignedTypedData) -> bool:
    """The token's own record of whether the authorization's nonce was consumed."""
    token = usdc_contract(chain.w3, chain.usdc)
    nonce = bytes.fromhex(signed.auth_nonce[2:])
    return bool(token.functions.authorizationState(AGENT_ADDRESS, nonce).call())


def outgoing(client: ChainClient, chain: Any, start: int) -> list[Any]:
    return client.transfer_logs(chain.usdc, start, "latest", AGENT_ADDRESS, direction="out")


def advance_chain(chain: Any, seconds: int) -> None:
    chain.rpc("evm_increaseTime", [seconds])
    chain.rpc("evm_mine")


def sign_unused(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, *, valid_s: int = 60
) -> SignedTypedData:
    """An x402 authorization the seller never submits, valid for ``valid_s`` on chain."""
    payload = quote(chain, valid_before=chain_time(chain) + valid_s)
    return wallet.sign_typed_data(payload, approve(judge_signer, payload), run_id=RUN, spend_cap_atomic=ONE_USDC)


# ----------------------------------------------------------------- expired authorizations


def test_the_ledger_stores_the_authorizations_valid_before(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    signed = sign_unused(chain, wallet, judge_signer, valid_s=90)
    row = wallet.meter.ledger.get(signed.ledger_id)
    assert (row.status, row.auth_nonce) == ("signed", signed.auth_nonce)
    assert row.valid_before == signed.valid_before == chain_time(chain) + 90


def test_an_expired_unused_authorization_is_failed_and_frees_the_cap(
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
    events: Events,
) -> None:
    start = chain.w3.eth.block_number + 1
    before = client.token_balance(chain.usdc, AGENT_ADDRESS)
    signed = sign_unused(chain, wallet, judge_signer)
    assert wallet.meter.usage(RUN).committed == DIME
    advance_chain(chain, 3_600)
    later = time.time() + 3_600

    report = reconcile(
        db_path, client, chain.usdc, AGENT_ADDRESS, start, emit=events, clock=lambda: later
    )
    row = wallet.meter.ledger.get(signed.ledger_id)
    assert row.status == "failed"
    assert row.note.startswith(f"authorization expired unused at {signed.valid_before}")
    assert row.note.endswith("; released")
    assert report.resolved == (signed.ledger_id,) and report.clean and report.pending == ()
    assert [(r.id, r.status) for r in report.unmatched_ledger] == [(signed.ledger_id, "failed")]
    assert wallet.meter.usage(RUN).committed == 0
    [event] = events.named("wallet.reconciled")
    assert event["unmatched_ledger"] == [{"id": signed.ledger_id, "status": "failed"}]
    assert event["clean"] is True and event["resolved"] == [signed.ledger_id]
    # What the chain says: the authorization was never used, no money left the wallet.
    assert not authorization_used(chain, signed)
    assert outgoing(client, chain, start) == []
    assert client.token_balance(chain.usdc, AGENT_ADDRESS) == before

    again = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start, clock=lambda: later)
    assert again.resolved == () and again.clean


@pytest.mark.parametrize("expired_on", ["chain-only", "wall-clock-only"])
def test_an_authorization_expired_on_one_clock_only_stays_pending(
    expired_on: str,
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
) -> None:
    start = chain.w3.eth.block_number
    # Valid for a minute on BOTH clocks (an idle chain's latest block can lag the wall
    # clock), so that moving one clock alone is what expires it.
    payload = quote(chain, valid_before=max(chain_time(chain), int(time.time())) + 60)
    signed = wallet.sign_typed_data(payload, approve(judge_signer, payload), run_id=RUN, spend_cap_atomic=ONE_USDC)
    if expired_on == "chain-only":
        advance_chain(chain, 3_600)
        wall = time.time()
    else:
        wall = time.time() + 3_600
    now = chain_time(chain)
    assert authorization_expired(signed.valid_before, chain_time=now, wall_time=wall) is False

    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start, clock=lambda: wall)
    assert wallet.meter.ledger.get(signed.ledger_id).status == "signed"
    assert report.resolved == () and not report.clean
    assert [r.id for r in report.pending] == [signed.ledger_id]
    assert wallet.meter.usage(RUN).committed == DIME


def test_an_authorization_used_before_the_range_is_never_failed(
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
) -> None:
    start = chain.w3.eth.block_number + 1
    signed = sign_unused(chain, wallet, judge_signer)
    tx_hash = submit_authorization(chain, signed)  # the seller settled; we never heard back
    advance_chain(chain, 3_600)
    later = time.time() + 3_600
    after_it = chain.w3.eth.block_number

    # Reconciling from after the payment cannot see its log, but the token says the
    # authorization was used: the money moved, so the row must not be failed.
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, after_it, clock=lambda: later)
    assert authorization_used(chain, signed)
    assert wallet.meter.ledger.get(signed.ledger_id).status == "signed"
    assert report.resolved == () and [r.id for r in report.pending] == [signed.ledger_id]

    full = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start, clock=lambda: later)
    assert full.resolved == (signed.ledger_id,) and full.clean
    row = wallet.meter.ledger.get(signed.ledger_id)
    assert (row.status, row.tx_hash) == ("settled", tx_hash)
    assert [(t.tx_hash.lower(), t.value) for t in outgoing(client, chain, start)] == [
        (tx_hash, DIME)
    ]


def test_a_row_without_valid_before_is_never_failed(
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
) -> None:
    # Rows written before the column existed: reconcile cannot tell expired from pending.
    start = chain.w3.eth.block_number + 1
    signed = sign_unused(chain, wallet, judge_signer)
    with wallet.meter.store.transaction() as conn:
        conn.execute("UPDATE wallet_spends SET valid_before = NULL")
    advance_chain(chain, 3_600)
    later = time.time() + 3_600
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start, clock=lambda: later)
    assert wallet.meter.ledger.get(signed.ledger_id).status == "signed"
    assert not report.clean and not authorization_used(chain, signed)


# ----------------------------------------------------------------- one log, one row


def twin_transfer(chain: Any) -> dict[str, Any]:
    """A fully pinned transfer: signing it twice yields one byte-identical transaction."""
    base = int(chain.w3.eth.get_block("latest")["baseFeePerGas"])
    return {
        **transfer_tx(chain),
        "type": 2,
        "from": AGENT_ADDRESS,
        "nonce": chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending"),
        "gas": 100_000,
        "maxFeePerGas": 2 * base + 10**9,
        "maxPriorityFeePerGas": 10**9,
    }


def test_a_failed_twin_never_takes_the_settled_rows_log(
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
) -> None:
    start = chain.w3.eth.block_number + 1
    before = client.token_balance(chain.usdc, AGENT_ADDRESS)
    tx = twin_transfer(chain)
    first = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id="run-b", spend_cap_atomic=ONE_USDC)
    second = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id="run-a", spend_cap_atomic=ONE_USDC)
    assert first.tx_hash == second.tx_hash
    wallet.send_transaction(second)
    with pytest.raises(SendFailed):
        wallet.send_transaction(first)  # the node already has it

    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert [m.ledger_id for m in report.matched] == [second.ledger_id]
    assert report.resolved == () and report.clean
    assert [(r.id, r.status) for r in report.unmatched_ledger] == [(first.ledger_id, "failed")]
    rows = {r.id: r.status for r in wallet.meter.ledger.rows()}
    assert rows == {first.ledger_id: "failed", second.ledger_id: "settled"}
    # The chain moved the money once; the ledger says so too.
    assert [t.value for t in outgoing(client, chain, start)] == [DIME]
    assert client.token_balance(chain.usdc, AGENT_ADDRESS) == before - DIME
    assert wallet.meter.spent("run-a") - wallet.meter.usage("run-a").gas_usdc == DIME
    assert wallet.meter.usage("run-b").settled == 0


def test_two_signed_twins_share_one_log_and_only_one_settles(
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
) -> None:
    # Both rows signed, then the process died; the raw tx went out once from elsewhere.
    start = chain.w3.eth.block_number + 1
    tx = twin_transfer(chain)
    first = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id="run-b", spend_cap_atomic=ONE_USDC)
    second = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id="run-a", spend_cap_atomic=ONE_USDC)
    chain.w3.eth.send_raw_transaction(second.raw_transaction)
    chain.w3.eth.wait_for_transaction_receipt(second.tx_hash, timeout=30)

    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert len(report.matched) == 1 and report.unmatched_onchain == ()
    # The oldest signed row claims the log; its twin can never move money of its own (the
    # same bytes cannot be mined twice), so it is failed rather than left pending forever.
    assert report.resolved == (first.ledger_id, second.ledger_id)
    assert report.pending == () and report.clean
    twin = wallet.meter.ledger.get(second.ledger_id)
    assert twin.status == "failed" and first.ledger_id in twin.note
    settled = [r for r in wallet.meter.ledger.rows() if r.status == "settled"]
    assert sum(r.amount for r in settled) == sum(t.value for t in outgoing(client, chain, start))


def test_a_transfer_whose_nonce_another_transaction_used_is_failed_never_before(
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
) -> None:
    # Signed, then its bytes dropped before the broadcast (the process lost them): while
    # its nonce is unused, whoever holds the bytes could still send it, so it stays pending.
    start = chain.w3.eth.block_number + 1
    tx = transfer_tx(chain)
    dropped = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, spend_cap_atomic=ONE_USDC)
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start - 1)
    assert [r.id for r in report.pending] == [dropped.ledger_id] and report.resolved == ()
    # Another transfer takes the nonce: the dropped one can never be mined.
    other = {**transfer_tx(chain, amount=2 * DIME), "nonce": tx["nonce"]}
    sent = wallet.send_transaction(
        wallet.sign_transaction(other, approve(judge_signer, other), run_id=RUN, spend_cap_atomic=ONE_USDC)
    )
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert [m.tx_hash for m in report.matched] == [sent.tx_hash]
    assert report.resolved == (dropped.ledger_id,) and report.pending == () and report.clean
    row = wallet.meter.ledger.get(dropped.ledger_id)
    assert row.status == "failed" and f"nonce {tx['nonce']} was used" in row.note
    assert wallet.meter.usage(RUN).reserved == 0  # its cap share is free again
    assert [t.value for t in outgoing(client, chain, start)] == [2 * DIME]
    assert verify_ledger(db_path).ok


# ----------------------------------------------------------------- what "clean" means


def test_failed_spends_that_never_reached_the_chain_leave_the_report_clean(
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
) -> None:
    start = chain.w3.eth.block_number + 1
    tx = transfer_tx(chain)
    sent = wallet.send_transaction(
        wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, spend_cap_atomic=ONE_USDC)
    )
    other = transfer_tx(chain, amount=2 * DIME)
    unsent = wallet.sign_transaction(other, approve(judge_signer, other), run_id=RUN, spend_cap_atomic=ONE_USDC)
    wallet.discard(unsent, "never sent")

    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert [m.tx_hash for m in report.matched] == [sent.tx_hash]
    assert [(r.id, r.status) for r in report.unmatched_ledger] == [(unsent.ledger_id, "failed")]
    assert report.pending == () and report.clean
    data = json.loads(json.dumps(report.to_dict()))
    assert data["clean"] is True and data["unmatched_ledger"][0]["status"] == "failed"
    assert [t.value for t in outgoing(client, chain, start)] == [DIME]

    # A spend that may still move money keeps the report from being clean.
    pending = sign_unused(chain, wallet, judge_signer)
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert [(r.id, r.status) for r in report.pending] == [(pending.ledger_id, "signed")]
    assert not report.clean and report.unmatched_onchain == ()
    assert report.to_dict()["clean"] is False


# ------------------------------------------------------ settlement proven on chain


def test_settle_refuses_a_receipt_that_does_not_carry_our_authorization(
    chain: Any, wallet: Wallet, client: ChainClient, judge_signer: VerdictSigner, db_path: Any
) -> None:
    # A seller names someone else's successful transaction as its settlement receipt.
    start = chain.w3.eth.block_number + 1
    payload = quote(chain)
    signed = wallet.sign_typed_data(payload, approve(judge_signer, payload), run_id=RUN, spend_cap_atomic=ONE_USDC)
    decoy = transfer(chain.w3, chain.usdc, dev_account(AGENT), dev_account(OUTSIDER).address, 1)
    with pytest.raises(SettlementUnproven, match="no-authorization-used") as caught:
        wallet.settle(signed, decoy)
    assert caught.value.finding == "no-authorization-used"
    with pytest.raises(SettlementUnproven, match="not-mined"):
        wallet.settle(signed, "0x" + "ab" * 32)
    [row] = [r for r in wallet.meter.ledger.rows(RUN) if r.id == signed.ledger_id]
    assert row.status == "signed" and "unproven" in row.note

    # The seller settles our signature later: reconcile ties the row to that tx.
    settled_in = submit_authorization(chain, signed)
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert [(m.ledger_id, m.tx_hash) for m in report.matched] == [(signed.ledger_id, settled_in)]
    assert [t.tx_hash for t in report.unmatched_onchain] == [decoy.lower()]  # the decoy is ours
    wallet.settle(signed, settled_in)  # proven now; already settled, the same tx


def test_reconcile_does_not_call_a_row_settled_under_a_foreign_tx_clean(
    chain: Any, wallet: Wallet, client: ChainClient, judge_signer: VerdictSigner, db_path: Any
) -> None:
    # A row recorded settled under a tx that never used its authorization (as an older
    # nib did on a seller's word) is unproven, not clean: the signature is still live.
    start = chain.w3.eth.block_number + 1
    payload = quote(chain)
    signed = wallet.sign_typed_data(payload, approve(judge_signer, payload), run_id=RUN, spend_cap_atomic=ONE_USDC)
    foreign = mint(chain.w3, chain.usdc, dev_account(DEPLOYER), dev_account(OUTSIDER).address, 1)
    wallet.meter.settle(signed.reservation, foreign)  # the unchecked low-level record

    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert [r.id for r in report.unproven] == [signed.ledger_id] and not report.clean

    settled_in = submit_authorization(chain, signed)
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert report.clean, report.to_dict()
    assert report.resolved == (signed.ledger_id,)
    row = wallet.meter.ledger.get(signed.ledger_id)
    assert row.tx_hash == settled_in.lower() and "re-tied by reconcile" in row.note


def test_a_forged_row_cannot_hide_an_unaudited_outflow(
    chain: Any, wallet: Wallet, client: ChainClient, db_path: Any
) -> None:
    # Money leaves with the wallet's key but without the wallet; someone then writes a
    # ledger row that "accounts" for it (same tx, recipient and amount).
    import sqlite3

    start = chain.w3.eth.block_number + 1
    outsider = dev_account(OUTSIDER).address
    rogue = transfer(chain.w3, chain.usdc, dev_account(AGENT), outsider, DIME)
    conn = sqlite3.connect(str(db_path))
    conn.execute(
        "INSERT INTO wallet_spends (id, run_id, verdict_id, kind, asset, amount, recipient, "
        "chain_id, status, tx_hash, created_at, updated_at) VALUES "
        "('forged', 'run-x', 'v-x', 'transfer', ?, ?, ?, 31337, 'settled', ?, 1, 1)",
        (chain.usdc.lower(), DIME, outsider.lower(), rogue.lower()),
    )
    conn.commit()
    conn.close()

    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert report.unmatched_onchain == ()  # the forged row "matches" the outflow...
    assert report.ledger_check is not None and not report.clean  # ...but the chain says no
    assert any("ledger row forged" in p for p in report.ledger_check.problems)


def test_a_settled_row_must_name_a_verdict_the_judge_issued_and_consumed(
    chain: Any, wallet: Wallet, client: ChainClient, judge_signer: VerdictSigner, db_path: Any
) -> None:
    from judge.records import VerdictRecords

    start = chain.w3.eth.block_number + 1
    payload = quote(chain)
    verdict = approve(judge_signer, payload)
    signed = wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    submit_authorization(chain, signed)
    records = VerdictRecords(db_path)

    # Signed under a verdict this judge's record never issued: not backed, not clean.
    report = reconcile(
        db_path, client, chain.usdc, AGENT_ADDRESS, start, verdict_standing=records.standing
    )
    assert [(u.ledger_id, u.standing) for u in report.unbacked] == [
        (signed.ledger_id, "not-issued")
    ]
    assert not report.clean and report.unmatched_onchain == ()

    records.issued(verdict, subject="pay_http")
    records.consume(verdict)
    report = reconcile(
        db_path, client, chain.usdc, AGENT_ADDRESS, start, verdict_standing=records.standing
    )
    assert report.unbacked == () and report.clean, report.to_dict()


def test_cutting_the_newest_rows_with_their_journal_is_caught_outside_the_file(
    chain: Any, wallet: Wallet, client: ChainClient, judge_signer: VerdictSigner, db_path: Any
) -> None:
    """The journal's stated limit: deleting the newest rows *together with* their journal
    entries leaves a shorter chain that verifies. What that hides is caught by what the
    file cannot rewrite: the chain (the settled payment's Transfer has no row: reconcile
    is not clean) and the judge's record (the verdict stays consumed there: no replay)."""
    import sqlite3

    from judge.records import VerdictRecords
    from wallet._tables import JOURNAL
    from wallet.errors import VerdictReplayed
    from wallet.journal import verify_ledger

    start = chain.w3.eth.block_number + 1
    records = VerdictRecords(db_path.parent / "judge.db")  # the judge's own store
    payload = quote(chain)
    verdict = approve(judge_signer, payload)
    records.issued(verdict, subject="pay_http")
    wallet.recheck = records.consume  # the judge's pre-signing re-check
    marker = int(sqlite3.connect(str(db_path)).execute(f"SELECT COALESCE(MAX(seq), 0) FROM {JOURNAL}").fetchone()[0])
    signed = wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    tx = submit_authorization(chain, signed)
    wallet.settle(signed, tx)

    conn = sqlite3.connect(str(db_path))  # cut the tail: the row, its verdict, their entries
    conn.execute("DELETE FROM wallet_spends WHERE id = ?", (signed.ledger_id,))
    conn.execute("DELETE FROM wallet_used_verdicts WHERE verdict_id = ?", (verdict.id,))
    conn.execute(f"DELETE FROM {JOURNAL} WHERE seq > ?", (marker,))
    conn.commit()
    conn.close()
    cut = verify_ledger(db_path)  # the running totals still count the row
    assert [p.split(" is ")[0] for p in cut.problems] == ["running total 'committed'"], cut
    conn = sqlite3.connect(str(db_path))  # ... so the attacker rewrites them too
    conn.execute("UPDATE wallet_totals SET value = 0")
    conn.commit()
    conn.close()

    assert verify_ledger(db_path).ok  # the file alone cannot tell
    report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start)
    assert not report.clean and [u.tx_hash for u in report.unmatched_onchain] == [tx.lower()]
    assert records.standing(verdict.id, verdict.payload_fingerprint) == "consumed"
    with pytest.raises(VerdictReplayed):
        wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)


def test_a_row_booked_under_another_run_than_its_verdicts_task_is_caught(
    chain: Any, wallet: Wallet, client: ChainClient, judge_signer: VerdictSigner, db_path: Any
) -> None:
    """Issue 22: a payment the judge approved for one task, booked under another run (as
    the wallet service did when the body named the run), fails reconcile and audit verify."""
    from judge.records import VerdictRecords
    from wallet.backing import booked_elsewhere

    start = chain.w3.eth.block_number + 1
    payload = quote(chain)
    verdict = approve(judge_signer, payload)  # a verdict naming no task: the old wire
    signed = wallet.sign_typed_data(payload, verdict, run_id="victim-run", spend_cap_atomic=ONE_USDC)
    submit_authorization(chain, signed)
    records = VerdictRecords(db_path)
    records.issued(verdict, subject="pay_http", task_id="attacker-task")
    records.consume(verdict)
    report = reconcile(
        db_path, client, chain.usdc, AGENT_ADDRESS, start, verdict_standing=records.standing
    )
    assert [(u.ledger_id, u.run_id, u.standing) for u in report.unbacked] == [
        (signed.ledger_id, "victim-run", "other-task")
    ]
    assert not report.clean
    [problem] = booked_elsewhere(db_path, records.standing)
    assert signed.ledger_id in problem and "'victim-run'" in problem and verdict.id in problem


# ----------------------------------------------------------------- a row it cannot read


@pytest.mark.parametrize("nonce", ["12345", "0x" + "ab" * 31, "0x" + "zz" * 32])
def test_a_row_whose_nonce_the_chain_cannot_read_is_named_and_the_pass_goes_on(
    chain: Any,
    wallet: Wallet,
    client: ChainClient,
    judge_signer: VerdictSigner,
    db_path: Any,
    nonce: str,
) -> None:
    # A ledger written before the judge refused such nonces (an integer, 31 bytes) may hold
    # one: the token cannot be asked about it, and every other row must still be reconciled.
    start = chain.w3.eth.block_number + 1
    odd = sign_unused(chain, wallet, judge_signer)
    wallet.meter.ledger.transition(odd.ledger_id, "signed", auth_nonce=nonce)
    paid = quote(chain, value=2 * DIME)
    signed = wallet.sign_typed_data(paid, approve(judge_signer, paid), run_id=RUN,
                                    spend_cap_atomic=ONE_USDC)
    tx_hash = submit_authorization(chain, signed)

    for checkpoint in (False, True, True):
        report = reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start,
                           checkpoint=checkpoint)
        [found] = report.unreadable
        assert (found.ledger_id, found.status) == (odd.ledger_id, "signed")
        assert found.why.startswith("its authorization nonce") and "Fix:" in found.why
        assert [r.id for r in report.pending] == [odd.ledger_id]  # it still holds its cap
        assert not report.clean and report.ledger_check is not None and report.ledger_check.ok
        assert wallet.meter.ledger.get(signed.ledger_id).status == "settled"
        assert json.loads(json.dumps(report.to_dict()))["unreadable"][0]["ledger_id"] == odd.ledger_id
    assert wallet.meter.ledger.get(signed.ledger_id).tx_hash == tx_hash
