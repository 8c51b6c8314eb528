"""Paid requests per second at 8 concurrent buyers: nib (services, as ``nib run`` builds it
by default, and in-process) vs the x402 package's client, and the seller's own ceiling.

Each side runs 8 buyers at once, each buying its own token fact sheet several times
(``/datasets/token/SYMBOL?buyer=N``: nib keeps one live authorization per resource, so
buyers of one resource would take turns; both sides buy the same resources), all from the agent's
account, settled on chain by the paywall's facilitator. Sides, in rounds, the order
rotating each round, the chain reverted to the same baseline before each side:

- **peer**: ``x402HttpxClient`` (402 -> sign -> paid GET), one client per process;
- **services**: nib's whole paid path (quote, JEV verdict, wallet checks and signature,
  paid GET, settlement proven on chain, ledger) through the judge and wallet services,
  each run's task registered before the clock starts;
- **in-process**: the same path with the judge (records on) and wallet in the process;
- **limit**: what the seller can settle: the same number of paid GETs whose payment
  headers were made (402 read, authorization signed by the x402 client) before the clock
  starts, so the seller's work (verify, settle on chain, answer) is all that is timed.

``python -m bench.throughput [--quick]``
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from bench._util import (
    BenchEnv,
    Decides,
    Figure,
    LoadWindow,
    bench_main,
    fmt_ratio,
    median,
    ratio,
    report_rows,
    with_details,
)

if TYPE_CHECKING:
    from agent.seams import AgentWallet
    from bench.roundtrip import Services

__all__ = ["main", "run"]

BUYERS = 8
GOAL = 0.8
SIDES = ("peer", "services", "local", "limit")


def _url(env: BenchEnv, buyer: int) -> str:
    """Buyer ``buyer``'s own resource: a token fact sheet, the buyer named in the query.
    The paywall sells 7 sheets, so without the query buyers 0 and 7 bought one resource
    and nib's pair took turns (one live authorization per resource): 12.7 against 20.3
    paid req/s at 8 buyers (in-process, load 3-4)."""
    from chain.paywall.datasets import tokens

    symbols = sorted(tokens())
    return f"{env.paywall_url}/datasets/token/{symbols[buyer % len(symbols)]}?buyer={buyer}"


async def _buyers(buyers: int, one: Callable[[int], Awaitable[int]]) -> float:
    """Run ``one(b)`` for every buyer at once; paid requests per second (``one`` returns
    how many it made)."""
    start = time.perf_counter()
    done = await asyncio.gather(*(one(b) for b in range(buyers)))
    return sum(done) / (time.perf_counter() - start)


async def _nib(env: BenchEnv, wallet: AgentWallet, judges: Sequence[Decides], runs: list[str],
               buyers: int, each: int) -> float:
    from agent.tools.x402.pay_http import PayHttpTool

    tool = PayHttpTool(env.paywall_url)
    limits = httpx.Limits(max_connections=buyers * 2, max_keepalive_connections=buyers * 2)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        await tool.load_catalog(env.paywall_url, env.context(wallet, http, "warm"))

        async def buyer(b: int) -> int:
            ctx = env.context(wallet, http, runs[b], judge=judges[b])
            for _ in range(each):
                await env.paid_call(tool, ctx, _url(env, b), judge=judges[b])
            return each

        return await _buyers(buyers, buyer)


async def _peer(env: BenchEnv, buyers: int, each: int) -> float:
    from bench.roundtrip import peer_client
    from chain.paywall.app import DEFAULT_PRICES

    async with peer_client(env, DEFAULT_PRICES["token"]) as http:

        async def buyer(b: int) -> int:
            for _ in range(each):
                resp = await http.get(_url(env, b))
                if resp.status_code != 200:
                    raise RuntimeError(f"benchmark: x402 client got {resp.status_code}")
            return each

        return await _buyers(buyers, buyer)


async def _limit(env: BenchEnv, buyers: int, each: int) -> float:
    """The seller's ceiling: paid GETs with payment headers made before the clock."""
    from x402.http.x402_http_client import x402HTTPClient

    from bench.roundtrip import peer_x402
    from chain.paywall.app import DEFAULT_PRICES

    client = peer_x402(env, DEFAULT_PRICES["token"])
    wire = x402HTTPClient(client)
    async with httpx.AsyncClient(timeout=60) as http:
        signed: list[list[dict[str, str]]] = []
        for b in range(buyers):
            mine = []
            for _ in range(each):
                resp = await http.get(_url(env, b))
                body = json.loads(resp.content) if resp.content else None
                required = wire.get_payment_required_response(resp.headers.get, body)
                mine.append(wire.encode_payment_signature_header(
                    await client.create_payment_payload(required)))
            signed.append(mine)

        async def buyer(b: int) -> int:
            for headers in signed[b]:
                resp = await http.get(_url(env, b), headers=headers)
                if resp.status_code != 200:
                    raise RuntimeError(f"benchmark: a pre-signed payment got {resp.status_code}")
            return each

        return await _buyers(buyers, buyer)


