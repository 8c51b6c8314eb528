"""The offline planner buys only what the task asked for, after a refusal or a failure too.

A task that names a resource by URL gets that resource, exactly (its query included); one
that asks for the market gets the offers discovery lists; one resolved against a seller's
catalog gets the offer it picked. When nothing is left to try there, the planner's next
proposal is the end of the run (``cannot-plan``), naming the refusal or failure and what it
buys only: never the same route without its query, the local paywall, or another seller.
Contexts are built the way the loop builds them (tests/agent/models/test_offline.py).
"""

from __future__ import annotations

import pytest

from agent.loop.proposal import Call, Done
from agent.models.offline import extract_checklist
from tests.agent.models.test_offline import PAYWALL, Sim

SELLER = "http://127.0.0.1:7010"
NAMED = f"{SELLER}/tokens?symbol=USDC"
REFUSAL = "price 0.01 USDC exceeds the per-call cap 0.005 USDC"


def _ends_naming(proposal: object, *reasons: str, paywall_named: bool = False) -> None:
    """The proposal ends the run, its answer naming every one of ``reasons``, and the
    local paywall only when the task named it."""
    assert isinstance(proposal, Done), proposal
    assert proposal.answer is not None
    for reason in reasons:
        assert reason in proposal.answer, proposal.answer
    assert paywall_named or PAYWALL not in proposal.answer


@pytest.mark.parametrize(
    "task",
    [
        f"Buy the USDC fact sheet from {NAMED} and tell me who the issuer is.",
        f"Get the USDC fact sheet from {NAMED}",
        f"Who issues USDC? Get the token fact sheet from {NAMED}",
        f"What is in the USDC token fact sheet at {NAMED}?",  # the "?" ends the question
    ],
)
def test_the_checklist_keeps_the_named_query_and_reads_no_part_of_the_task_from_it(task: str) -> None:
    """Before, a request to buy cut the URL at its "?" (the item bought ``/tokens``), and
    the query's ``symbol=USDC`` was read as a question of its own (the token symbol)."""
    items = extract_checklist(task)
    assert {i["kind"] for i in items} == {"token_factsheet"}, items
    assert {i["params"].get("url") for i in items} <= {NAMED, None}
    assert any(i["params"].get("url") == NAMED for i in items)


def test_a_query_in_a_named_url_is_no_unread_part_that_blocks_the_purchase() -> None:
    """Before, ``window=10`` was a part the planner could not read, and nothing was paid
    while it stood."""
    task = f"What are the gas statistics at {SELLER}/gas?window=10"
    assert [i["kind"] for i in extract_checklist(task)] == ["gas_stats"]
    assert Sim(task).propose() == Call("pay_http", {"url": f"{SELLER}/gas?window=10", "covers": ["gas_stats"]})


@pytest.mark.parametrize(
    "task",
    [
        f"Buy the USDC fact sheet from {NAMED} and tell me who the issuer is.",
        f"Who issues USDC? Get the token fact sheet from {NAMED}",
        f"What is in the USDC token fact sheet at {NAMED}?",
    ],
)
def test_after_the_judge_refuses_the_named_resource_the_next_proposal_is_the_end(task: str) -> None:
    """Before: the same route without ``?symbol=USDC``, or the same URL again without
    ``covers`` (another fingerprint for the call the judge had just refused)."""
    sim = Sim(task)
    first = sim.propose()
    assert first == Call("pay_http", {"url": NAMED, "covers": ["token_factsheet"]})
    sim.record(first, "refused", summary=REFUSAL)
    _ends_naming(sim.propose(), f"pay_http was refused: {REFUSAL}",
                 f"the offline planner buys only what the task names ({NAMED}), never another "
                 "resource or seller in its place")  # fmt: skip


def test_a_named_resource_that_failed_twice_is_not_replaced() -> None:
    sim = Sim(f"Buy the USDC fact sheet from {NAMED} and tell me who the issuer is.")
    call = sim.propose()
    sim.record(call, "failed", summary="quote failed: it answered 503")
    assert sim.propose() == call  # the same resource, once more
    sim.record(call, "failed", summary="quote failed: it answered 503")
    _ends_naming(sim.propose(), "pay_http failed in steps 1 and 2 (last error: quote failed: "
                 "it answered 503)", f"buys only what the task names ({NAMED})")  # fmt: skip


