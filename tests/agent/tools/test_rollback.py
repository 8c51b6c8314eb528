"""A chain that loses blocks after payments settled (a devnet restarted from an older
state, a reorganisation): reconcile finds the rows whose transactions are gone, reopens
them, and closes each as the chain decides: one authorization submitted again by whoever
held it (re-proven, settled in the new transaction), the other expired unused (failed;
its signature, replayed from the attacker's side, is refused by the token). Reconcile is
then clean, with balances read back from the chain. Given the wallet's cancel path,
reconcile instead cancels an unused reopened authorization on chain in the same pass."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from _tools_support import approve, usdc_balance
from x402.http import decode_payment_signature_header

from agent.tools.x402.pay_http import PayHttpArgs, PayHttpTool
from chain.devkeys import AGENT, OUTSIDER, SELLER, dev_account
from chain.usdc import usdc_contract
from wallet.journal import verify
from wallet.ledger import Ledger
from wallet.reconcile import reconcile

AGENT_ADDR = dev_account(AGENT).address
SELLER_ADDR = dev_account(SELLER).address


async def _buy(tool: PayHttpTool, ctx: Any, signer: Any, *urls: str) -> None:
    """Buy each URL in turn, in one event loop (the recording client lives in it)."""
    for url in urls:
        quote = await tool.quote(PayHttpArgs.model_validate({"url": url}), ctx)
        assert (await tool.execute(quote, approve(signer, quote), ctx)).ok


def _submit(chain: Any, auth: dict[str, Any], signature: str) -> Any:
    """Submit a captured authorization from an unrelated account (anyone may), and wait
    until it is mined: the node answers eth_sendTransaction before its block exists, and a
    reconcile that read the head first missed the log (seen once in a full run under load:
    the row kept its lost transaction's hash)."""
    fn = usdc_contract(chain.w3, chain.usdc).functions.transferWithAuthorization(
        auth["from"], auth["to"], int(auth["value"]), int(auth["validAfter"]),
        int(auth["validBefore"]), bytes.fromhex(auth["nonce"][2:]), bytes.fromhex(signature[2:]),
    )
    tx = fn.transact({"from": dev_account(OUTSIDER).address})
    chain.w3.eth.wait_for_transaction_receipt(tx, timeout=30)
    return tx


def test_rows_settled_in_lost_blocks_are_reopened_then_reproven_or_dead(
    chain: Any, make_ctx: Any, wallet: Any, paywall: Any, judge_signer: Any
) -> None:
    seen: list[str] = []

    async def record(request: httpx.Request) -> None:
        if "payment-signature" in request.headers:
            seen.append(request.headers["payment-signature"])

    tool = PayHttpTool(paywall.url)
    head = chain.w3.eth.block_number
    before = usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, SELLER_ADDR)
    lost = chain.rpc("evm_snapshot")

    async def buy_two() -> None:
        async with httpx.AsyncClient(event_hooks={"request": [record]}, timeout=30) as http:
            ctx = make_ctx(wallet=wallet, allowlist=(paywall.url,), http=http)
            await _buy(tool, ctx, judge_signer, paywall.url + "/analytics/gas?blocks=3",
                       paywall.url + "/analytics/gas?blocks=4")

    asyncio.run(buy_two())
    rows = Ledger(wallet.meter.store).rows("run-test")
    assert [r.status for r in rows] == ["settled", "settled"]
    chain.rpc("evm_revert", [lost])  # the blocks that carried both settlements are gone
    assert (usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, SELLER_ADDR)) == before

    first = reconcile(wallet.meter.store, wallet.chain, chain.usdc, AGENT_ADDR, head + 1)
    assert set(first.rolled_back) == {r.id for r in rows}
    assert not first.clean and {r.status for r in first.pending} == {"signed"}
    assert all("rolled back" in Ledger(wallet.meter.store).get(r.id).note for r in rows)

    # Whoever holds the first signature submits it again: the chain proves it once more.
    payloads = [decode_payment_signature_header(h).payload for h in seen]
    assert len(payloads) == 2
    _submit(chain, payloads[0]["authorization"], payloads[0]["signature"])
    # The second is left until it expires (on the chain's clock and the wall clock).
    valid_before = int(payloads[1]["authorization"]["validBefore"])
    now = chain.w3.eth.get_block("latest")["timestamp"]
    chain.rpc("evm_increaseTime", [valid_before - now + 1])
    chain.rpc("evm_mine")
    done = reconcile(wallet.meter.store, wallet.chain, chain.usdc, AGENT_ADDR, head + 1,
                     clock=lambda: valid_before + 1)
    assert done.clean, done.to_dict()
    after = {r.id: r for r in Ledger(wallet.meter.store).rows("run-test")}
    assert [after[r.id].status for r in rows] == ["settled", "failed"]
    # Re-tied to the resubmission, a transaction the restored chain has (its hash equals
    # the lost one's when the same sender sent the same bytes at the same nonce).
    retied = after[rows[0].id].tx_hash
    assert retied and chain.w3.eth.get_transaction_receipt(retied)["status"] == 1
    assert usdc_balance(chain, SELLER_ADDR) == before[1] + rows[0].amount
    assert usdc_balance(chain, AGENT_ADDR) == before[0] - rows[0].amount
    with pytest.raises(Exception, match="expired"):  # the dead one is refused by the token
        _submit(chain, payloads[1]["authorization"], payloads[1]["signature"])
    assert verify(wallet.meter.store).ok


