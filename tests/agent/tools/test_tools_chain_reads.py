"""Free chain reads against the real Anvil: values equal what web3 reads directly."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

import pytest
from web3 import Web3

from agent.errors import ToolArgsError, ToolError
from agent.tools.base import Observation, Tool, ToolContext
from agent.tools.chain_reads import (
    BaseFeeTool,
    BlockInfoTool,
    EthBalanceTool,
    GasPriceTool,
    TokenBalanceTool,
    TokenInfoTool,
    TokenTransfersTool,
    TxReceiptTool,
    UsdcTotalsTool,
    format_eth,
    format_gwei,
    format_token,
)
from chain.devkeys import AGENT, OUTSIDER, SELLER, dev_account
from chain.errors import RpcUnreachable
from chain.money import format_usdc
from chain.usdc import transfer

AGENT_ADDR = dev_account(AGENT).address


def run(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Observation:
    return asyncio.run(tool.run(tool.parse_args(args), ctx))


# --------------------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    ("atomic", "text"),
    [
        (1_500_000, "1.50 USDC"),
        (1_234_567, "1.234567 USDC"),
        (100_000_000, "100.00 USDC"),
        (1, "0.000001 USDC"),
        (0, "0.00 USDC"),
    ],
)
def test_format_usdc_is_exact(atomic: int, text: str) -> None:
    assert format_usdc(atomic) == text


def test_gwei_and_token_formatting_is_exact() -> None:
    assert format_gwei(875_000_000) == "0.875"
    assert format_gwei(1_000_000_007) == "1.000000007"
    assert format_gwei(0) == "0"
    assert format_token(10**18, 18, "WETH") == "1.00 WETH"
    assert format_token(7, 0, "X") == "7 X"


# --------------------------------------------------------------------------- arguments


def test_address_args_accept_lower_and_checksum_and_return_checksum() -> None:
    tool = EthBalanceTool()
    assert tool.parse_args({"address": AGENT_ADDR.lower()}).address == AGENT_ADDR  # type: ignore[attr-defined]
    assert tool.parse_args({"address": f"  {AGENT_ADDR} "}).address == AGENT_ADDR  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("address", "needle"),
    [
        ("0x1234", "0x + 40 hex digits"),
        ("70997970C51812dc3A010C7d01b50e0d17dc79C8", "0x-prefixed"),
        ("0x70997970C51812DC3A010C7D01B50E0D17DC79c8", "EIP-55 checksum"),
    ],
)
def test_bad_addresses_are_refused_with_the_fix(address: str, needle: str) -> None:
    with pytest.raises(ToolArgsError) as err:
        EthBalanceTool().parse_args({"address": address})
    assert needle in str(err.value)
    assert "eth_balance: invalid arguments (address:" in str(err.value)


def test_tx_hash_and_lookback_are_validated() -> None:
    with pytest.raises(ToolArgsError, match="32-byte transaction hash"):
        TxReceiptTool().parse_args({"tx_hash": "0xabc"})
    with pytest.raises(ToolArgsError, match="blocks"):
        TokenTransfersTool().parse_args({"blocks": 0})
    with pytest.raises(ToolArgsError, match="blocks"):
        TokenTransfersTool().parse_args({"blocks": 10_001})
    with pytest.raises(ToolArgsError, match="unexpected: Extra inputs are not permitted"):
        BaseFeeTool().parse_args({"unexpected": 1})
    with pytest.raises(ToolArgsError, match="block"):
        BlockInfoTool().parse_args({"block": -1})


# --------------------------------------------------------------------------- reads


def test_base_fee_and_gas_price_match_web3(
    anvil: Any, make_ctx: Callable[..., ToolContext]
) -> None:
    ctx = make_ctx()
    obs = run(BaseFeeTool(), {}, ctx)
    block = anvil.w3.eth.get_block("latest")
    assert obs.ok and obs.facts == {"base_fee_gwei": format_gwei(block["baseFeePerGas"])}
    assert Decimal(obs.facts["base_fee_gwei"]) * 10**9 == block["baseFeePerGas"]
    assert obs.summary.startswith("base fee ") and "\n" not in obs.summary

    at_one = run(BaseFeeTool(), {"block": 1}, ctx)
    one = anvil.w3.eth.get_block(1)
    assert at_one.facts == {"base_fee_gwei": format_gwei(one["baseFeePerGas"])}
    assert at_one.data["block_number"] == 1
    with pytest.raises(ToolError, match="does not exist yet"):
        run(BaseFeeTool(), {"block": block["number"] + 5}, ctx)

    obs = run(GasPriceTool(), {}, ctx)
    assert obs.data["gas_price_wei"] == anvil.w3.eth.gas_price
    assert obs.facts["gas_price_gwei"] == format_gwei(anvil.w3.eth.gas_price)


def test_block_info_latest_and_explicit(anvil: Any, make_ctx: Callable[..., ToolContext]) -> None:
    ctx = make_ctx()
    obs = run(BlockInfoTool(), {}, ctx)
    head = anvil.w3.eth.get_block("latest")
    assert obs.facts == {
        "block_number": str(head["number"]),
        "block_timestamp": str(head["timestamp"]),
        "block_gas_used": str(head["gasUsed"]),
        "block_gas_limit": str(head["gasLimit"]),
        "block_tx_count": str(len(head["transactions"])),
        "block_fullness": _fullness(head["gasUsed"], head["gasLimit"]),
    }
    obs = run(BlockInfoTool(), {"block": 0}, ctx)
    genesis = anvil.w3.eth.get_block(0)
    assert obs.facts["block_number"] == "0"
    assert obs.facts["block_timestamp"] == str(genesis["timestamp"])


def _fullness(used: int, limit: int) -> str:
    """A block's fullness as the tool states it, computed here another way: a Decimal
    quotient far past the 2 places kept, rounded half up once, then its basis."""
    with localcontext() as exact:
        exact.prec = 60
        share = (Decimal(used) * 100 / Decimal(limit)).quantize(Decimal("0.01"), ROUND_HALF_UP)
    return f"{share}% ({used} of {limit} gas)"


def _raw_block(chain: Any, number: int) -> dict[str, Any]:
    """The block as the node answers eth_getBlockByNumber, read past web3's formatting."""
    found = chain.w3.provider.make_request("eth_getBlockByNumber", [hex(number), False])
    return dict(found["result"])


