"""Paid requests per second from concurrent runs vs Anvil's raw USDC transfer throughput.

Ours: N concurrent buyers (separate runs, one shared wallet, one process) each pay the
local paywall k times through nib's whole paid path (quote, JEV verdict, wallet sign,
paid request, x402 settlement on chain, ledger). Peer: the limit on this machine, signed
USDC ``transfer`` transactions sent back-to-back with web3 from several dev accounts
(one thread each, signed before the clock starts) to the same Anvil, until every one is
mined. Each round runs every side once, rotating which goes first; each side's figure
is the median over its rounds; the chain is reverted to the same baseline before each
side runs (Anvil slows as blocks pile up). The x402 package's client at the same concurrency is
measured too, as a reference for the seller's own ceiling.

``python -m bench.throughput [--quick]``
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from bench._util import (
    RAW_SENDERS,
    BenchEnv,
    Figure,
    bench_main,
    fmt_ratio,
    median,
    ratio,
)

__all__ = ["main", "run"]

_RECEIPT_TIMEOUT_S = 60.0
#: A transfer still unmined this long after the last send is stuck in Anvil's pool.
_STUCK_S = 2.0


# -------------------------------------------------------------------------------- ours


def _url(env: BenchEnv, buyer: int) -> str:
    """Buyer ``buyer``'s resource: each buys its own token fact sheet (the same price).

    nib's wallet keeps one live authorization per resource across runs (what a cheating
    seller can hold is bounded by it), so concurrent runs buying one resource take turns;
    concurrent runs buy different things here, on both sides alike.
    """
    from chain.paywall.datasets import tokens

    symbols = sorted(tokens())
    return f"{env.paywall_url}/datasets/token/{symbols[buyer % len(symbols)]}"


async def _ours_round(env: BenchEnv, wallet: Any, round_no: int, buyers: int, each: int) -> float:
    from agent.tools.x402.pay_http import PayHttpTool

    tool = PayHttpTool(env.paywall_url)
    limits = httpx.Limits(max_connections=buyers * 2, max_keepalive_connections=buyers * 2)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        # One free catalog read first, so no buyer's timing includes the tool's cache fill.
        await tool.load_catalog(env.paywall_url, env.context(wallet, http, "warm"))

        async def buyer(b: int) -> None:
            for j in range(each):
                ctx = env.context(wallet, http, f"bench-rps-{round_no}-{b}-{j}")
                await env.paid_call(tool, ctx, _url(env, b))

        start = time.perf_counter()
        await asyncio.gather(*(buyer(b) for b in range(buyers)))
        elapsed = time.perf_counter() - start
    return buyers * each / elapsed


async def _x402_client_round(env: BenchEnv, buyers: int, each: int) -> float:
    """The x402 package's client at the same concurrency: the seller-side ceiling."""
    from bench.x402_latency import peer_client
    from chain.paywall.app import DEFAULT_PRICES

    async with peer_client(env, DEFAULT_PRICES["token"]) as http:

        async def buyer(b: int) -> None:
            url = _url(env, b)
            for _ in range(each):
                resp = await http.get(url)
                if resp.status_code != 200:
                    raise RuntimeError(f"benchmark: x402 client got {resp.status_code} from {url}")

        start = time.perf_counter()
        await asyncio.gather(*(buyer(b) for b in range(buyers)))
        elapsed = time.perf_counter() - start
    return buyers * each / elapsed


# -------------------------------------------------------------------------------- peer


def _signed_transfers(env: BenchEnv, per_sender: int) -> list[list[bytes]]:
    """Raw signed USDC transfers, ``per_sender`` from each raw sender, nonces in order."""
    from web3 import Web3

    from chain.devkeys import OUTSIDER, dev_account
    from chain.usdc import usdc_contract

    w3 = env.chain.w3
    token = usdc_contract(w3, env.usdc)
    data = token.encode_abi("transfer", args=[dev_account(OUTSIDER).address, 1])
    tip = Web3.to_wei(1, "gwei")
    max_fee = int(w3.eth.get_block("latest")["baseFeePerGas"]) * 4 + tip
    batches = []
    for index in RAW_SENDERS:
        account = dev_account(index)
        nonce = w3.eth.get_transaction_count(account.address, "pending")
        batch = []
        for n in range(per_sender):
            tx = {
                "type": 2,
                "chainId": env.network.chain_id,
                "to": env.usdc,
                "data": data,
                "value": 0,
                "gas": 80_000,
                "maxFeePerGas": max_fee,
                "maxPriorityFeePerGas": tip,
                "nonce": nonce + n,
            }
            batch.append(bytes(account.sign_transaction(tx).raw_transaction))
        batches.append(batch)
    return batches


