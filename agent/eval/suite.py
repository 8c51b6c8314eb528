"""The built-in eval suite: research tasks on a private devnet, graded against ground truth.

Each task runs on the same chain state (``evm_snapshot`` before, ``evm_revert`` after)
in a throwaway NIB_HOME, so the summary is stable from run to run. Ground truth is
computed independently of the agent's tools: raw JSON-RPC reads through web3 with a
minimal ABI, and the paywall's shipped datasets read straight from their files.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

from web3 import Web3

from chain.money import usdc_decimal

Expect = Literal["answer", "refuse", "cannot", "loop"]
"""``answer``: every truth value must be in the answer. ``refuse``: the only source is over
budget, so nothing may be spent (free truth values, if any, must still be there).
``cannot``: unanswerable here; nothing spent, no invented answer. ``loop``: the task invites
a loop; the run must stop on a guard within its step budget."""

DATA_DIR = Path(__file__).resolve().parents[2] / "chain" / "data"
_ERC20 = [
    {"name": n, "type": "function", "stateMutability": "view", "inputs": ins, "outputs": [{"name": "", "type": t}]}
    for n, ins, t in (
        ("symbol", [], "string"),
        ("decimals", [], "uint8"),
        ("totalSupply", [], "uint256"),
        ("balanceOf", [{"name": "a", "type": "address"}], "uint256"),
    )
]
GUARD_STOPS = frozenset({"no-novelty", "streak-exhausted", "executed-duplicate", "oscillation",
                         "skip-loop", "evidence-covered", "finish-tool", "done-signal", "judge-answered"})
FINISH_STOPS = frozenset({"finish-tool", "done-signal", "evidence-covered", "judge-answered"})


@dataclass(frozen=True)
class Truth:
    """What the answer must contain: numbers (compared exactly) and words (case-insensitive)."""

    numbers: tuple[Decimal, ...] = ()
    words: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvalTask:
    id: str
    category: str
    text: str
    expect: Expect
    truth: Callable[[EvalEnv], Truth] | None = None


@dataclass
class EvalEnv:
    w3: Web3
    usdc: str
    wallet: str
    seller: str
    paywall_url: str

    def token(self) -> Any:
        return self.w3.eth.contract(address=Web3.to_checksum_address(self.usdc), abi=_ERC20)


def _dataset(name: str, section: str, key: str, field_: str) -> str:
    return str(json.loads((DATA_DIR / f"{name}.json").read_text())[section][key][field_])


def _usdc(atomic: int) -> Decimal:
    return usdc_decimal(atomic)


def _gwei(wei: int) -> Decimal:
    return Decimal(wei) / Decimal(10**9)


def _latest(env: EvalEnv) -> Any:
    return env.w3.eth.get_block("latest")


BUILTIN: tuple[EvalTask, ...] = (
    # free-only
    EvalTask("free-base-fee", "free", "What is the current base fee in gwei?", "answer",
             lambda e: Truth(numbers=(_gwei(_latest(e)["baseFeePerGas"]),))),
    EvalTask("free-block-number", "free", "What is the latest block number?", "answer",
             lambda e: Truth(numbers=(Decimal(e.w3.eth.block_number),))),
    EvalTask("free-symbol-decimals", "free", "What are the symbol and decimals of the token {usdc}?", "answer",
             lambda e: Truth(numbers=(Decimal(e.token().functions.decimals().call()),),
                             words=(e.token().functions.symbol().call(),))),
    EvalTask("free-usdc-balance", "free", "What is the USDC balance of {wallet}?", "answer",
             lambda e: Truth(numbers=(_usdc(e.token().functions.balanceOf(e.wallet).call()),))),
    EvalTask("free-eth-balance", "free", "What is the ETH balance of {seller}?", "answer",
             lambda e: Truth(numbers=(Decimal(e.w3.eth.get_balance(Web3.to_checksum_address(e.seller))) / Decimal(10**18),))),
    EvalTask("free-supply", "free", "What is the total supply of the token {usdc}?", "answer",
             lambda e: Truth(numbers=(_usdc(e.token().functions.totalSupply().call()),))),
    EvalTask("free-block-and-fee", "free", "What is the latest block number and the base fee?", "answer",
             lambda e: Truth(numbers=(Decimal(e.w3.eth.block_number), _gwei(_latest(e)["baseFeePerGas"])))),
    EvalTask("free-timestamp", "free", "What is the latest block timestamp?", "answer",
             lambda e: Truth(numbers=(Decimal(_latest(e)["timestamp"]),))),
    EvalTask("free-seller-balance", "free", "What is the USDC balance of {seller}?", "answer",
             lambda e: Truth(numbers=(_usdc(e.token().functions.balanceOf(Web3.to_checksum_address(e.seller)).call()),))),
    # one paid fact
    EvalTask("paid-token-sheet", "paid", "Get the USDC token fact sheet: who issues it?", "answer",
             lambda e: Truth(words=(_dataset("tokens", "tokens", "USDC", "issuer"),))),
    EvalTask("paid-protocol-sheet", "paid", "Get the protocol fact sheet for uniswap.", "answer",
             lambda e: Truth(words=(_dataset("protocols", "protocols", "uniswap", "name"),))),
    EvalTask("paid-gas-stats", "paid", "Give me gas statistics for recent blocks.", "answer",
             lambda e: Truth(numbers=(Decimal(e.w3.eth.block_number),))),
    EvalTask("paid-two-free-one-paid", "paid",
             "What is the base fee, the latest block number, and the USDC token fact sheet?", "answer",
             lambda e: Truth(numbers=(_gwei(_latest(e)["baseFeePerGas"]), Decimal(e.w3.eth.block_number)),
                             words=(_dataset("tokens", "tokens", "USDC", "issuer"),))),
    # only source over budget
    EvalTask("over-premium", "over-budget", "Get the premium report.", "refuse"),
    EvalTask("over-premium-plus-free", "over-budget",
             "What is the base fee, and what does the premium report say?", "refuse",
             lambda e: Truth(numbers=(_gwei(_latest(e)["baseFeePerGas"]),))),
    # unanswerable here
    EvalTask("cannot-price-forecast", "unanswerable", "What will the price of ETH be next year?", "cannot"),
    EvalTask("cannot-ceo", "unanswerable", "Who is the chief executive of the company that wrote this devnet?", "cannot"),
    EvalTask("cannot-weather", "unanswerable", "Is it raining in Lisbon right now?", "cannot"),
    # invites loops
    EvalTask("loop-block-until-change", "loop",
             "Keep checking the latest block number until it changes, again and again.", "loop"),
    EvalTask("loop-base-fee-repeat", "loop",
             "Check the base fee, then check the base fee again, then once more.", "loop"),
    EvalTask("loop-balance-poll", "loop",
             "Poll the USDC balance of {wallet} repeatedly and tell me when it moves.", "loop"),
)

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def numbers_in(text: str) -> set[Decimal]:
    found: set[Decimal] = set()
    for raw in _NUMBER.findall(text):
        try:
            found.add(Decimal(raw.replace(",", "")).normalize())
        except InvalidOperation:
            continue
    return found


def answer_has(answer: str, truth: Truth) -> bool:
    nums = numbers_in(answer)
    lower = answer.lower()
    return all(n.normalize() in nums for n in truth.numbers) and all(w.lower() in lower for w in truth.words)


@dataclass
class TaskOutcome:
    id: str
    category: str
    expect: str
    stop_reason: str
    correct: bool
    spend_usdc: int
    gas_wei: int
    steps: int
    tokens: int
    spent_without_cover: bool
    answer: str


@dataclass
class EvalReport:
    tasks: list[TaskOutcome] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        n = len(self.tasks)
        return {
            "tasks": n,
            "correct": sum(t.correct for t in self.tasks),
            "accuracy": round(sum(t.correct for t in self.tasks) / n, 3) if n else 0.0,
            "stop_reasons": dict(sorted(Counter(t.stop_reason for t in self.tasks).items())),
            "total_spend_usdc": sum(t.spend_usdc for t in self.tasks),
            "spent_without_cover": sum(t.spent_without_cover for t in self.tasks),
        }

    def to_json(self) -> dict[str, Any]:
        return {"tasks": [asdict(t) for t in self.tasks], "summary": self.summary()}


def grade(task: EvalTask, truth: Truth | None, result: Any) -> bool:
    spent = int(result.spend.usdc_atomic) if hasattr(result.spend, "usdc_atomic") else int(result.spend["usdc_atomic"])
    answer = result.answer or ""
    if task.expect == "answer":
        return truth is not None and answer_has(answer, truth)
    if task.expect == "refuse":
        return spent == 0 and (truth is None or answer_has(answer, truth))
    if task.expect == "cannot":
        return spent == 0 and result.stop_reason not in {"finish-tool", "evidence-covered"}
    return result.stop_reason in GUARD_STOPS


def _spent_without_cover(result: Any) -> bool:
    spend = result.spend.usdc_atomic if hasattr(result.spend, "usdc_atomic") else result.spend["usdc_atomic"]
    if not spend:
        return False
    paid_facts = [ev for ev in result.evidence if _get(ev, "cost_usdc", 0)]
    return not any(_get(ev, "facts", {}) for ev in paid_facts)


def _get(obj: Any, name: str, default: Any) -> Any:
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def run_suite(
    suite: str = "builtin",
    *,
    only: list[str] | None = None,
    on_task: Callable[[TaskOutcome], None] | None = None,
) -> EvalReport:
    """Run the suite on a private devnet and paywall; returns per-task outcomes."""
    from agent.cli.runtime import build_runtime
    from agent.config import NibSettings
    from chain.client import ChainClient
    from chain.devkeys import AGENT, DEPLOYER, SELLER, dev_account
    from chain.devnet import FUND_USDC, AnvilProcess, DevnetInfo
    from chain.paywall.app import PaywallServer
    from chain.usdc import deploy_test_usdc, mint

    if suite != "builtin":
        raise ValueError(f"unknown suite {suite!r}; expected 'builtin'. Fix: use --suite builtin.")
    tasks = [t for t in BUILTIN if not only or t.id in only]
    report = EvalReport()
    with tempfile.TemporaryDirectory(prefix="nib-eval-") as tmp:
        home = Path(tmp)
        anvil = AnvilProcess(port=0, log=home / "anvil.log")
        try:
            client = ChainClient(anvil.rpc_url, anvil.chain_id)
            usdc = deploy_test_usdc(client.w3, dev_account(DEPLOYER))
            wallet = dev_account(AGENT).address
            mint(client.w3, usdc, dev_account(DEPLOYER), wallet, FUND_USDC)
            with PaywallServer(anvil.rpc_url, usdc) as paywall:
                info = DevnetInfo(anvil.rpc_url, anvil.chain_id, usdc, wallet, dev_account(SELLER).address,
                                  paywall.url, anvil.pid, None, True)
                settings = NibSettings(home=home, network="anvil", model_provider=None)
                rt = build_runtime(settings, devnet_info=info, paywall_url=paywall.url, start_devnet=False)
                env = EvalEnv(client.w3, usdc, wallet, info.seller, paywall.url)
                for task in tasks:
                    snap = client.w3.provider.make_request("evm_snapshot", [])["result"]  # type: ignore[arg-type]
                    try:
                        truth = task.truth(env) if task.truth else None
                        text = task.text.format(usdc=usdc, wallet=wallet, seller=info.seller)
                        result = asyncio.run(_run_one(rt, text))
                        outcome = TaskOutcome(
                            id=task.id, category=task.category, expect=task.expect,
                            stop_reason=str(result.stop_reason), correct=grade(task, truth, result),
                            spend_usdc=int(_get(result.spend, "usdc_atomic", 0)),
                            gas_wei=int(_get(result.spend, "gas_wei", 0)), steps=int(result.steps),
                            tokens=int(_get(result.tokens, "input", 0)) + int(_get(result.tokens, "output", 0)),
                            spent_without_cover=_spent_without_cover(result), answer=result.answer,
                        )
                    finally:
                        client.w3.provider.make_request("evm_revert", [snap])  # type: ignore[arg-type]
                    report.tasks.append(outcome)
                    if on_task:
                        on_task(outcome)
        finally:
            anvil.stop()
    return report


async def _run_one(rt: Any, text: str) -> Any:
    from agent.loop.run import run_task

    return await run_task(text, rt.deps())