def test_block_info_reads_gas_used_gas_limit_and_tx_count_as_the_node_states_them(
    chain: Any, make_ctx: Callable[..., ToolContext]
) -> None:
    # Two transactions mined in one block, then an empty block: each against the raw RPC.
    agent, seller = dev_account(AGENT).address, dev_account(SELLER).address
    chain.rpc("evm_setAutomine", [False])
    try:
        hashes = [chain.rpc("eth_sendTransaction", [{"from": a, "to": b, "value": "0x1"}])
                  for a, b in ((agent, seller), (seller, agent))]  # fmt: skip
        chain.rpc("evm_mine")
    finally:
        chain.rpc("evm_setAutomine", [True])
    full = chain.w3.eth.get_transaction_receipt(hashes[0])["blockNumber"]
    chain.rpc("evm_mine")
    empty = chain.w3.eth.block_number
    ctx = make_ctx()
    for number, txs in ((full, 2), (empty, 0)):
        raw = _raw_block(chain, number)
        obs = run(BlockInfoTool(), {"block": number}, ctx)
        assert len(raw["transactions"]) == txs
        assert obs.facts["block_gas_used"] == str(int(raw["gasUsed"], 16))
        assert obs.facts["block_gas_limit"] == str(int(raw["gasLimit"], 16))
        assert obs.facts["block_tx_count"] == str(txs)
        assert obs.facts["block_fullness"] == _fullness(int(raw["gasUsed"], 16),
                                                        int(raw["gasLimit"], 16))
        assert f"{txs} transactions, gas used {int(raw['gasUsed'], 16)} of a gas limit of " \
            f"{int(raw['gasLimit'], 16)}" in obs.summary
    receipts = [chain.w3.eth.get_transaction_receipt(h) for h in hashes]
    assert int(_raw_block(chain, full)["gasUsed"], 16) == sum(r["gasUsed"] for r in receipts) > 0
    latest = run(BlockInfoTool(), {}, ctx)
    assert latest.facts["block_number"] == str(empty) and latest.facts["block_tx_count"] == "0"
    assert latest.facts["block_gas_used"] == "0"


