"""Context tokens: the whole request each loop sends its model after 10 steps.

The ten steps are real tool calls on the bench devnet (eight free chain reads and two
paid x402 purchases from the local paywall), so results have the sizes the agent really
sees. Both sides are counted whole, with the same offline estimator (agent/loop/tokens.py)
over the same OpenAI-style request shape (messages plus the tool schemas offered):

- **ours**: the propose request nib's loop builds before step 11 (``propose_messages``):
  the system message (identity, rules, every wired tool's description, the paid offers
  known), the user message (fresh self-model, task, checklist, focus, evidence, shaped
  history), the last step's tool call and result, and the native tool schemas of every
  tool ``default_registry`` wires on the devnet plus the finishes;
- **peer**: a ``pydantic_ai.Agent`` given the same system text and task, the same tools
  (name, description, JSON schema), whose model calls the same tools with the same
  arguments; each tool returns the tool's own raw result (its data, not nib's observation
  record). Counted is the request PydanticAI hands its model before step 11: its
  instructions, the user prompt, every tool call and tool return so far, and the tools.
- **own**: nib's shaped history against its unshaped full transcript (history only).

``python -m bench.context_tokens [--quick]``
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Protocol

import httpx

from agent.jsonvalues import as_int, as_object
from bench._util import (
    BenchEnv,
    Figure,
    bench_main,
    fmt_ratio,
    on_fresh_chain,
    ratio,
    report_rows,
    run_async,
)

if TYPE_CHECKING:
    from agent.tools.base import Observation

__all__ = ["STEPS", "main", "run"]

_Step = tuple[str, dict[str, object], dict[str, object]]
"""(tool, args, the observation as a dict) of one real call."""


class _Replay(Protocol):
    def __call__(self, **_kwargs: object) -> object: ...

NAME = "context tokens at step 10 (shaped vs full history)"
STEPS = 10
TASK = (
    "What are the base fee, the gas price and the latest block on this chain, what does "
    "the paywall's gas analytics say over the last 20 blocks, and how many USDC transfers "
    "did the agent make?"
)


async def _real_steps(env: BenchEnv) -> list[_Step]:
    """Ten (tool, args, raw result) triples from real tool calls on the bench devnet."""
    from agent.tools.chain_reads import chain_read_tools
    from agent.tools.x402.pay_http import PayHttpTool
    from chain.devkeys import AGENT, dev_account

    tools = {t.name: t for t in chain_read_tools()}
    agent = dev_account(AGENT).address
    pay = PayHttpTool(env.paywall_url)
    wallet = env.wallet("context-tokens")
    steps: list[_Step] = []
    async with httpx.AsyncClient(timeout=30) as http:
        ctx = env.context(wallet, http, "bench-context", cap=1_000_000)

        async def free(name: str, args: dict[str, object]) -> Observation:
            tool = tools[name]
            obs = await tool.run(tool.parse_args(args), ctx)
            steps.append((name, args, asdict(obs)))
            return obs

        async def paid(path: str) -> Observation:
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
        await free("tx_receipt", {"tx_hash": as_object(bought.data["settlement"])["transaction"]})
        await free("token_transfers", {"address": agent})
        await paid("/analytics/transfers")
    return steps


def series(steps: list[_Step]) -> list[dict[str, int | float]]:
    """Per step k: history tokens carried after k steps, shaped and full (own row)."""
    from agent.loop.history import full_transcript_tokens, shaped_tokens

    rows: list[dict[str, int | float]] = []
    for k in range(1, len(steps) + 1):
        shaped = shaped_tokens(steps[:k]) - shaped_tokens(steps[: k - 1])
        full = full_transcript_tokens(steps[:k]) - full_transcript_tokens(steps[: k - 1])
        rows.append({"step": k, "shaped": shaped, "full": full, "ratio": ratio(shaped, full)})
    return rows


def _system_text() -> str:
    """nib's fixed system text (identity and rules), given to both loops."""
    from agent.loop.proposal import _RULES, _SYSTEM
    from agent.loop.selfmodel import agent_version

    return _SYSTEM.format(agent="nib", version=agent_version()) + "\n" + _RULES


