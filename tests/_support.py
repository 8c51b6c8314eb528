"""Helpers several test packages share: a loopback ASGI server, a stand-in for a user's HTTP
proxy, and chain readings of a run."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from chain.client import ChainClient
from chain.devkeys import AGENT, dev_account
from chain.usdc import usdc_contract
from wallet.ledger import Ledger, SpendRow

AGENT_ADDR = dev_account(AGENT).address


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Serve an ASGI ``app`` with uvicorn on a free loopback port; yield its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="test-seller", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the test seller did not start within 15 s")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class Proxy:
    """A user's HTTP proxy as nib meets it, on a free loopback port: it records the request
    line of each request it is sent (``seen``: ``GET http://host/path``, ``CONNECT
    host:443``) and answers every one with ``status`` (502, as a proxy answers for this
    machine's loopback, which it cannot reach) and ``headers``."""

    def __init__(self, status: int = 502, headers: dict[str, str] | None = None) -> None:
        self.seen: list[str] = []
        proxy = self

        class _Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                proxy.seen.append(f"{self.command} {self.path}")
                self.send_response(proxy.status)
                for name, value in (proxy.headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_CONNECT = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.status = status
        self.headers = headers
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Proxy:
        threading.Thread(target=self._server.serve_forever, name="test-proxy", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def proxy_in_environment(monkeypatch: Any, status: int = 502,
                         headers: dict[str, str] | None = None) -> Iterator[Proxy]:
    """A :class:`Proxy` named in HTTP_PROXY, HTTPS_PROXY and ALL_PROXY (both spellings:
    the standard library prefers the lower-case one) with no NO_PROXY, as an outside tester
    ran nib."""
    with Proxy(status, headers) as proxy:
        for name in ("http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy.url)
            monkeypatch.setenv(name.upper(), proxy.url)
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        yield proxy


class ChainReadings:
    """What a test reads back about a run: its ledger, balances and the agent's transfers.

    Mixed into the harness dataclasses, which provide ``db``, ``client``, ``usdc`` and
    ``start_block``.
    """

    db: Path
    client: ChainClient
    usdc: str
    start_block: int

    def ledger(self, run_id: str | None = None) -> list[SpendRow]:
        return Ledger(self.db).rows(run_id)

    def balance(self, who: str) -> int:
        return int(usdc_contract(self.client.w3, self.usdc).functions.balanceOf(who).call())

    def transfers_from_agent(self) -> list[Any]:
        logs = self.client.transfer_logs(
            self.usdc, self.start_block, "latest", AGENT_ADDR, direction="out"
        )
        return [
            t
            for t in logs
            if t.sender.lower() == AGENT_ADDR.lower() and t.block_number > self.start_block
        ]


@contextmanager
def running_market(rpc_url: str, usdc: str) -> Iterator[dict[str, str]]:
    """The devnet market in this process: the facilitator service, every market seller
    (listed in its discovery catalogue) and the paid MCP server; yields name -> base URL
    (``facilitator`` and ``mcp`` included)."""
    import socket

    from chain.paywall.facilitator_service import create_facilitator_app
    from chain.paywall.market import MARKET, create_seller_app, register_with
    from chain.paywall.mcp_seller import create_mcp_app, register_mcp
    from chain.paywall.serve import AppServer
    with contextlib.ExitStack() as stack:
        fac = stack.enter_context(AppServer(create_facilitator_app(rpc_url), name="facilitator"))
        urls = {"facilitator": fac.url}
        for seller in MARKET:
            app = create_seller_app(seller, fac.url, usdc, rpc_url=rpc_url)
            srv = stack.enter_context(AppServer(app, name=seller.name))
            register_with(fac.url, seller, srv.url)
            urls[seller.name] = srv.url
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        mcp_app = create_mcp_app(base, fac.url, usdc, rpc_url=rpc_url)
        stack.enter_context(AppServer(mcp_app, port=port, name="mcp"))
        register_mcp(fac.url, base)
        urls["mcp"] = base
        yield urls


def assert_money_audited(root: Path) -> None:
    """After a money test: every nib database under ``root`` passes ``nib audit verify``
    (its ledger's hash chain matches its tables), and every finished run's reported spend
    equals its ledger rows as they stood when it finished (settled + outstanding; a row
    failed or released after the run ended was outstanding then). Runs and ledger rows
    may be in different databases (the services keep their records in their own)."""
    import json
    import sqlite3

    from wallet import verify_ledger

    runs: list[tuple[str, float | None, str]] = []
    spends: dict[str, list[tuple[str, int, float]]] = {}
    for db in sorted(root.rglob("*.db")):
        conn = sqlite3.connect(str(db))
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            if "wallet_journal" in tables:
                check = verify_ledger(db)
                assert check.ok, (str(db), check.problems)
                for run_id, status, amount, updated in conn.execute(
                    "SELECT run_id, status, amount, updated_at FROM wallet_spends"
                ):
                    spends.setdefault(run_id, []).append((status, amount, updated))
            if "agent_runs" in tables:
                runs += conn.execute(
                    "SELECT run_id, ended_at, result FROM agent_runs WHERE result IS NOT NULL"
                ).fetchall()
        finally:
            conn.close()
    if not spends:
        return  # no ledger here: nothing moved money (or it is audited where it lives)
    for run_id, ended_at, result in runs:
        spend = json.loads(result).get("spend") or {}
        rows = spends.get(run_id, [])
        expected = sum(
            amount
            for status, amount, updated in rows
            if status in ("settled", "signed", "reserved")
            or (ended_at is not None and updated > ended_at)
        )
        assert spend.get("usdc_atomic") == expected, (run_id, spend, rows)


def lying_transfer(
    w3: Any, usdc: str, chain_id: int, to: str, amount: int, nonce: int, *, task_id: str
) -> tuple[dict[str, Any], Any]:
    """A pinned USDC transfer and the judge request for it, claiming what a compromised
    agent would: unlimited budgets, no approval threshold, no recipient list."""
    from judge.fingerprint import transaction_fingerprint

    base = int(w3.eth.get_block("latest")["baseFeePerGas"])
    tx = {"chainId": chain_id, "to": usdc, "value": 0,
          "data": usdc_contract(w3, usdc).encode_abi("transfer", [to, amount]),
          "nonce": nonce, "gas": 60_000,
          "maxFeePerGas": base + 10**8, "maxPriorityFeePerGas": 10**8}
    args = {"to": to, "amount": str(amount)}
    return tx, _claiming(args, transaction_fingerprint(tx), tx, usdc, chain_id, to, amount, task_id)


def _claiming(
    args: dict[str, str], payload_fingerprint: str, payload: dict[str, Any], usdc: str,
    chain_id: int, to: str, amount: int, task_id: str,
) -> Any:
    """The judge request a compromised agent sends: unlimited budgets, no threshold."""
    from judge.fingerprint import call_fingerprint
    from judge.jev import PaidCallRequest

    return PaidCallRequest(
        tool="transfer_usdc", args=args, call_fingerprint=call_fingerprint("transfer_usdc", args),
        payload_fingerprint=payload_fingerprint, price=amount, asset=usdc,
        recipient=to, chain_id=chain_id,
        remaining_budget=10**15, balance=10**15, per_call_cap_atomic=10**15, spend_cap_atomic=10**15,
        approval_threshold_atomic=None, missing=("receipt",), tool_facts=("receipt",),
        task_id=task_id, payload=payload,
    )


def lying_authorization(
    w3: Any, usdc: str, chain_id: int, payer: str, to: str, amount: int, *, task_id: str,
    name: str = "USDC", version: str = "2", valid_s: int = 600, url: str | None = None,
    verifying_contract: str | None = None,
) -> tuple[dict[str, Any], Any]:
    """An EIP-3009 authorization (typed data) and the judge request for it, claiming what
    a compromised agent would; ``name``/``version``: the EIP-712 domain it is built under
    (the token's is ("USDC", "2") on the devnet); ``url``: the resource it claims to buy
    (a services' judge reads its 402 for the payTo: a real seller's, e.g. the paywall's);
    ``verifying_contract``: the domain's contract, claimed as the asset too (default: the token)."""
    import os

    from chain.usdc import eip3009_typed_data
    from judge.fingerprint import typed_data_fingerprint

    now = int(w3.eth.get_block("latest")["timestamp"])
    payload = dict(eip3009_typed_data(
        name=name, version=version, chain_id=chain_id, verifying_contract=verifying_contract or usdc,
        sender=payer,
        recipient=to, value=amount, valid_after=0, valid_before=now + valid_s,
        nonce=os.urandom(32)))
    args = {"url": url or f"http://seller.invalid/data/{payload['message']['nonce']}"}
    fp = typed_data_fingerprint(payload)
    return payload, _claiming(args, fp, payload, verifying_contract or usdc, chain_id, to, amount, task_id)


def offline_deps(chain: Any, paywall: Any, tmp_path: Path, *, sellers: tuple[str, ...] = (),
                 limits: Any = None) -> Any:
    """What ``nib run`` wires on the devnet with no model: the offline planner, the default
    tools naming the local paywall, the paywall and ``sellers`` allowlisted, the in-process
    judge and the verdict-gated wallet on one SQLite file under ``tmp_path``."""
    from agent.loop.run import Deps
    from agent.models.offline import OfflinePlanner
    from agent.store import RunStore
    from agent.tools.registry_default import default_registry
    from chain.devkeys import JUDGE
    from chain.networks import get_network
    from judge.jev import Judge
    from judge.verdict import VerdictSigner
    from wallet.keystore import KeyHandle
    from wallet.signer import Wallet

    db = tmp_path / "nib.db"
    client = ChainClient(chain.rpc_url, chain.chain_id)
    signer = VerdictSigner(dev_account(JUDGE))
    judge = Judge(signer, allowed_assets={chain.chain_id: {chain.usdc}})
    wallet = Wallet(KeyHandle(dev_account(AGENT)), db_path=db, chain=client, usdc=chain.usdc,
                    trusted_judge=signer.address, recheck=judge.recheck)  # fmt: skip
    return Deps(
        model=OfflinePlanner(),
        registry=default_registry(paywall_url=paywall.url),
        store=RunStore(db),
        network=get_network("anvil", rpc_url=chain.rpc_url, usdc=chain.usdc),
        chain=client,
        judge=judge,
        wallet=wallet,
        wallet_address=wallet.address,
        meter=wallet.meter,
        limits=limits,
        allowlist=(paywall.url, *sellers),
        extras={"paywall_url": paywall.url},
    )