def test_block_info_reads_a_blocks_fullness_from_its_gas_used_and_gas_limit(
    chain: Any, make_ctx: Callable[..., ToolContext]
) -> None:
    # A transfer (21000 gas) in a block whose gas limit is 32000: 65.625% exactly, stated
    # 65.63% (half up, where half even would say 65.62), with its basis. Then an empty
    # block whose gas limit is 0: no share, and no division by zero.
    agent, seller = dev_account(AGENT).address, dev_account(SELLER).address
    limit_before = int(_raw_block(chain, chain.w3.eth.block_number)["gasLimit"], 16)
    chain.rpc("evm_setBlockGasLimit", [hex(32_000)])
    try:
        tx = chain.rpc("eth_sendTransaction", [{"from": agent, "to": seller, "value": "0x1"}])
        # The node answers eth_sendTransaction before its automined block exists: wait.
        mined = chain.w3.eth.wait_for_transaction_receipt(tx, timeout=30)["blockNumber"]
        chain.rpc("evm_setBlockGasLimit", ["0x0"])
        chain.rpc("evm_mine")
        unlimited = chain.w3.eth.block_number
    finally:
        chain.rpc("evm_setBlockGasLimit", [hex(limit_before)])
    ctx = make_ctx()
    raw = _raw_block(chain, mined)
    assert (raw["gasUsed"], raw["gasLimit"]) == (hex(21_000), hex(32_000))
    obs = run(BlockInfoTool(), {"block": mined}, ctx)
    assert obs.facts["block_fullness"] == _fullness(21_000, 32_000) == "65.63% (21000 of 32000 gas)"
    assert obs.data["fullness_percent"] == "65.63"
    assert "gas used 21000 of a gas limit of 32000 (65.63% full, rounded half up to 2 places)" \
        in obs.summary
    raw = _raw_block(chain, unlimited)
    assert (raw["gasUsed"], raw["gasLimit"], raw["transactions"]) == ("0x0", "0x0", [])
    obs = run(BlockInfoTool(), {"block": unlimited}, ctx)
    assert obs.facts["block_fullness"] == "none: the gas limit is 0 (0 of 0 gas)"
    assert obs.data["fullness_percent"] is None
    assert "gas used 0 of a gas limit of 0 (no share: its gas limit is 0)" in obs.summary
    assert obs.facts["block_gas_used"] == obs.facts["block_gas_limit"] == "0"


def test_block_info_beyond_head_is_a_tool_error(
    anvil: Any, make_ctx: Callable[..., ToolContext]
) -> None:
    head = anvil.w3.eth.block_number
    with pytest.raises(ToolError, match=f"the chain head is {head}"):
        run(BlockInfoTool(), {"block": head + 1000}, make_ctx())


def test_eth_and_usdc_balances_match_web3(anvil: Any, make_ctx: Callable[..., ToolContext]) -> None:
    ctx = make_ctx()
    obs = run(EthBalanceTool(), {"address": AGENT_ADDR}, ctx)
    wei = anvil.w3.eth.get_balance(AGENT_ADDR)
    assert obs.data["wei"] == wei
    assert Decimal(obs.facts["eth_balance"].removesuffix(" ETH")) * 10**18 == wei

    obs = run(TokenBalanceTool(), {"address": AGENT_ADDR.lower()}, ctx)
    atomic = obs.data["atomic"]
    from _tools_support import usdc_balance

    assert atomic == usdc_balance(anvil, AGENT_ADDR)
    assert obs.facts == {"usdc_balance": format_usdc(atomic)}
    assert obs.data["display"] == format_usdc(atomic)
    assert TokenBalanceTool().facts_for(TokenBalanceTool().parse_args({"address": AGENT_ADDR})) == (
        "usdc_balance",
    )


def test_token_info_matches_the_contract(anvil: Any, make_ctx: Callable[..., ToolContext]) -> None:
    obs = run(TokenInfoTool(), {}, make_ctx())
    from chain.usdc import usdc_contract

    token = usdc_contract(anvil.w3, anvil.usdc)
    supply = token.functions.totalSupply().call()
    assert obs.facts == {
        "token_name": token.functions.name().call(),
        "token_symbol": token.functions.symbol().call(),
        "token_decimals": str(token.functions.decimals().call()),
        "token_supply": format_usdc(supply),
        "token_issuer": obs.facts["token_issuer"],
    }
    assert obs.data["supply_atomic"] == supply
    # The issuer on this chain is the contract's owner(), read apart from the tool here.
    owner = anvil.w3.eth.call({"to": anvil.usdc, "data": "0x8da5cb5b"})[-20:]
    assert obs.facts["token_issuer"].startswith(Web3.to_checksum_address(owner) + " (owner() of")