def test_the_failures_said_are_the_steps_that_failed_not_a_count_assumed() -> None:
    """Outside tester 13 (F5): the judge's read of the seller stalled at step 1; step 2
    failed at once on that read, with no second request. The answer said "failed twice",
    which read as a second wait; it names the steps that failed, and their last error."""
    stalled = ("quote failed: pay_http: no whole response (headers and body) within 10 s "
               f"from {NAMED} (the judge's read of it stalled)")
    sim = Sim(f"Buy the USDC fact sheet from {NAMED} and tell me who the issuer is.")
    call = sim.propose()
    sim.record(call, "failed", summary=stalled)
    sim.record(Call("base_fee", {}), "ok", {"base_fee_gwei": "1"}, "base fee 1 gwei")
    assert sim.propose() == call
    sim.record(call, "failed", summary=stalled)
    done = sim.propose()
    _ends_naming(done, f"pay_http failed in steps 1 and 3 (last error: {stalled[:60]}")
    assert isinstance(done, Done) and "twice" not in (done.answer or "")


def test_a_fact_the_task_buys_from_a_named_seller_never_falls_back_to_the_paywall() -> None:
    """Before, the next proposal was the local paywall's ``/analytics/gas``."""
    sim = Sim(f"What are the gas statistics at {SELLER}/gas?")
    first = sim.propose()
    assert first == Call("pay_http", {"url": f"{SELLER}/gas", "covers": ["gas_stats"]})
    sim.record(first, "refused", summary=REFUSAL)
    _ends_naming(sim.propose(), f"buys only what the task names ({SELLER}/gas)")


def test_a_named_seller_origin_is_asked_at_its_own_path_for_the_fact_and_nowhere_else() -> None:
    sim = Sim(f"Who issues USDC? Buy the token fact sheet from {SELLER}.")
    first = sim.propose()
    assert first == Call("pay_http", {"url": SELLER, "covers": ["token_factsheet"]})
    sim.record(first, "failed", summary="it answered 404")
    sim.record(first, "failed", summary="it answered 404")
    second = sim.propose()
    assert second == Call("pay_http", {"url": f"{SELLER}/datasets/token/USDC", "covers": ["token_factsheet"]})
    sim.record(second, "refused", summary=REFUSAL)
    _ends_naming(sim.propose(), f"buys only what the task names ({SELLER})")


def test_the_post_form_of_a_named_resource_asks_the_named_query_and_stays_on_its_path() -> None:
    """The seller's 402 says the route sells over POST: the same question (the URL's own
    query, not a guess from the subject) is asked as the JSON body; a POST route a 402
    names at another path is not followed."""
    named = f"{SELLER}/lookup?ticker=USDC"
    task = f"Who issues USDC? Buy the token fact sheet at {named}"
    sim = Sim(task)
    get = sim.propose()
    assert get == Call("pay_http", {"url": named, "covers": ["token_factsheet"]})
    sim.record(get, "failed", summary=f"pay_http: the route sells over POST {SELLER}/lookup (GET "
               "answered 405); nothing was paid.")  # fmt: skip
    post = sim.propose()
    assert post == Call("pay_http", {"url": f"{SELLER}/lookup", "method": "POST",
                                     "body": {"ticker": "USDC"}, "covers": ["token_factsheet"]})  # fmt: skip

    elsewhere = Sim(task)
    elsewhere.record(get, "failed", summary=f"pay_http: the route sells over POST {SELLER}/pay-here "
                     "(GET answered 405); nothing was paid.")  # fmt: skip
    assert elsewhere.propose() == get  # the named GET once more, not the other path


