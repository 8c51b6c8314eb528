"""usdc_transfer on a real Anvil: quote -> JEV judge -> wallet -> receipt, balances read back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from _tools_support import Events, approve, usdc_balance

from agent.errors import ToolArgsError, ToolError
from agent.tools.base import Quote, ToolContext
from agent.tools.transfer import (
    TransferArgs,
    UsdcTransferTool,
    parse_usdc_amount,
    transfer_calldata,
)
from chain.devkeys import AGENT, OUTSIDER, SELLER, dev_account
from chain.usdc import transfer as raw_transfer
from judge.fingerprint import call_fingerprint, transaction_fingerprint
from judge.jev import Judge, PaidCallRequest
from judge.verdict import VerdictSigner
from wallet.errors import VerdictVoid
from wallet.signer import Wallet

AGENT_ADDR = dev_account(AGENT).address
TO = dev_account(OUTSIDER).address


def quote_of(ctx: ToolContext, **args: Any) -> Quote:
    tool = UsdcTransferTool()
    parsed = TransferArgs.model_validate(tool.parse_args(args).model_dump())
    return asyncio.run(tool.quote(parsed, ctx))


@pytest.fixture
def ctx(make_ctx: Callable[..., ToolContext], wallet: Wallet) -> ToolContext:
    return make_ctx(wallet=wallet)


# --------------------------------------------------------------------------- amounts


@pytest.mark.parametrize(
    ("given", "atomic"),
    [
        (1_500_000, 1_500_000),
        ("1500000", 1_500_000),
        ("1.5 USDC", 1_500_000),
        ("0.000001 usdc", 1),
        (" 2 USDC ", 2_000_000),
    ],
)
def test_amounts_parse_exactly(given: Any, atomic: int) -> None:
    assert parse_usdc_amount(given) == atomic


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        (1.5, "never a float"),
        ("1.5", "with the unit"),
        ("1.0000001 USDC", "more than 6 decimal"),
        (0, "positive"),
        (-5, "positive"),
        ("5 ETH", "with the unit"),
        (True, "never a float"),
    ],
)
def test_bad_amounts_are_refused(given: Any, needle: str) -> None:
    with pytest.raises(ToolArgsError, match=needle):
        UsdcTransferTool().parse_args({"to": TO, "amount": given})


def test_calldata_is_the_erc20_transfer_encoding(anvil: Any) -> None:
    from chain.usdc import usdc_contract

    token = usdc_contract(anvil.w3, anvil.usdc)
    expected = token.encode_abi("transfer", [TO, 123])
    assert transfer_calldata(TO.lower(), 123) == expected


# --------------------------------------------------------------------------- end to end


def test_transfer_end_to_end_with_the_jev_judge(
    chain: Any, ctx: ToolContext, wallet: Wallet, judge_signer: VerdictSigner, events: Events
) -> None:
    tool = UsdcTransferTool()
    quote = quote_of(ctx, to=TO.lower(), amount="0.25 USDC")
    tx = quote.payload
    assert quote.kind == "transfer" and quote.amount == 250_000 and quote.recipient == TO
    assert quote.payload_fingerprint == transaction_fingerprint(tx)
    # Every field is pinned: the verdict covers the exact bytes signed.
    assert {"nonce", "gas", "maxFeePerGas", "maxPriorityFeePerGas", "type", "chainId"} <= set(tx)
    assert tx["nonce"] == chain.w3.eth.get_transaction_count(AGENT_ADDR, "pending")
    assert quote.meta["max_gas_wei"] == tx["gas"] * tx["maxFeePerGas"]

    judge = Judge(judge_signer, allowed_assets={31337: [chain.usdc]})
    balance = usdc_balance(chain, AGENT_ADDR)
    verdict = judge.decide(
        PaidCallRequest(
            tool=quote.tool,
            args=quote.args,
            call_fingerprint=call_fingerprint(quote.tool, quote.args),
            payload_fingerprint=quote.payload_fingerprint,
            price=quote.amount,
            asset=quote.asset,
            recipient=quote.recipient,
            chain_id=quote.chain_id,
            remaining_budget=1_000_000,
            balance=balance,
            per_call_cap=1_000_000,
            spend_cap=1_000_000,
            missing=("transfer_receipt",),
            tool_facts=tool.facts,
        )
    )
    assert verdict.decision == "approve", verdict.reason
    before_to = usdc_balance(chain, TO)

    obs = asyncio.run(tool.execute(quote, verdict, ctx))

    assert usdc_balance(chain, AGENT_ADDR) == balance - 250_000
    assert usdc_balance(chain, TO) == before_to + 250_000
    receipt = chain.w3.eth.get_transaction_receipt(obs.data["tx_hash"])
    assert receipt["status"] == 1 and receipt["from"] == AGENT_ADDR
    assert obs.gas_wei == receipt["gasUsed"] * receipt["effectiveGasPrice"] > 0
    assert obs.cost_usdc == 250_000
    assert obs.facts["transfer_receipt"].startswith(obs.data["tx_hash"] + " success: 0.25 USDC")
    [row] = wallet.meter.ledger.rows("run-test")
    assert (row.status, row.tx_hash, row.kind) == ("settled", obs.data["tx_hash"], "transfer")
    [gas] = wallet.meter.ledger.gas_rows("run-test")
    assert gas.wei == obs.gas_wei
    # A second transfer quotes the next nonce and goes through too.
    second = quote_of(ctx, to=TO, amount=1)
    assert second.payload["nonce"] == tx["nonce"] + 1
    asyncio.run(tool.execute(second, approve(judge_signer, second), ctx))
    assert usdc_balance(chain, TO) == before_to + 250_001


def test_payload_changed_after_approval_voids_the_verdict(
    chain: Any, ctx: ToolContext, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    quote = quote_of(ctx, to=TO, amount=100_000)
    verdict = approve(judge_signer, quote)
    tampered = Quote(
        **{**quote.__dict__, "payload": {**quote.payload, "data": transfer_calldata(TO, 900_000)}}
    )
    before = usdc_balance(chain, AGENT_ADDR)
    with pytest.raises(VerdictVoid, match="the payload changed after approval"):
        asyncio.run(UsdcTransferTool().execute(tampered, verdict, ctx))
    assert usdc_balance(chain, AGENT_ADDR) == before
    assert wallet.meter.ledger.rows() == []


def test_stale_nonce_is_refused_before_signing(
    chain: Any, ctx: ToolContext, wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    quote = quote_of(ctx, to=TO, amount=100_000)
    verdict = approve(judge_signer, quote)
    raw_transfer(chain.w3, chain.usdc, dev_account(AGENT), dev_account(SELLER).address, 1)
    with pytest.raises(ToolError, match="the quote is stale: it pins nonce"):
        asyncio.run(UsdcTransferTool().execute(quote, verdict, ctx))
    assert wallet.meter.ledger.rows() == [] and not wallet.meter.ledger.is_used(verdict.id)


def test_refusals_before_quoting(
    chain: Any, make_ctx: Callable[..., ToolContext], wallet: Wallet
) -> None:
    ctx = make_ctx(wallet=wallet)
    with pytest.raises(ToolError, match="less than the 1000.00 USDC"):
        quote_of(ctx, to=TO, amount="1000 USDC")
    with pytest.raises(ToolError, match="is the wallet itself"):
        quote_of(ctx, to=AGENT_ADDR, amount=1)
    listed = make_ctx(wallet=wallet, allowlist=(dev_account(SELLER).address, "http://x:1"))
    with pytest.raises(ToolError, match=f"recipient {TO} is not on the allowlist"):
        quote_of(listed, to=TO, amount=1)
    assert quote_of(listed, to=dev_account(SELLER).address, amount=1).amount == 1
    with pytest.raises(ToolError, match="no wallet is configured"):
        quote_of(make_ctx(), to=TO, amount=1)


def test_missing_cap_fails_closed(
    make_ctx: Callable[..., ToolContext], wallet: Wallet, judge_signer: VerdictSigner
) -> None:
    quote = quote_of(make_ctx(wallet=wallet), to=TO, amount=1)
    with pytest.raises(ToolError, match="spend cap in the tool context is 0"):
        asyncio.run(
            UsdcTransferTool().execute(
                quote, approve(judge_signer, quote), make_ctx(wallet=wallet, spend_cap_usdc=0)
            )
        )
    assert wallet.meter.ledger.rows() == []
