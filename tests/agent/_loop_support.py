"""Test doubles for driving the real loop: small free tools and a deps builder.

Free tools here are deterministic and in-process; paid tests use the real
``usdc_transfer`` tool, wallet and judge on the session's Anvil.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from agent.errors import ToolError
from agent.loop.run import Deps
from agent.models.scripted import ScriptedModel
from agent.store import RunStore
from agent.tools.base import FreeLimits, Observation, Tool, ToolContext, ToolRegistry
from agent.tools.registry_default import default_registry
from chain.client import ChainClient
from chain.networks import get_network
from judge.policy import FreePolicyRow, FreeReadPolicy


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BlockArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    block: int
    detail: str = "short"


class FactTool(Tool):
    """A free tool reporting ``facts`` (fixed, or computed from the args)."""

    kind = "free"
    free_limits = FreeLimits(max_calls_per_run=10, max_result_bytes=65_536)
    args_model: type[BaseModel] = NoArgs

    def __init__(
        self,
        name: str,
        facts: dict[str, str] | Callable[[Any], dict[str, str]],
        *,
        args_model: type[BaseModel] = NoArgs,
        summary: str | Callable[[Any], str] | None = None,
    ) -> None:
        self.name = name
        self.description = f"test tool {name}"
        self.args_model = args_model
        self._facts = facts
        self._summary = summary
        self.facts = tuple(facts) if isinstance(facts, dict) else ()
        self.calls: list[Any] = []

    async def run(self, args: Any, ctx: ToolContext) -> Observation:
        self.calls.append(args)
        facts = self._facts(args) if callable(self._facts) else dict(self._facts)
        if callable(self._summary):
            summary = self._summary(args)
        else:
            summary = self._summary or ", ".join(f"{k} {v}" for k, v in facts.items())
        return Observation(tool=self.name, ok=True, summary=summary, data=facts, facts=facts)


class FlakyTool(Tool):
    """Fails the first ``failures`` calls, then succeeds."""

    kind = "free"
    free_limits = FreeLimits(max_calls_per_run=10, max_result_bytes=65_536)
    args_model = NoArgs
    facts = ("block_number",)

    def __init__(self, name: str = "flaky", failures: int = 1) -> None:
        self.name = name
        self.description = "a tool that fails at first"
        self.failures = failures
        self.calls = 0

    async def run(self, args: Any, ctx: ToolContext) -> Observation:
        self.calls += 1
        if self.calls <= self.failures:
            raise ToolError(f"{self.name}: upstream timed out (call {self.calls})")
        return Observation(
            tool=self.name, ok=True, summary="block number 42", facts={"block_number": "42"}
        )


class SlowTool(Tool):
    """Sleeps ``delay`` seconds (real asyncio time) then answers; for concurrency tests."""

    kind = "free"
    free_limits = FreeLimits(max_calls_per_run=10, max_result_bytes=65_536)
    args_model = BlockArgs
    facts = ("block_timestamp",)

    def __init__(self, name: str = "slow", delay: float = 0.2) -> None:
        self.name = name
        self.description = "slow read"
        self.delay = delay

    async def run(self, args: Any, ctx: ToolContext) -> Observation:
        await asyncio.sleep(self.delay)
        return Observation(
            tool=self.name,
            ok=True,
            summary=f"block {args.block} at t={1000 + args.block}",
            facts={"block_timestamp": str(1000 + args.block)},
        )


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"action": "call", "tool": tool, "args": args}


def checklist(*items: tuple[str, str | None]) -> dict[str, Any]:
    return {"items": [{"text": t, "kind": k} for t, k in items]}


def policy_for(*tools: Tool, max_calls: int = 10) -> FreeReadPolicy:
    rows = [FreePolicyRow(t.name, max_calls_per_run=max_calls) for t in tools if t.kind == "free"]
    return default_registry(paid=False).free_policy().with_rows(*rows)


def make_deps(
    tmp_path: Path,
    model: ScriptedModel,
    tools: list[Tool],
    *,
    network: Any = None,
    **kwargs: Any,
) -> Deps:
    store = kwargs.pop("store", None) or RunStore(tmp_path / "nib.db")
    policy = kwargs.pop("free_policy", None) or policy_for(*tools)
    network = network or get_network("anvil")
    # Free doubles never read it: a client that would connect only when asked.
    chain = kwargs.pop("chain", None) or ChainClient(network.rpc_url)
    return Deps(
        model=model,
        registry=ToolRegistry(tools),
        store=store,
        network=network,
        chain=chain,
        free_policy=policy,
        **kwargs,
    )


def events(deps: Deps, run_id: str, type_: str | None = None) -> list[dict[str, Any]]:
    return deps.store.events(run_id, type_)


def dumps(obj: Any) -> str:
    return json.dumps(obj)


# ------------------------------------------------------------------ money on Anvil

FAST_SCRYPT_N = 2**10  # tests only: the default work factor costs ~1 s per unlock
ONE_USDC = 1_000_000
DIME = 100_000


def paid_deps(
    tmp_path: Path,
    dev: Any,
    model: ScriptedModel,
    *,
    limits: Any = None,
    extra_tools: tuple[Tool, ...] = (),
    transfer_tool: Tool | None = None,
    judge: Any = None,
) -> Deps:
    """Real wallet (AGENT key), real in-process judge (JUDGE key), real usdc_transfer."""
    from agent.tools.transfer import UsdcTransferTool
    from chain.client import ChainClient
    from chain.devkeys import AGENT, JUDGE, dev_account
    from judge.calibration import BetaCalibrator
    from judge.jev import Judge
    from judge.verdict import VerdictSigner
    from wallet.keystore import Keystore
    from wallet.signer import Wallet

    db = tmp_path / "nib.db"
    client = ChainClient(dev.rpc_url, dev.chain_id)
    network = get_network("anvil", rpc_url=dev.rpc_url, usdc=dev.usdc)
    keystore_path = tmp_path / "wallet.json"
    keystore = Keystore(keystore_path, scrypt_n=FAST_SCRYPT_N)
    if not keystore_path.exists():
        keystore.import_key(dev_account(AGENT).key.hex(), "pw")
    key = keystore.unlock("pw")
    if judge is None:
        judge = Judge(
            VerdictSigner(dev_account(JUDGE)),
            BetaCalibrator(str(db)),
            allowed_assets={dev.chain_id: [dev.usdc]},
        )
    store = RunStore(db)
    wallet = Wallet(
        key,
        db_path=db,
        chain=client,
        usdc=dev.usdc,
        trusted_judge=dev_account(JUDGE).address,
        recheck=getattr(judge, "recheck", None),
        emit=None,
    )
    tools = [transfer_tool or UsdcTransferTool(), *extra_tools]
    return Deps(
        model=model,
        registry=ToolRegistry(tools),
        store=store,
        network=network,
        chain=client,
        judge=judge,
        wallet=wallet,
        limits=limits,
        free_policy=policy_for(*tools),
    )


def usdc_balance(dev: Any, address: str) -> int:
    from chain.usdc import usdc_contract

    return int(usdc_contract(dev.w3, dev.usdc).functions.balanceOf(address).call())
