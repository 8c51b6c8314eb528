"""Context tokens over a 10-step run: shaped history vs the full transcript.

The ten steps are real tool calls on the bench devnet (eight free chain reads and two
paid x402 purchases from the local paywall), so the results have the sizes the agent
really sees. Ours is the shaped history the loop sends (agent/history.py: one bounded
line per step); the peer is a naive loop's full transcript that replays every raw
result. Both are counted with the same offline estimator (agent/tokens.py). The
figure is the history carried into the request after step k; the ratio is at step 10.

``python -m bench.context_tokens [--quick]``
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import httpx

from bench._util import BenchEnv, Figure, bench_main, fmt_ratio, ratio, run_async

__all__ = ["STEPS", "main", "run"]

NAME = "context tokens at step 10 (shaped vs full)"
STEPS = 10


async def _real_steps(env: BenchEnv) -> list[tuple[str, dict[str, Any], Any]]:
    """Ten (tool, args, raw result) triples from real tool calls on the bench devnet."""
    from agent.tools.chain_reads import chain_read_tools
    from agent.tools.x402.pay_http import PayHttpTool
    from chain.devkeys import AGENT, dev_account

    tools = {t.name: t for t in chain_read_tools()}
    agent = dev_account(AGENT).address
    pay = PayHttpTool(env.paywall_url)
    wallet = env.wallet("context-tokens")
    steps: list[tuple[str, dict[str, Any], Any]] = []
    async with httpx.AsyncClient(timeout=30) as http:
        ctx = env.context(wallet, http, "bench-context", cap=1_000_000)

        async def free(name: str, args: dict[str, Any]) -> Any:
            tool = tools[name]
            obs = await tool.run(tool.parse_args(args), ctx)
            steps.append((name, args, asdict(obs)))
            return obs

        async def paid(path: str) -> Any:
            url = env.paywall_url + path
            obs = await env.paid_call(pay, ctx, url)
            steps.append((pay.name, {"url": url}, asdict(obs)))
            return obs

        await free("base_fee", {})
        await free("gas_price", {})
        await free("block_info", {})
        await free("eth_balance", {"address": agent})
        await free("token_balance", {"address": agent})
        await free("token_info", {})
        bought = await paid("/analytics/gas?blocks=20")
        await free("tx_receipt", {"tx_hash": bought.data["settlement"]["transaction"]})
        await free("token_transfers", {"address": agent})
        await paid("/analytics/transfers")
    return steps


def series(steps: list[tuple[str, dict[str, Any], Any]]) -> list[dict[str, int | float]]:
    """Per step k: history tokens carried after k steps, shaped and full, and their ratio.

    agent.loop.history's helpers count the whole run (the sum over every request); the
    history a single request carries after step k is the difference of two prefixes.
    """
    from agent.loop.history import full_transcript_tokens, shaped_tokens

    rows: list[dict[str, int | float]] = []
    for k in range(1, len(steps) + 1):
        shaped = shaped_tokens(steps[:k]) - shaped_tokens(steps[: k - 1])
        full = full_transcript_tokens(steps[:k]) - full_transcript_tokens(steps[: k - 1])
        rows.append({"step": k, "shaped": shaped, "full": full, "ratio": ratio(shaped, full)})
    return rows


def run(quick: bool = False, env: BenchEnv | None = None) -> dict[str, Any]:
    """Count both histories over the ten real steps (``quick`` changes nothing: 10 steps)."""
    from agent.loop.history import full_transcript_tokens, shaped_tokens

    if env is None:
        with BenchEnv() as own:
            return run(quick, own)
    env.reset_chain()
    steps = run_async(lambda: _real_steps(env))
    rows = series(steps)
    last = rows[-1]
    total_shaped, total_full = shaped_tokens(steps), full_transcript_tokens(steps)
    figure = Figure(
        benchmark=NAME,
        ours=f"{last['shaped']} tokens (run total {total_shaped})",
        peer=f"{last['full']} tokens (run total {total_full})",
        ratio=float(last["ratio"]),
        notes=(
            f"shaped/full history carried after step {len(steps)}; run-total ratio "
            f"{fmt_ratio(ratio(total_shaped, total_full))} (sum over the {len(steps) + 1} "
            "requests). Steps are real calls on the bench devnet: 8 free chain reads + 2 "
            "paid x402 purchases. History only (system prompt, tools and checklist are the "
            "same on both sides); offline estimator agent/tokens.py."
        ),
        details=tuple(
            f"step {r['step']:>2} {tool:<16} shaped {r['shaped']:>5}  full {r['full']:>6}  "
            f"ratio {fmt_ratio(float(r['ratio']))}"
            for r, (tool, _args, _data) in zip(rows, steps, strict=True)
        ),
        raw={
            "kind": "own",
            "goal": "<= 0.25x at step 10",
            "met": float(last["ratio"]) <= 0.25,
            "series": rows,
            "tools": [tool for tool, _a, _d in steps],
            "total_shaped": total_shaped,
            "total_full": total_full,
            "total_ratio": ratio(total_shaped, total_full),
        },
    )
    return figure.as_dict()


def report(result: dict[str, Any]) -> str:
    return "\n".join(
        ["context tokens per step (history carried after step k):", *result["details"]]
        + [
            f"  ratio shaped/full at step {len(result['series'])}: {fmt_ratio(result['ratio'])}"
            f"; whole run: {fmt_ratio(result['total_ratio'])}"
        ]
    )


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.context_tokens", __doc__, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
