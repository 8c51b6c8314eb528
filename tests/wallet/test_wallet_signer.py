"""The verdict-gated signer on a real Anvil: refusals sign nothing, and what it signs settles."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from _wallet_support import (
    AGENT_ADDRESS,
    DIME,
    ONE_USDC,
    SELLER_ADDRESS,
    Events,
    approve,
    chain_time,
    quote,
    relay,
    submit_authorization,
    transfer_tx,
)
from eth_account import Account
from web3.exceptions import Web3RPCError

from chain.client import ChainClient
from chain.devkeys import AGENT, OUTSIDER, dev_account
from chain.usdc import transfer, usdc_contract
from judge.errors import JudgeUnreachable
from judge.errors import VerdictRevoked as JudgeVerdictRevoked
from judge.verdict import VerdictSigner
from wallet.errors import (
    CapExceeded,
    DevKeyRefused,
    InsufficientBalance,
    NoVerdict,
    PayloadMismatch,
    RecheckFailed,
    SendFailed,
    SpendRefused,
    VerdictBadSignature,
    VerdictExpired,
    VerdictNotApproved,
    VerdictReplayed,
    VerdictRevoked,
    VerdictVoid,
)
from wallet.signer import SignedTypedData, Wallet

RUN = "run-test"
OUTSIDER_ADDRESS = dev_account(OUTSIDER).address


def balance(chain: Any, address: str) -> int:
    return int(usdc_contract(chain.w3, chain.usdc).functions.balanceOf(address).call())


def assert_nothing_signed(wallet: Wallet, events: Events, chain: Any, before: int) -> None:
    assert wallet.meter.ledger.rows() == []
    assert events.named("wallet.signed") == []
    assert balance(chain, AGENT_ADDRESS) == before


# ------------------------------------------------------------------------ refusals


def test_no_verdict_refused(chain: Any, wallet: Wallet, events: Events) -> None:
    before = balance(chain, AGENT_ADDRESS)
    with pytest.raises(NoVerdict) as info:
        wallet.sign_typed_data(quote(chain), None, run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert info.value.code == "no-verdict"
    assert "signs only with an approving verdict" in str(info.value)
    assert events.named("wallet.refused")[0]["code"] == "no-verdict"
    assert_nothing_signed(wallet, events, chain, before)


@pytest.mark.parametrize("decision", ["refuse", "escalate", "answer"])
def test_verdict_that_does_not_approve_is_refused(
    chain: Any, wallet: Wallet, events: Events, judge_signer: VerdictSigner, decision: str
) -> None:
    before = balance(chain, AGENT_ADDRESS)
    payload = quote(chain)
    verdict = approve(judge_signer, payload, decision=decision)
    with pytest.raises(VerdictNotApproved, match=f"decided '{decision}', expected 'approve'"):
        wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert not wallet.meter.ledger.is_used(verdict.id)
    assert_nothing_signed(wallet, events, chain, before)


def test_verdict_signed_by_another_key_is_refused(
    chain: Any, wallet: Wallet, events: Events
) -> None:
    before = balance(chain, AGENT_ADDRESS)
    payload = quote(chain)
    verdict = approve(VerdictSigner(dev_account(OUTSIDER)), payload)
    with pytest.raises(VerdictBadSignature) as info:
        wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert info.value.code == "bad-signature"
    assert f"signed by {OUTSIDER_ADDRESS}" in str(info.value)
    assert_nothing_signed(wallet, events, chain, before)


def test_verdict_edited_after_signing_is_refused(
    chain: Any, wallet: Wallet, events: Events, judge_signer: VerdictSigner
) -> None:
    before = balance(chain, AGENT_ADDRESS)
    payload = quote(chain, value=5 * ONE_USDC)
    verdict = approve(judge_signer, payload, amount=DIME)
    forged = verdict.model_copy(update={"amount": 5 * ONE_USDC})
    with pytest.raises(VerdictBadSignature, match="altered after signing"):
        wallet.sign_typed_data(payload, forged, run_id=RUN, spend_cap_atomic=10 * ONE_USDC)
    assert_nothing_signed(wallet, events, chain, before)


def test_expired_verdict_is_refused(
    chain: Any, wallet: Wallet, events: Events, judge_signer: VerdictSigner
) -> None:
    before = balance(chain, AGENT_ADDRESS)
    payload = quote(chain)
    verdict = approve(judge_signer, payload, now=time.time() - 600, ttl_s=120)
    with pytest.raises(VerdictExpired) as info:
        wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert info.value.code == "expired"
    assert f"expired at {verdict.expires_at}" in str(info.value)
    assert_nothing_signed(wallet, events, chain, before)


def test_expiry_uses_the_wallets_clock(
    chain: Any, make_wallet: Callable[..., Wallet], events: Events, judge_signer: VerdictSigner
) -> None:
    payload = quote(chain)
    verdict = approve(judge_signer, payload, ttl_s=60)
    late = make_wallet(clock=lambda: verdict.expires_at)
    with pytest.raises(VerdictExpired):
        late.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)


MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "amount+1": lambda p: p["message"].update(value=p["message"]["value"] + 1),
    "recipient": lambda p: p["message"].update(to=OUTSIDER_ADDRESS),
    "validBefore": lambda p: p["message"].update(validBefore=p["message"]["validBefore"] + 1),
    "chainId": lambda p: p["domain"].update(chainId=1),
    "asset": lambda p: p["domain"].update(verifyingContract=OUTSIDER_ADDRESS),
    "nonce": lambda p: p["message"].update(nonce="0x" + "00" * 32),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_payload_changed_after_approval_voids_the_verdict(
    chain: Any, wallet: Wallet, events: Events, judge_signer: VerdictSigner, mutation: str
) -> None:
    before = balance(chain, AGENT_ADDRESS)
    payload = quote(chain)
    verdict = approve(judge_signer, payload)
    MUTATIONS[mutation](payload)
    with pytest.raises(VerdictVoid) as info:
        wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert info.value.code == "verdict-void"
    assert "the payload changed after approval" in str(info.value)
    refused = events.named("wallet.refused")[0]
    assert (refused["code"], refused["verdict_id"]) == ("verdict-void", verdict.id)
    assert_nothing_signed(wallet, events, chain, before)


def test_key_order_does_not_void_a_verdict(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    payload = quote(chain)
    verdict = approve(judge_signer, payload)
    reordered = {k: payload[k] for k in reversed(list(payload))}
    reordered["message"] = dict(reversed(list(payload["message"].items())))
    signed = wallet.sign_typed_data(reordered, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert signed.value == DIME


def test_the_signature_is_eth_accounts_signature_of_the_typed_data(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    # The wallet signs the EIP-712 digest its checks recomputed; that must be exactly the
    # signature eth-account gives the payload itself (what the token verifies).
    payload = quote(chain)
    verdict = approve(judge_signer, payload)
    signed = wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    expected = dev_account(AGENT).sign_typed_data(full_message=payload)
    assert signed.signature == "0x" + bytes(expected.signature).hex()


@pytest.mark.parametrize(
    ("field", "value"),
    [("amount", DIME + 1), ("recipient", OUTSIDER_ADDRESS), ("chain_id", 1)],
)
def test_verdict_terms_must_match_the_payload(
    chain: Any,
    wallet: Wallet,
    events: Events,
    judge_signer: VerdictSigner,
    field: str,
    value: Any,
) -> None:
    before = balance(chain, AGENT_ADDRESS)
    payload = quote(chain)
    verdict = approve(judge_signer, payload, **{field: value})
    with pytest.raises(PayloadMismatch) as info:
        wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert info.value.code == "mismatch"
    assert_nothing_signed(wallet, events, chain, before)


def test_payload_for_another_sender_is_refused(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    payload = quote(chain)
    payload["message"]["from"] = OUTSIDER_ADDRESS
    verdict = approve(judge_signer, payload)
    with pytest.raises(PayloadMismatch, match="sender is"):
        wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)


class _OtherChain(ChainClient):
    """The real Anvil, reporting Base Sepolia's chain id (to exercise the dev-key rule)."""

    def chain_id(self) -> int:
        return 84532


