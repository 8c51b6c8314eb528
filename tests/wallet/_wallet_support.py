"""Helpers shared by the wallet tests: quotes, verdicts, an event collector."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from web3 import Web3

from chain.devkeys import AGENT, DEPLOYER, SELLER, dev_account
from chain.usdc import USDC_NAME, USDC_VERSION, eip3009_typed_data, usdc_contract
from judge.fingerprint import call_fingerprint, transaction_fingerprint, typed_data_fingerprint
from judge.verdict import Verdict, VerdictSigner
from wallet.signer import SignedTypedData

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
    task_id: str | None = None,
    task_cap: int | None = None,
) -> Verdict:
    """A verdict over ``payload`` (typed data or a transaction) as the judge would issue it
    (``task_id``/``task_cap``: to a registered task, with its cap)."""
    if "primaryType" in payload:
        fp = typed_data_fingerprint(payload)
        msg = payload["message"]
        terms = (
            int(msg["value"]),
            msg["to"],
            payload["domain"]["verifyingContract"],
            int(payload["domain"]["chainId"]),
        )
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
        task_id=task_id,
        task_cap=task_cap,
    )


def submit_authorization(chain: Any, signed: SignedTypedData) -> str:
    """Settle an authorization the way the x402 facilitator does (DEPLOYER relays it)."""
    return relay(
        chain,
        signed.signer,
        Web3.to_checksum_address(signed.recipient),
        signed.value,
        signed.valid_after,
        signed.valid_before,
        signed.auth_nonce,
        signed.signature_bytes(),
    )


def relay(chain: Any, *args: Any) -> str:
    """DEPLOYER submits transferWithAuthorization(from, to, value, after, before, nonce, sig)."""
    relayer = dev_account(DEPLOYER)
    fn = usdc_contract(chain.w3, chain.usdc).get_function_by_signature(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
    )(*args)
    tx = fn.build_transaction(
        {
            "from": relayer.address,
            "nonce": chain.w3.eth.get_transaction_count(relayer.address, "pending"),
            "chainId": chain.chain_id,
        }
    )
    tx_hash = chain.w3.eth.send_raw_transaction(relayer.sign_transaction(tx).raw_transaction)
    receipt = chain.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)
    assert receipt["status"] == 1
    return "0x" + bytes(receipt["transactionHash"]).hex()


def transfer_tx(chain: Any, to: str = SELLER_ADDRESS, amount: int = DIME) -> dict[str, Any]:
    """A USDC transfer with nonce, gas and fees pinned, as the transfer tool quotes it."""
    data = usdc_contract(chain.w3, chain.usdc).encode_abi("transfer", [to, amount])
    base = int(chain.w3.eth.get_block("latest")["baseFeePerGas"])
    return {
        "chainId": chain.chain_id,
        "to": chain.usdc,
        "data": data,
        "value": 0,
        "nonce": chain.w3.eth.get_transaction_count(AGENT_ADDRESS, "pending"),
        "gas": 60_000,
        "maxFeePerGas": base + 10**8,
        "maxPriorityFeePerGas": 10**8,
    }
