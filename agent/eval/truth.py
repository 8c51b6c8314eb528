"""Ground truth for eval tasks, read independently of the agent's tools.

Raw JSON-RPC through web3 with a minimal ABI, raw ``eth_getLogs`` for transfers, and the
paywall's shipped datasets read straight from their files. A probe is a JSON object
(``{"probe": "base_fee_gwei", "block": 1}``) naming what to read; it yields numbers
(compared exactly) or words (case-insensitive), or a winner of a comparison.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext
from pathlib import Path
from typing import TYPE_CHECKING

from web3 import Web3

from agent.jsonvalues import as_int, as_list
from chain.money import usdc_decimal

if TYPE_CHECKING:
    from web3.contract import Contract
    from web3.types import BlockData, LogReceipt

__all__ = ["EvalEnv", "Truth", "probe"]

DATA_DIR = Path(__file__).resolve().parents[2] / "chain" / "data"
_TRANSFER_TOPIC = Web3.keccak(text="Transfer(address,address,uint256)").hex()
_ERC20 = [
    {"name": n, "type": "function", "stateMutability": "view", "inputs": ins,
     "outputs": [{"name": "", "type": t}]}
    for n, ins, t in (
        ("symbol", [], "string"),
        ("name", [], "string"),
        ("decimals", [], "uint8"),
        ("totalSupply", [], "uint256"),
        ("owner", [], "address"),
        ("balanceOf", [{"name": "a", "type": "address"}], "uint256"),
    )
]  # fmt: skip


@dataclass(frozen=True)
class Truth:
    """What the answer must hold: numbers (exact), words, and a comparison's winner
    (named on a backed line that does not name the loser)."""

    numbers: tuple[Decimal, ...] = ()
    words: tuple[str, ...] = ()
    #: The winner of a comparison, then every address it won over.
    winner: tuple[str, ...] | None = None

    def __add__(self, other: Truth) -> Truth:
        return Truth(self.numbers + other.numbers, self.words + other.words,
                     self.winner or other.winner)  # fmt: skip


@dataclass
class EvalEnv:
    """The private devnet an eval runs on, and the addresses its placeholders name."""

    w3: Web3
    usdc: str
    names: dict[str, str]

    def token(self) -> Contract:
        return self.w3.eth.contract(address=Web3.to_checksum_address(self.usdc), abi=_ERC20)

    def fill(self, text: str) -> str:
        if "{head_minus_" not in text:
            return text.format(**self.names)
        head = self.w3.eth.block_number
        near = {f"head_minus_{k}": head - k for k in range(1, 4)}
        return text.format(**self.names, **near)

    def usdc_of(self, address: str) -> int:
        return int(self.token().functions.balanceOf(Web3.to_checksum_address(address)).call())

    def usdc_sent_by(self, address: str, from_block: int) -> int:
        """Atomic USDC the chain moved out of ``address`` from ``from_block`` to the head,
        summed from the token's Transfer logs (what a run's spend must equal)."""
        head = self.w3.eth.block_number
        if from_block > head:
            return 0
        sender = "0x" + address.lower().removeprefix("0x").rjust(64, "0")
        params = {"address": Web3.to_checksum_address(self.usdc), "fromBlock": from_block,
                  "toBlock": head, "topics": [_TRANSFER_TOPIC, sender]}  # fmt: skip
        logs = self.w3.eth.get_logs(params)  # type: ignore[arg-type]
        return sum(int(bytes(log["data"]).hex() or "0", 16) for log in logs)


def _block(env: EvalEnv, spec: Mapping[str, object]) -> BlockData:
    if "back" in spec:  # a relative reference: N blocks before the head at run start
        return env.w3.eth.get_block(env.w3.eth.block_number - as_int(spec["back"]))
    block = spec.get("block", "latest")  # a block number, or "latest"
    return env.w3.eth.get_block("latest" if block == "latest" else as_int(block))


def _logs(env: EvalEnv, spec: Mapping[str, object]) -> list[LogReceipt]:
    """USDC Transfer logs of the spec's window; with ``address``, those from or to it."""
    head = env.w3.eth.block_number
    first = spec.get("from_block", max(0, head - as_int(spec.get("blocks", 1000)) + 1))
    last = spec.get("to_block", head)
    params = {"address": Web3.to_checksum_address(env.usdc), "fromBlock": first,
              "toBlock": last, "topics": [_TRANSFER_TOPIC]}  # fmt: skip
    logs = list(env.w3.eth.get_logs(params))  # type: ignore[arg-type]
    if "address" not in spec:
        return logs
    word = _word(env.fill(str(spec["address"])))
    return [log for log in logs if word in (_topic(log["topics"][1]), _topic(log["topics"][2]))]


