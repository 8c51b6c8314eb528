"""Free chain reads: fees, blocks, balances, token facts, receipts and recent transfers.

Each tool validates its arguments with a small pydantic model, reads through the
run's :class:`chain.client.ChainClient` in a worker thread (web3 is blocking), and
returns an observation whose ``facts`` hold exact values as strings. Chain errors
propagate as ``chain.errors`` types (the loop maps ``RpcUnreachable`` to
``chain-unreachable``); anything else a tool cannot answer raises ``ToolError``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)
from web3.exceptions import Web3Exception

from agent.errors import PermanentToolError, ToolError
from agent.tools.address import checked_address
from agent.tools.base import ArgsT, FreeLimits, Observation, Tool, ToolContext
from chain.client import Receipt, TransferLog, checksum_address
from chain.errors import RpcError
from chain.money import format_usdc

__all__ = [
    "AddressStr",
    "BaseFeeTool",
    "BlockInfoTool",
    "EthBalanceTool",
    "GasPriceTool",
    "TokenBalanceTool",
    "TokenInfoTool",
    "TokenTransfersTool",
    "TxHashStr",
    "TxReceiptTool",
    "UsdcTotalsTool",
    "chain_read_tools",
    "format_eth",
    "format_gwei",
    "format_token",
    "usdc_address",
]

T = TypeVar("T")

_HEX64 = re.compile(r"^0x[0-9a-fA-F]{64}\Z")
GWEI = Decimal(10) ** 9
WEI_PER_ETH = Decimal(10) ** 18
#: Upper bound of the transfer lookback: a bigger window makes eth_getLogs slow and large.
MAX_LOOKBACK_BLOCKS = 10_000


# ---------------------------------------------------------------------- argument types


def _address(value: str) -> str:
    return checksum_address(checked_address(value))


def _tx_hash(value: str) -> str:
    if not _HEX64.match(value):
        raise ValueError(
            f"found {value!r} ({len(value)} chars); expected a 32-byte transaction hash: "
            "0x followed by 64 hex digits"
        )
    return value.lower()


def _strip(value: object) -> object:
    return value.strip() if isinstance(value, str) else value


AddressStr = Annotated[str, BeforeValidator(_strip), AfterValidator(_address)]
"""A 0x address, returned in checksum form; a mixed-case typo is refused."""

TxHashStr = Annotated[
    str,
    BeforeValidator(_strip),
    AfterValidator(_tx_hash),
    # Its shape in the schema a model sees: a server that turns schemas into a grammar
    # (llama.cpp) then cannot write an endless string into it.
    WithJsonSchema({"type": "string", "pattern": "^0x[0-9a-fA-F]{64}$"}),
]
"""A 0x 32-byte transaction hash, returned lower case."""


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoArgs(_Args):
    """No arguments."""


class BlockArgs(_Args):
    block: int | None = Field(
        default=None, ge=0, description="Block number; omit for the latest block."
    )
    of_tx: TxHashStr | None = Field(
        default=None,
        description="Instead of block: a transaction hash, for the block it was mined in.",
    )

    @model_validator(mode="after")
    def _one_block(self) -> BlockArgs:
        if self.block is not None and self.of_tx is not None:
            raise ValueError(
                f"found block {self.block} and of_tx {self.of_tx}; expected one of them. "
                "Fix: give the block number, or the transaction whose block is asked"
            )
        return self


class AddressArgs(_Args):
    address: AddressStr = Field(description="0x account address.")


class TokenBalanceArgs(_Args):
    address: AddressStr = Field(description="0x account address.")
    token: AddressStr | None = Field(
        default=None, description="ERC-20 token address; omit for the configured USDC."
    )


class TokenArgs(_Args):
    token: AddressStr | None = Field(
        default=None, description="ERC-20 token address; omit for the configured USDC."
    )


class TxArgs(_Args):
    tx_hash: TxHashStr = Field(description="0x transaction hash (64 hex digits).")


class TransfersArgs(_Args):
    address: AddressStr | None = Field(
        default=None, description="Count only transfers from or to this address; omit for all."
    )
    sender: AddressStr | None = Field(default=None, description="Only transfers from this address.")
    recipient: AddressStr | None = Field(default=None, description="Only transfers to this address.")
    blocks: int = Field(
        default=1000,
        ge=1,
        le=MAX_LOOKBACK_BLOCKS,
        description=f"How many recent blocks to scan (1..{MAX_LOOKBACK_BLOCKS}); ignored "
        "when from_block is given.",
    )
    from_block: int | None = Field(
        default=None, ge=0, description="First block of an explicit range (inclusive)."
    )
    to_block: int | None = Field(
        default=None, ge=0, description="Last block of an explicit range; omit for the latest."
    )

    @model_validator(mode="after")
    def _one_way_or_either(self) -> TransfersArgs:
        if self.address is not None and (self.sender or self.recipient):
            raise ValueError("found address with sender or recipient; expected address (either "
                             "way) or sender and/or recipient (one way)")  # fmt: skip
        return self


class TotalsArgs(_Args):
    address: AddressStr = Field(description="0x account address whose USDC in and out is summed.")
    counterparty: AddressStr | None = Field(
        default=None,
        description="Only transfers between address and this 0x address; omit for any.",
    )
    from_block: int = Field(
        default=0, ge=0, description="First block summed (inclusive); default 0, the first."
    )
    to_block: int | None = Field(
        default=None, ge=0, description="Last block summed (inclusive); omit for the latest."
    )
    blocks: int | None = Field(
        default=None,
        ge=1,
        le=MAX_LOOKBACK_BLOCKS,
        description="Sum only the most recent N blocks instead (from_block is then ignored).",
    )


# ---------------------------------------------------------------------- formatting


def _plain(value: Decimal) -> str:
    """Exact plain decimal string: no exponent, no trailing zeros."""
    if value == 0:
        return "0"
    text = format(value.normalize(), "f")
    return text


def format_gwei(wei: int) -> str:
    """``wei`` in gwei, exact (``875000000`` -> ``"0.875"``)."""
    return _plain(Decimal(wei) / GWEI)


def format_eth(wei: int) -> str:
    """``wei`` in ETH, exact, with the unit (``"1.5 ETH"``)."""
    return f"{_plain(Decimal(wei) / WEI_PER_ETH)} ETH"


def format_token(atomic: int, decimals: int, symbol: str) -> str:
    """Atomic units as an exact display amount with at least two decimals (``"1.50 USDC"``)."""
    value = Decimal(atomic).scaleb(-decimals)
    text = _plain(value)
    whole, _, frac = text.partition(".")
    if len(frac) < 2 and decimals >= 2:
        frac = frac.ljust(2, "0")
    return f"{whole}.{frac} {symbol}" if frac else f"{whole} {symbol}"


def _share(used: int, limit: int) -> Decimal | None:
    """The share of its gas limit a block used, in percent: ``used * 100 / limit`` rounded
    half up to 2 decimal places, in integers (exact up to that rounding, never a float);
    None for a gas limit of 0, which has no share (never a division by zero)."""
    if limit <= 0:
        return None
    hundredths = (2 * used * 10_000 + limit) // (2 * limit)  # half up: floor(x + 1/2)
    return Decimal(hundredths).scaleb(-2)


def _fullness(share: Decimal | None, used: int, limit: int) -> str:
    """The ``block_fullness`` fact: the share with its basis, "0.24% (72390 of 30000000
    gas)"; a gas limit of 0 is said, with no number for a share."""
    basis = f"({used} of {limit} gas)"
    return f"{share:f}% {basis}" if share is not None else f"none: the gas limit is 0 {basis}"


