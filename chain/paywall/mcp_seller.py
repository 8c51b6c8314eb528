"""A paid MCP server on the devnet: one tool protected by x402 (``x402.mcp``), served over
streamable HTTP (``nib devnet up``'s, at ``/mcp``; its app needs its lifespan run) or SSE
(``transport``, at ``/sse``).

``token_fact`` sells a token fact sheet for 0.01 test USDC. An unpaid call returns an
error result carrying the x402 PaymentRequired (with a ``bazaar`` MCP declaration); a call
whose ``_meta["x402/payment"]`` holds a valid payment runs the tool and settles through the
devnet facilitator service, the receipt in ``_meta["x402/payment-response"]``.
"""

from __future__ import annotations

import socket
import sys

import httpx
from mcp.server.fastmcp import FastMCP
from starlette.applications import Starlette
from x402 import x402ResourceServer
from x402.extensions.bazaar import (
    DeclareMcpDiscoveryConfig,
    OutputConfig,
    declare_mcp_discovery_extension,
)
from x402.mcp import create_payment_wrapper
from x402.mechanisms.evm.exact import ExactEvmServerScheme
from x402.schemas import AssetAmount, ResourceConfig, ResourceInfo

from chain.client import ChainClient
from chain.devkeys import dev_account
from chain.errors import ChainError
from chain.mcp_client import ENDPOINTS, MCP_TRANSPORTS, McpTransport
from chain.paywall.datasets import tokens
from chain.paywall.discovery import Registration, register_resources
from chain.paywall.market import facilitator_client
from chain.paywall.serve import AppServer, serve_forever, service_parser, wait_for_service
from chain.usdc import token_domain

__all__ = [
    "MCP_PAY_TO_INDEX",
    "MCP_TOOL",
    "MCP_TOOL_PRICE",
    "create_mcp_app",
    "main",
    "register_mcp",
]

MCP_TOOL = "token_fact"
MCP_TOOL_PRICE = 10_000
#: Dev account the MCP seller is paid to.
MCP_PAY_TO_INDEX = 8
_DESCRIPTION = "Token fact sheet (issuer, launch year, decimals) for a symbol, e.g. USDC"
_INPUT_SCHEMA = {
    "type": "object",
    "properties": {"symbol": {"type": "string", "description": "Token symbol, e.g. USDC"}},
    "required": ["symbol"],
}


def create_mcp_app(
    base_url: str,
    facilitator_url: str,
    usdc: str,
    *,
    rpc_url: str,
    chain_id: int | None = None,
    transport: McpTransport = "sse",
) -> Starlette:
    """The ASGI app (over ``transport``) of the paid MCP server reachable at ``base_url``, advertising the
    EIP-712 domain the token reports at ``rpc_url`` (``chain.usdc.token_domain``, read
    here so no caller can pass another)."""
    client = ChainClient(rpc_url, chain_id)
    network = f"eip155:{client.chain_id()}"  # the chain's own: no seller hard-codes one
    domain = token_domain(client.w3, usdc)
    rs = x402ResourceServer(facilitator_client(facilitator_url))
    rs.register(network, ExactEvmServerScheme())  # type: ignore[arg-type]
    rs.initialize()  # reads the facilitator's /supported; needed before building requirements
    accepts = rs.build_payment_requirements(
        ResourceConfig(
            scheme="exact",
            network=network,
            pay_to=dev_account(MCP_PAY_TO_INDEX).address,
            price=AssetAmount(
                amount=str(MCP_TOOL_PRICE),
                asset=usdc,
                extra={"name": domain[0], "version": domain[1]},
            ),
            max_timeout_seconds=300,
        )
    )
    paid = create_payment_wrapper(
        rs,
        accepts=accepts,
        resource=ResourceInfo(
            url=f"{base_url}{ENDPOINTS[transport]}#{MCP_TOOL}",
            description=_DESCRIPTION,
            mime_type="application/json",
        ),
        extensions=declare_mcp_discovery_extension(
            DeclareMcpDiscoveryConfig(
                tool_name=MCP_TOOL,
                description=_DESCRIPTION,
                input_schema=_INPUT_SCHEMA,
                example={"symbol": "USDC"},
                transport=transport,
                output=OutputConfig(example={"symbol": "USDC", "issuer": "Circle"}),
            )
        ),
    )
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    server = FastMCP("nib devnet paid MCP", host=host, port=int(port))

    @server.tool(name=MCP_TOOL, description=f"{_DESCRIPTION}. Paid: 0.01 test USDC over x402.")
    @paid
    async def token_fact(symbol: str) -> dict[str, object]:
        sheet = tokens().get(symbol.upper())
        if sheet is None:
            return {"error": f"no fact sheet for {symbol!r}", "have": sorted(tokens())}
        keep = ("symbol", "name", "issuer", "launched", "decimals", "standard")
        return {k: sheet[k] for k in keep if k in sheet}

    return server.sse_app() if transport == "sse" else server.streamable_http_app()


def register_mcp(
    facilitator_url: str, base_url: str, transport: McpTransport = "sse"
) -> Registration:
    """Ask the facilitator to list the paid tool (it probes the tool's 402 itself)."""
    entry: dict[str, object] = {"url": base_url + ENDPOINTS[transport], "method": "MCP",
                                "tool": MCP_TOOL, "arguments": {"symbol": "USDC"},
                                "transport": transport}
    return register_resources(facilitator_url, [entry], timeout_s=30)


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def main(argv: list[str] | None = None) -> int:
    """``python -m chain.paywall.mcp_seller --facilitator-url URL --usdc ADDR --rpc-url URL
    [--transport streamable-http|sse]`` (streamable HTTP by default: what MCP servers serve now)."""
    parser = service_parser("chain.paywall.mcp_seller", market=True)
    parser.add_argument("--transport", choices=MCP_TRANSPORTS, default="streamable-http")
    args = parser.parse_args(argv)
    # The tool's resource URL names the server, so the port is fixed before serving.
    port = args.port or _free_port(args.host)
    base = f"http://{args.host}:{port}"
    try:
        wait_for_service(args.facilitator_url.rstrip("/") + "/supported")
        app = create_mcp_app(
            base, args.facilitator_url, args.usdc, rpc_url=args.rpc_url, chain_id=args.chain_id,
            transport=args.transport,
        )
        serve_forever(
            # A streamable HTTP server's session manager runs in the app's lifespan.
            AppServer(app, args.host, port, name="paid MCP server",
                      lifespan=args.transport == "streamable-http"),
            url_file=args.url_file,
            on_ready=lambda url: print(
                register_mcp(args.facilitator_url, url, args.transport).line()),
        )
    except (ChainError, httpx.HTTPError, ValueError) as exc:
        print(f"paid MCP server: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