@dataclass(frozen=True)
class _Built:
    """The compositions a round pays through: the services (their wallet client), or the
    in-process judge and wallet."""

    services: Services
    remote: AgentWallet
    judge: Decides
    wallet: AgentWallet


def _round(env: BenchEnv, side: str, round_no: int, buyers: int, each: int,
           built: _Built) -> float:
    env.reset_chain()
    if side == "peer":
        return asyncio.run(_peer(env, buyers, each))
    if side == "limit":
        return asyncio.run(_limit(env, buyers, each))
    runs = [f"bench-rps-{side}-{round_no}-{b}" for b in range(buyers)]
    if side == "services":
        from bench.roundtrip import register

        judges = [register(env, built.services, run_id) for run_id in runs]
        return asyncio.run(_nib(env, built.remote, judges, runs, buyers, each))
    return asyncio.run(_nib(env, built.wallet, [built.judge] * buyers, runs, buyers, each))


def run(quick: bool = False, env: BenchEnv | None = None) -> list[dict[str, object]]:
    from bench.roundtrip import Services, in_process
    from wallet.service import WalletClient

    rounds, buyers, each = (1, 2, 1) if quick else (3, BUYERS, 4)
    if env is None:
        with BenchEnv() as own:
            return run(quick, own)
    judge, wallet = in_process(env, "throughput")
    rates: dict[str, list[float]] = {side: [] for side in SIDES}
    load = LoadWindow()
    with Services(env) as services:
        built = _Built(services, WalletClient(services.socket), judge, wallet)
        for r in range(rounds):
            load.sample()
            for side in SIDES[r % len(SIDES):] + SIDES[:r % len(SIDES)]:
                rates[side].append(_round(env, side, r, buyers, each, built))
        load.sample()
    med = {side: median(v) for side, v in rates.items()}
    summary = load.summary()
    details = [
        f"{buyers} concurrent buyers x {each} paid GETs per side per round, {rounds} rounds, "
        f"order rotated, chain reverted before each side; load {summary['text']}",
        *(f"  {side:<9} median {med[side]:6.1f} paid req/s (rounds: "
          + ", ".join(f"{x:.1f}" for x in rates[side]) + ")" for side in SIDES),
    ]
    common = (f"{buyers} concurrent buyers x {each} paid GETs of their own token fact sheet, "
              f"median of {rounds} rounds interleaved with the other sides (order rotated)")
    rows = []
    for side, label in (("services", "services (nib run's default)"),
                        ("local", "in-process (records on)")):
        r_client = ratio(med[side], med["peer"])
        per_round = [ratio(a, b) for a, b in zip(rates[side], rates["peer"], strict=True)]
        rows.append(Figure(
            benchmark=f"paid requests/s at {buyers} buyers, {label} vs the x402 client",
            ours=f"{med[side]:.1f} paid req/s",
            peer=f"{med['peer']:.1f} paid req/s (x402HttpxClient)",
            ratio=r_client,
            notes=(f"a rate ratio, higher is better; per-round ratios "
                   f"{fmt_ratio(min(per_round))}-{fmt_ratio(max(per_round))}. {common}."),
            details=tuple(details),
            raw={"kind": "peer", "goal": f">= {GOAL}x", "met": r_client >= GOAL,
                 "load": summary, "rates": rates},
        ).as_dict())
    ceiling = ratio(med["services"], med["limit"])
    ceiling_rounds = [ratio(a, b) for a, b in zip(rates["services"], rates["limit"], strict=True)]
    rows.append(Figure(
        benchmark=f"paid requests/s at {buyers} buyers vs what the seller can settle",
        ours=f"{med['services']:.1f} paid req/s (services)",
        peer=f"{med['limit']:.1f} paid req/s (limit: pre-signed payments)",
        ratio=ceiling,
        notes=(f"share of the seller's measured ceiling (payment headers made before the "
               f"clock: the seller's verify, on-chain settle and answer are all that is "
               f"timed); the x402 client reaches {fmt_ratio(ratio(med['peer'], med['limit']))} "
               f"of it; per-round ratios {fmt_ratio(min(ceiling_rounds))}-"
               f"{fmt_ratio(max(ceiling_rounds))}. {common}."),
        details=tuple(details),
        raw={"kind": "limit", "goal": "-", "met": None, "load": summary},
    ).as_dict())
    return with_details(rows, details)


def report(rows: list[dict[str, object]]) -> str:
    return report_rows(rows)


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.throughput", __doc__, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