def usdc_address(ctx: ToolContext) -> str:
    """The configured USDC address of the run's network, or a ToolError naming the fix."""
    usdc = ctx.network.usdc
    if not usdc:
        raise ToolError(
            f"no USDC address is configured for network {ctx.network.name!r}; expected one. "
            "Fix: start the devnet (`nib devnet up`) or set the USDC address in the config "
            "(NIB_USDC_ADDRESS)."
        )
    return checksum_address(usdc)


def _utc(ts: int) -> str:
    """A unix timestamp as UTC in ISO 8601 ("2026-12-06T23:46:13Z")."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _read(fn: Callable[[], T]) -> T:
    """Run a blocking chain read off the event loop; chain errors pass through unchanged."""
    return await asyncio.to_thread(fn)


# ---------------------------------------------------------------------- tools


class _FreeRead(Tool[ArgsT]):
    kind = "free"

    def _obs(self, summary: str, data: dict[str, object], facts: dict[str, str]) -> Observation:
        return Observation(tool=self.name, ok=True, summary=summary, data=data, facts=facts)

    def _obs_for(
        self, summary: str, data: dict[str, object], facts: dict[str, str], params: dict[str, str]
    ) -> Observation:
        """An observation whose facts hold for ``params`` resolved by the tool."""
        return Observation(
            tool=self.name, ok=True, summary=summary, data=data, facts=facts, params=params
        )


async def _block_ref(tool: str, args: BlockArgs, ctx: ToolContext) -> int | str:
    """The block ``args`` asks as a block reference: the block its transaction was mined in
    (read from the receipt), its number ("latest" when neither); a ToolError past the head."""
    if args.of_tx is not None:
        return (await _receipt(tool, args.of_tx, ctx)).block_number
    block = args.block
    if block is None:
        return "latest"
    head = await _read(ctx.chain.block_number)
    if block > head:
        raise ToolError(
            f"{tool}: block {block} does not exist yet; the chain head is {head}. "
            f"Fix: ask for a block <= {head}, or omit block for the latest."
        )
    return block


async def _receipt(tool: str, tx_hash: str, ctx: ToolContext) -> Receipt:
    """The receipt of ``tx_hash``; a PermanentToolError when the node knows no such
    transaction, a ToolError while it waits in the pool."""
    receipt = await _read(lambda: ctx.chain.receipt(tx_hash))
    if receipt is None and not await _read(lambda: ctx.chain.knows_transaction(tx_hash)):
        # No such transaction here: asking again cannot find it (it is declined by name).
        raise PermanentToolError(
            f"{tool}: no transaction {tx_hash} on {ctx.network.name} (chain "
            f"{ctx.network.chain_id}): the node knows no transaction with this hash, mined "
            "or waiting. Fix: check the hash, and that it is a transaction of this network."
        )
    if receipt is None:
        raise ToolError(
            f"{tool}: no receipt for {tx_hash} on {ctx.network.name} "
            f"(chain {ctx.network.chain_id}); it is waiting in the node's pool, not mined "
            "yet. Fix: try again after the next block."
        )
    return receipt


class BaseFeeTool(_FreeRead[BlockArgs]):
    name = "base_fee"
    free_limits = FreeLimits(max_calls_per_run=4, max_result_bytes=2_048)
    description = "Base fee per gas of a block (the latest when no block is given), in gwei."
    args_model = BlockArgs
    facts = ("base_fee_gwei",)
    reads_block = True

    async def run(self, args: BlockArgs, ctx: ToolContext) -> Observation:
        ref = await _block_ref(self.name, args, ctx)
        block = await _read(lambda: ctx.chain.block(ref))
        wei = int(block.get("baseFeePerGas", 0))
        number = int(block["number"])
        gwei = format_gwei(wei)
        return self._obs(
            f"base fee {gwei} gwei ({wei} wei) at block {number}",
            {"base_fee_wei": wei, "base_fee_gwei": gwei, "block_number": number},
            {"base_fee_gwei": gwei},
        )


class GasPriceTool(_FreeRead[NoArgs]):
    name = "gas_price"
    free_limits = FreeLimits(max_calls_per_run=4, max_result_bytes=2_048)
    description = "The node's suggested gas price (eth_gasPrice), in gwei."
    args_model = NoArgs
    facts = ("gas_price_gwei",)
    # The node suggests it from the blocks up to its head: the head read just before names
    # which (a block may land between the two reads; the suggestion moves with the head).
    reads_block = True

    async def run(self, args: NoArgs, ctx: ToolContext) -> Observation:
        head = await _read(ctx.chain.block_number)
        wei = await _read(ctx.chain.gas_price)
        gwei = format_gwei(wei)
        return self._obs(
            f"gas price {gwei} gwei ({wei} wei) at block {head}",
            {"gas_price_wei": wei, "gas_price_gwei": gwei, "block_number": head},
            {"gas_price_gwei": gwei},
        )


class BlockInfoTool(_FreeRead[BlockArgs]):
    name = "block_info"
    free_limits = FreeLimits(max_calls_per_run=4, max_result_bytes=8_192)
    description = (
        "Number, timestamp, gas used, gas limit, fullness (gas used as a share of the gas "
        "limit) and transaction count of a block (the latest when no block is given)."
    )
    args_model = BlockArgs
    facts = ("block_number", "block_timestamp", "block_gas_used", "block_gas_limit",
             "block_tx_count", "block_fullness")  # fmt: skip
    reads_block = True

    async def run(self, args: BlockArgs, ctx: ToolContext) -> Observation:
        ref = await _block_ref(self.name, args, ctx)
        block = await _read(lambda: ctx.chain.block(ref))
        number, ts = int(block["number"]), int(block["timestamp"])
        used, limit = int(block["gasUsed"]), int(block["gasLimit"])
        txs = len(block.get("transactions", []))
        iso = _utc(ts)
        share = _share(used, limit)
        full = (f"{share:f}% full, rounded half up to 2 places" if share is not None
                else "no share: its gas limit is 0")  # fmt: skip
        return self._obs(
            f"block {number} at {ts} ({iso}): {txs} transaction{'' if txs == 1 else 's'}, "
            f"gas used {used} of a gas limit of {limit} ({full})",
            {
                "block_number": number,
                "block_timestamp": ts,
                "time_utc": iso,
                "tx_count": txs,
                "gas_used": used,
                "gas_limit": limit,
                "fullness_percent": None if share is None else f"{share:f}",
            },
            {
                "block_number": str(number),
                "block_timestamp": str(ts),
                "block_gas_used": str(used),
                "block_gas_limit": str(limit),
                "block_tx_count": str(txs),
                "block_fullness": _fullness(share, used, limit),
            },
        )


class EthBalanceTool(_FreeRead[AddressArgs]):
    name = "eth_balance"
    free_limits = FreeLimits(max_calls_per_run=4, max_result_bytes=2_048)
    description = "Native ETH balance of an address (exact, in ETH and wei)."
    args_model = AddressArgs
    facts = ("eth_balance",)
    reads_block = True

    async def run(self, args: AddressArgs, ctx: ToolContext) -> Observation:
        head = await _read(ctx.chain.block_number)
        wei = await _read(lambda: ctx.chain.eth_balance(args.address, head))
        display = format_eth(wei)
        return self._obs(
            f"{args.address} holds {display} ({format_gwei(wei)} gwei, {wei} wei) at block {head}",
            {"address": args.address, "wei": wei, "display": display, "block_number": head},
            {"eth_balance": display},
        )


async def _token_meta(ctx: ToolContext, token: str) -> tuple[str, int]:
    """(symbol, decimals) of ``token``; a ToolError when it is not an ERC-20 contract."""
    chain = ctx.chain
    code = await _read(lambda: chain.call("eth_getCode", lambda: chain.w3.eth.get_code(token)))  # type: ignore[arg-type]
    if not code:
        raise ToolError(
            f"no contract at token address {token} on {ctx.network.name} "
            f"(chain {ctx.network.chain_id}); expected an ERC-20 token. Fix: check the "
            "address, or omit token to use the configured USDC."
        )
    try:
        symbol = await _read(lambda: chain.token_symbol(token))
        decimals = await _read(lambda: chain.token_decimals(token))
    except (RpcError, Web3Exception) as exc:
        # A revert or undecodable output: the contract exists but is no ERC-20.
        raise ToolError(
            f"the contract at {token} does not answer symbol()/decimals() like an ERC-20 "
            f"token ({type(exc).__name__}); expected an ERC-20. Fix: pass a token address."
        ) from exc
    return symbol, decimals


class TokenBalanceTool(_FreeRead[TokenBalanceArgs]):
    name = "token_balance"
    free_limits = FreeLimits(max_calls_per_run=4, max_result_bytes=2_048)
    description = (
        "ERC-20 balance of an address; the token defaults to the configured USDC. "
        "Returns the atomic amount and a display amount such as '1.50 USDC'."
    )
    args_model = TokenBalanceArgs
    facts = ("usdc_balance",)
    reads_block = True

    def facts_for(self, args: BaseModel) -> tuple[str, ...]:
        # Without a token the read is USDC's; with one we cannot know before the call.
        return self.facts if getattr(args, "token", None) is None else ()

    async def run(self, args: TokenBalanceArgs, ctx: ToolContext) -> Observation:
        usdc = usdc_address(ctx)
        token = args.token or usdc
        is_usdc = token.lower() == usdc.lower()
        if is_usdc:
            symbol, decimals = "USDC", ctx.network.decimals
        else:
            symbol, decimals = await _token_meta(ctx, token)
        head = await _read(ctx.chain.block_number)
        atomic = await _read(lambda: ctx.chain.token_balance(token, args.address, head))
        display = format_token(atomic, decimals, symbol)
        facts = {"usdc_balance": display} if is_usdc else {}
        return self._obs_for(
            f"{args.address} holds {display} ({atomic} atomic) at block {head}",
            {
                "address": args.address,
                "token": token,
                "symbol": symbol,
                "decimals": decimals,
                "atomic": atomic,
                "display": display,
                "block_number": head,
            },
            facts,
            {"token": token},
        )


#: ``owner()``: the account in control of a token contract (for TestUSDC and Circle's
#: FiatToken, the one that mints or appoints who mints).
_OWNER_CALL = "0x8da5cb5b"


async def _token_owner(ctx: ToolContext, token: str) -> str | None:
    """The token contract's ``owner()`` (checksum), or None when it has none."""
    chain = ctx.chain
    call = {"to": token, "data": _OWNER_CALL}
    try:
        raw = await _read(lambda: chain.call("eth_call", lambda: chain.w3.eth.call(call)))  # type: ignore[arg-type]
    except (RpcError, Web3Exception):
        return None  # no owner() (a revert): the token names no issuer on chain
    word = bytes(raw)
    if len(word) != 32 or int.from_bytes(word, "big") == 0 or int.from_bytes(word, "big") >> 160:
        return None
    return checksum_address("0x" + word[-20:].hex())