def _stored_payload(row: Any) -> dict[str, Any]:
    """The x402 payload the ledger row stored (its PAYMENT-SIGNATURE header)."""
    return dict(decode_payment_signature_header(json.loads(str(row.x402_payment))[1]).payload)


def test_with_the_wallet_reconcile_reties_a_resubmitted_row_and_cancels_the_other(
    chain: Any, make_ctx: Any, wallet: Any, paywall: Any, judge_signer: Any
) -> None:
    """Given the wallet's cancel path, reconcile closes a rollback in one pass and without
    moving any clock: the authorization someone submitted again on the restored chain is
    re-tied and settled; the unused one is cancelled on chain (the cancel recorded on the
    row), and its stored signature, submitted from the attacker's side, reverts."""
    head = chain.w3.eth.block_number
    before = usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, SELLER_ADDR)
    lost = chain.rpc("evm_snapshot")

    async def buy_two() -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            ctx = make_ctx(wallet=wallet, allowlist=(paywall.url,), http=http)
            await _buy(PayHttpTool(paywall.url), ctx, judge_signer,
                       paywall.url + "/analytics/gas?blocks=3", paywall.url + "/analytics/gas?blocks=4")

    asyncio.run(buy_two())
    rows = Ledger(wallet.meter.store).rows("run-test")
    chain.rpc("evm_revert", [lost])  # both settlements are gone
    used, unused = (_stored_payload(r) for r in rows)
    _submit(chain, used["authorization"], used["signature"])  # someone resubmits the first

    done = reconcile(wallet.meter.store, wallet.chain, chain.usdc, AGENT_ADDR, head + 1,
                     abandon=wallet.abandon_authorization)
    assert done.clean and done.rolled_back == (rows[1].id,), done.to_dict()
    after = [Ledger(wallet.meter.store).get(r.id) for r in rows]
    assert [r.status for r in after] == ["settled", "cancelled"]
    # Re-tied to the resubmission, which the restored chain has (the same hash as the lost
    # transaction's when the same sender sent the same bytes at the same nonce).
    assert after[0].tx_hash and chain.w3.eth.get_transaction_receipt(after[0].tx_hash)["status"] == 1
    assert after[1].tx_hash != rows[1].tx_hash
    assert chain.w3.eth.get_transaction_receipt(after[1].tx_hash)["status"] == 1  # the cancel
    assert wallet.chain.authorization_state(chain.usdc, AGENT_ADDR, str(rows[1].auth_nonce))
    with pytest.raises(Exception, match="used or canceled"):
        _submit(chain, unused["authorization"], unused["signature"])
    assert usdc_balance(chain, SELLER_ADDR) == before[1] + rows[0].amount
    assert usdc_balance(chain, AGENT_ADDR) == before[0] - rows[0].amount
    assert verify(wallet.meter.store).ok


