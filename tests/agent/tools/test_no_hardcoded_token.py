"""No seller or tool hard-codes a token name, version, address or chain id.

Dynamic: the devnet's sellers (paywall, market, paid MCP server, facilitator) run on an
Anvil with chain id 4242 and a token named "Twin Dollar" at an address of its own; every
402 they answer advertises that chain, that address and that domain, and nib's buyer pays
one over GET and one over POST under that domain, balances read from the chain (a
hard-coded 31337, "USDC" or devnet address anywhere on either side fails it).
Static: the sellers' and tools' code holds no chain id, CAIP-2 id or address literal.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _tools_support import approve, usdc_balance
from eth_account import Account

from agent.tools.x402.offers import OfferBook
from agent.tools.x402.pay_http import PayHttpArgs, PayHttpTool
from agent.tools.x402.protocol import parse_payment_required
from chain.client import ChainClient
from chain.devkeys import DEPLOYER, dev_account
from chain.devnet import AnvilProcess
from chain.devtoken import fund
from chain.networks import custom_network
from chain.paywall.app import PaywallServer
from chain.paywall.market import seller_named
from chain.usdc import deploy_test_usdc
from judge.verdict import VerdictSigner
from tests._support import running_market
from wallet.keystore import KeyHandle
from wallet.signer import Wallet

CHAIN_ID = 4242
NAME = "Twin Dollar"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def odd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Anvil on chain 4242 with TestUSDC named "Twin Dollar", its market and paywall."""
    log = tmp_path_factory.mktemp("odd-anvil") / "anvil.log"
    proc = AnvilProcess(port=0, log=log, chain_id=CHAIN_ID)
    try:
        client = ChainClient(proc.rpc_url, CHAIN_ID)
        usdc = deploy_test_usdc(client.w3, dev_account(DEPLOYER), name=NAME)
        with running_market(proc.rpc_url, usdc) as urls, PaywallServer(proc.rpc_url, usdc) as pw:
            yield {"rpc_url": proc.rpc_url, "usdc": usdc, "client": client, "market": urls,
                   "paywall": pw.url}
    finally:
        proc.stop()


def _terms(resp: httpx.Response) -> list[tuple[str, str, str, str]]:
    """(network, asset, domain name, domain version) of every offer in a 402."""
    assert resp.status_code == 402, resp.text
    return [(a.network, a.asset.lower(), a.extra["name"], a.extra["version"])
            for a in parse_payment_required(resp).accepts]


def test_every_402_advertises_the_chains_own_id_token_and_domain(odd: dict[str, Any]) -> None:
    m = odd["market"]
    terms = [
        *_terms(httpx.get(m["atlas"] + "/tokens?symbol=USDC", timeout=30)),
        *_terms(httpx.post(m["meridian"] + "/lookup", json={"symbol": "USDC"}, timeout=30)),
        *_terms(httpx.get(odd["paywall"] + "/analytics/gas", timeout=30)),
    ]
    listed = httpx.get(m["facilitator"] + "/discovery/resources", timeout=30).json()["items"]
    assert any(item.get("type") == "mcp" or "/sse" in str(item) for item in listed)
    terms += [(a["network"], a["asset"].lower(), a["extra"]["name"], a["extra"]["version"])
              for item in listed for a in item["accepts"]]  # the MCP tool's offer too
    assert len(terms) >= 3 + len(listed)
    assert set(terms) == {(f"eip155:{CHAIN_ID}", odd["usdc"].lower(), NAME, "2")}


def test_nib_buys_under_the_tokens_own_domain_on_any_chain(
    odd: dict[str, Any], judge_signer: VerdictSigner, events: Any, tmp_path: Path
) -> None:
    from agent.tools.base import ToolContext

    client, usdc = odd["client"], odd["usdc"]
    buyer = Account.create()  # a dev key is refused off chain 31337, as it should be
    fund(odd["rpc_url"], usdc, "test", buyer.address, 1_000_000)
    wallet = Wallet(KeyHandle(buyer), db_path=tmp_path / "nib.db", chain=client, usdc=usdc,
                    trusted_judge=judge_signer.address, emit=events)
    net = custom_network("odd", CHAIN_ID, odd["rpc_url"], usdc)
    ctx = ToolContext(run_id="run-odd", chain=client, network=net, wallet=wallet, emit=events,
                      allowlist=(odd["market"]["atlas"], odd["market"]["meridian"]),
                      spend_cap_atomic=1_000_000)
    tool = PayHttpTool(offers=OfferBook())
    atlas, meridian = seller_named("atlas"), seller_named("meridian")
    dev = type("D", (), {"w3": client.w3, "usdc": usdc})
    before = [usdc_balance(dev, a) for a in (buyer.address, atlas.pay_to, meridian.pay_to)]
    for args in ({"url": odd["market"]["atlas"] + "/tokens?symbol=USDC"},
                 {"url": odd["market"]["meridian"] + "/lookup", "method": "POST",
                  "body": {"symbol": "USDC"}}):
        quote = asyncio.run(tool.quote(PayHttpArgs.model_validate(args), ctx))
        assert quote.payload["domain"]["name"] == NAME
        assert quote.payload["domain"]["chainId"] == CHAIN_ID
        assert asyncio.run(tool.execute(quote, approve(judge_signer, quote), ctx)).ok
    after = [usdc_balance(dev, a) for a in (buyer.address, atlas.pay_to, meridian.pay_to)]
    assert after == [before[0] - 50_000, before[1] + 10_000, before[2] + 40_000]


#: Where a token's identity must be read (from the chain or the configured network), never written.
_SCANNED = ("chain/paywall", "agent/tools")
_CHAIN_IDS = {31337, 84532, 8453, 1, 11155111}


def _literals(path: Path) -> Iterator[tuple[int, object]]:
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                  and n.body and isinstance(n.body[0], ast.Expr)
                  and isinstance(n.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in docstrings:
            yield node.lineno, node.value
        elif isinstance(node, ast.Name | ast.alias):
            name = node.id if isinstance(node, ast.Name) else node.name
            if name in ("DEVNET_CHAIN_ID", "ANVIL_CHAIN_ID", "BASE_SEPOLIA_CHAIN_ID",
                        "USDC_NAME", "USDC_VERSION"):
                yield getattr(node, "lineno", 0), name


def test_no_seller_or_tool_writes_a_chain_id_caip2_id_address_or_token_domain() -> None:
    import re

    found = []
    for folder in _SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, value in _literals(path):
                bad = (
                    (type(value) is int and value in _CHAIN_IDS and value != 1)
                    or (isinstance(value, str) and (
                        re.fullmatch(r"0x[0-9a-fA-F]{40}", value)
                        or re.fullmatch(r"eip155:\d+", value)
                        or value in ("DEVNET_CHAIN_ID", "ANVIL_CHAIN_ID", "BASE_SEPOLIA_CHAIN_ID",
                                     "USDC_NAME", "USDC_VERSION")))
                )
                if bad:
                    found.append(f"{path.relative_to(ROOT)}:{line}: {value!r}")
    assert found == [], "hard-coded token identity:\n" + "\n".join(found)