def test_a_market_task_whose_offers_were_all_refused_ends_without_the_paywall() -> None:
    """Before, the planner then proposed the local paywall's sheet (refused by pay_http
    only because the task asked for the market, as one more failure)."""
    sim = Sim("Who issues USDC? Buy its token fact sheet from a seller in the market.")
    first = sim.propose()
    assert first == Call("discover", {"query": "token fact sheet"})
    sim.record(first, "ok", {}, "discovered 2 offers from 2 sellers: GET http://127.0.0.1:7001/tokens "
               "0.005 USDC [token_factsheet]; GET http://127.0.0.1:7002/tokens 0.01 USDC [token_factsheet]")  # fmt: skip
    for port in (7001, 7002):
        offer = sim.propose()
        assert offer == Call("pay_http", {"url": f"http://127.0.0.1:{port}/tokens?symbol=USDC",
                                          "covers": ["token_factsheet"]})  # fmt: skip
        sim.record(offer, "refused", summary=REFUSAL)
    _ends_naming(sim.propose(), "every offer of a token factsheet discovery listed was tried",
                 "buys from no other (the local paywall included) in its place")  # fmt: skip


def test_a_request_resolved_against_the_sellers_catalog_is_not_proposed_again_after_a_refusal() -> None:
    """Before, the picked offer came back without ``covers`` and ``max_price``: the call the
    judge had refused, under another fingerprint."""
    from agent.loop.offerpick import catalog_offers, resolve_picks

    sim = Sim("Buy the cheapest research dataset the local paywall sells under 0.03 USDC.")
    catalog = {"endpoints": [
        {"path": "/datasets/token/{symbol}", "price_atomic": 20_000, "kind": "token_factsheet"},
    ], "token_symbols": ["DAI"]}  # fmt: skip
    sim.checklist = resolve_picks(sim.checklist, {"paywall": catalog_offers(PAYWALL, catalog)}, 250_000)
    buy = sim.propose()
    url = PAYWALL + "/datasets/token/DAI"
    assert buy == Call("pay_http", {"url": url, "covers": ["token_factsheet"], "max_price": 30_000})
    sim.record(buy, "refused", summary=REFUSAL)
    _ends_naming(sim.propose(), f"pay_http was refused: {REFUSAL}",
                 f"buys only the offer it picked from the seller the task names ({url})",
                 paywall_named=True)  # fmt: skip


MCP_SERVER = "http://127.0.0.1:7020"
LISTED = {"resource": f"{MCP_SERVER}/mcp", "method": "MCP", "tool": "token_fact", "price": None,
          "kinds": ["token_factsheet"], "allowlisted": True, "inputs": ["symbol"]}  # fmt: skip


@pytest.mark.parametrize("endpoint,transport", [("/mcp", "streamable-http"), ("/sse", "sse")])
def test_an_mcp_servers_url_is_asked_through_its_tools_never_plain_http(
    endpoint: str, transport: str
) -> None:
    """Outside tester 12: the planner sent pay_http GET to ``.../mcp`` (HTTP 406, the run
    stopped failure-budget). A URL ending in /mcp or /sse names an MCP server: its tools
    are listed (free), then the tool that sells the fact is paid with pay_mcp, over the
    transport the URL names, with the task's subject as its input."""
    sim = Sim(f"Who issues USDC? Buy its token fact sheet from {MCP_SERVER}{endpoint}")
    listing = sim.propose()
    assert listing == Call("mcp_tools", {"server": MCP_SERVER, "transport": transport})
    sim.record(listing, "ok", {}, "MCP server lists 2 tools")
    sim.evidence[-1]["offers"] = [
        {**LISTED, "tool": "gas_stats", "kinds": ["gas_stats"], "inputs": []}, LISTED]
    buy = sim.propose()
    assert buy == Call("pay_mcp", {"server": MCP_SERVER, "tool": "token_fact",
                                   "arguments": {"symbol": "USDC"}, "covers": ["token_factsheet"],
                                   "transport": transport})  # fmt: skip
    sim.record(buy, "refused", summary=REFUSAL)
    _ends_naming(sim.propose(), f"pay_mcp was refused: {REFUSAL}",
                 f"the offline planner buys only what the task names ({MCP_SERVER}{endpoint})")