def test_a_killed_devnet_restarts_behind_and_reconcile_closes_what_it_lost(
    tmp_path: Any, judge_signer: Any, events: Any
) -> None:
    """kill -9 with payments made after Anvil's last state dump: `up` restarts the chain
    on the same port from that dump (the settlements are gone), the devnet's paywall works
    on the new chain, and reconcile finds the lost rows and cancels their authorizations on
    chain through the wallet: clean at once, no clock moved, no stored signature usable."""
    import os
    import shutil
    import signal

    from agent.tools.base import ToolContext
    from chain import devnet
    from chain.client import ChainClient
    from chain.networks import get_network
    from wallet.keystore import KeyHandle
    from wallet.signer import Wallet

    home = tmp_path / "home"
    info = devnet.up(home, market=False)
    try:
        client = ChainClient(info.rpc_url)
        wallet = Wallet(KeyHandle(dev_account(AGENT)), db_path=tmp_path / "nib.db", chain=client,
                        usdc=info.usdc, trusted_judge=judge_signer.address, emit=events)

        def pay(*queries: str) -> None:
            info = devnet.status(home)
            assert info is not None and info.paywall_url

            async def go() -> None:
                async with httpx.AsyncClient(timeout=30) as http:
                    ctx = ToolContext(
                        run_id="run-kill", chain=client, wallet=wallet, emit=events, http=http,
                        network=get_network("anvil", rpc_url=info.rpc_url, usdc=info.usdc),
                        allowlist=(str(info.paywall_url),), spend_cap_atomic=1_000_000)
                    await _buy(PayHttpTool(str(info.paywall_url)), ctx, judge_signer,
                               *(f"{info.paywall_url}/analytics/gas?blocks={q}" for q in queries))
            asyncio.run(go())

        dev = type("D", (), {"w3": client.w3, "usdc": info.usdc})
        pay("2")
        devnet.stop_pid(info.pid)  # a clean stop dumps the state: the last dump it had
        state = home / "devnet" / "anvil-state.json"
        kept = shutil.copy(state, tmp_path / "dump.json")
        info = devnet.up(home, market=False)
        balances = usdc_balance(dev, AGENT_ADDR), usdc_balance(dev, SELLER_ADDR)
        pay("3", "4")  # in flight: settled on the chain, not in its last dump
        os.kill(info.pid, signal.SIGKILL)
        shutil.copy(kept, state)  # what a dump one second earlier holds
        again = devnet.up(home, market=False)
        assert again.rpc_url == info.rpc_url and again.usdc == info.usdc
        assert (usdc_balance(dev, AGENT_ADDR), usdc_balance(dev, SELLER_ADDR)) == balances

        # Reconcile with the wallet's cancel path: the two lost rows are found and their
        # authorizations made dead on chain at once, with no clock moved.
        found = reconcile(wallet.meter.store, client, info.usdc, AGENT_ADDR,
                          abandon=wallet.abandon_authorization)
        assert found.clean and len(found.matched) == 1, found.to_dict()
        assert len(found.rolled_back) == 2 and set(found.rolled_back) <= set(found.resolved)
        lost = [r for r in Ledger(wallet.meter.store).rows("run-kill") if r.id in found.rolled_back]
        assert [r.status for r in lost] == ["cancelled", "cancelled"]
        for row in lost:  # each names the cancel that killed it, mined on the restored chain
            assert "rolled back" in row.note and row.tx_hash
            assert client.w3.eth.get_transaction_receipt(row.tx_hash)["status"] == 1
            assert client.authorization_state(info.usdc, AGENT_ADDR, str(row.auth_nonce))
            # The stored signature, submitted from the attacker's side, is refused.
            payload = _stored_payload(row)
            with pytest.raises(Exception, match="used or canceled"):
                _submit(dev, payload["authorization"], payload["signature"])
        assert (usdc_balance(dev, AGENT_ADDR), usdc_balance(dev, SELLER_ADDR)) == balances
        pay("5")  # the devnet (its paywall restarted by `up`) works on the restarted chain
        assert usdc_balance(dev, SELLER_ADDR) == balances[1] + lost[0].amount
        done = reconcile(wallet.meter.store, client, info.usdc, AGENT_ADDR,
                         abandon=wallet.abandon_authorization)
        assert done.clean and len(done.matched) == 2 and not done.rolled_back, done.to_dict()
    finally:
        devnet.down(home)
