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

from bench._util import (
    BenchEnv,
    Figure,
    bench_main,
    fmt_ratio,
    on_fresh_chain,
    ratio,
    run_async,
)

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


def pydantic_ai_history(steps: list[tuple[str, dict[str, Any], Any]]) -> list[int]:
    """Tokens of the history PydanticAI's own loop hands its model before each step.

    A real ``pydantic_ai.Agent`` runs the same steps: its model (a FunctionModel) calls
    the same tools with the same arguments, one per turn, and each tool returns the same
    raw result nib's tool returned. Before turn k the model receives PydanticAI's
    message history (the user prompt, then every tool call and tool return so far); we
    count the tool calls and returns in it the way PydanticAI renders them for a
    provider (``args_as_json_str``, ``model_response_str``) with nib's estimator.
    Returned: history tokens after step k, for k = 1..len(steps).
    """
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from agent.loop.tokens import count_text

    seen: list[int] = []

    def history_tokens(messages: list[ModelMessage]) -> int:
        total = 0
        for message in messages:
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    total += count_text(part.tool_name + part.args_as_json_str())
                elif isinstance(part, ToolReturnPart):
                    total += count_text(part.model_response_str())
        return total

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = len(seen)
        seen.append(history_tokens(messages))
        if turn < len(steps):
            tool, args, _ = steps[turn]
            return ModelResponse(parts=[ToolCallPart(tool, dict(args))])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(respond))
    results: dict[str, list[Any]] = {}
    for tool, _args, data in steps:
        results.setdefault(tool, []).append(data)
    for name in results:

        def replay(_name: str = name, **_kwargs: Any) -> Any:
            return results[_name].pop(0)  # this tool's recorded results, in order

        agent.tool_plain(name=name)(replay)
    agent.run_sync("answer the task")
    # seen[k] is the history before turn k (after k steps); seen[0] is the empty history.
    return seen[1 : len(steps) + 1]


def run(quick: bool = False, env: BenchEnv | None = None) -> list[dict[str, Any]]:
    """Count the histories over the ten real steps (``quick`` changes nothing: 10 steps):
    one row against PydanticAI's own message history (the peer), one against nib's
    unshaped full transcript (our own before/after)."""
    from agent.loop.history import full_transcript_tokens, shaped_tokens

    steps = on_fresh_chain(env, lambda e: run_async(lambda: _real_steps(e)))
    rows = series(steps)
    for row, peer_tokens in zip(rows, pydantic_ai_history(steps), strict=True):
        row["pydantic_ai"] = peer_tokens
    last = rows[-1]
    total_shaped, total_full = shaped_tokens(steps), full_transcript_tokens(steps)
    vs_pai = ratio(float(last["shaped"]), float(last["pydantic_ai"]))
    details = tuple(
        f"step {r['step']:>2} {tool:<16} shaped {r['shaped']:>5}  pydantic-ai "
        f"{r['pydantic_ai']:>6}  full {r['full']:>6}  "
        f"ratio vs pydantic-ai {fmt_ratio(ratio(float(r['shaped']), float(r['pydantic_ai'])))}"
        for r, (tool, _args, _data) in zip(rows, steps, strict=True)
    )
    raw = {
        "series": rows,
        "tools": [tool for tool, _a, _d in steps],
        "total_shaped": total_shaped,
        "total_full": total_full,
        "total_ratio": ratio(total_shaped, total_full),
    }
    common = (
        f"History carried into the request after step {len(steps)}; steps are real calls on "
        "the bench devnet (8 free chain reads + 2 paid x402 purchases); history only "
        "(system prompt, tools and checklist are not counted); the same offline estimator "
        "(agent/loop/tokens.py) on both sides."
    )
    peer = Figure(
        benchmark="context tokens at step 10 vs PydanticAI",
        ours=f"{last['shaped']} tokens",
        peer=f"{last['pydantic_ai']} tokens (PydanticAI message history)",
        ratio=vs_pai,
        notes=(
            f"{common} Peer: a pydantic_ai.Agent whose model calls the same tools with the "
            "same arguments, each returning the same raw result; counted is the tool-call "
            "and tool-return history its model receives before step 11, as PydanticAI "
            "renders it (args_as_json_str, model_response_str)."
        ),
        details=details,
        raw={"kind": "peer", "goal": "<= 0.25x at step 10", "met": vs_pai <= 0.25, **raw},
    )
    own = Figure(
        benchmark=NAME,
        ours=f"{last['shaped']} tokens (run total {total_shaped})",
        peer=f"{last['full']} tokens (run total {total_full}; nib unshaped)",
        ratio=float(last["ratio"]),
        notes=(
            f"{common} Against nib's own unshaped loop (every raw result replayed); "
            f"run-total ratio {fmt_ratio(ratio(total_shaped, total_full))} (sum over the "
            f"{len(steps) + 1} requests)."
        ),
        details=details,
        raw={"kind": "own", "goal": "<= 0.25x at step 10", "met": last["ratio"] <= 0.25, **raw},
    )
    return [peer.as_dict(), own.as_dict()]


def report(rows: list[dict[str, Any]]) -> str:
    return "\n".join(
        ["context tokens per step (history carried after step k):", *rows[0]["details"]]
        + [
            f"  ratio shaped/PydanticAI at step {len(rows[0]['series'])}: "
            f"{fmt_ratio(rows[0]['ratio'])}; shaped/full: {fmt_ratio(rows[1]['ratio'])}"
            f"; whole run shaped/full: {fmt_ratio(rows[1]['total_ratio'])}"
        ]
    )


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.context_tokens", __doc__, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
