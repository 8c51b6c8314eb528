"""Reconcile from its checkpoint (``nib audit reconcile``), on a real Anvil: a pass reads
the rows written since the last one and the rows it left open, never the proven ones
again, and still catches what a full pass catches: a chain that lost blocks below the
checkpoint, a row still pending or unproven, a row edited since."""

from __future__ import annotations

import sqlite3
from typing import Any

from _wallet_support import AGENT_ADDRESS, ONE_USDC, approve, quote, submit_authorization

from chain.client import ChainClient
from chain.devkeys import AGENT, DEPLOYER, OUTSIDER, dev_account
from chain.usdc import mint, transfer
from judge.verdict import VerdictSigner
from wallet.reconcile import reconcile
from wallet.signer import SignedTypedData, Wallet

RUN = "run-ckpt"


class CountingChain(ChainClient):
    """The real client, counting the per-row reads a pass makes."""

    def __init__(self, rpc_url: str, chain_id: int) -> None:
        super().__init__(rpc_url, chain_id)
        self.per_row: list[str] = []

    def authorization_state(self, token: str, authorizer: str, nonce: str) -> bool:
        self.per_row.append(f"authorizationState {nonce}")
        return super().authorization_state(token, authorizer, nonce)

    def receipt(self, tx_hash: str) -> Any:
        self.per_row.append(f"receipt {tx_hash}")
        return super().receipt(tx_hash)


def _pay(chain: Any, wallet: Wallet, judge_signer: VerdictSigner) -> SignedTypedData:
    """One x402 payment the seller settled and the wallet recorded as settled."""
    payload = quote(chain)
    signed = wallet.sign_typed_data(payload, approve(judge_signer, payload), run_id=RUN,
                                    spend_cap_atomic=ONE_USDC)
    wallet.settle(signed, submit_authorization(chain, signed))
    return signed


def _reconcile(db_path: Any, client: ChainClient, chain: Any, start: int) -> Any:
    return reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start, checkpoint=True)


def test_a_pass_from_the_checkpoint_reads_only_the_rows_written_since(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, db_path: Any
) -> None:
    start = chain.w3.eth.block_number + 1
    old = [_pay(chain, wallet, judge_signer) for _ in range(3)]
    client = CountingChain(chain.rpc_url, chain.chain_id)
    first = _reconcile(db_path, client, chain, start)  # no checkpoint yet: a full pass
    assert first.clean and first.proven_through is None and len(first.matched) == 3
    proven = chain.w3.eth.block_number

    new = _pay(chain, wallet, judge_signer)
    client.per_row.clear()
    second = _reconcile(db_path, client, chain, start)
    assert second.clean, second.to_dict()
    assert second.proven_through == proven
    assert [m.ledger_id for m in second.matched] == [new.ledger_id]
    # Nothing about the rows proven before is read again, from the chain or the ledger.
    assert not [read for read in client.per_row for s in old if s.auth_nonce in read]
    assert {r.id for r in second.unmatched_ledger} <= {new.ledger_id}
    # A full pass (the default) still reads everything, and leaves the checkpoint alone.
    assert len(reconcile(db_path, client, chain.usdc, AGENT_ADDRESS, start).matched) == 4
    assert _reconcile(db_path, client, chain, start).proven_through == chain.w3.eth.block_number


def test_a_chain_that_lost_blocks_below_the_checkpoint_is_caught(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, db_path: Any
) -> None:
    """Issue 26 with a checkpoint: a settlement is proven and checkpointed, then the chain
    goes back to before it and grows past the checkpoint's height again (the block number
    exists, another block). The block's hash differs, so the pass is full and the row
    whose transaction is gone is reopened: it is not skipped as proven."""
    start = chain.w3.eth.block_number + 1
    before = chain.rpc("evm_snapshot")
    paid = _pay(chain, wallet, judge_signer)
    client = ChainClient(chain.rpc_url, chain.chain_id)
    proven = _reconcile(db_path, client, chain, start)
    assert proven.clean and [m.ledger_id for m in proven.matched] == [paid.ledger_id]
    height = chain.w3.eth.block_number

    chain.rpc("evm_revert", [before])
    while chain.w3.eth.block_number < height + 1:
        chain.rpc("evm_mine")
    again = _reconcile(db_path, client, chain, start)
    assert again.proven_through is None  # not from the checkpoint: its block is another
    assert again.rolled_back == (paid.ledger_id,) and not again.clean, again.to_dict()