def test_token_info_of_a_non_contract_names_the_fix(make_ctx: Callable[..., ToolContext]) -> None:
    with pytest.raises(ToolError, match="no contract at token address"):
        run(TokenInfoTool(), {"token": dev_account(OUTSIDER).address}, make_ctx())


def test_receipt_and_transfers_after_a_real_transfer(
    chain: Any, make_ctx: Callable[..., ToolContext]
) -> None:
    tx_hash = transfer(
        chain.w3, chain.usdc, dev_account(AGENT), dev_account(SELLER).address, 250_000
    )
    ctx = make_ctx()
    obs = run(TxReceiptTool(), {"tx_hash": tx_hash.upper().replace("0X", "0x")}, ctx)
    receipt = chain.w3.eth.get_transaction_receipt(tx_hash)
    mined_at = chain.w3.eth.get_block(receipt["blockNumber"])["timestamp"]
    price = int(receipt["effectiveGasPrice"])
    assert obs.facts == {"tx_status": "success", "tx_gas_used": str(receipt["gasUsed"]),
                         "tx_block": str(receipt["blockNumber"]), "tx_time": str(mined_at),
                         "tx_gas_price": format_gwei(price),
                         "tx_fee": f"{format_eth(receipt['gasUsed'] * price)} ({receipt['gasUsed']} "
                                   f"gas at {format_gwei(price)} gwei)"}  # fmt: skip
    assert obs.data["block_number"] == receipt["blockNumber"]
    chain.rpc("evm_mine", [mined_at + 100])  # a later head: its time is no answer here
    again = run(TxReceiptTool(), {"tx_hash": tx_hash}, ctx)
    assert again.facts["tx_time"] == str(mined_at), again.facts

    # A block fact of the block it was mined in (``of_tx``): read there, never at the head.
    block = chain.w3.eth.get_block(receipt["blockNumber"])
    fee = run(BaseFeeTool(), {"of_tx": tx_hash}, ctx)
    assert fee.data["block_number"] == receipt["blockNumber"], fee.data
    assert fee.facts == {"base_fee_gwei": format_gwei(int(block["baseFeePerGas"]))}, fee.facts
    info = run(BlockInfoTool(), {"of_tx": tx_hash}, ctx)
    assert info.facts["block_tx_count"] == str(len(block["transactions"])), info.facts
    assert info.facts["block_timestamp"] == str(mined_at), info.facts
    with pytest.raises(ToolArgsError, match="expected one of them"):
        BaseFeeTool().parse_args({"block": 1, "of_tx": tx_hash})

    seller = dev_account(SELLER).address
    obs = run(TokenTransfersTool(), {"address": seller, "blocks": 5}, ctx)
    logs = chain.w3.eth.get_logs(
        {
            "address": chain.usdc,
            "fromBlock": max(0, chain.w3.eth.block_number - 4),
            "toBlock": "latest",
        }
    )
    touching = [
        log
        for log in logs
        if seller.lower()[2:] in (log["topics"][1].hex() + log["topics"][2].hex())
    ]
    assert obs.facts["transfer_count"] == str(len(touching))
    assert int(obs.facts["transfer_count"]) >= 1
    top = max(touching, key=lambda log: int(log["data"].hex(), 16))
    largest = format_usdc(int(top["data"].hex(), 16))
    assert obs.facts["transfer_max"].startswith(f"{largest} from ")
    assert "0x" + top["transactionHash"].hex().removeprefix("0x") in obs.facts["transfer_max"]
    assert obs.data["latest"][-1]["tx_hash"] == tx_hash
    everyone = run(TokenTransfersTool(), {}, ctx)
    assert int(everyone.facts["transfer_count"]) >= 2  # the fixture's mint and this transfer
    # An explicit range: only the block of this transfer.
    mined = receipt["blockNumber"]
    just = run(TokenTransfersTool(), {"from_block": mined, "to_block": mined}, ctx)
    in_block = [log for log in logs if log["blockNumber"] == mined]
    assert just.facts["transfer_count"] == str(len(in_block))
    assert (just.data["from_block"], just.data["to_block"]) == (mined, mined)
    with pytest.raises(ToolError, match="is not a range of this chain"):
        run(TokenTransfersTool(), {"from_block": mined, "to_block": mined + 1000}, ctx)


