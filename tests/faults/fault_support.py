"""Helpers for the fault suite: a real agent (loop, wallet, judge, tools) on a given chain,
ledger and chain readings, and an EIP-3009 relay that settles like a facilitator.

Deps are wired like ``agent.cli.runtime.Runtime.deps``; the wallet's audit events are routed
into the run store so signatures and refusals sit in ``agent_events`` with the loop's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from web3 import Web3

from agent.loop.limits import Limits
from agent.loop.result import AgentResult
from agent.loop.run import Deps
from agent.models.base import Model
from agent.models.scripted import ScriptedModel
from agent.store import RunStore, spend_reader
from agent.tools.base import Tool, ToolRegistry
from agent.tools.registry_default import default_registry
from chain.client import ChainClient
from chain.devkeys import AGENT, DEPLOYER, JUDGE, SELLER, dev_account
from chain.networks import get_network
from chain.usdc import usdc_contract
from judge.calibration import BetaCalibrator
from judge.jev import Judge
from judge.records import VerdictRecords
from judge.verdict import VerdictSigner
from tests._services import Composition, Services, records_beside, run_registered
from tests._support import ChainReadings
from wallet.keystore import KeyHandle
from wallet.meter import SpendMeter
from wallet.nonces import NonceManager
from wallet.service import WalletClient
from wallet.signer import Wallet

AGENT_ADDR = dev_account(AGENT).address
SELLER_ADDR = dev_account(SELLER).address
JUDGE_ADDR = dev_account(JUDGE).address
GAS_PRICE = 50_000  # chain.paywall.app DEFAULT_PRICES["gas"]

GAS = {"text": "gas stats", "kind": "gas_stats"}
TRANSFERS = {"text": "transfer stats", "kind": "transfer_stats"}


TIP = 10_000  # 0.01 USDC per direct transfer
#: A task's cap. The judge values each of 2 checklist items at half of it, so every buy
#: here has EV > 0 (p 0.5 x 0.5 USDC > 0.10 USDC).
CAP_PER_TASK = 1_000_000
RECEIPT = {"text": "transfer receipt", "kind": "transfer_receipt"}
SEND = {"action": "call", "tool": "usdc_transfer", "args": {"to": SELLER_ADDR, "amount": TIP}}


def pay(url: str) -> dict[str, Any]:
    return {"action": "call", "tool": "pay_http", "args": {"url": url}}


def buyer_model(paywall_url: str, items: tuple[dict[str, Any], ...]) -> ScriptedModel:
    """A model that buys whatever of ``items`` is still missing (a failed buy is retried:
    the paywall's analytics over x402, a receipt by a direct transfer), then finishes."""
    replies = {"checklist": checklist(*items), "replan": "go on", "synthesize": "done",
               "lesson": "none"}

    def reply(req: Any) -> Any:
        missing = [i["kind"] for i in req.context.get("checklist", []) if not i["covered"]]
        if req.purpose in replies:
            return replies[req.purpose]
        if "gas_stats" in missing:
            return pay(paywall_url + "/analytics/gas")
        if "transfer_stats" in missing:
            return pay(paywall_url + "/analytics/transfers")
        if "transfer_receipt" in missing:
            return SEND
        return {"action": "done"}

    return ScriptedModel(reply)


def checklist(*items: dict[str, Any]) -> dict[str, Any]:
    return {"items": list(items)}


def make_judge(db: Path, usdc: str) -> Judge:
    return Judge(
        VerdictSigner(dev_account(JUDGE)), BetaCalibrator(str(db)), allowed_assets={31337: [usdc]},
        records=VerdictRecords(db),
    )


@dataclass
class Agent(ChainReadings):
    deps: Deps
    wallet: Wallet | WalletClient
    store: RunStore
    client: ChainClient
    db: Path | str
    usdc: str
    start_block: int
    extra: dict[str, Any] = field(default_factory=dict)
    services: Services | None = None

    async def run(self, task: str) -> AgentResult:
        """``run_task`` as ``nib run`` does it (the task registered with a judge service)."""
        return await run_registered(task, self.deps, self.services)

    def nonces(self) -> dict[str, object]:
        """The wallet's nonce state as its tables hold it (whichever process signs)."""
        view = NonceManager(self.client.w3, AGENT_ADDR, store=SpendMeter(self.db, self.client).store,
                            scope=f"{self.client.chain_id()}:{AGENT_ADDR.lower()}")
        return view.snapshot()



def build_agent(
    db: Path | str,
    rpc_url: str,
    usdc: str,
    model: Model,
    *,
    judge: Any = None,
    tools: list[Tool] | None = None,
    allowlist: tuple[str, ...] = (),
    limits: Limits | None = None,
    paywall_url: str | None = None,
    extras: dict[str, Any] | None = None,
    treasury_cap: int | None = None,
    composition: Composition | None = None,
    hang_on: dict[str, str] | None = None,
    wallet_client: WalletClient | None = None,
) -> Agent:
    """The agent in-process, or, with a services ``composition``, holding only clients of
    the judge and wallet services (their own processes, their records where `nib services
    up` keeps them: ``Agent.db``, see tests._services.records_beside); the wallet service
    stops at ``hang_on`` (see tests/service_child.py). A worker process of the services
    composition passes the clients it holds: ``judge`` and ``wallet_client``."""
    client = ChainClient(rpc_url, 31337)
    store = RunStore(db)
    records = db

    def wallet_emit(name: str, data: dict[str, Any]) -> None:
        store.event(str(data.get("run_id") or "wallet"), name, data)

    wallet: Wallet | WalletClient
    services = None
    if composition is not None and composition.services:
        records = records_beside(db)
        services = composition.start(records, wallet_emit, treasury_cap=treasury_cap,
                                     hang_on=hang_on)
    if services is not None:
        judge, wallet = services.judge, services.wallet
    elif wallet_client is not None:
        wallet = wallet_client
        wallet.emit = wallet_emit
    else:
        judge = judge if judge is not None else make_judge(db, usdc)
        wallet = Wallet(
            KeyHandle(dev_account(AGENT)),
            db_path=db,
            chain=client,
            usdc=usdc,
            trusted_judge=JUDGE_ADDR,
            recheck=judge.recheck,
            emit=wallet_emit,
            meter=SpendMeter(db, client, treasury_cap_atomic=treasury_cap),
        )
    store.spend_of = spend_reader(wallet.meter)  # as agent.cli.runtime.Runtime does
    registry = ToolRegistry(tools) if tools is not None else default_registry(paywall_url=paywall_url)
    deps = Deps(
        model=model,
        registry=registry,
        store=store,
        network=get_network("anvil", rpc_url=rpc_url, usdc=usdc),
        chain=client,
        judge=judge,
        wallet=wallet,
        wallet_address=wallet.address,
        meter=wallet.meter,
        limits=limits,
        allowlist=allowlist,
        extras={"paywall_url": paywall_url, **(extras or {})},
    )
    return Agent(deps, wallet, store, client, records, usdc, client.block_number(),
                 services=services)


# ------------------------------------------------------------------ model provider doubles


def completion(text: str) -> httpx.Response:
    """An OpenAI chat-completions 200 carrying ``text``."""
    body = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }
    return httpx.Response(200, json=body)


