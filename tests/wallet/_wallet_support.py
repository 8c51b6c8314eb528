"""Helpers shared by the wallet tests: quotes, verdicts, an event collector."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from chain.devkeys import AGENT, SELLER, dev_account
from chain.usdc import USDC_NAME, USDC_VERSION, eip3009_typed_data
from judge.fingerprint import call_fingerprint, transaction_fingerprint, typed_data_fingerprint
from judge.verdict import Verdict, VerdictSigner

ONE_USDC = 1_000_000
DIME = 100_000  # 0.10 USDC
FAST_SCRYPT_N = 2**10  # tests only: the default 2**18 costs ~1 s per unlock

AGENT_ADDRESS = dev_account(AGENT).address
SELLER_ADDRESS = dev_account(SELLER).address


@dataclass
class Events:
    """Collects emitted audit events; every payload must survive json.dumps."""

    items: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, name: str, data: dict[str, Any]) -> None:
        json.dumps(data)
        self.items.append((name, data))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [d for n, d in self.items if n == name]


def chain_time(chain: Any) -> int:
    return int(chain.w3.eth.get_block("latest")["timestamp"])


def quote(
    chain: Any,
    *,
    value: int = DIME,
    recipient: str = SELLER_ADDRESS,
    valid_before: int | None = None,
    chain_id: int | None = None,
    nonce: bytes | None = None,
    asset: str | None = None,
) -> dict[str, Any]:
    """The EIP-3009 payload a paid tool would quote: agent -> seller."""
    return eip3009_typed_data(
        name=USDC_NAME,
        version=USDC_VERSION,
        chain_id=chain_id if chain_id is not None else chain.chain_id,
        verifying_contract=asset or chain.usdc,
        sender=AGENT_ADDRESS,
        recipient=recipient,
        value=value,
        valid_after=0,
        valid_before=valid_before if valid_before is not None else chain_time(chain) + 600,
        nonce=nonce if nonce is not None else os.urandom(32),
    )


def approve(
    signer: VerdictSigner,
    payload: dict[str, Any],
    *,
    decision: str = "approve",
    amount: int | None = None,
    recipient: str | None = None,
    asset: str | None = None,
    chain_id: int | None = None,
    now: float | None = None,
    ttl_s: int = 120,
) -> Verdict:
    """A verdict over ``payload`` (typed data or a transaction) as the judge would issue it."""
    if "primaryType" in payload:
        fp = typed_data_fingerprint(payload)
        msg = payload["message"]
        terms = (int(msg["value"]), msg["to"], payload["domain"]["verifyingContract"],
                 int(payload["domain"]["chainId"]))
    else:
        fp = transaction_fingerprint(payload)
        data = payload["data"].removeprefix("0x")
        terms = (int(data[72:], 16), "0x" + data[32:72], payload["to"], int(payload["chainId"]))
    return signer.issue(
        decision=decision,  # type: ignore[arg-type]
        call_fingerprint=call_fingerprint("pay_http", {"url": "http://paywall/gas_stats"}),
        payload_fingerprint=fp,
        amount=terms[0] if amount is None else amount,
        recipient=recipient or terms[1],
        asset=asset or terms[2],
        chain_id=terms[3] if chain_id is None else chain_id,
        p="0.8",
        ev="0.05",
        reason="test",
        ttl_s=ttl_s,
        now=time.time() if now is None else now,
    )