def test_the_largest_transfer_says_when_it_is_a_tie(
    chain: Any, make_ctx: Callable[..., ToolContext]
) -> None:
    # Outside round 23: of three equal largest transfers one was named, with no word of a tie.
    first = chain.w3.eth.block_number + 1
    hashes = [transfer(chain.w3, chain.usdc, dev_account(AGENT), dev_account(SELLER).address,
                       777_000) for _ in range(3)]  # fmt: skip
    obs = run(TokenTransfersTool(), {"from_block": first, "to_block": chain.w3.eth.block_number},
              make_ctx())  # fmt: skip
    assert obs.facts["transfer_max"].startswith("0.777 USDC from "), obs.facts
    assert f"(tx {hashes[0]}); a tie: 3 transfers of this size, the first shown" in \
        obs.facts["transfer_max"], obs.facts
    one = run(TokenTransfersTool(), {"from_block": first, "to_block": first}, make_ctx())
    assert "tie" not in one.facts["transfer_max"], one.facts


def test_the_transfers_are_listed_each_up_to_the_cap_and_never_cut_short(
    chain: Any, make_ctx: Callable[..., ToolContext]
) -> None:
    # Outside round 32: "Show me the USDC transfers in the last 10 blocks" got a count.
    from agent.tools.chain_reads import MAX_LISTED_TRANSFERS

    first = chain.w3.eth.block_number + 1
    sent = [(transfer(chain.w3, chain.usdc, dev_account(AGENT), dev_account(SELLER).address,
                      1_000 + n), 1_000 + n) for n in range(MAX_LISTED_TRANSFERS + 1)]  # fmt: skip
    last = chain.w3.eth.block_number
    ctx = make_ctx()
    two = run(TokenTransfersTool(), {"from_block": first, "to_block": first + 1}, ctx)
    listed = two.facts["transfer_list"]
    assert listed.startswith(f"2 in blocks {first}..{first + 1}: "), listed
    agent, seller = dev_account(AGENT).address, dev_account(SELLER).address
    for tx, amount in sent[:2]:
        block = chain.w3.eth.get_transaction_receipt(tx)["blockNumber"]
        assert (f"block {block}: {format_usdc(amount)} from {agent} to {seller} (tx {tx})"
                in listed), listed
    cap = run(TokenTransfersTool(), {"from_block": first + 1, "to_block": last}, ctx)
    assert cap.facts["transfer_list"].startswith(f"{MAX_LISTED_TRANSFERS} in blocks"), cap.facts
    assert all(tx in cap.facts["transfer_list"] for tx, _ in sent[1:])
    over = run(TokenTransfersTool(), {"from_block": first, "to_block": last}, ctx)
    assert "transfer_list" not in over.facts, over.facts  # a count, never a list cut short
    assert over.facts["transfer_count"] == str(MAX_LISTED_TRANSFERS + 1)
    assert f"more than {MAX_LISTED_TRANSFERS}: not listed one by one" in over.summary
    none = run(TokenTransfersTool(), {"address": dev_account(OUTSIDER).address, "blocks": 3}, ctx)
    assert none.facts["transfer_list"].startswith("none: no USDC transfers in blocks"), none.facts


def test_transfers_are_read_one_way_from_a_sender_to_a_recipient(
    chain: Any, make_ctx: Callable[..., ToolContext]
) -> None:
    # Outside round 33: "the USDC transfers to 0xB" listed those 0xB sent too.
    agent, seller, outsider = (dev_account(k) for k in (AGENT, SELLER, OUTSIDER))
    first = chain.w3.eth.block_number + 1
    to_seller = transfer(chain.w3, chain.usdc, agent, seller.address, 11_000)
    to_outsider = transfer(chain.w3, chain.usdc, agent, outsider.address, 12_000)
    from_seller = transfer(chain.w3, chain.usdc, seller, outsider.address, 5_000)  # of the 11,000
    span = {"from_block": first, "to_block": chain.w3.eth.block_number}
    ctx = make_ctx()

    def txs(**args: str) -> set[str]:
        obs = run(TokenTransfersTool(), {**span, **args}, ctx)
        return {row for row in (to_seller, to_outsider, from_seller) if row in obs.facts["transfer_list"]}

    assert txs(recipient=seller.address) == {to_seller}
    assert txs(sender=seller.address) == {from_seller}
    assert txs(address=seller.address) == {to_seller, from_seller}
    assert txs(sender=agent.address, recipient=outsider.address) == {to_outsider}
    obs = run(TokenTransfersTool(), {**span, "recipient": seller.address}, ctx)
    assert obs.facts["transfer_count"] == "1" and f" to {seller.address} " in obs.summary + " "
    with pytest.raises(ToolArgsError, match="expected address .either way. or sender"):
        TokenTransfersTool().parse_args({"address": seller.address, "sender": agent.address})