class TokenInfoTool(_FreeRead[TokenArgs]):
    name = "token_info"
    free_limits = FreeLimits(max_calls_per_run=4, max_result_bytes=4_096)
    description = (
        "Name, symbol, decimals and total supply of an ERC-20 token (default: USDC), and "
        "the account controlling its issuance (its owner()) when it has one."
    )
    args_model = TokenArgs
    facts = ("token_name", "token_symbol", "token_decimals", "token_supply", "token_issuer")
    reads_block = True  # the supply's block (the others do not change with it)

    async def run(self, args: TokenArgs, ctx: ToolContext) -> Observation:
        token = args.token or usdc_address(ctx)
        symbol, decimals = await _token_meta(ctx, token)
        head = await _read(ctx.chain.block_number)
        supply = await _read(lambda: ctx.chain.token_supply(token, head))
        name = await _read(lambda: ctx.chain.token_name(token))
        owner = await _token_owner(ctx, token)
        issuer = {} if owner is None else {"token_issuer": (
            f"{owner} (owner() of the {symbol} contract {token}, in control of its issuance)")}
        display = format_token(supply, decimals, symbol)
        return self._obs_for(
            f"{name} ({symbol}) at {token}: {decimals} decimals, supply {display} "
            f"({supply} atomic) at block {head}",
            {
                "token": token,
                "name": name,
                "symbol": symbol,
                "decimals": decimals,
                "supply_atomic": supply,
                "supply": display,
                "owner": owner,
                "block_number": head,
            },
            {"token_name": name, "token_symbol": symbol, "token_decimals": str(decimals),
             "token_supply": display, **issuer},
            {"token": token},
        )


