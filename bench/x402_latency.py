"""x402 round trip: one paid request through nib vs the x402 package's own httpx client.

Both buyers pay the same local paywall (chain.paywall.app on a private Anvil) from the same
agent account for the same resource, interleaved (alternating who goes first) so drift
in the chain or the machine hits both. Ours is the whole money-moving path: 402 ->
quote -> JEV verdict (in-process judge, signed) -> wallet checks and signs -> paid
request -> settlement recorded in the ledger -> 200. The peer is x402HttpxClient with an
eth-account signer: 402 -> sign -> paid request -> 200, no judge and no ledger.

``python -m bench.x402_latency [--quick]``
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from bench._util import (
    BENCH_PATH,
    BenchEnv,
    Figure,
    Spread,
    bench_main,
    fmt_ms,
    fmt_ratio,
    median,
    on_fresh_chain,
    ratio,
    run_async,
)

__all__ = ["main", "peer_client", "run"]

NAME = "x402 round trip (median)"


def peer_client(env: BenchEnv, price: int) -> Any:
    """The x402 package's own buyer: x402HttpxClient, eth-account signer, TestUSDC opted in."""
    from x402 import x402Client
    from x402.http.clients import x402HttpxClient
    from x402.mechanisms.evm.exact import register_exact_evm_client
    from x402.mechanisms.evm.signers import EthAccountSigner

    from chain.devkeys import AGENT, dev_account

    network = env.network.caip2
    client = register_exact_evm_client(
        x402Client(), EthAccountSigner(dev_account(AGENT)), networks=network
    )
    # x402 refuses tokens outside its default list; TestUSDC must be opted in, with a cap.
    client.set_spend_controls(
        {
            "allowed_assets": [
                {"network": network, "asset": env.usdc, "max_amount_per_payment": str(price)}
            ]
        }
    )
    return x402HttpxClient(client, timeout=30)


async def _measure(env: BenchEnv, iterations: int, warmup: int) -> dict[str, Any]:
    from agent.tools.x402.pay_http import PayHttpTool
    from chain.paywall.app import DEFAULT_PRICES

    price = DEFAULT_PRICES["token"]
    url = env.paywall_url + BENCH_PATH
    tool = PayHttpTool(env.paywall_url)
    wallet = env.wallet("x402-latency")
    ours: list[float] = []
    peer: list[float] = []
    phases: dict[str, list[float]] = {}
    unpaid: list[float] = []
    async with httpx.AsyncClient(timeout=30) as http, peer_client(env, price) as x402_http:

        async def one_ours(i: int) -> float:
            ctx = env.context(wallet, http, f"bench-x402-{i}")
            start = time.perf_counter()
            await env.paid_call(tool, ctx, url, phases if i >= warmup else None)
            return time.perf_counter() - start

        async def one_peer() -> float:
            start = time.perf_counter()
            resp = await x402_http.get(url)
            elapsed = time.perf_counter() - start
            if resp.status_code != 200 or "PAYMENT-RESPONSE" not in resp.headers:
                raise RuntimeError(
                    f"benchmark: the x402 client got {resp.status_code} from {url} "
                    f"({resp.text[:200]!r}); expected a settled 200."
                )
            return elapsed

        async def one_unpaid_get() -> float:
            # What pay_http's re-check of the seller's terms costs: one unpaid GET -> 402.
            start = time.perf_counter()
            resp = await http.get(url)
            if resp.status_code != 402:
                raise RuntimeError(f"benchmark: expected a 402 from {url}, got {resp.status_code}")
            return time.perf_counter() - start

        for i in range(warmup + iterations):
            first_ours = i % 2 == 0
            a = await one_ours(i) if first_ours else await one_peer()
            b = await one_peer() if first_ours else await one_ours(i)
            get_402 = await one_unpaid_get()
            if i < warmup:
                continue
            ours.append(a if first_ours else b)
            peer.append(b if first_ours else a)
            unpaid.append(get_402)
    return {
        "ours": ours,
        "peer": peer,
        "unpaid_get": unpaid,
        "phases": {k: median(v) for k, v in phases.items()},
        "price_atomic": price,
    }


def run(quick: bool = False, env: BenchEnv | None = None) -> dict[str, Any]:
    """Measure both buyers; return medians, p95s (seconds) and ours / peer."""
    iterations, warmup = (3, 1) if quick else (30, 3)
    data = on_fresh_chain(env, lambda e: run_async(lambda: _measure(e, iterations, warmup)))
    ours, peer = data["ours"], data["peer"]
    o, p = Spread.of(ours), Spread.of(peer)
    r = ratio(o.median, p.median)
    figure = Figure(
        benchmark=NAME,
        ours=str(o),
        peer=str(p),
        ratio=r,
        notes=(
            f"ours/peer median; p95 ratio {fmt_ratio(ratio(o.p95, p.p95))}; {iterations} paid "
            f"GETs each of {BENCH_PATH} ({data['price_atomic']} atomic USDC), interleaved, "
            f"{warmup} warm-up dropped. Peer: x402HttpxClient + EthAccountSigner (no judge, "
            "no ledger). Ours adds the terms re-check GET (alongside the chain-time check), "
            "the signed JEV verdict, the wallet's checks (verdict re-check, one live "
            "authorization, the settlement proven on chain) and the durable SQLite spend "
            f"meter/ledger (fsync per commit); best-vs-best ratio "
            f"{fmt_ratio(ratio(min(ours), min(peer)))}."
        ),
        raw={
            "kind": "peer",
            "goal": "median <= 1.05x, p95 <= 1.1x",
            "met": r <= 1.05 and ratio(o.p95, p.p95) <= 1.1,
            "median_ours_s": o.median,
            "median_peer_s": p.median,
            "p95_ours_s": o.p95,
            "p95_peer_s": p.p95,
            "p95_ratio": ratio(o.p95, p.p95),
            "best_ours_s": min(ours),
            "best_peer_s": min(peer),
            "iterations": iterations,
            "phases_median_s": data["phases"],
            "unpaid_get_median_s": median(data["unpaid_get"]),
            "samples_ours_s": ours,
            "samples_peer_s": peer,
        },
    )
    return figure.as_dict()


def report(result: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"x402 paid round trip, {result['iterations']} interleaved requests each",
            f"  nib (quote+verdict+sign+settle): median {fmt_ms(result['median_ours_s'])}, "
            f"p95 {fmt_ms(result['p95_ours_s'])}",
            f"  x402 httpx client:               median {fmt_ms(result['median_peer_s'])}, "
            f"p95 {fmt_ms(result['p95_peer_s'])}",
            "  nib phases (median): "
            + ", ".join(f"{k} {fmt_ms(v)}" for k, v in result["phases_median_s"].items()),
            f"  one unpaid GET -> 402 alone (the terms re-check, which pay_http runs alongside "
            f"the chain-time check): median {fmt_ms(result['unpaid_get_median_s'])} = "
            f"{result['unpaid_get_median_s'] / result['median_peer_s']:.0%} of the peer's "
            "median round trip",
            f"  best: nib {fmt_ms(result['best_ours_s'])}, x402 client "
            f"{fmt_ms(result['best_peer_s'])}",
            f"  ratio nib/x402: median {fmt_ratio(result['ratio'])}, "
            f"p95 {fmt_ratio(result['p95_ratio'])}, best "
            f"{fmt_ratio(ratio(result['best_ours_s'], result['best_peer_s']))}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.x402_latency", __doc__, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