def test_rows_left_open_are_read_again_until_the_chain_decides(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, db_path: Any
) -> None:
    """A signed row not yet submitted and a row settled under a tx that never used its
    authorization (unproven) are not proven by a pass: the next pass from its checkpoint
    reports them again, and settles the first when its money moves."""
    start = chain.w3.eth.block_number + 1
    client = ChainClient(chain.rpc_url, chain.chain_id)
    waiting, foreign = quote(chain), quote(chain)
    pending = wallet.sign_typed_data(waiting, approve(judge_signer, waiting), run_id=RUN,
                                     spend_cap_atomic=ONE_USDC)
    lying = wallet.sign_typed_data(foreign, approve(judge_signer, foreign), run_id=RUN,
                                   spend_cap_atomic=ONE_USDC)
    decoy = mint(chain.w3, chain.usdc, dev_account(DEPLOYER), dev_account(OUTSIDER).address, 1)
    wallet.meter.settle(lying.reservation, decoy)  # the unchecked low-level record
    first = _reconcile(db_path, client, chain, start)
    assert [r.id for r in first.pending] == [pending.ledger_id]
    assert [r.id for r in first.unproven] == [lying.ledger_id]

    chain.rpc("evm_mine")
    second = _reconcile(db_path, client, chain, start)
    assert second.proven_through is not None
    assert [r.id for r in second.pending] == [pending.ledger_id]
    assert [r.id for r in second.unproven] == [lying.ledger_id] and not second.clean

    settled_in = submit_authorization(chain, pending)
    third = _reconcile(db_path, client, chain, start)
    assert third.proven_through is not None
    assert [(m.ledger_id, m.tx_hash) for m in third.matched] == [(pending.ledger_id, settled_in)]
    assert third.pending == () and [r.id for r in third.unproven] == [lying.ledger_id]


def test_a_row_edited_since_the_checkpoint_is_named_and_a_cut_journal_makes_a_full_pass(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, db_path: Any
) -> None:
    start = chain.w3.eth.block_number + 1
    client = ChainClient(chain.rpc_url, chain.chain_id)
    _pay(chain, wallet, judge_signer)
    assert _reconcile(db_path, client, chain, start).clean
    paid = _pay(chain, wallet, judge_signer)

    amount = wallet.meter.ledger.get(paid.ledger_id).amount
    conn = sqlite3.connect(str(db_path))  # someone lowers the new row's amount
    conn.execute("UPDATE wallet_spends SET amount = 1 WHERE id = ?", (paid.ledger_id,))
    conn.commit()
    edited = _reconcile(db_path, client, chain, start)
    assert edited.proven_through is not None and edited.ledger_check is not None
    assert any(f"ledger row {paid.ledger_id}: amount is 1" in p
               for p in edited.ledger_check.problems), edited.ledger_check
    assert not edited.clean
    # The tampered pass left no checkpoint: the next pass is a full one and names it too.
    again = _reconcile(db_path, client, chain, start)
    assert again.proven_through is None and not again.clean

    conn.execute("UPDATE wallet_spends SET amount = ? WHERE id = ?", (amount, paid.ledger_id))
    conn.commit()
    assert _reconcile(db_path, client, chain, start).clean  # checkpoint saved again
    conn.execute("DELETE FROM wallet_journal WHERE seq = (SELECT MAX(seq) FROM wallet_journal)")
    conn.commit()
    conn.close()
    cut = _reconcile(db_path, client, chain, start)  # the checkpoint's entry is gone
    assert cut.proven_through is None and not cut.clean


def test_money_gone_without_a_row_is_reported_by_every_pass_after(
    chain: Any, wallet: Wallet, judge_signer: VerdictSigner, db_path: Any
) -> None:
    """USDC sent with the wallet's key but not through the wallet stays an alarm: the pass
    that found it does not move the checkpoint past it, so later passes read it again."""
    start = chain.w3.eth.block_number + 1
    client = ChainClient(chain.rpc_url, chain.chain_id)
    _pay(chain, wallet, judge_signer)
    assert _reconcile(db_path, client, chain, start).clean
    rogue = transfer(chain.w3, chain.usdc, dev_account(AGENT), dev_account(OUTSIDER).address, 7)
    for _ in range(2):
        found = _reconcile(db_path, client, chain, start)
        assert [t.tx_hash for t in found.unmatched_onchain] == [rogue.lower()], found.to_dict()
        _pay(chain, wallet, judge_signer)  # the wallet goes on paying meanwhile


def test_the_checkpoint_works_the_same_on_postgresql(
    chain: Any, make_wallet: Any, judge_signer: VerdictSigner, pg_url: str
) -> None:
    wallet = make_wallet(db_path=pg_url)
    start = chain.w3.eth.block_number + 1
    client = ChainClient(chain.rpc_url, chain.chain_id)
    _pay(chain, wallet, judge_signer)
    assert _reconcile(pg_url, client, chain, start).proven_through is None
    proven = chain.w3.eth.block_number
    new = _pay(chain, wallet, judge_signer)
    second = _reconcile(pg_url, client, chain, start)
    assert second.clean and second.proven_through == proven, second.to_dict()
    assert [m.ledger_id for m in second.matched] == [new.ledger_id]