def _total(env: EvalEnv, spec: Mapping[str, object], way: str) -> Truth:
    """USDC an address sent (``way`` "out") or received ("in") in the spec's range (from
    block 0 by default), only with ``counterparty`` when named; whole USDC and atomic."""
    head = env.w3.eth.block_number
    first = as_int(spec.get("from_block", 0))
    if "blocks" in spec:
        first = max(0, head - as_int(spec["blocks"]) + 1)
    window = {"from_block": first, "to_block": spec.get("to_block", head),
              "address": spec["address"]}  # fmt: skip
    me = _word(env.fill(str(spec["address"])))
    other = _word(env.fill(str(spec["counterparty"]))) if "counterparty" in spec else None
    ends = (1, 2) if way == "out" else (2, 1)
    atomic = sum(
        _value(log) for log in _logs(env, window)
        if _topic(log["topics"][ends[0]]) == me
        and other in (None, _topic(log["topics"][ends[1]]))
    )  # fmt: skip
    if "unit" in spec:  # the answer asked in that unit holds the whole USDC scaled to it
        return Truth((usdc_decimal(atomic),))
    return Truth((usdc_decimal(atomic), Decimal(atomic)))


def _word(address: str) -> str:
    return "0x" + address.lower().removeprefix("0x").rjust(64, "0")


def _topic(t: object) -> str:
    return "0x" + (t.hex() if isinstance(t, bytes) else str(t)).removeprefix("0x").lower()


def _value(log: LogReceipt) -> int:
    data: bytes | str = log["data"]
    return int(data.hex() if isinstance(data, bytes) else data, 16)


def _fullness(env: EvalEnv, spec: Mapping[str, object]) -> Truth:
    """A block's gas used as a share of its gas limit, in percent rounded half up to 2
    places (as the answer states it), and its basis: the gas used and the gas limit."""
    block = _block(env, spec)
    used, limit = Decimal(block["gasUsed"]), Decimal(block["gasLimit"])
    with localcontext() as ctx:
        ctx.prec = 60  # far past the 2 places kept: the rounding is the only one
        share = (used * 100 / limit).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return Truth((share, used, limit))


def _balance(env: EvalEnv, kind: str, address: str) -> Decimal:
    if kind == "eth_balance":
        wei = env.w3.eth.get_balance(Web3.to_checksum_address(address))
        return Decimal(wei) / Decimal(10**18)
    return usdc_decimal(env.usdc_of(address))


def _balances(env: EvalEnv, spec: Mapping[str, object]) -> list[tuple[str, Decimal]]:
    """(address, balance of ``spec["of"]``) for each of the spec's addresses."""
    of = str(spec["of"])
    return [(a, _balance(env, of, a)) for a in (env.fill(str(x)) for x in as_list(spec["addresses"]))]


def _winner(env: EvalEnv, spec: Mapping[str, object]) -> Truth:
    """The address holding the most (``op`` max) or least (min), then the others."""
    rows = sorted(_balances(env, spec), key=lambda r: r[1], reverse=spec["op"] == "max")
    if len(rows) > 2 and rows[0][1] == rows[1][1]:
        raise ValueError(f"eval probe {dict(spec)!r} has a tie for the winner; expected "
                         "one. Fix: compare addresses whose balances differ.")  # fmt: skip
    return Truth(winner=tuple(a for a, _v in rows))


def _sum(env: EvalEnv, spec: Mapping[str, object]) -> Truth:
    """The balances added (exact)."""
    return Truth((sum((v for _a, v in _balances(env, spec)), Decimal(0)),))


def _count(env: EvalEnv, spec: Mapping[str, object]) -> Truth:
    """How many of the addresses hold more than ``above`` (0 unless named), or at most
    ``at_most``."""
    values = [v for _a, v in _balances(env, spec)]
    if "at_most" in spec:
        most = Decimal(str(spec["at_most"]))
        return Truth((Decimal(sum(1 for v in values if v <= most)),))
    above = Decimal(str(spec.get("above", "0")))
    return Truth((Decimal(sum(1 for v in values if v > above)),))


def _diff(env: EvalEnv, spec: Mapping[str, object]) -> Truth:
    """The size of the difference of two balances."""
    (_a, x), (_b, y) = _balances(env, spec)
    return Truth((abs(x - y),))


