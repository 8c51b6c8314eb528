"""The self-model: a fresh snapshot of who and where the agent is, taken every turn.

Identity and version, network, RPC, USDC address, wallet address and its live
balance read from the chain, what is left of every budget, and exactly which tools
are wired now. Reasoning from a stale snapshot is how agents promise spends they
cannot make, so it is never reused across turns.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import metadata

from agent.loop.budget import BudgetGate
from agent.loop.context import RunContext
from agent.loop.stop import raise_if_dependency
from agent.seams import ChainReader
from chain import aio_rpc
from chain.money import format_usdc

__all__ = ["AGENT_NAME", "SelfModel", "SelfModelReader", "agent_version", "read_balance"]

AGENT_NAME = "nib"


@lru_cache(maxsize=1)
def agent_version() -> str:
    """The installed package version (``0.0.0+unknown`` when run from a bare checkout).

    Cached: the code running in this process cannot change version under it."""
    try:
        return metadata.version("nib")
    except metadata.PackageNotFoundError:
        return "0.0.0+unknown"


@dataclass(frozen=True)
class SelfModel:
    """One turn's snapshot. Money in atomic USDC; ``wallet_balance_usdc`` None = no wallet."""

    agent: str
    version: str
    network: str
    chain_id: int
    rpc_url: str
    usdc: str | None
    wallet: str | None
    wallet_balance_usdc: int | None
    spend_left_usdc: int
    tokens_left: int
    steps_left: int
    deadline_left_s: float
    tools: tuple[tuple[str, str], ...]

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["tools"] = [{"name": n, "kind": k} for n, k in self.tools]
        return data

    def render(self) -> str:
        """The prompt block: short lines, facts only."""
        balance = (
            "no wallet wired (paid tools cannot pay)"
            if self.wallet_balance_usdc is None
            else format_usdc(self.wallet_balance_usdc)
        )
        tools = ", ".join(f"{n} ({k})" for n, k in self.tools) or "none"
        return "\n".join(
            [
                f"agent: {self.agent} {self.version}",
                f"network: {self.network} (chain id {self.chain_id}), rpc {self.rpc_url}",
                f"usdc: {self.usdc or 'not configured'}",
                f"wallet: {self.wallet or 'none'}, balance {balance}",
                f"left: {format_usdc(self.spend_left_usdc)} spend, {self.tokens_left} tokens, "
                f"{self.steps_left} steps, {self.deadline_left_s:.0f} s",
                f"tools wired now: {tools}",
            ]
        )


async def read_balance(chain: ChainReader, usdc: str | None, wallet: str | None) -> int | None:
    """The wallet's live USDC balance from the chain (None without a wallet or token).

    Raises chain.errors.RpcUnreachable when the node does not answer.
    """
    if not usdc or not wallet:
        return None
    return int(await aio_rpc.token_balance(chain, usdc, wallet))


class SelfModelReader:
    """Takes one run's self-model each turn (and before an approved paid call), keeping
    the live balance on the run context for the judge's request."""

    def __init__(self, run: RunContext, budget: BudgetGate) -> None:
        self.run = run
        self.budget = budget

    async def read(self) -> SelfModel:
        """A fresh snapshot; a chain outage while reading the balance stops the run."""
        run, deps = self.run, self.run.deps
        net = deps.network
        wallet_addr = deps.wallet_address or (deps.wallet.address if deps.wallet else None)
        try:
            balance = await read_balance(deps.chain, net.usdc, wallet_addr)
        except Exception as exc:
            raise_if_dependency(exc)
            raise
        run.balance = balance
        return SelfModel(
            agent=AGENT_NAME,
            version=agent_version(),
            network=net.name,
            chain_id=net.chain_id,
            rpc_url=net.rpc_url,
            usdc=net.usdc,
            wallet=wallet_addr,
            wallet_balance_usdc=balance,
            spend_left_usdc=self.budget.spend_left(),
            tokens_left=self.budget.tokens_left(),
            steps_left=max(0, run.limits.max_steps - run.state.step),
            deadline_left_s=max(0.0, run.limits.wall_clock_s - run.elapsed()),
            tools=tuple(
                (n, t.kind)
                for n in deps.registry.names()
                if (t := deps.registry.get(n)) is not None
            ),
        )