def test_usdc_totals_sum_the_transfer_logs_each_way(
    chain: Any, make_ctx: Callable[..., ToolContext]
) -> None:
    agent, seller, outsider = (dev_account(k).address for k in (AGENT, SELLER, OUTSIDER))
    first = chain.w3.eth.block_number + 1
    transfer(chain.w3, chain.usdc, dev_account(AGENT), seller, 120_000)
    transfer(chain.w3, chain.usdc, dev_account(AGENT), outsider, 30_000)
    transfer(chain.w3, chain.usdc, dev_account(SELLER), agent, 7_000)
    last = chain.w3.eth.block_number
    ctx = make_ctx()
    span = {"address": agent, "from_block": first, "to_block": last}
    obs = run(UsdcTotalsTool(), span, ctx)
    assert (obs.data["sent_atomic"], obs.data["received_atomic"]) == (150_000, 7_000)
    assert obs.facts["usdc_sent_total"] == (
        f"0.15 USDC (150000 atomic) sent by {agent} in 2 transfers, blocks {first}..{last}"
    )
    assert obs.facts["usdc_received_total"].startswith("0.007 USDC (7000 atomic) received by")
    only = run(UsdcTotalsTool(), {**span, "counterparty": seller}, ctx)
    said = only.facts["usdc_sent_total"]
    assert said.startswith(f"0.12 USDC (120000 atomic) sent by {agent} to {seller} in 1 transfer,")
    assert only.data["received_atomic"] == 7_000
    recent = run(UsdcTotalsTool(), {"address": agent, "blocks": 1}, ctx)  # the last block only
    assert (recent.data["sent_atomic"], recent.data["received_atomic"]) == (0, 7_000)
    with pytest.raises(ToolError, match="is not a range of this chain"):
        run(UsdcTotalsTool(), {"address": agent, "from_block": last + 1}, ctx)


def test_a_hash_the_node_does_not_know_fails_for_good_and_a_pending_one_may_be_retried(
    chain: Any, make_ctx: Callable[..., ToolContext]
) -> None:
    """The outside tester's Q23 (round 19): a made-up hash was looked up twice and the run
    stopped on its failure budget ("failures are retryable"). No transaction by that hash
    is a fact of the chain: asking again cannot find it. One waiting in the pool may be
    mined by the next try."""
    from agent.errors import PermanentToolError

    with pytest.raises(PermanentToolError, match="no transaction 0x" + "ab" * 32 + " on anvil"):
        run(TxReceiptTool(), {"tx_hash": "0x" + "ab" * 32}, make_ctx())
    with pytest.raises(PermanentToolError, match="block_info: no transaction 0x" + "ab" * 32):
        run(BlockInfoTool(), {"of_tx": "0x" + "ab" * 32}, make_ctx())
    agent, seller = dev_account(AGENT).address, dev_account(SELLER).address
    chain.rpc("evm_setAutomine", [False])
    try:
        pending = chain.rpc("eth_sendTransaction", [{"from": agent, "to": seller, "value": "0x1"}])
        with pytest.raises(ToolError, match="waiting in the node's pool") as refused:
            run(TxReceiptTool(), {"tx_hash": pending}, make_ctx())
        assert not isinstance(refused.value, PermanentToolError)
    finally:
        chain.rpc("evm_setAutomine", [True])
        chain.rpc("evm_mine")
    assert run(TxReceiptTool(), {"tx_hash": pending}, make_ctx()).facts["tx_status"] == "success"


def test_unreachable_rpc_propagates_as_chain_error(
    anvil: Any, make_ctx: Callable[..., ToolContext]
) -> None:
    from chain.client import ChainClient
    from chain.devnet import free_port

    dead = ChainClient(f"http://127.0.0.1:{free_port()}", timeout_s=1)
    with pytest.raises(RpcUnreachable, match="is unreachable"):
        run(BaseFeeTool(), {}, make_ctx(chain=dead))


def test_missing_usdc_configuration_names_the_fix(
    anvil: Any, make_ctx: Callable[..., ToolContext]
) -> None:
    from chain.networks import get_network

    ctx = make_ctx(network=get_network("anvil", rpc_url=anvil.rpc_url))
    with pytest.raises(ToolError, match="no USDC address is configured"):
        run(TokenBalanceTool(), {"address": AGENT_ADDR}, ctx)