def nib_request_tokens(env: BenchEnv, steps: list[_Step]) -> int:
    """Tokens of the whole propose request nib's loop sends after ``steps``."""
    from agent.loop.history import HistoryEntry, one_line, render
    from agent.loop.proposal import propose_messages, tool_specs
    from agent.loop.selfmodel import SelfModel, agent_version
    from agent.loop.tokens import count_messages
    from agent.tools.registry_default import default_registry
    from chain.devkeys import AGENT, dev_account

    tools = default_registry(paywall_url=env.paywall_url).describe()
    spent = sum(as_int(d.get("cost_usdc") or 0) for _t, _a, d in steps)
    model = SelfModel(
        agent="nib", version=agent_version(), network="anvil", chain_id=31337,
        rpc_url=env.rpc_url, usdc=env.usdc, wallet=dev_account(AGENT).address,
        wallet_balance_usdc=100_000_000 - spent, spend_left_usdc=1_000_000 - spent,
        tokens_left=100_000, steps_left=2, deadline_left_s=420.0,
        tools=tuple((str(t["name"]), str(t["kind"])) for t in tools))
    entries = [HistoryEntry(n, tool, args, "ok", str(d["summary"]), f"e{n}")
               for n, (tool, args, d) in enumerate(steps, start=1)]
    last_tool, last_args, last = steps[-1]
    context = {
        "self_model": {**model.as_dict(), "spend_left_usdc": model.spend_left_usdc},
        "self_model_text": model.render(),
        "task": TASK,
        "tools": tools,
        "checklist": [
            {"id": "c1", "text": "base fee gwei", "covered": True, "value": "1"},
            {"id": "c2", "text": "gas price gwei", "covered": True, "value": "2"},
            {"id": "c3", "text": "latest block number", "covered": True, "value": "12"},
            {"id": "c4", "text": "gas analytics over 20 blocks", "covered": True},
            {"id": "c5", "text": "agent USDC transfer count", "covered": False},
        ],
        "focus": {"id": "c5", "text": "agent USDC transfer count"},
        "evidence": [{"id": f"e{n}", "tool": tool, "summary": one_line(str(d["summary"]))}
                     for n, (tool, _a, d) in enumerate(steps, start=1)],
        "history": render(entries),
        "exchange": [
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call-10", "type": "function",
                 "function": {"name": last_tool, "arguments": str(last_args)}}]},
            {"role": "tool", "tool_call_id": "call-10", "name": last_tool,
             "content": one_line(f"{last['summary']} [evidence e{len(steps)}]", 600)},
        ],
    }
    specs = tool_specs(tools)
    return count_messages(propose_messages(context), [asdict(t) for t in specs])


def pydantic_ai_request_tokens(env: BenchEnv, steps: list[_Step]) -> list[int]:
    """Tokens of the whole request PydanticAI's loop hands its model before each step
    (after 0..len(steps) steps), counted as an OpenAI-style request."""
    import json

    from pydantic_ai import Agent, Tool
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from agent.loop.proposal import tool_specs
    from agent.loop.tokens import count_messages
    from agent.tools.registry_default import default_registry

    # The same tools nib offers (every tool the devnet registry wires), finishes excluded:
    # PydanticAI ends a run with a text reply.
    finishes = {s.name for s in tool_specs([])}
    specs = [s for s in tool_specs(default_registry(paywall_url=env.paywall_url).describe())
             if s.name not in finishes]
    seen: list[int] = []

    def request_tokens(messages: list[ModelMessage], info: AgentInfo) -> int:
        chat: list[dict[str, object]] = [{"role": "system", "content": info.instructions or ""}]
        for message in messages:
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    chat.append({"role": "user", "content": str(part.content)})
                elif isinstance(part, ToolCallPart):
                    chat.append({"role": "assistant", "content": "", "tool_calls": [
                        {"id": part.tool_call_id, "type": "function", "function": {
                            "name": part.tool_name, "arguments": part.args_as_json_str()}}]})
                elif isinstance(part, ToolReturnPart):
                    chat.append({"role": "tool", "tool_call_id": part.tool_call_id,
                                 "content": part.model_response_str()})
        tools = [{"name": t.name, "description": t.description,
                  "parameters": t.parameters_json_schema} for t in info.function_tools]
        return count_messages(chat, tools)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = len(seen)
        seen.append(request_tokens(messages, info))
        if turn < len(steps):
            tool, args, _ = steps[turn]
            return ModelResponse(parts=[ToolCallPart(tool, dict(args))])
        return ModelResponse(parts=[TextPart("done")])

    results: dict[str, list[object]] = {s.name: [] for s in specs}
    for tool, _args, data in steps:
        results.setdefault(tool, []).append(data.get("data") or data.get("summary"))

    def replayer(name: str) -> _Replay:
        def replay(**_kwargs: object) -> object:
            return json.loads(json.dumps(results[name].pop(0), default=str))  # the raw result
        return replay

    agent = Agent(FunctionModel(respond), instructions=_system_text(),
                  tools=[Tool.from_schema(replayer(s.name), s.name, s.description, s.parameters)
                         for s in specs])
    agent.run_sync(TASK)
    return seen


