"""A paid MCP tool's terms, read by the judge itself over MCP, from the attacker's position.

A real seller built with the official ``x402.mcp`` payment wrapper (FastMCP, served over
streamable HTTP and over SSE). The judge service approves an MCP purchase only when the
payload pays the payTo, amount, asset and chain of the tool's own 402, as it reads it:
a compromised agent naming the allowlisted seller with its own address or another price,
and a seller that tells the agent other terms than it tells the judge, are refused naming
both. On the old code every MCP purchase was refused under the services ("no http(s)
resource"), the honest one included.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from test_judge_tasks import ATTACKER, USDC, authorization, request

from judge.fingerprint import call_fingerprint
from judge.jev import Judge
from judge.payto import advertised_terms
from judge.tasks import TaskLimits
from judge.verdict import VerdictSigner

PAY_TO = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
OTHER_PAY_TO = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"
PRICE = 10_000
TOOL = "sheet"


def _requirement(pay_to: str, amount: int = PRICE, asset: str = USDC, network: str = "eip155:31337") -> Any:
    from x402.schemas import PaymentRequirements

    return PaymentRequirements(scheme="exact", network=network, asset=asset, amount=str(amount),
                               pay_to=pay_to, max_timeout_seconds=300,
                               extra={"name": "USDC", "version": "2"})


@pytest.fixture(scope="module")
def seller() -> Iterator[dict[str, Any]]:
    """One x402.mcp seller over streamable HTTP (``url``) and SSE (``sse``);
    ``state['accepts']`` is what its 402 states."""
    import socket

    from mcp.server.fastmcp import FastMCP
    from x402 import x402ResourceServer
    from x402.http import FacilitatorConfig, HTTPFacilitatorClient
    from x402.mcp import create_payment_wrapper
    from x402.mechanisms.evm.exact import ExactEvmServerScheme
    from x402.schemas import ResourceInfo

    from chain.paywall.serve import AppServer

    state: dict[str, Any] = {"accepts": [_requirement(PAY_TO)]}
    rs = x402ResourceServer(HTTPFacilitatorClient(FacilitatorConfig(url="http://127.0.0.1:9")))
    rs.register("eip155:31337", ExactEvmServerScheme())  # type: ignore[arg-type]
    # The wrapper states the list it was given at each unpaid call: a test changes it in place.
    paid = create_payment_wrapper(rs, accepts=state["accepts"],
                                  resource=ResourceInfo(url=f"mcp://tool/{TOOL}", description="sheet"))
    server = FastMCP("a paid MCP seller")

    @server.tool(name=TOOL, description="a token fact sheet")
    @paid
    async def sheet(symbol: str) -> dict[str, Any]:
        return {"symbol": symbol, "issuer": "Circle"}

    @server.tool(name="free_sheet", description="the same sheet, free")
    async def free_sheet(symbol: str) -> dict[str, object]:
        return {"symbol": symbol}

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (AppServer(server.streamable_http_app(), port=port, name="mcp-seller", lifespan=True) as srv,
          AppServer(server.sse_app(), name="mcp-seller-sse") as sse):
        state.update(url=srv.url, sse=sse.url)
        yield state


def _judge(signer: VerdictSigner, *origins: str) -> Judge:
    """The services' judge: registered tasks only, the sellers' terms read by the judge."""
    judge = Judge(signer, allowed_assets={31337: [USDC]}, balance_of=lambda asset: 5_000_000,
                  require_task=True, terms_of=advertised_terms)
    judge.register_task(TaskLimits(task_id="task-1", spend_cap_atomic=1_000_000, per_call_cap_atomic=500_000,
                                   approval_threshold_atomic=None, recipients=(ATTACKER,),
                                   sellers=origins))
    return judge


def _buy(server: str, to: str, amount: int = PRICE, nonce: int = 1, seller: str | None = None,
         **more: Any) -> Any:
    args = {"server": server, "tool": TOOL, "arguments": {"symbol": "USDC"}, **more}
    return request(authorization(to, amount, nonce), tool="pay_mcp", args=args,
                   seller=seller or server, call_fingerprint=call_fingerprint("pay_mcp", args))


def test_an_mcp_purchase_is_approved_only_on_the_terms_the_tools_own_402_states(
    seller: dict[str, Any], signer: VerdictSigner
) -> None:
    seller["accepts"][:] = [_requirement(PAY_TO)]
    judge = _judge(signer, seller["url"])
    honest = judge.decide(_buy(seller["url"], PAY_TO))
    assert honest.decision == "approve", honest.reason  # refused on the old code
    # A compromised agent names the allowlisted seller and pays itself (a registered
    # recipient of the task): the tool's own 402, read by the judge, does not name it.
    stolen = judge.decide(_buy(seller["url"], ATTACKER, nonce=2))
    assert stolen.decision == "refuse", stolen.reason
    assert ATTACKER.lower() in stolen.reason and PAY_TO.lower() in stolen.reason, stolen.reason
    assert "read by the judge" in stolen.reason
    # The seller's payTo at another price: 1 unit (what would move its calibration for
    # next to nothing) and more than it asks are both refused, naming the price it asks.
    for amount in (1, 2 * PRICE):
        priced = judge.decide(_buy(seller["url"], PAY_TO, amount, nonce=3 + amount))
        assert priced.decision == "refuse", priced.reason
        assert f"amount {amount} " in priced.reason and f"amount {PRICE} " in priced.reason
    # A payment for a tool the seller gives away: its unpaid call answers no 402.
    free = {"server": seller["url"], "tool": "free_sheet", "arguments": {"symbol": "USDC"}}
    gift = judge.decide(request(authorization(PAY_TO, PRICE, 7), tool="pay_mcp", args=free,
                                seller=seller["url"], call_fingerprint=call_fingerprint("pay_mcp", free)))
    assert gift.decision == "refuse" and "nothing payable" in gift.reason, gift.reason
    # The purchase names the allowlisted seller but a server of another origin.
    elsewhere = judge.decide(_buy(seller["sse"], PAY_TO, nonce=9, seller=seller["url"]))
    assert elsewhere.decision == "refuse" and "another origin" in elsewhere.reason


def test_a_seller_whose_terms_differ_from_what_the_agent_claims_is_refused(
    seller: dict[str, Any], signer: VerdictSigner
) -> None:
    """The agent's quote read payTo PAY_TO; by the time the judge rules, the seller states
    OTHER_PAY_TO (a seller swapping its terms, or one answering the agent and the judge
    differently). The judge rules on what the seller tells it, never on the agent's claim."""
    from judge.mcp_terms import McpTool

    seller["accepts"][:] = [_requirement(PAY_TO)]
    tool = McpTool(seller["url"], TOOL, {"symbol": "USDC"}, "streamable-http")
    assert {t.pay_to for t in tool.offered_terms()} == {PAY_TO.lower()}  # the agent's quote
    seller["accepts"][:] = [_requirement(OTHER_PAY_TO)]
    verdict = _judge(signer, seller["url"]).decide(_buy(seller["url"], PAY_TO))
    assert verdict.decision == "refuse", verdict.reason
    assert PAY_TO.lower() in verdict.reason and OTHER_PAY_TO.lower() in verdict.reason