def _peer_round(env: BenchEnv, per_sender: int) -> tuple[float, int]:
    from web3 import Web3

    batches = _signed_transfers(env, per_sender)
    last_hashes: list[Any] = [None] * len(batches)
    errors: list[BaseException] = []
    ready = threading.Barrier(len(batches) + 1)

    def sender(i: int, batch: list[bytes]) -> None:
        w3 = Web3(Web3.HTTPProvider(env.rpc_url, request_kwargs={"timeout": 30}))
        try:
            w3.eth.chain_id  # connect before the clock starts  # noqa: B018
            ready.wait()
            for raw in batch:
                last_hashes[i] = w3.eth.send_raw_transaction(raw)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)
            ready.abort()

    threads = [threading.Thread(target=sender, args=(i, b)) for i, b in enumerate(batches)]
    for t in threads:
        t.start()
    ready.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"benchmark: raw transfer sending failed: {errors[0]!r}") from errors[0]
    # Nonces are sequential per sender: once each sender's last transfer is mined, all are.
    flushes = sum(_wait_mined(env, i, tx_hash) for i, tx_hash in enumerate(last_hashes))
    elapsed = time.perf_counter() - start
    return len(batches) * per_sender / elapsed, flushes


def _wait_mined(env: BenchEnv, i: int, tx_hash: Any) -> int:
    """Wait for ``tx_hash``; return how many times Anvil's pool had to be flushed.

    Anvil's automine can leave ready transactions in its pool when many arrive at once
    (foundry-rs/foundry#10122); nothing would ever mine them, so after _STUCK_S without a
    receipt one ``evm_mine`` flushes the pool. Counted and reported with the figure.
    """
    w3 = env.chain.w3
    start = last_flush = time.perf_counter()
    flushes = 0
    while True:
        receipt = w3.provider.make_request("eth_getTransactionReceipt", [tx_hash.to_0x_hex()])
        found = receipt.get("result")
        if found:
            if int(found["status"], 16) != 1:
                raise RuntimeError(f"benchmark: raw transfer {tx_hash.to_0x_hex()} reverted")
            return flushes
        now = time.perf_counter()
        if now - start > _RECEIPT_TIMEOUT_S:
            raise RuntimeError(f"benchmark: raw transfer not mined: {_stuck(env, i)}")
        if now - last_flush > _STUCK_S:
            w3.provider.make_request("evm_mine", [])
            flushes += 1
            last_flush = now
        time.sleep(0.005)


def _stuck(env: BenchEnv, i: int) -> str:
    """What the node says about raw sender ``i`` when its last transfer is not mined."""
    from chain.devkeys import dev_account

    w3 = env.chain.w3
    who = dev_account(RAW_SENDERS[i]).address
    pool = w3.provider.make_request("txpool_status", []).get("result")
    return (
        f"sender {who}: nonce latest {w3.eth.get_transaction_count(who, 'latest')}, pending "
        f"{w3.eth.get_transaction_count(who, 'pending')}; block {w3.eth.block_number}; "
        f"txpool {pool}"
    )


# -------------------------------------------------------------------------------- run


