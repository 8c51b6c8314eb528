"""The x402 facilitator for the devnet: the package's own EVM facilitator, run in-process.

There is no public facilitator for a local chain, so the paywall runs x402's
``x402FacilitatorSync`` with the devnet deployer's key (never the agent's) behind the
package's ``FacilitatorClient`` protocol.
"""

from __future__ import annotations

import asyncio
import threading

from x402 import x402FacilitatorSync
from x402.mechanisms.evm.signers import FacilitatorWeb3Signer
from x402.schemas import (
    PaymentPayload,
    PaymentRequirements,
    SettleResponse,
    SupportedResponse,
    VerifyResponse,
)

__all__ = ["DevnetFacilitatorSigner", "InProcessFacilitator"]


class DevnetFacilitatorSigner(FacilitatorWeb3Signer):
    """x402's web3 facilitator signer, with nonces read fresh from the node.

    The stock signer caches its next nonce and only ever moves it up. After an
    ``evm_revert`` (every chain test) or a deployer transaction sent by someone else, the
    cache is ahead of the chain and the settlement sits in Anvil's queue until it times
    out. Settlements are serialised by :class:`InProcessFacilitator`, so the pending count
    is always the right nonce.
    """

    def _reserve_nonce(self) -> int:
        with self._nonce_lock:
            return int(self._w3.eth.get_transaction_count(self._account.address, "pending"))


class InProcessFacilitator:
    """x402's ``FacilitatorClient`` protocol over an in-process ``x402FacilitatorSync``.

    There is no public facilitator for a devnet. The package's facilitator does blocking
    RPC (simulate, send, wait for the receipt), so each call runs in a worker thread to keep
    the event loop serving; settlements run one at a time so facilitator nonces never race.
    """

    def __init__(self, facilitator: x402FacilitatorSync) -> None:
        self._facilitator = facilitator
        self._settle_lock = threading.Lock()

    async def verify(
        self, payload: PaymentPayload, requirements: PaymentRequirements
    ) -> VerifyResponse:
        return await asyncio.to_thread(self._facilitator.verify, payload, requirements)

    async def settle(
        self, payload: PaymentPayload, requirements: PaymentRequirements
    ) -> SettleResponse:
        return await asyncio.to_thread(self._settle, payload, requirements)

    def _settle(self, payload: PaymentPayload, requirements: PaymentRequirements) -> SettleResponse:
        with self._settle_lock:
            return self._facilitator.settle(payload, requirements)

    def get_supported(self) -> SupportedResponse:
        return self._facilitator.get_supported()
