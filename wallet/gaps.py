"""Filling a nonce number another task holds up, so this task's transfer goes through.

Numbers are sequential: a transfer signed with nonce ``n`` is mined only once every lower
number is. A confined task that holds a number (allocated or claimed back, never sent)
and one that gives it back leaves every later transfer of every other task above it; the
wallet bounds how long a task may hold (``wallet.nonces``: one lease over its life), but
a transfer waiting above it meanwhile would be discarded. So once a transfer has waited
its turn (``broadcast.ORDER_WAIT_S``) and a lower number is still held by, or was last
given back by, **another** confined task, the wallet takes that number over and sends a
0-ETH transaction to itself with it (21,000 gas, metered to the task that held it); the
waiting transfer is then next. A number the holding task later signs a transfer with is
refused by the node as used ("nonce too low"): no money moves on its account.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from web3.exceptions import Web3RPCError

if TYPE_CHECKING:
    from wallet.core import WalletCore

__all__ = ["FILL_GAS", "fill_foreign"]

log = logging.getLogger(__name__)

#: The gas of a plain transfer of 0 ETH to the wallet's own address.
FILL_GAS = 21_000


def fill_foreign(core: WalletCore, task: str, numbers: list[int]) -> list[int]:
    """Fill each of ``numbers`` (below a transfer of ``task``) that another confined task
    holds or last gave back; the numbers filled."""
    filled = []
    for n in sorted(numbers):
        owners = core.nonces.take_over(n, task)
        if owners is None:
            continue
        try:
            tx_hash, gas_wei = _send_filler(core, n)
        except Exception as exc:  # nothing mined under the number: give it back
            log.warning("filling nonce %s held up by task %s failed: %s", n, owners[0], exc)
            core.nonces.release(n)
            core.nonces.resync()
            continue
        core.meter.record_gas(owners[0], gas_wei, tx_hash=tx_hash)
        core.emit("wallet.nonce_filled", {"run_id": owners[0], "nonce": n, "tx_hash": tx_hash,
                                          "gas_wei": gas_wei, "for_run": task})
        filled.append(n)
    return filled


def _send_filler(core: WalletCore, n: int) -> tuple[str, int]:
    """SPENDS GAS: a 0-ETH transaction to the wallet itself with nonce ``n``, mined; its
    hash and the gas it cost."""
    w3 = core.chain.w3
    chain_id = core.chain.chain_id()
    core.key.check_chain(chain_id)
    tip = int(w3.eth.max_priority_fee)
    base = int(w3.eth.get_block("latest").get("baseFeePerGas", 0))
    tx: dict[str, object] = {
        "type": 2, "chainId": chain_id, "to": core.address, "value": 0, "data": "0x",
        "nonce": n, "gas": FILL_GAS, "maxFeePerGas": 2 * base + tip, "maxPriorityFeePerGas": tip,
    }
    signed = core.key._unsafe_sign_transaction(tx)
    try:
        tx_hash = "0x" + bytes(w3.eth.send_raw_transaction(signed.raw_transaction)).hex()
    except Web3RPCError as exc:
        raise RuntimeError(f"the node refused the filler: {str(exc)[:200]}") from exc
    core.nonces.confirm(n, tx_hash)
    receipt = w3.eth.wait_for_transaction_receipt(
        tx_hash, timeout=core.receipt_timeout_s, poll_latency=0.05  # type: ignore[arg-type]
    )
    return tx_hash, int(receipt["gasUsed"]) * int(receipt.get("effectiveGasPrice", 0))