class TxReceiptTool(_FreeRead[TxArgs]):
    name = "tx_receipt"
    free_limits = FreeLimits(max_calls_per_run=4, max_result_bytes=16_384)
    description = ("Status (success/reverted), gas used, the gas price and fee it paid, "
                   "block and time (its block's timestamp) of a mined transaction.")
    args_model = TxArgs
    facts = ("tx_status", "tx_gas_used", "tx_block", "tx_time", "tx_gas_price", "tx_fee")

    async def run(self, args: TxArgs, ctx: ToolContext) -> Observation:
        receipt = await _receipt(self.name, args.tx_hash, ctx)
        status = "success" if receipt.status == 1 else "reverted"
        # When it was mined: the timestamp of the block its receipt names, that block read.
        mined_at = await _read(lambda: ctx.chain.block_timestamp(receipt.block_number))
        price = receipt.effective_gas_price
        return self._obs(
            f"tx {receipt.tx_hash[:10]}… {status} in block {receipt.block_number} at "
            f"{mined_at} ({_utc(mined_at)}), gas used {receipt.gas_used}",
            {
                "tx_hash": receipt.tx_hash,
                "status": status,
                "block_number": receipt.block_number,
                "gas_used": receipt.gas_used,
                "block_timestamp": mined_at,
                "time_utc": _utc(mined_at),
                "effective_gas_price_wei": receipt.effective_gas_price,
                "from": receipt.sender,
                "to": receipt.to,
            },
            {"tx_status": status, "tx_gas_used": str(receipt.gas_used),
             "tx_block": str(receipt.block_number), "tx_time": str(mined_at),
             # What it paid: the receipt's effective price, and gas used times that price.
             "tx_gas_price": format_gwei(price),
             "tx_fee": f"{format_eth(receipt.gas_used * price)} ({receipt.gas_used} gas at "
                       f"{format_gwei(price)} gwei)"},
        )