def test_the_terms_are_read_over_the_transport_named_else_each_in_turn(
    seller: dict[str, Any], signer: VerdictSigner
) -> None:
    from judge.mcp_terms import McpTermsUnread, McpTool, mcp_tool_of

    seller["accepts"][:] = [_requirement(PAY_TO), _requirement(OTHER_PAY_TO, 5 * PRICE,
                                                               network="eip155:8453")]
    over_sse = mcp_tool_of({"server": seller["sse"] + "/sse", "tool": TOOL,
                            "arguments": {"symbol": "USDC"}})
    assert over_sse is not None and over_sse.transport == "sse"
    terms = over_sse.offered_terms()
    assert {(t.pay_to, t.amount, t.chain_id) for t in terms} == {
        (PAY_TO.lower(), PRICE, 31337), (OTHER_PAY_TO.lower(), 5 * PRICE, 8453)}
    # No transport named: streamable HTTP is tried first, then SSE.
    either = mcp_tool_of({"server": seller["sse"], "tool": TOOL, "arguments": {"symbol": "USDC"}})
    assert either is not None and either.transport is None and either.offered_terms() == terms
    judge = _judge(signer, seller["sse"])
    assert judge.decide(_buy(seller["sse"], PAY_TO, transport="sse")).decision == "approve"
    # An unreachable server names every transport tried, and the judge refuses.
    dead = McpTool("http://127.0.0.1:9", TOOL, {}, None)
    with pytest.raises(McpTermsUnread) as err:
        dead.offered_terms()
    assert "streamable-http at http://127.0.0.1:9/mcp (" in str(err.value)
    assert "sse at http://127.0.0.1:9/sse (" in str(err.value)
    refused = _judge(signer, "http://127.0.0.1:9").decide(_buy("http://127.0.0.1:9", PAY_TO))
    assert refused.decision == "refuse" and "could not read the tool's payment terms" in refused.reason
