"""Interop with the official TypeScript x402 packages (pinned in tools/package.json, run
under node from tools/interop/), on Circle's token: nib buys from a seller built only with
``@x402/express`` over GET and POST, and ``@x402/fetch`` pays nib's market sellers (GET and
POST); every amount is read back from the chain. No test reaches the internet."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _on_circle
import pytest
from _tools_support import approve, usdc_balance
from eth_account import Account

from agent.tools.x402.offers import OfferBook
from agent.tools.x402.pay_http import PayHttpArgs, PayHttpTool
from chain.devkeys import AGENT, OUTSIDER, dev_account
from chain.devtoken import fund
from chain.paywall.market import seller_named
from chain.usdc import token_domain

#: This module's chain and market are the session's Circle devnet (tests/conftest.py).
anvil, market = _on_circle.anvil, _on_circle.market

INTEROP = Path(__file__).resolve().parents[3] / "tools" / "interop"
AGENT_ADDR = dev_account(AGENT).address
PRICE = 12_345  # an odd amount: nothing else on the chain pays it


def _node() -> str:
    node = shutil.which("node")
    if node is None or not (INTEROP.parent / "node_modules" / "@x402" / "express").exists():
        pytest.fail("node and the TypeScript x402 packages are needed; expected them from "
                    "`make setup` (npm install --prefix tools). Fix: run `make setup`.")
    return node


@pytest.fixture(scope="module")
def ts_seller(anvil: Any, market: dict[str, str], tmp_path_factory: Any) -> Iterator[dict[str, str]]:
    """The @x402/express seller, settling through the devnet facilitator, paid to a fresh address."""
    name, version = token_domain(anvil.w3, anvil.usdc)
    pay_to = Account.create().address
    env = {"PATH": os.environ.get("PATH", ""), "FACILITATOR_URL": market["facilitator"],
           "NETWORK": f"eip155:{anvil.chain_id}", "USDC": anvil.usdc, "TOKEN_NAME": name,
           "TOKEN_VERSION": version, "PAY_TO": pay_to, "PRICE": str(PRICE)}
    log = tmp_path_factory.mktemp("ts-seller") / "seller.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([_node(), str(INTEROP / "seller.mjs")], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while "listening" not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the @x402/express seller did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield {"url": log.read_text().split("listening ", 1)[1].split()[0], "pay_to": pay_to}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_nib_buys_from_an_x402_express_seller_over_get_and_post(
    chain: Any, ts_seller: dict[str, str], make_ctx: Any, wallet: Any, judge_signer: Any
) -> None:
    ctx = make_ctx(wallet=wallet, allowlist=(ts_seller["url"],))
    tool = PayHttpTool(offers=OfferBook())
    before = usdc_balance(chain, AGENT_ADDR), usdc_balance(chain, ts_seller["pay_to"])
    for args in ({"url": ts_seller["url"] + "/tokens?symbol=USDC"},
                 {"url": ts_seller["url"] + "/lookup", "method": "POST", "body": {"symbol": "DAI"}}):
        quote = asyncio.run(tool.quote(PayHttpArgs.model_validate(args), ctx))
        assert (quote.amount, quote.recipient) == (PRICE, ts_seller["pay_to"])
        obs = asyncio.run(tool.execute(quote, approve(judge_signer, quote), ctx))
        assert obs.ok and obs.cost_usdc == PRICE
    assert "DAI" in json.dumps(obs.data["excerpt"])
    assert usdc_balance(chain, AGENT_ADDR) == before[0] - 2 * PRICE
    assert usdc_balance(chain, ts_seller["pay_to"]) == before[1] + 2 * PRICE


def test_x402_fetch_pays_nibs_sellers_over_get_and_post(chain: Any, market: dict[str, str]) -> None:
    buyer = dev_account(OUTSIDER)
    fund(chain.rpc_url, chain.usdc, "circle", buyer.address, 1_000_000)
    atlas, meridian = seller_named("atlas"), seller_named("meridian")
    before = [usdc_balance(chain, a) for a in (buyer.address, atlas.pay_to, meridian.pay_to)]
    env = {"PATH": os.environ.get("PATH", ""), "BUYER_KEY": buyer.key.to_0x_hex(),
           "NETWORK": f"eip155:{chain.chain_id}", "USDC": chain.usdc, "MAX_ATOMIC": "100000"}
    paid = []
    for extra in ({"URL": market["atlas"] + "/tokens?symbol=USDC"},
                  {"URL": market["meridian"] + "/lookup", "METHOD": "POST",
                   "BODY": json.dumps({"symbol": "USDC"})}):
        out = subprocess.run([_node(), str(INTEROP / "buyer.mjs")], env={**env, **extra},
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        answer = json.loads(out.stdout.strip().splitlines()[-1])
        assert answer["status"] == 200 and answer["body"]["issuer"] == "Circle", answer
        assert answer["payment"]["success"] and answer["payment"]["payer"] == buyer.address
        paid.append(answer["payment"]["transaction"])
    assert len(set(paid)) == 2
    after = [usdc_balance(chain, a) for a in (buyer.address, atlas.pay_to, meridian.pay_to)]
    assert after == [before[0] - 50_000, before[1] + 10_000, before[2] + 40_000]