_TESTS: dict[str, Callable[[Decimal, Decimal], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
}


def _test(env: EvalEnv, spec: Mapping[str, object]) -> Truth:
    """A yes or no: whether the first number of the probe ``of`` is ``op`` ``than``. The
    answer's derived line says it ("...: yes (derived"); the value is in the answer too."""
    of = spec["of"]
    if not isinstance(of, Mapping):
        raise ValueError(f"eval probe {dict(spec)!r}: 'of' is {of!r}; expected a probe object. "
                         "Fix: correct the task file.")  # fmt: skip
    value = _PROBES[str(of["probe"])](env, of).numbers[0]
    held = _TESTS[str(spec["op"])](value, Decimal(str(spec["than"])))
    return Truth((value,), (f": {'yes' if held else 'no'} (derived",))


def _dataset(spec: Mapping[str, object]) -> Truth:
    data = json.loads((DATA_DIR / f"{spec['file']}.json").read_text())
    return Truth(words=(str(data[spec["section"]][spec["key"]][spec["field"]]),))


_PROBES: dict[str, Callable[[EvalEnv, Mapping[str, object]], Truth]] = {
    "base_fee_gwei": lambda e, s: Truth((Decimal(_block(e, s)["baseFeePerGas"]) / 10**9,)),
    "block_number": lambda e, s: Truth((Decimal(e.w3.eth.block_number),)),
    "block_timestamp": lambda e, s: Truth((Decimal(_block(e, s)["timestamp"]),)),
    "block_gas_used": lambda e, s: Truth((Decimal(_block(e, s)["gasUsed"]),)),
    "block_gas_limit": lambda e, s: Truth((Decimal(_block(e, s)["gasLimit"]),)),
    "block_tx_count": lambda e, s: Truth((Decimal(len(_block(e, s)["transactions"])),)),
    "block_fullness": _fullness,
    "usdc_balance": lambda e, s: Truth((_balance(e, "usdc_balance", e.fill(str(s["address"]))),)),
    "eth_balance": lambda e, s: Truth((_balance(e, "eth_balance", e.fill(str(s["address"]))),)),
    "token_symbol": lambda e, s: Truth(words=(e.token().functions.symbol().call(),)),
    "token_name": lambda e, s: Truth(words=(e.token().functions.name().call(),)),
    "token_decimals": lambda e, s: Truth((Decimal(e.token().functions.decimals().call()),)),
    "token_supply": lambda e, s: Truth((usdc_decimal(e.token().functions.totalSupply().call()),)),
    "token_issuer": lambda e, s: Truth(words=(e.token().functions.owner().call(),)),
    "transfer_count": lambda e, s: Truth((Decimal(len(_logs(e, s))),)),
    "transfer_max": lambda e, s: Truth(
        (usdc_decimal(max((_value(log) for log in _logs(e, s)), default=0)),)
    ),
    "usdc_sent_total": lambda e, s: _total(e, s, "out"),
    "usdc_received_total": lambda e, s: _total(e, s, "in"),
    "winner": _winner,
    "sum": _sum,
    "count": _count,
    "diff": _diff,
    "test": _test,
    "dataset": lambda e, s: _dataset(s),
}


#: A probe's ``unit`` asks its number in another unit than the fact's own (gwei for a
#: fee, ether for an ETH balance, whole USDC for USDC amounts): the power of ten to it.
#: An aggregate's (``of``) is its fact kind's.
_UNIT_SCALE: dict[tuple[str, str], int] = {
    ("base_fee_gwei", "wei"): 9,
    ("base_fee_gwei", "ether"): -9,
    ("eth_balance", "wei"): 18,
    ("eth_balance", "gwei"): 9,
    **{(k, "atomic"): 6 for k in ("usdc_balance", "token_supply", "transfer_max",
                                  "usdc_sent_total", "usdc_received_total")},
    **{(k, "cents"): 2 for k in ("usdc_balance", "token_supply", "transfer_max",
                                 "usdc_sent_total", "usdc_received_total")},
}  # fmt: skip


def probe(env: EvalEnv, specs: list[Mapping[str, object]]) -> Truth:
    """The combined truth of ``specs`` on ``env``'s chain as it is now."""
    truth = Truth()
    for spec in specs:
        if spec["probe"] not in _PROBES:
            raise ValueError(
                f"unknown eval probe {spec['probe']!r}; expected one of {sorted(_PROBES)}. "
                "Fix: correct the task file."
            )
        found = _PROBES[str(spec["probe"])](env, spec)
        if "unit" in spec:
            power = _UNIT_SCALE[(str(spec.get("of", spec["probe"])), str(spec["unit"]))]
            found = Truth(tuple(n.scaleb(power) for n in found.numbers), found.words, found.winner)
        truth = truth + found
    return truth