def test_dev_key_refused_off_the_devnet(
    chain: Any, make_wallet: Callable[..., Wallet], events: Events, judge_signer: VerdictSigner
) -> None:
    wallet = make_wallet(chain=_OtherChain(chain.rpc_url))
    payload = quote(chain, chain_id=84532)
    verdict = approve(judge_signer, payload)
    with pytest.raises(DevKeyRefused, match="accepted only on chain 31337, got chain 84532"):
        wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert events.named("wallet.refused")[0]["code"] == "dev-key"
    assert wallet.meter.ledger.rows() == []


def test_judge_recheck_runs_before_signing(
    chain: Any, make_wallet: Callable[..., Wallet], judge_signer: VerdictSigner
) -> None:
    def revoked(_: Any) -> None:
        raise JudgeVerdictRevoked("verdict revoked by the judge")

    def silent(_: Any) -> None:
        raise JudgeUnreachable("judge did not answer in 2 s", url="http://127.0.0.1:1")

    payload = quote(chain)
    with pytest.raises(VerdictRevoked, match="failed the judge's re-check"):
        make_wallet(recheck=revoked).sign_typed_data(
            payload, approve(judge_signer, payload), run_id=RUN, spend_cap_atomic=ONE_USDC
        )
    with pytest.raises(RecheckFailed) as info:
        make_wallet(recheck=silent).sign_typed_data(
            payload, approve(judge_signer, payload), run_id=RUN, spend_cap_atomic=ONE_USDC
        )
    assert isinstance(info.value.__cause__, JudgeUnreachable)
    seen: list[str] = []
    ok = make_wallet(recheck=lambda v: seen.append(v.id))
    verdict = approve(judge_signer, payload)
    ok.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert seen == [verdict.id]


