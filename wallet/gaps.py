"""Filling a nonce number below a transfer waiting its turn, so the transfer goes through.

Numbers are sequential: a transfer signed with nonce ``n`` is mined only once every lower
number is. A lower number can stay unsent for two reasons:

- it was given back (a quote the judge refused, a send that failed before the node took
  it) or its lease ran out, and no one has taken it since. Nobody holds it, so the
  wallet takes it at once, whoever gave it back, and fills it;
- a confined task holds it (allocated or claimed back, never sent). The wallet bounds how
  long a task may hold (``wallet.nonces``: one lease over its life); once the transfer
  has waited its turn (``broadcast.ORDER_WAIT_S``) the number is taken over when
  **another** confined task holds it. A number the user's processes hold, or the
  waiting transfer's own task, is never taken from its holder.

Filling means a 0-ETH transaction from the wallet to itself with that number (21,000 gas,
no calldata: it moves no money, it costs gas only), sent only when it is the lowest number
not sent (never above a gap). Its most gas (gas x max fee) is held on the waiting
transfer's ledger row against that run's cap and the treasury cap before it is signed
(the max fee lowered to fit the room left, down to the next block's base fee and a 1-wei
tip); with no room it is not sent, and the transfer tries again while it waits, then is
refused. Once mined, the gas paid replaces
the hold in one write: metered to the confined task that held or gave back the number
when it is another than the waiting transfer's (even past its cap: the filler was its
doing, and the treasury held the gas), else to the waiting transfer's task, and recorded
as a ``wallet.nonce_filled`` event. A number the holding task later
signs a transfer with is refused by the node as used ("nonce too low"): no money moves
on its account.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from web3.exceptions import Web3RPCError

from chain.money import ATOMIC_PER_USDC, WEI_PER_ETH, gas_to_usdc
from judge.storage import cell_int
from wallet._tables import CAPS, SPENDS
from wallet.ledger import hold_gas_in
from wallet.reserving import run_committed
from wallet.totals import committed as treasury_committed

if TYPE_CHECKING:
    from judge.storage import Tx
    from wallet.core import WalletCore
    from wallet.signed import SignedTx

__all__ = ["FILL_GAS", "FillFailed", "fill_lowest"]

log = logging.getLogger(__name__)

#: The gas of a plain transfer of 0 ETH to the wallet's own address.
FILL_GAS = 21_000


class FillFailed(Exception):
    """A number below a waiting transfer could not be filled; the message says why."""


def fill_lowest(core: WalletCore, signed: SignedTx, n: int, *, held: bool = False) -> bool:
    """Fill ``n``, the lowest number not yet sent below ``signed`` (a transfer waiting its
    turn): True once a filler is mined (or pooled) with it. False when the wallet could
    not take it (someone took it or sent below it meanwhile: look again). ``held``: also
    take it from another confined task holding it unsent (the wait is over). FillFailed
    when it was taken but cannot be filled (no room under a cap for the filler's gas, the
    node refused it); the number is then given back."""
    owners = core.nonces.take_over(n, signed.run_id, held=held)
    if owners is None:
        return False
    row, task = signed.reservation.id, signed.run_id
    try:
        tx, own = _hold_filler(core, n, row, task)
    except Exception as exc:
        core.nonces.release(n)
        raise FillFailed(str(exc)) from exc
    try:
        tx_hash, gas_wei = _send_filler(core, n, tx)
    except Exception as exc:  # nothing was mined under the number: it is free again
        _book(core, row, own, None, [], task)
        core.nonces.release(n)
        core.nonces.resync()
        raise FillFailed(f"the filler for nonce {n} was not sent: {str(exc)[:200]}") from exc
    charged = _book(core, row, own, (tx_hash, gas_wei), owners, task)
    core.emit("wallet.nonce_filled", {"run_id": charged, "nonce": n, "tx_hash": tx_hash,
                                      "gas_wei": gas_wei, "for_run": task,
                                      "taken_from": "holder" if held and owners else "given back"})
    return True


def _hold_filler(core: WalletCore, n: int, row: str, run_id: str) -> tuple[dict[str, object], int]:
    """The filler transaction with nonce ``n``, its most gas (gas x max fee) held on the
    waiting transfer's row ``row`` (run ``run_id``) in one write section with the check
    that it fits the run's cap and the treasury cap; and the row's hold before. The max
    fee is 2 x base fee + tip, lowered to fit the room left (as a cancel's is), down to
    the most the next block's base fee can be plus a tip of 1 wei. ValueError (nothing
    held) when even that does not fit."""
    w3, price = core.chain.w3, core.meter.eth_price_usdc
    chain_id = core.chain.chain_id()
    core.key.check_chain(chain_id)
    tip = int(w3.eth.max_priority_fee)
    base = int(w3.eth.get_block("latest").get("baseFeePerGas", 0))
    least = base + base // 8 + 1  # the next block's base fee is at most 12.5% higher
    with core.meter.store.transaction() as conn:
        own = cell_int(conn.scalar(f"SELECT gas_hold FROM {SPENDS} WHERE id = ?", (row,)) or 0)
        rooms = {f"run {run_id}'s cap": _room(conn, run_id)}
        if core.meter.treasury_cap_atomic is not None:
            rooms["the treasury cap"] = core.meter.treasury_cap_atomic - treasury_committed(conn)
        fee = max(2 * base + tip, least + 1)
        for name, room in rooms.items():
            fits = -1 if room is None else max(room, 0) * WEI_PER_ETH // max(price * ATOMIC_PER_USDC * FILL_GAS, 1)
            if 0 <= fits < least + 1:
                raise ValueError(
                    f"its gas (at least {gas_to_usdc(FILL_GAS * (least + 1), price)} atomic "
                    f"USDC: {FILL_GAS} gas at {least + 1} wei) does not fit {name} ({room} left)"
                )
            fee = fee if fits < 0 else min(fee, fits)
        hold_gas_in(conn, row, own + gas_to_usdc(FILL_GAS * fee, price), now=core.clock())
    tx: dict[str, object] = {
        "type": 2, "chainId": chain_id, "to": core.address, "value": 0, "data": "0x",
        "nonce": n, "gas": FILL_GAS, "maxFeePerGas": fee,
        "maxPriorityFeePerGas": max(min(tip, fee - least), 1),
    }
    return tx, own


def _room(conn: Tx, run_id: str) -> int | None:
    """What is left of ``run_id``'s cap (None: no cap on record)."""
    found = conn.one(f"SELECT cap FROM {CAPS} WHERE run_id = ?", (run_id,))
    return None if found is None else cell_int(found[0]) - run_committed(conn, run_id)


def _book(core: WalletCore, row: str, own: int, paid: tuple[str, int] | None,
          owners: list[str], task: str) -> str:
    """Put the row's gas hold back to ``own`` and, in the same write, meter the filler's
    gas ``paid`` (tx hash, wei): to the first confined task other than ``task`` that held
    or gave back the number (even past its cap: the treasury held it on ``row``), else to
    ``task``, whose hold covered it. Returns the run charged."""
    charged = next((o for o in owners if o != task), task)
    with core.meter.store.transaction() as conn:
        hold_gas_in(conn, row, own, now=core.clock())
        if paid is not None:
            core.meter._insert_gas(conn, charged, paid[1], None, paid[0])
    return charged


def _send_filler(core: WalletCore, n: int, tx: dict[str, object]) -> tuple[str, int]:
    """SPENDS GAS: ``tx`` (a 0-ETH transaction to the wallet itself with nonce ``n``),
    broadcast and mined; its hash and the gas it cost."""
    w3 = core.chain.w3
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