async def _block_range(
    tool: str, ctx: ToolContext, blocks: int | None, from_block: int | None, to_block: int | None
) -> tuple[int, int]:
    """The inclusive block range a log scan reads: ``from_block..to_block`` (the head when
    ``to_block`` is None), else the last ``blocks`` blocks; a ToolError naming the fix when
    it is no range of this chain or spans more than MAX_LOOKBACK_BLOCKS."""
    head = await _read(ctx.chain.block_number)
    last = head if to_block is None else to_block
    if from_block is None:
        first = max(0, head - (blocks or 1) + 1)
    else:
        first = from_block
    if last > head or first > last:
        raise ToolError(
            f"{tool}: blocks {first}..{last} is not a range of this chain (head "
            f"{head}); expected from_block <= to_block <= {head}. Fix: pick a range "
            "within the chain, or omit to_block for the latest."
        )
    if last - first + 1 > MAX_LOOKBACK_BLOCKS:
        raise ToolError(
            f"{tool}: blocks {first}..{last} spans {last - first + 1} blocks; "
            f"at most {MAX_LOOKBACK_BLOCKS}. Fix: narrow the range (for a total: ask over "
            "the last N blocks, or name the blocks)."
        )
    return first, last


def _transfers(ctx: ToolContext, token: str, first: int, last: int, args: TransfersArgs) -> list[TransferLog]:
    """The Transfer logs ``args`` asks: touching ``address``, or from ``sender`` and/or to
    ``recipient`` (outside round 33: "the transfers to 0xB" listed those 0xB sent too)."""
    if args.sender is None and args.recipient is None:
        return ctx.chain.transfer_logs(token, first, last, args.address)
    one_way = args.sender or args.recipient
    logs = ctx.chain.transfer_logs(token, first, last, one_way,
                                   direction="out" if args.sender else "in")  # fmt: skip
    if args.sender and args.recipient:
        logs = [log for log in logs if log.recipient.lower() == args.recipient.lower()]
    return logs