def run(quick: bool = False, env: BenchEnv | None = None) -> list[dict[str, Any]]:
    """Alternate rounds of ours, the x402 client and raw transfers; one row against the
    client (like for like) and one against the chain's raw transfer rate (the limit)."""
    rounds, buyers, each, per_sender = (1, 2, 1, 10) if quick else (3, 7, 5, 100)
    if env is None:
        with BenchEnv() as own:
            return run(quick, own)
    wallet = env.wallet("throughput")
    ours_rps: list[float] = []
    peer_rps: list[float] = []
    client_rps: list[float] = []
    flushes: list[int] = []

    def peer_side(_round: int) -> float:
        rps, flushed = _peer_round(env, per_sender)
        flushes.append(flushed)
        return rps

    sides: list[tuple[list[float], Callable[[int], float]]] = [
        (ours_rps, lambda r: asyncio.run(_ours_round(env, wallet, r, buyers, each))),
        (peer_rps, peer_side),
        (client_rps, lambda r: asyncio.run(_x402_client_round(env, buyers, each))),
    ]
    for r in range(rounds):
        # Rotate who goes first, so warm-up and drift do not favour one side.
        for out, measure in sides[r % 3 :] + sides[: r % 3]:
            env.reset_chain()
            out.append(measure(r))
    ours, peer, client = median(ours_rps), median(peer_rps), median(client_rps)
    senders = len(RAW_SENDERS)
    raw = {
        "ours_rps": ours,
        "peer_rps": peer,
        "rounds_ours_rps": ours_rps,
        "rounds_peer_rps": peer_rps,
        "x402_client_rps": client,
        "rounds_x402_client_rps": client_rps,
        "buyers": buyers,
        "payments_per_buyer": each,
        "raw_senders": senders,
        "raw_per_sender": per_sender,
        "anvil_pool_flushes": flushes,
    }
    common = (
        f"{buyers} concurrent runs x {each} paid GETs, each run its own token fact sheet "
        "(/datasets/token/SYMBOL, one live authorization per resource), one shared wallet, "
        f"settled on chain by the paywall's facilitator; median of {rounds} rounds, order "
        "rotated, chain reverted to the same baseline before each side."
    )
    vs_client = Figure(
        benchmark="concurrent paid requests/s vs the x402 client",
        ours=f"{ours:.1f} paid req/s",
        peer=f"{client:.1f} paid req/s (x402HttpxClient)",
        ratio=ratio(ours, client),
        notes=(
            f"a rate ratio, higher is better. {common} Peer: the x402 package's httpx "
            "client at the same concurrency against the same paywall (no judge, no ledger)."
        ),
        raw={"kind": "peer", "goal": ">= 1.0x", "met": ratio(ours, client) >= 1.0, **raw},
    )
    vs_chain = Figure(
        benchmark="concurrent paid requests/s vs Anvil's raw USDC transfers",
        ours=f"{ours:.1f} paid req/s",
        peer=f"{peer:.1f} transfers/s (limit: raw transfers)",
        ratio=ratio(ours, peer),
        notes=(
            f"share of the chain's limit reached. {common} Limit: {senders} dev accounts x "
            f"{per_sender} pre-signed USDC transfers sent back-to-back with web3 (a thread "
            "each) until mined."
            + (
                f" Anvil left ready transfers unmined {sum(flushes)} time(s) (foundry#10122); "
                f"an evm_mine after {_STUCK_S:.0f} s flushed them, inside the limit's time."
                if sum(flushes)
                else ""
            )
        ),
        raw={"kind": "limit", "goal": ">= 0.5x", "met": ratio(ours, peer) >= 0.5, **raw},
    )
    return [vs_client.as_dict(), vs_chain.as_dict()]


def report(rows: list[dict[str, Any]]) -> str:
    result = rows[1]
    rounds_o = ", ".join(f"{x:.1f}" for x in result["rounds_ours_rps"])
    rounds_p = ", ".join(f"{x:.1f}" for x in result["rounds_peer_rps"])
    rounds_c = ", ".join(f"{x:.1f}" for x in result["rounds_x402_client_rps"])
    return "\n".join(
        [
            f"paid throughput: {result['buyers']} concurrent runs x "
            f"{result['payments_per_buyer']} payments per round",
            f"  nib paid requests/s:        median {result['ours_rps']:.1f} (rounds: {rounds_o})",
            f"  Anvil raw USDC transfers/s: median {result['peer_rps']:.1f} (rounds: {rounds_p})",
            f"  x402 httpx client (same concurrency, reference): median "
            f"{result['x402_client_rps']:.1f} req/s (rounds: {rounds_c})",
            f"  Anvil pool flushes per peer round (foundry#10122): {result['anvil_pool_flushes']}",
            f"  ratio nib/x402 client: {fmt_ratio(rows[0]['ratio'])}; "
            f"nib/raw transfers: {fmt_ratio(result['ratio'])}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.throughput", __doc__, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