def test_insufficient_live_balance_is_refused(
    chain: Any, wallet: Wallet, events: Events, judge_signer: VerdictSigner
) -> None:
    payload = quote(chain, value=200 * ONE_USDC)
    verdict = approve(judge_signer, payload)
    with pytest.raises(InsufficientBalance) as info:
        wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=1000 * ONE_USDC)
    assert (info.value.limit, info.value.observed) == (100 * ONE_USDC, 200 * ONE_USDC)
    assert events.named("wallet.refused")[0]["code"] == "insufficient-balance"


# ------------------------------------------------------------------------ single use


def test_a_verdict_signs_once(
    chain: Any, wallet: Wallet, events: Events, judge_signer: VerdictSigner
) -> None:
    payload = quote(chain)
    verdict = approve(judge_signer, payload)
    first = wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    with pytest.raises(VerdictReplayed) as info:
        wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert info.value.code == "replayed"
    assert [r.id for r in wallet.meter.ledger.rows()] == [first.ledger_id]
    assert len(events.named("wallet.signed")) == 1


def test_a_verdict_signs_once_when_two_threads_race(
    chain: Any, make_wallet: Callable[..., Wallet], judge_signer: VerdictSigner
) -> None:
    # Two Wallet objects on one DB file: separate connections, as in two processes.
    wallets = [make_wallet(), make_wallet()]
    payload = quote(chain)
    verdict = approve(judge_signer, payload)
    barrier = threading.Barrier(2)
    results: list[object] = []

    def attempt(w: Wallet) -> None:
        barrier.wait()
        try:
            results.append(w.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC))
        except SpendRefused as exc:
            results.append(exc)

    threads = [threading.Thread(target=attempt, args=(w,)) for w in wallets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    signed = [r for r in results if isinstance(r, SignedTypedData)]
    refused = [r for r in results if isinstance(r, VerdictReplayed)]
    assert (len(signed), len(refused)) == (1, 1)
    assert len(wallets[0].meter.ledger.rows()) == 1


# ------------------------------------------------------------------------ the cap, on chain


def test_twenty_parallel_dimes_against_a_dollar_cap_settle_exactly_ten(
    chain: Any, wallet: Wallet, client: ChainClient, judge_signer: VerdictSigner
) -> None:
    agent_before = balance(chain, AGENT_ADDRESS)
    seller_before = balance(chain, SELLER_ADDRESS)
    start_block = chain.w3.eth.block_number + 1
    jobs = []
    for _ in range(20):
        payload = quote(chain)
        jobs.append((payload, approve(judge_signer, payload)))
    barrier = threading.Barrier(20)
    signed: list[SignedTypedData] = []
    capped: list[CapExceeded] = []

    def attempt(payload: dict[str, Any], verdict: Any) -> None:
        barrier.wait()
        try:
            signed.append(wallet.sign_typed_data(payload, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC))
        except CapExceeded as exc:
            capped.append(exc)

    threads = [threading.Thread(target=attempt, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(signed), len(capped)) == (10, 10)
    assert all(c.limit == ONE_USDC and c.observed == ONE_USDC + DIME for c in capped)

    for s in signed:  # the facilitator settles each authorization on chain
        wallet.settle(s, submit_authorization(chain, s))

    # The chain, the ledger and the meter agree.
    assert balance(chain, AGENT_ADDRESS) == agent_before - ONE_USDC
    assert balance(chain, SELLER_ADDRESS) == seller_before + ONE_USDC
    rows = wallet.meter.ledger.rows(RUN)
    assert len(rows) == 10 and {r.status for r in rows} == {"settled"}
    assert sum(r.amount for r in rows) == ONE_USDC
    assert (wallet.meter.spent(RUN), wallet.meter.reserved(RUN)) == (ONE_USDC, 0)
    measured = wallet.meter.measured_spend(RUN, client, chain.usdc, AGENT_ADDRESS, start_block)
    assert measured.agrees and measured.onchain == ONE_USDC


# ------------------------------------------------------------------------ transactions


def test_transfer_transaction_is_signed_sent_settled_and_gas_metered(
    chain: Any, wallet: Wallet, events: Events, judge_signer: VerdictSigner
) -> None:
    agent_before = balance(chain, AGENT_ADDRESS)
    tx = transfer_tx(chain, amount=3 * DIME)
    verdict = approve(judge_signer, tx)
    signed = wallet.sign_transaction(tx, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert wallet.meter.ledger.get(signed.ledger_id).status == "signed"
    sent = wallet.send_transaction(signed)
    assert sent.status == 1 and sent.gas_wei > 0 and sent.gas_usdc > 0
    assert balance(chain, AGENT_ADDRESS) == agent_before - 3 * DIME
    row = wallet.meter.ledger.get(signed.ledger_id)
    assert (row.status, row.tx_hash, row.kind) == ("settled", signed.tx_hash, "transfer")
    assert wallet.meter.spent(RUN) == 3 * DIME + sent.gas_usdc
    assert [n for n, _ in events.items] == ["wallet.signed", "wallet.broadcast", "wallet.settled"]


def test_an_audit_sink_that_fails_never_strands_a_signed_transfer(
    chain: Any, make_wallet: Any, judge_signer: VerdictSigner
) -> None:
    # The event store refusing a line (it raised IntegrityError under four workers) must
    # not drop a signature after the ledger recorded it: the transfer is handed out, sent
    # and settled, and the ledger (with its journal) stays the book of record.
    def broken_sink(name: str, data: dict[str, object]) -> None:
        raise RuntimeError(f"event store refused {name}")

    wallet = make_wallet(emit=broken_sink)
    agent_before = balance(chain, AGENT_ADDRESS)
    tx = transfer_tx(chain)
    signed = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, spend_cap_atomic=ONE_USDC)
    row = wallet.meter.ledger.get(signed.ledger_id)
    assert (row.status, row.tx_nonce) == ("signed", tx["nonce"])
    sent = wallet.send_transaction(signed)
    assert wallet.meter.ledger.get(signed.ledger_id).status == "settled"
    assert balance(chain, AGENT_ADDRESS) == agent_before - DIME and sent.status == 1


def test_transfer_transaction_changed_after_approval_is_void(
    chain: Any, wallet: Wallet, events: Events, judge_signer: VerdictSigner
) -> None:
    tx = transfer_tx(chain)
    verdict = approve(judge_signer, tx)
    changed = transfer_tx(chain, amount=DIME + 1)
    with pytest.raises(VerdictVoid):
        wallet.sign_transaction(changed, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    other = dict(tx, to=OUTSIDER_ADDRESS)
    with pytest.raises(PayloadMismatch, match="asset"):
        wallet.sign_transaction(
            other, approve(judge_signer, other, asset=OUTSIDER_ADDRESS), run_id=RUN, spend_cap_atomic=ONE_USDC
        )
    eth = dict(tx, value=1)
    with pytest.raises(PayloadMismatch, match="wei of ETH"):
        wallet.sign_transaction(eth, approve(judge_signer, eth), run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert wallet.meter.ledger.rows() == []





def test_signed_results_are_immutable(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    payload = quote(chain)
    signed = wallet.sign_typed_data(
        payload, approve(judge_signer, payload), run_id=RUN, spend_cap_atomic=ONE_USDC
    )
    with pytest.raises(AttributeError):
        signed.value = 5 * ONE_USDC  # type: ignore[misc]
    x = signed.to_x402_payload()
    assert x["authorization"]["value"] == str(DIME)
    assert x["authorization"]["nonce"] == payload["message"]["nonce"]
    assert chain_time(chain) < signed.valid_before


def test_broadcast_failure_fails_the_spend_and_frees_the_nonce(
    chain: Any, wallet: Wallet, events: Events, judge_signer: VerdictSigner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The node answers and refuses it (as it does for a fee the wallet's ETH cannot cover).
    def refuse(raw: bytes) -> Any:
        raise Web3RPCError("insufficient funds for gas * price + value")

    monkeypatch.setattr(wallet.chain.w3.eth, "send_raw_transaction", refuse)
    tx = transfer_tx(chain)
    signed = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, spend_cap_atomic=ONE_USDC)
    with pytest.raises(SendFailed) as info:
        wallet.send_transaction(signed)
    assert info.value.code == "send-failed" and "was refused:" in str(info.value)
    assert wallet.meter.ledger.get(signed.ledger_id).status == "failed"
    assert wallet.meter.reserved(RUN) == 0
    assert wallet.nonces.allocate() == signed.nonce  # handed out again: no gap
    assert events.named("wallet.failed")[0]["note"] == "broadcast refused"


def test_broadcast_without_an_answer_that_landed_is_awaited_and_settled(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node took the transaction but the answer was lost: the wallet must not free the
    cap or the nonce (a retry would overspend); it finds the tx and settles it."""
    real_send = wallet.chain.w3.eth.send_raw_transaction

    def send_then_time_out(raw: bytes) -> Any:
        real_send(raw)
        raise TimeoutError("read timed out")

    monkeypatch.setattr(wallet.chain.w3.eth, "send_raw_transaction", send_then_time_out)
    before = balance(chain, AGENT_ADDRESS)
    tx = transfer_tx(chain)
    signed = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, spend_cap_atomic=ONE_USDC)
    sent = wallet.send_transaction(signed)
    assert sent.status == 1
    assert wallet.meter.ledger.get(signed.ledger_id).status == "settled"
    assert wallet.nonces.allocate() == signed.nonce + 1
    assert balance(chain, AGENT_ADDRESS) == before - DIME


def test_broadcast_without_an_answer_keeps_the_spend_pending_and_the_nonce_used(
    chain: Any, wallet: Wallet, events: Events, judge_signer: VerdictSigner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def time_out(raw: bytes) -> Any:
        raise TimeoutError("read timed out")

    monkeypatch.setattr(wallet.chain.w3.eth, "send_raw_transaction", time_out)
    tx = {**transfer_tx(chain), "nonce": wallet.nonces.allocate()}  # as the quote pins it
    signed = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, spend_cap_atomic=ONE_USDC)
    with pytest.raises(SendFailed, match="got no answer .* stays pending"):
        wallet.send_transaction(signed)
    row = wallet.meter.ledger.get(signed.ledger_id)
    assert row.status == "signed" and "outcome unknown" in (row.note or "")
    assert wallet.meter.usage(RUN).committed >= DIME  # the cap share is held
    # The node never saw it, so the chain's count still stops below it: the number is
    # handed out again rather than leaving a gap a later transfer would wait on, unmined.
    # Only one transaction per nonce can land, so the unknown one and a retry never both pay.
    assert wallet.nonces.allocate() == signed.nonce
    assert events.named("wallet.failed")[-1]["note"] == "broadcast outcome unknown"


def test_discarded_transaction_gives_back_its_nonce(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    tx = transfer_tx(chain)
    signed = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, spend_cap_atomic=ONE_USDC)
    wallet.discard(signed)
    assert wallet.meter.ledger.get(signed.ledger_id).status == "failed"
    again = transfer_tx(chain, amount=DIME + 1)
    second = wallet.sign_transaction(again, approve(judge_signer, again), run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert second.nonce == signed.nonce
    assert wallet.send_transaction(second).status == 1


def test_outside_send_that_takes_the_nonce_is_survived_by_a_resync(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    tx = transfer_tx(chain)
    signed = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, spend_cap_atomic=ONE_USDC)
    transfer(chain.w3, chain.usdc, dev_account(AGENT), OUTSIDER_ADDRESS, ONE_USDC)  # same nonce
    with pytest.raises(SendFailed, match="nonce too low"):
        wallet.send_transaction(signed)
    assert wallet.meter.ledger.get(signed.ledger_id).status == "failed"
    again = transfer_tx(chain, amount=DIME + 1)
    second = wallet.sign_transaction(again, approve(judge_signer, again), run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert second.nonce == signed.nonce + 1
    assert wallet.send_transaction(second).status == 1


def test_reverted_transfer_fails_the_spend_and_keeps_the_gas(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    tx = dict(transfer_tx(chain, amount=60 * ONE_USDC), gas=100_000)
    signed = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, spend_cap_atomic=100 * ONE_USDC)
    # The balance moves away between signing and sending (an authorization signed with
    # the same key outside the wallet, relayed by someone else).
    drain = quote(chain, value=50 * ONE_USDC)
    sig = Account.sign_typed_data(dev_account(AGENT).key, full_message=drain).signature
    m = drain["message"]
    relay(
        chain,
        m["from"],
        m["to"],
        m["value"],
        m["validAfter"],
        m["validBefore"],
        m["nonce"],
        bytes(sig),
    )
    with pytest.raises(SendFailed, match="reverted in block"):
        wallet.send_transaction(signed)
    usage = wallet.meter.usage(RUN)
    assert wallet.meter.ledger.get(signed.ledger_id).status == "failed"
    assert (usage.settled, usage.reserved) == (0, 0) and usage.gas_wei > 0


def test_the_most_gas_can_cost_is_held_against_the_cap(
    chain: Any, wallet: Wallet, events: Events, judge_signer: VerdictSigner
) -> None:
    """Gas is paid in ETH but counts against the task's dollar cap: a transfer whose gas
    limit x max fee could push the run over its cap is refused before signing."""
    before = balance(chain, AGENT_ADDRESS)
    # 100k gas at 5,000 gwei is 0.5 ETH, 1,500 USDC at the default rate: far over the cap.
    tx = dict(transfer_tx(chain), gas=100_000, maxFeePerGas=5 * 10**12, maxPriorityFeePerGas=1)
    with pytest.raises(CapExceeded, match="plus up to .* for gas"):
        wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert_nothing_signed(wallet, events, chain, before)
    # A normal fee fits: the hold shows in the committed total until the receipt replaces it.
    ok = transfer_tx(chain)
    signed = wallet.sign_transaction(ok, approve(judge_signer, ok), run_id=RUN, spend_cap_atomic=ONE_USDC)
    pending = wallet.meter.usage(RUN).committed
    assert pending > DIME
    sent = wallet.send_transaction(signed)
    assert wallet.meter.usage(RUN).committed == DIME + sent.gas_usdc < pending


def test_a_long_lived_authorization_is_refused(
    chain: Any, wallet: Wallet, events: Events, judge_signer: VerdictSigner
) -> None:
    """A signed EIP-3009 authorization can be relayed by anyone until validBefore, so the
    wallet refuses windows longer than an hour even when the judge approved them."""
    before = balance(chain, AGENT_ADDRESS)
    payload = quote(chain, valid_before=int(time.time()) + 2 * 3600)
    with pytest.raises(PayloadMismatch, match="more than 3600 s from now"):
        wallet.sign_typed_data(payload, approve(judge_signer, payload), run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert_nothing_signed(wallet, events, chain, before)


def test_signed_records_do_not_print_their_signatures(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    payload = quote(chain)
    signed = wallet.sign_typed_data(payload, approve(judge_signer, payload), run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert signed.signature not in repr(signed) and signed.signature[2:] not in repr(signed)
    tx = transfer_tx(chain)
    stx = wallet.sign_transaction(tx, approve(judge_signer, tx), run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert stx.raw_transaction[2:40] not in repr(stx)
    wallet.discard(stx)


def test_a_transaction_that_leaves_nonce_gas_or_fees_open_is_refused(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    # One verdict, two payments: a wallet that filled these after the checks could sign
    # two different transactions (two nonces) under one verdict.
    full = transfer_tx(chain)
    from judge.errors import FingerprintError

    for field in ("nonce", "gas", "maxFeePerGas", "maxPriorityFeePerGas"):
        tx = {k: v for k, v in full.items() if k != field}
        # The fingerprint is the serialized unsigned transaction: there is none to approve.
        with pytest.raises(FingerprintError, match="every field pinned"):
            approve(judge_signer, tx)
        with pytest.raises(VerdictVoid, match="no canonical fingerprint"):
            wallet.sign_transaction(tx, approve(judge_signer, full), run_id=RUN, spend_cap_atomic=ONE_USDC)
    with pytest.raises(FingerprintError, match="every field pinned"):
        approve(judge_signer, {**full, "gasPrice": 10**9})  # two fee models in one tx
    fees = ("maxFeePerGas", "maxPriorityFeePerGas")
    legacy = {**{k: v for k, v in full.items() if k not in fees}, "gasPrice": 10**9}
    with pytest.raises(PayloadMismatch, match="no gasPrice"):
        wallet.sign_transaction(legacy, approve(judge_signer, legacy), run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert wallet.meter.ledger.rows() == []


def test_one_verdict_moves_money_once_across_two_wallet_databases(
    chain: Any, make_wallet: Callable[..., Wallet], judge_signer: VerdictSigner, tmp_path: Any
) -> None:
    # Two NIB_HOMEs, each with its own used-verdicts table, share the judge that issued the
    # verdict; the pre-signing re-check consumes it there, so the second wallet refuses.
    from judge.fingerprint import call_fingerprint, transaction_fingerprint
    from judge.jev import Judge, PaidCallRequest

    judge = Judge(judge_signer, allowed_assets={chain.chain_id: [chain.usdc]})
    first = make_wallet(db_path=tmp_path / "a" / "nib.db", recheck=judge.recheck)
    second = make_wallet(db_path=tmp_path / "b" / "nib.db", recheck=judge.recheck)
    tx = {**transfer_tx(chain), "nonce": first.nonces.allocate()}
    args = {"to": SELLER_ADDRESS, "amount": "0.1"}
    verdict = judge.decide(
        PaidCallRequest(
            tool="transfer_usdc", args=args, call_fingerprint=call_fingerprint("transfer_usdc", args),
            payload_fingerprint=transaction_fingerprint(tx), price=DIME, asset=chain.usdc,
            recipient=SELLER_ADDRESS, chain_id=chain.chain_id, remaining_budget=ONE_USDC,
            balance=10 * ONE_USDC, per_call_cap_atomic=ONE_USDC, spend_cap_atomic=ONE_USDC,
            missing=("receipt",), tool_facts=("receipt",),
        )
    )
    assert verdict.decision == "approve"
    seller_before = balance(chain, SELLER_ADDRESS)
    first.send_transaction(first.sign_transaction(tx, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC))
    with pytest.raises(VerdictReplayed, match="already used, as the judge's record shows"):
        second.sign_transaction(tx, verdict, run_id=RUN, spend_cap_atomic=ONE_USDC)
    assert second.meter.ledger.rows() == []
    assert balance(chain, SELLER_ADDRESS) == seller_before + DIME
