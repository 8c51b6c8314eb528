"""Helpers shared by the tool tests: verdicts, balances, an event collector."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent.tools.base import Quote
from chain.usdc import usdc_contract
from judge.fingerprint import call_fingerprint
from judge.verdict import Verdict, VerdictSigner
from tests._support import serve  # noqa: F401 - re-exported for the tool tests


@dataclass
class Events:
    """Collects emitted audit events; every payload must survive json.dumps."""

    items: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, name: str, data: dict[str, Any]) -> None:
        json.dumps(data)
        self.items.append((name, data))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [d for n, d in self.items if n == name]


def approve(signer: VerdictSigner, quote: Quote) -> Verdict:
    """An approving verdict for exactly ``quote`` (what the judge issues on a good EV)."""
    return signer.issue(
        decision="approve",
        call_fingerprint=call_fingerprint(quote.tool, quote.args),
        payload_fingerprint=quote.payload_fingerprint,
        amount=quote.amount,
        asset=quote.asset,
        recipient=quote.recipient,
        chain_id=quote.chain_id,
        p="0.9",
        ev="0.5",
        reason="test: approve",
    )


def usdc_balance(chain: Any, who: str) -> int:
    return int(usdc_contract(chain.w3, chain.usdc).functions.balanceOf(who).call())