def run(quick: bool = False, env: BenchEnv | None = None) -> list[dict[str, object]]:
    """Count both loops' whole requests after the ten real steps (``quick`` changes
    nothing: 10 steps); one row against PydanticAI, one of nib's own history shaping."""
    from agent.loop.history import full_transcript_tokens, shaped_tokens

    def measure(e: BenchEnv) -> tuple[list[_Step], int, list[int]]:
        steps = run_async(lambda: _real_steps(e))
        return steps, nib_request_tokens(e, steps), pydantic_ai_request_tokens(e, steps)

    steps, ours, peer_series = on_fresh_chain(env, measure)
    peer = peer_series[len(steps)]
    rows = series(steps)
    last = rows[-1]
    total_shaped, total_full = shaped_tokens(steps), full_transcript_tokens(steps)
    vs_pai = ratio(float(ours), float(peer))
    details = (
        f"whole request before step {len(steps) + 1}: nib {ours} tokens, PydanticAI {peer} "
        f"tokens; ratio {fmt_ratio(vs_pai)}",
        "PydanticAI's whole request before each step: " + ", ".join(map(str, peer_series)),
        *(f"step {r['step']:>2} {tool:<16} history shaped {r['shaped']:>5}  full "
          f"{r['full']:>6}" for r, (tool, _a, _d) in zip(rows, steps, strict=True)),
    )
    peer_row = Figure(
        benchmark="context tokens, whole request at step 10 vs PydanticAI",
        ours=f"{ours} tokens",
        peer=f"{peer} tokens (PydanticAI's whole request)",
        ratio=vs_pai,
        notes=(
            "both sides' whole request before step 11 (system text, task, tools and their "
            "schemas, history; nib also its self-model, checklist, evidence and the last "
            "exchange), counted with the same estimator; steps are real calls on the bench "
            "devnet (8 free chain reads + 2 paid x402 purchases); PydanticAI's tools return "
            "their raw results. Counted, not timed: load does not move it."
        ),
        details=details,
        raw={"kind": "peer", "goal": "-", "met": None, "peer_series": peer_series,
             "counted": True},
    )
    own = Figure(
        benchmark=NAME,
        ours=f"{last['shaped']} tokens (run total {total_shaped})",
        peer=f"{last['full']} tokens (run total {total_full}; nib unshaped)",
        ratio=float(last["ratio"]),
        notes=(
            "history only, after step 10: nib's shaped history against its own unshaped "
            f"transcript (every raw result replayed); run-total ratio "
            f"{fmt_ratio(ratio(total_shaped, total_full))}."
        ),
        details=details,
        raw={"kind": "own", "goal": "<= 0.25x at step 10", "met": last["ratio"] <= 0.25,
             "series": rows, "counted": True},
    )
    return [peer_row.as_dict(), own.as_dict()]


def report(rows: list[dict[str, object]]) -> str:
    return report_rows(rows)


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.context_tokens", __doc__, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
