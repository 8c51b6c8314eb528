"""What the local paywall sells: analytics computed live from the chain, and fact sheets
from the datasets shipped in ``chain/data/``. Every value is an exact decimal string."""

from __future__ import annotations

from decimal import Decimal
from functools import cache
from pathlib import Path

from eth_utils import to_checksum_address
from pydantic import TypeAdapter

from chain.client import GWEI, ChainClient
from chain.money import USDC_DECIMALS

__all__ = ["congestion", "dataset", "decimal_str", "gas_stats", "protocols", "tokens", "transfer_stats"]

_DATA_DIR = Path(__file__).resolve().parent.parent / "data"



@cache
def dataset(name: str) -> dict[str, object]:
    text = (_DATA_DIR / f"{name}.json").read_text(encoding="utf-8")
    return _OBJECT.validate_json(text)


@cache
def tokens() -> dict[str, dict[str, str]]:
    return _SHEETS.validate_python(dataset("tokens")["tokens"])


@cache
def protocols() -> dict[str, dict[str, str]]:
    return _SHEETS.validate_python(dataset("protocols")["protocols"])


_OBJECT = TypeAdapter(dict[str, object])
#: A shipped dataset's sheets: name -> field -> exact string (checked once, at first use).
_SHEETS = TypeAdapter(dict[str, dict[str, str]])


def decimal_str(value: Decimal, places: int) -> str:
    """Exact decimal string, rounded to ``places`` and without trailing zeros."""
    text = f"{value.quantize(Decimal(10) ** -places):f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def gas_stats(client: ChainClient, blocks: int = 20) -> dict[str, str]:
    """Base fee and gas-used statistics over the last ``blocks`` blocks, as fact strings."""
    latest = client.block("latest")
    head = int(latest["number"])
    first = max(0, head - blocks + 1)
    rows = [latest if n == head else client.block(n) for n in range(first, head + 1)]
    fees = [int(b.get("baseFeePerGas", 0)) for b in rows]
    used = [int(b["gasUsed"]) for b in rows]
    ratios = [Decimal(int(b["gasUsed"])) / Decimal(int(b["gasLimit"])) for b in rows]
    span = int(rows[-1]["timestamp"]) - int(rows[0]["timestamp"])
    n = len(rows)
    return {
        "latest_block": str(head),
        "blocks_sampled": str(n),
        "base_fee_gwei": decimal_str(Decimal(fees[-1]) / GWEI, 9),
        "base_fee_gwei_mean": decimal_str(Decimal(sum(fees)) / n / GWEI, 9),
        "base_fee_gwei_min": decimal_str(Decimal(min(fees)) / GWEI, 9),
        "base_fee_gwei_max": decimal_str(Decimal(max(fees)) / GWEI, 9),
        "gas_used_mean": decimal_str(Decimal(sum(used)) / n, 2),
        "gas_used_ratio_mean": decimal_str(sum(ratios, Decimal(0)) / n, 6),
        "tx_count": str(sum(len(b.get("transactions", [])) for b in rows)),
        "block_time_s_mean": decimal_str(Decimal(span) / (n - 1), 3) if n > 1 else "0",
    }


def transfer_stats(client: ChainClient, token: str, blocks: int = 1000) -> dict[str, str]:
    """Transfer statistics of ``token`` over the last ``blocks`` blocks, as fact strings."""
    head = client.block_number()
    first = max(0, head - blocks + 1)
    logs = client.transfer_logs(token, first, head)
    zero = "0x" + "0" * 40
    volume = sum(log.value for log in logs)
    return {
        "token": to_checksum_address(token),
        "from_block": str(first),
        "to_block": str(head),
        "transfer_count": str(len(logs)),
        "volume_atomic": str(volume),
        "volume_usdc": decimal_str(Decimal(volume) / Decimal(10**USDC_DECIMALS), USDC_DECIMALS),
        "unique_senders": str(len({log.sender for log in logs if log.sender != zero})),
        "unique_recipients": str(len({log.recipient for log in logs})),
        "largest_transfer_atomic": str(max((log.value for log in logs), default=0)),
        "mint_count": str(sum(1 for log in logs if log.sender.lower() == zero)),
    }


def congestion(gas_used_ratio_mean: str) -> str:
    ratio = Decimal(gas_used_ratio_mean)
    if ratio < Decimal("0.05"):
        return "idle"
    if ratio < Decimal("0.5"):
        return "light"
    return "busy"
