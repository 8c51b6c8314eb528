"""mcp_tools: list the tools an allowlisted MCP server offers (``tools/list``), free.

A task may name an MCP server by its URL (``http://host:port/mcp`` or ``.../sse``) rather
than a tool; this read tells a planner which tool to pay with ``pay_mcp``. Each tool is an
offer row in the shape ``discover`` gives (resource, ``MCP``, tool, kinds, allowlisted), the
kinds matched from its description by nib's own terms (``declared_kinds``) and its required
inputs by name. The seller's words never reach the result: only a tool name ``pay_mcp`` can
call, its input names, and nib's fact kinds.
"""

from __future__ import annotations

import asyncio
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent.errors import ToolError
from agent.tools.base import FreeLimits, Observation, Tool, ToolContext
from agent.tools.x402.offers import check_seller, declared_kinds, resources_named_in
from chain.mcp_client import (
    ENDPOINTS,
    McpErrorAnswer,
    McpTransport,
    McpUnreachable,
    list_tools,
    mcp_tool_name,
    split_endpoint,
)
from chain.seller_url import seller_url

__all__ = ["MAX_LISTED_TOOLS", "McpServerArgs", "McpToolsArgs", "McpToolsTool"]

#: At most this many tools are listed: results must stay small.
MAX_LISTED_TOOLS = 16
_INPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
_MAX_INPUTS = 8
_TIMEOUT_S = 15.0


def _server_endpoint(data: object) -> object:
    """Arguments whose ``server`` ends in ``/mcp`` or ``/sse``: the base URL, and the
    transport that endpoint names (unless one is given)."""
    if isinstance(data, dict) and isinstance(data.get("server"), str):
        base, named = split_endpoint(data["server"])
        if named and not data.get("transport"):
            data = {**data, "transport": named}
        data = {**data, "server": base}
    return data


class McpServerArgs(BaseModel):
    """Arguments naming an MCP server (``server``, ``transport``), for ``mcp_tools`` and
    ``pay_mcp`` alike: a ``server`` ending in /mcp or /sse names its transport, and the
    base URL is checked as a seller URL nib may request (chain.seller_url)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _endpoint(cls, data: object) -> object:
        return _server_endpoint(data)

    @field_validator("server", mode="before", check_fields=False)
    @classmethod
    def _server(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip().rstrip("/")
        seller_url(text, what="MCP server's base URL", example="http://127.0.0.1:8403")
        return text


class McpToolsArgs(McpServerArgs):
    server: str = Field(description="URL of the MCP server (base, or ending in /mcp or /sse).")
    transport: McpTransport | None = Field(
        default=None,
        description="'streamable-http' or 'sse' (none: the URL's endpoint, else each in turn).",
    )



class McpToolsTool(Tool[McpToolsArgs]):
    """List an allowlisted MCP server's tools and the fact kinds each may sell (free)."""

    name = "mcp_tools"
    free_limits = FreeLimits(max_calls_per_run=2, max_result_bytes=16_384, timeout_s=20.0)
    args_model = McpToolsArgs
    kind = "free"
    description = (
        "List the tools an allowlisted MCP server offers (a task naming a server URL ending "
        "in /mcp or /sse): each tool's name, required inputs and the fact kinds it matches. "
        "Free; buying from one is pay_mcp with that server and tool."
    )

    def shown_for(self, task: str) -> bool:
        """Only a task naming an MCP server's endpoint (a URL ending in /mcp or /sse) is
        shown this tool: its schema would cost every other task's requests context."""
        return any(split_endpoint(url)[1] for url in resources_named_in(task))

    async def run(self, args: McpToolsArgs, ctx: ToolContext) -> Observation:
        seller = check_seller(self.name, args.server, ctx)
        try:
            async with asyncio.timeout(_TIMEOUT_S):
                tools, used = await list_tools(
                    args.server, transport=args.transport, timeout_s=_TIMEOUT_S
                )
        except TimeoutError as exc:
            raise ToolError(
                f"mcp_tools: {args.server} listed no tools within {_TIMEOUT_S:g} s; expected "
                "an MCP server's tools/list answer. Fix: check the server, or use another seller."
            ) from exc
        except McpErrorAnswer as exc:
            raise ToolError(
                f"mcp_tools: the MCP server at {args.server} is up and answered tools/list "
                f"over {exc.transport} with JSON-RPC error {exc.code}; expected its list of "
                "tools. Fix: check the server's URL, or use another seller."
            ) from exc
        except McpUnreachable as exc:
            raise ToolError(
                f"mcp_tools: could not list the tools at {args.server}: {exc}; expected a "
                "running MCP server (streamable HTTP at /mcp or SSE at /sse). Fix: start it "
                "(`nib devnet up` on the devnet) or check the URL."
            ) from exc
        resource = args.server + ENDPOINTS[used]
        kept = [t for t in tools if _callable(t.name)][:MAX_LISTED_TOOLS]
        listed = [
            (t.name, _required_inputs(t.inputSchema), list(declared_kinds(t.name, t.description or "")))
            for t in kept
        ]
        rows: list[dict[str, object]] = [
            {"resource": resource, "method": "MCP", "tool": name, "price": None, "kinds": kinds,
             "allowlisted": True, "inputs": inputs}
            for name, inputs, kinds in listed
        ]  # fmt: skip
        said = "; ".join(
            f"{name}({', '.join(inputs)}) [{', '.join(kinds) or 'no known fact kind'}]"
            for name, inputs, kinds in listed
        )
        left_out = len(tools) - len(kept)
        summary = f"MCP server {seller} over {used} lists {len(rows)} tools: {said or 'none'}"
        if left_out:
            summary += f" (left out {left_out}: past {MAX_LISTED_TOOLS} or a name pay_mcp cannot call)"
        return Observation(
            tool=self.name, ok=True, summary=summary,
            data={"server": args.server, "transport": used, "offers": rows},
        )  # fmt: skip


def _callable(name: str) -> bool:
    """Whether ``name`` is a tool name pay_mcp takes (chain.mcp_client.mcp_tool_name)."""
    try:
        mcp_tool_name(name)
    except ValueError:
        return False
    return True


def _required_inputs(schema: object) -> list[str]:
    """The input names a tool's JSON schema requires (names nib can read, bounded)."""
    required = schema.get("required") if isinstance(schema, dict) else None
    if not isinstance(required, list):
        return []
    names = [r for r in required if isinstance(r, str) and _INPUT_NAME.fullmatch(r)]
    return names[:_MAX_INPUTS]