def test_an_mcp_server_that_lists_no_tool_for_the_fact_is_named_and_nothing_else_bought() -> None:
    sim = Sim(f"Who issues USDC? Buy its token fact sheet from {MCP_SERVER}/mcp")
    listing = sim.propose()
    sim.record(listing, "ok", {}, "MCP server lists 1 tools")
    sim.evidence[-1]["offers"] = [{**LISTED, "tool": "gas_stats", "kinds": ["gas_stats"]}]
    _ends_naming(sim.propose(), f"the MCP server {MCP_SERVER} lists no tool selling a token "
                 "fact sheet (tools: gas_stats); the offline planner buys only what the task "
                 f"names ({MCP_SERVER}/mcp)")  # fmt: skip
    sim = Sim(f"Who issues USDC? Buy its token fact sheet from {MCP_SERVER}/mcp")
    sim.record(sim.propose(), "ok", {}, "MCP server lists 1 tools")
    sim.evidence[-1]["offers"] = [{**LISTED, "inputs": ["symbol", "chain"]}]
    _ends_naming(sim.propose(), f"the MCP server {MCP_SERVER} sells a token fact sheet only "
                 "with inputs the task does not give (token_fact needs symbol, chain)")  # fmt: skip


@pytest.mark.parametrize(
    ("described", "bare"),
    [
        (f"Buy the USDC token fact sheet from the MCP seller at {MCP_SERVER}/mcp and tell me who "
         "issues the token.",
         f"Buy the USDC token fact sheet from {MCP_SERVER}/mcp and tell me who issues the token."),
        (f"Buy the USDC token fact sheet from the MCP server at {MCP_SERVER}/mcp.",
         f"Buy the USDC token fact sheet from {MCP_SERVER}/mcp."),
        (f"Who issues USDC? Buy its token fact sheet from the MCP server at {MCP_SERVER}/mcp",
         f"Who issues USDC? Buy its token fact sheet from {MCP_SERVER}/mcp"),
        (f"Buy the USDC token fact sheet from the MCP endpoint {MCP_SERVER}/sse.",
         f"Buy the USDC token fact sheet from {MCP_SERVER}/sse."),
        (f"Buy the USDC fact sheet from the x402 seller at {PAYWALL}/tokens?symbol=USDC.",
         f"Buy the USDC fact sheet from {PAYWALL}/tokens?symbol=USDC."),
        (f"Buy the USDC fact sheet from the x402 server on {PAYWALL}/tokens?symbol=USDC.",
         f"Buy the USDC fact sheet from {PAYWALL}/tokens?symbol=USDC."),
        (f"Buy the cheapest dataset from the paywall at {PAYWALL}.",
         f"Buy the cheapest dataset from {PAYWALL}."),
        (f"Buy the cheapest dataset from the service at {PAYWALL}.",
         f"Buy the cheapest dataset from {PAYWALL}."),
    ],
)  # fmt: skip
def test_a_seller_described_by_its_protocol_is_the_seller_its_url_names(described: str, bare: str) -> None:
    """Outside test 15, Q30: "from the MCP seller at http://.../mcp" was declined ('mcp')
    while the bare URL was bought; the words describing a seller its URL names ask nothing."""
    assert extract_checklist(described) == extract_checklist(bare)
    assert not [i for i in extract_checklist(described) if i.get("unanswerable")]


def test_the_outside_writers_mcp_seller_is_asked_through_its_tools() -> None:
    sim = Sim(f"Buy the USDC token fact sheet from the MCP seller at {MCP_SERVER}/mcp and tell me "
              "who issues the token.")  # fmt: skip
    assert sim.propose() == Call("mcp_tools", {"server": MCP_SERVER, "transport": "streamable-http"})


@pytest.mark.parametrize(
    ("task", "word"),
    [
        # "MCP" said of a URL that is no MCP server: which is meant is not read.
        (f"Buy the USDC fact sheet from the MCP seller at {PAYWALL}/tokens?symbol=USDC.", "'mcp'"),
        (f"Buy the USDC token fact sheet from the zorp seller at {MCP_SERVER}/mcp.", "'zorp'"),
    ],
)
def test_a_description_it_cannot_read_still_declines_the_purchase(task: str, word: str) -> None:
    items = extract_checklist(task)
    assert any(word in str(i.get("unanswerable")) for i in items), items