#: A list of transfers is a fact only up to this many: more is a count, never a list cut
#: short (an answer listing some of them would be wrong at exit 0).
MAX_LISTED_TRANSFERS = 20


def _listed_transfers(
    logs: Sequence[TransferLog], first: int, last: int, decimals: int
) -> str | None:
    """Every transfer of ``logs``, one after the other ("block 6: 3.25 USDC from 0xA to 0xB
    (tx 0x..)"), or None when there are more than MAX_LISTED_TRANSFERS."""
    if len(logs) > MAX_LISTED_TRANSFERS:
        return None
    if not logs:
        return f"none: no USDC transfers in blocks {first}..{last}"
    each = "; ".join(f"block {log.block_number}: {format_usdc(log.value, decimals)} from "
                     f"{log.sender} to {log.recipient} (tx {log.tx_hash})" for log in logs)
    return f"{len(logs)} in blocks {first}..{last}: {each}"


class TokenTransfersTool(_FreeRead[TransfersArgs]):
    name = "token_transfers"
    # Log scans span block ranges: more room and time than a point read.
    free_limits = FreeLimits(max_calls_per_run=3, max_result_bytes=65_536, timeout_s=20.0)
    description = (
        "USDC Transfer events in the most recent blocks (default 1000) or in an explicit "
        f"block range, optionally only those from or to one address: their count, each of "
        f"them when there are at most {MAX_LISTED_TRANSFERS}, the largest one, and up to 5 "
        "of the latest."
    )
    args_model = TransfersArgs
    facts = ("transfer_count", "transfer_list", "transfer_max")
    reads_range = True

    async def run(self, args: TransfersArgs, ctx: ToolContext) -> Observation:
        token = usdc_address(ctx)
        first, last = await _block_range(self.name, ctx, args.blocks, args.from_block, args.to_block)
        logs = await _read(lambda: _transfers(ctx, token, first, last, args))
        volume = sum(log.value for log in logs)
        who = (f" touching {args.address}" if args.address else "") + (
            f" from {args.sender}" if args.sender else "") + (
            f" to {args.recipient}" if args.recipient else "")  # fmt: skip
        rows = [
            {
                "tx_hash": log.tx_hash,
                "block": log.block_number,
                "from": log.sender,
                "to": log.recipient,
                "value_atomic": log.value,
            }
            for log in logs
        ]
        facts = {"transfer_count": str(len(logs))}
        top = max(logs, key=lambda log: log.value, default=None)
        largest = None if top is None else rows[logs.index(top)]
        if top is not None:
            ties = sum(1 for log in logs if log.value == top.value)
            facts["transfer_max"] = (
                f"{format_usdc(top.value, ctx.network.decimals)} from {top.sender} to "
                f"{top.recipient} in block {top.block_number} (tx {top.tx_hash})"
                # A tie says so: which of the equal transfers is shown is no answer.
                + (f"; a tie: {ties} transfers of this size, the first shown" if ties > 1 else "")
            )
        else:
            facts["transfer_max"] = f"none: no USDC transfers in blocks {first}..{last}"
        listed = _listed_transfers(logs, first, last, ctx.network.decimals)
        if listed is not None:
            facts["transfer_list"] = listed
        unlisted = (f", more than {MAX_LISTED_TRANSFERS}: not listed one by one (ask how many, "
                    "or over fewer blocks)") if listed is None else ""  # fmt: skip
        return self._obs(
            f"{len(logs)} USDC transfers{who} in blocks {first}..{last}{unlisted}",
            {
                "token": token,
                "address": args.address,
                "from_block": first,
                "to_block": last,
                "transfer_count": len(logs),
                "volume_atomic": volume,
                "volume": format_usdc(volume, ctx.network.decimals),
                "largest": largest,
                "latest": rows[-5:],
            },
            facts,
        )


