"""The in-process judge (``nib run --in-process``, tests, benchmarks) holds a purchase to its
seller's own terms, as the services' judge does, from the attacker's position.

In-process, a task that orders no payment is registered nowhere: the judge rules on the
request's own limits. It used to approve any x402 purchase from a seller the agent's
origin allowlist admitted, paying whatever address and amount the request named. It now
reads the named seller's own 402 (judge.tasks.unbound) and approves only exactly an offer
it states: an agent naming the allowlisted seller and paying itself, or paying the seller
1 unit, is refused naming both sides.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judge"))
from test_judge_payto import OUTSIDE_PAY_TO, serving_402  # noqa: E402
from test_judge_tasks import ATTACKER, USDC, authorization, request  # noqa: E402

from agent.cli.runtime import build_local_judge  # noqa: E402
from agent.config import load_settings  # noqa: E402
from chain.networks import get_network  # noqa: E402
from judge.fingerprint import call_fingerprint  # noqa: E402
from judge.jev import Judge  # noqa: E402


@pytest.fixture
def seller() -> Iterator[str]:
    """An outside x402 seller whose 402 asks 10 000 at OUTSIDE_PAY_TO."""
    with serving_402(OUTSIDE_PAY_TO) as url:
        yield url


@pytest.fixture
def in_process_judge(nib_home: Path, anvil: Any) -> Judge:
    """The judge as ``build_runtime(in_process=True)`` builds it (``build_local_judge``),
    on the session's Anvil."""
    network = get_network("anvil", rpc_url=anvil.rpc_url, usdc=USDC)
    return build_local_judge(load_settings(), network)


def _buy(seller: str, to: str, amount: int, nonce: int) -> Any:
    url = seller + "/data"
    return request(authorization(to, amount, nonce), args={"url": url}, seller=seller,
                   task_id="an-unregistered-run",
                   call_fingerprint=call_fingerprint("pay_http", {"url": url}))


def test_the_in_process_judge_approves_an_unregistered_tasks_purchase_only_on_its_sellers_terms(
    in_process_judge: Judge, seller: str
) -> None:
    judge = in_process_judge
    assert judge.tasks.get("an-unregistered-run") is None  # ruled on the request's limits
    honest = judge.decide(_buy(seller, OUTSIDE_PAY_TO, 10_000, 1))
    assert honest.decision == "approve", honest.reason
    # A compromised agent names the seller its allowlist admits and pays itself: the
    # seller's own 402, read by the judge, names another payTo (approved on the old code).
    stolen = judge.decide(_buy(seller, ATTACKER, 10_000, 2))
    assert stolen.decision == "refuse", stolen.reason
    assert ATTACKER in stolen.reason and OUTSIDE_PAY_TO.lower() in stolen.reason, stolen.reason
    # The seller's real payTo, 1 unit of the 10 000 it asks.
    cheap = judge.decide(_buy(seller, OUTSIDE_PAY_TO, 1, 3))
    assert cheap.decision == "refuse", cheap.reason
    assert "amount 1 " in cheap.reason and "amount 10000 " in cheap.reason, cheap.reason
