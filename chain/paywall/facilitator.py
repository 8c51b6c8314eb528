"""The x402 facilitator for the devnet: the package's own EVM facilitator, run in-process.

There is no public facilitator for a local chain, so the paywall runs x402's
``x402FacilitatorSync`` with the devnet deployer's key (never the agent's) behind the
package's ``FacilitatorClient`` protocol.
"""

from __future__ import annotations

import asyncio
import threading

from eth_typing import HexStr
from x402 import x402FacilitatorSync
from x402.mechanisms.evm.constants import TX_STATUS_SUCCESS
from x402.mechanisms.evm.signers import FacilitatorWeb3Signer
from x402.mechanisms.evm.types import TransactionReceipt
from x402.schemas import (
    PaymentPayload,
    PaymentRequirements,
    SettleResponse,
    SupportedResponse,
    VerifyResponse,
)

from chain.client import ChainClient

__all__ = ["RECEIPT_POLL_S", "DevnetFacilitatorSigner", "InProcessFacilitator"]

#: How often a settlement looks for its receipt (seconds).
RECEIPT_POLL_S = 0.005


class DevnetFacilitatorSigner(FacilitatorWeb3Signer):
    """x402's web3 facilitator signer, with pipelined nonces read fresh from the node.

    The stock signer caches its next nonce and only ever moves it up. After an
    ``evm_revert`` (every chain test) or a deployer transaction sent by someone else, the
    cache is ahead of the chain and the settlement sits in Anvil's queue until it times
    out. Here each transaction takes the node's pending count as its nonce, and holds the
    send lock from reading it until the node has the signed transaction (so the next
    reader counts it): settlements from one key pipeline (nonce n+1 is sent while n's
    receipt is awaited) and never race, and a revert needs no resync.
    """

    def __init__(
        self, private_key: str, rpc_url: str, confirmation_timeout_seconds: float = 120,
        gas_limit: int = 500_000,
    ) -> None:
        super().__init__(private_key, rpc_url, confirmation_timeout_seconds, gas_limit)
        # x402's own provider takes the environment's proxies, even to a local node.
        self._w3 = ChainClient(rpc_url, timeout_s=30.0).w3
        self._send_lock = threading.RLock()

    def _reserve_nonce(self) -> int:
        with self._send_lock:
            return int(self._w3.eth.get_transaction_count(self._account.address, "pending"))

    def write_contract(
        self, address: str, abi: list[dict[str, object]], function_name: str, *args: object,
        data_suffix: str | None = None,
    ) -> str:
        with self._send_lock:  # nonce read -> build -> sign -> sent, as one step
            return super().write_contract(
                address, abi, function_name, *args, data_suffix=data_suffix
            )

    def send_transaction(self, to: str, data: bytes) -> str:
        with self._send_lock:
            return super().send_transaction(to, data)

    def wait_for_transaction_receipt(self, tx_hash: str) -> TransactionReceipt:
        """The stock wait, polling every RECEIPT_POLL_S instead of web3's 0.1 s: a devnet
        mines on arrival, so a receipt not there at the first look is there a few ms
        later, and a 100 ms sleep was most of a settlement's (and a paid request's) tail."""
        if not tx_hash.startswith("0x"):
            tx_hash = "0x" + tx_hash
        receipt = self._w3.eth.wait_for_transaction_receipt(
            HexStr(tx_hash), timeout=self._confirmation_timeout_seconds,
            poll_latency=RECEIPT_POLL_S,
        )
        return TransactionReceipt(
            status=TX_STATUS_SUCCESS if receipt["status"] == 1 else 0,
            block_number=receipt["blockNumber"],
            tx_hash=tx_hash,
            logs=list(receipt.get("logs") or []),
        )


class InProcessFacilitator:
    """x402's ``FacilitatorClient`` protocol over an in-process ``x402FacilitatorSync``.

    There is no public facilitator for a devnet. The package's facilitator does blocking
    RPC (simulate, send, wait for the receipt), so each call runs in a worker thread to keep
    the event loop serving. Settlements run concurrently: the signer serialises only the
    nonce-to-send step (see :class:`DevnetFacilitatorSigner`), so receipts are awaited in
    parallel. Two settlements of one authorization cannot both move money: the token
    contract refuses a used nonce, and the second settlement fails on chain.
    """

    def __init__(self, facilitator: x402FacilitatorSync) -> None:
        self._facilitator = facilitator

    async def verify(
        self, payload: PaymentPayload, requirements: PaymentRequirements
    ) -> VerifyResponse:
        return await asyncio.to_thread(self._facilitator.verify, payload, requirements)

    async def settle(
        self, payload: PaymentPayload, requirements: PaymentRequirements
    ) -> SettleResponse:
        return await asyncio.to_thread(self._facilitator.settle, payload, requirements)

    def get_supported(self) -> SupportedResponse:
        return self._facilitator.get_supported()