Step = str | dict[str, Any] | httpx.Response | type[Exception] | Callable[[], Any]


class Provider:
    """An OpenAI-compatible endpoint behind httpx.MockTransport that plays ``steps`` in
    order (reply text/JSON, a raw response, a transport exception, or a callable returning
    one of those, run when its turn comes), then ``fallback``."""

    def __init__(self, steps: list[Step], fallback: str = "Partial answer from evidence.") -> None:
        self.steps = list(steps)
        self.fallback = fallback
        self.requests: list[dict[str, Any]] = []
        self.transport = httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        step: Step = self.steps.pop(0) if self.steps else self.fallback
        if callable(step) and not isinstance(step, type):
            step = step()
        if isinstance(step, type) and issubclass(step, Exception):
            raise step("simulated", request=request)  # type: ignore[call-arg]
        if isinstance(step, httpx.Response):
            return step
        return completion(step if isinstance(step, str) else json.dumps(step))


# ------------------------------------------------------------------ relaying authorizations


def relay_authorization(w3: Web3, usdc: str, auth: dict[str, Any], signature: str) -> str:
    """Submit an EIP-3009 authorization from DEPLOYER (what a facilitator does)."""
    relayer = dev_account(DEPLOYER)
    fn = usdc_contract(w3, usdc).get_function_by_signature(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
    )(
        Web3.to_checksum_address(auth["from"]),
        Web3.to_checksum_address(auth["to"]),
        int(auth["value"]),
        int(auth["validAfter"]),
        int(auth["validBefore"]),
        bytes.fromhex(str(auth["nonce"])[2:]),
        bytes.fromhex(signature[2:]),
    )
    tx = fn.build_transaction(
        {
            "from": relayer.address,
            "nonce": w3.eth.get_transaction_count(relayer.address, "pending"),
            "chainId": w3.eth.chain_id,
            "gas": 200_000,
        }
    )
    tx_hash = w3.eth.send_raw_transaction(relayer.sign_transaction(tx).raw_transaction)
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)
    return ("ok:" if receipt["status"] == 1 else "reverted:") + "0x" + bytes(tx_hash).hex()


def poll(check: Callable[[], Any], *, timeout_s: float = 20.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy; raise after ``timeout_s``."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout_s:g} s")
        time.sleep(0.05)