class UsdcTotalsTool(_FreeRead[TotalsArgs]):
    name = "usdc_totals"
    # A log scan over the whole range, like token_transfers.
    free_limits = FreeLimits(max_calls_per_run=3, max_result_bytes=8_192, timeout_s=20.0)
    description = (
        "Total USDC an address sent and received in a block range (default: from block 0 "
        "to the latest), optionally only to/from one counterparty: the exact sums of the "
        "token's Transfer logs, with the transfer counts and the range read."
    )
    args_model = TotalsArgs
    facts = ("usdc_sent_total", "usdc_received_total")
    reads_range = True

    async def run(self, args: TotalsArgs, ctx: ToolContext) -> Observation:
        token = usdc_address(ctx)
        from_block = None if args.blocks else args.from_block
        first, last = await _block_range(self.name, ctx, args.blocks, from_block, args.to_block)
        logs = await _read(lambda: ctx.chain.transfer_logs(token, first, last, args.address))
        me, other = args.address.lower(), (args.counterparty or "").lower()
        out = [g for g in logs if g.sender.lower() == me and other in ("", g.recipient.lower())]
        into = [g for g in logs if g.recipient.lower() == me and other in ("", g.sender.lower())]
        sent, received = sum(g.value for g in out), sum(g.value for g in into)
        decimals = ctx.network.decimals

        def said(atomic: int, n: int, verb: str, way: str) -> str:
            whom = f" {way} {args.counterparty}" if args.counterparty else ""
            return (f"{format_usdc(atomic, decimals)} ({atomic} atomic) {verb} by "
                    f"{args.address}{whom} in {n} transfer{'s' if n != 1 else ''}, "
                    f"blocks {first}..{last}")  # fmt: skip

        return self._obs(
            f"{args.address} sent {format_usdc(sent, decimals)} and received "
            f"{format_usdc(received, decimals)} in blocks {first}..{last}",
            {
                "token": token,
                "address": args.address,
                "counterparty": args.counterparty,
                "from_block": first,
                "to_block": last,
                "sent_atomic": sent,
                "received_atomic": received,
                "sent_count": len(out),
                "received_count": len(into),
            },
            {
                "usdc_sent_total": said(sent, len(out), "sent", "to"),
                "usdc_received_total": said(received, len(into), "received", "from"),
            },
        )


def chain_read_tools() -> list[Tool]:
    """One instance of every free chain-read tool."""
    return [
        BaseFeeTool(),
        GasPriceTool(),
        BlockInfoTool(),
        EthBalanceTool(),
        TokenBalanceTool(),
        TokenInfoTool(),
        TxReceiptTool(),
        TokenTransfersTool(),
        UsdcTotalsTool(),
    ]
