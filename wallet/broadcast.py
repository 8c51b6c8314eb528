"""MOVES MONEY: broadcasting a signed transfer in nonce order, waiting for its receipt,
metering its gas and settling (or failing) its spend from what the chain says.

A transaction above a nonce gap is never broadcast: the node would keep it unmined in
its pool while its spend stays counted.
"""

from __future__ import annotations

import time

from web3.exceptions import TransactionNotFound, Web3RPCError
from web3.types import TxReceipt

from wallet.core import WalletCore, spend_event
from wallet.errors import SendFailed
from wallet.gaps import FillFailed, fill_lowest
from wallet.meter import Reservation
from wallet.signed import SentTx, SignedTx

__all__ = ["FILL_RETRY_S", "ORDER_POLL_S", "ORDER_WAIT_S", "Broadcaster"]

#: How long a transaction waits for the lower nonces handed out before it (other calls
#: between their quote and their broadcast) to reach the node or be given back, and how
#: often it looks. Broadcasting past a number that is later given back would leave the
#: transaction unmined in the pool for good, its spend counted (a task refused by the
#: judge after quoting, the last one before a cap binds, leaves that number unused).
ORDER_WAIT_S, ORDER_POLL_S = 30.0, 0.05
#: How often a fill of a lower number that failed is tried again while the transfer waits
#: (room under a cap for the filler's gas comes back as other sends settle below their hold).
FILL_RETRY_S = 0.5


class Broadcaster:
    """Sends signed transfers and decides their spends from the chain."""

    def __init__(self, core: WalletCore) -> None:
        self._core = core

    def send_transaction(self, signed: SignedTx, reservation: Reservation | None = None) -> SentTx:
        """MOVES MONEY: see ``Wallet.send_transaction``."""
        core = self._core
        res = reservation or signed.reservation
        self._refuse_above_gap(signed)
        self._broadcast(signed, res)
        core.nonces.confirm(signed.nonce, signed.tx_hash)
        core.emit(
            "wallet.broadcast", {**spend_event(res), "tx_hash": signed.tx_hash, "nonce": signed.nonce}
        )
        receipt = self._await_receipt(signed, res)
        gas_wei = int(receipt["gasUsed"]) * int(receipt.get("effectiveGasPrice", 0))
        gas_usdc = core.meter.record_gas(
            res.run_id, gas_wei, spend_id=res.id, tx_hash=signed.tx_hash
        )
        status = int(receipt["status"])
        block = int(receipt["blockNumber"])
        if status != 1:
            core.meter.fail(res, note=f"reverted in block {block}")
            core.emit(
                "wallet.failed",
                {
                    **spend_event(res),
                    "tx_hash": signed.tx_hash,
                    "note": "reverted",
                    "gas_wei": gas_wei,
                },
            )
            raise SendFailed(
                f"Transaction {signed.tx_hash} reverted in block {block} (status {status}, "
                f"expected 1). Fix: replay it with `cast run {signed.tx_hash}` to see why; the "
                "spend is marked failed and its cap share freed (gas stays metered)."
            )
        core.meter.settle(res, signed.tx_hash)
        core.emit(
            "wallet.settled",
            {
                **spend_event(res),
                "tx_hash": signed.tx_hash,
                "gas_wei": gas_wei,
                "block_number": block,
            },
        )
        return SentTx(
            signed.tx_hash, block, status, int(receipt["gasUsed"]), gas_wei, gas_usdc, res.id
        )

    def discard(self, signed: SignedTx, note: str) -> None:
        """Give back a signed transaction that will not be broadcast: its nonce is reused
        and its spend marked failed."""
        self._core.nonces.release(signed.nonce)
        self._failed(signed, note)

    def _failed(self, signed: SignedTx, note: str) -> None:
        """The wallet's own finding that ``signed`` moved no money (never broadcast, or
        its nonce taken by another mined transaction)."""
        self._core.meter.fail(signed.reservation, note)
        self._core.emit("wallet.failed", {**spend_event(signed.reservation), "note": note})

    def _refuse_above_gap(self, signed: SignedTx) -> None:
        """Broadcast in nonce order. While a lower number is not sent: the lowest one,
        when free (given back, run out, forgotten by the node), is filled by a 0-ETH
        transaction to the wallet itself (wallet.gaps); one handed out and not yet sent
        is waited for. A fill that fails (no room under a cap for its gas yet, the node
        refused it) is tried again every FILL_RETRY_S, and a number held is taken over
        when another confined task holds it, each for ORDER_WAIT_S from when this send
        first saw it so (at most twice that in all). A transfer whose lower
        number stays unsent is discarded (nonce released, spend failed) and refused: the
        node would keep it in its pool unmined."""
        nonces = self._core.nonces
        nonces.keep_while_sending(signed.nonce, 2 * ORDER_WAIT_S)
        start = retry_at = time.monotonic()
        seen: dict[tuple[int, bool], float] = {}  # (number, free) -> when this send first saw it
        failed: tuple[int, str] | None = None  # the number whose last fill failed, and why
        while True:
            gap, waiting = nonces.unsent_below(signed.nonce)
            if not gap and not waiting:
                return
            lowest, now = min([*gap, *waiting]), time.monotonic()
            late = now - seen.setdefault((lowest, lowest in gap), now) >= ORDER_WAIT_S
            if failed and failed[0] != lowest:
                failed = None
            if now - start >= 2 * ORDER_WAIT_S or (late and failed):
                break  # bounded: numbers kept being handed out again, or its fill failed
            if (lowest in waiting and not late) or now < retry_at:
                time.sleep(ORDER_POLL_S)
                continue
            try:
                filled = fill_lowest(self._core, signed, lowest, held=lowest in waiting)
            except FillFailed as exc:
                failed, retry_at = (lowest, f"the wallet could not fill {lowest}: {exc}"), now + FILL_RETRY_S
                continue
            failed = None
            if not filled and lowest in waiting:
                gap, waiting = nonces.unsent_below(signed.nonce)
                if lowest in waiting:
                    break  # its holder keeps it: not the wallet's to take
            if not filled:
                time.sleep(ORDER_POLL_S)  # taken, sent or given back meanwhile: look again
        self._refuse(signed, gap, waiting, failed[1] if failed else "")

    def _refuse(self, signed: SignedTx, gap: list[int], waiting: list[int], why: str) -> None:
        """Discard ``signed`` (nonce released, spend failed) and raise SendFailed: ``gap``
        or ``waiting`` is unsent below it (see ``NonceManager.unsent_below``)."""
        if why:
            fix = "quote the transfer again"
        elif gap:
            why = f"no send under way holds {', '.join(map(str, gap))}"
            fix = ("quote the transfer again (a lower number was given back, or the chain "
                   "moved back: a devnet reverted or reset, or a transaction was dropped)")
        else:
            why = (f"{', '.join(map(str, waiting))} were handed out and not sent within "
                   f"{ORDER_WAIT_S:g} s")
            fix = "quote the transfer again once the other sends have finished"
        first = min([*gap, *waiting])
        self.discard(signed, note=f"not broadcast: nonce {signed.nonce} above a gap "
                                  f"{gap or waiting}: {why[:300]}")
        raise SendFailed(
            f"Transaction {signed.tx_hash} has nonce {signed.nonce}, but the chain's next "
            f"number for {self._core.address} is {first} and {why}; expected no gap (the node "
            "would keep it unmined). Nothing was broadcast: the spend is marked failed and "
            f"its cap share freed, the nonce given back. Fix: {fix}."
        )

    def _broadcast(self, signed: SignedTx, res: Reservation) -> None:
        """MOVES MONEY: hand ``signed`` to the node. Returns when the node took it (or
        already knew it); raises SendFailed when it refused it or did not answer."""
        core = self._core
        try:
            core.chain.w3.eth.send_raw_transaction(bytes.fromhex(signed.raw_transaction[2:]))
        except Web3RPCError as exc:
            # The node answered and refused it: the transaction is not in its pool.
            self._broadcast_refused(signed, res, exc)
        except Exception as exc:
            # No answer (timeout, dropped connection): the node may have taken it anyway.
            # Freeing the nonce or the cap here would let a retry spend past the cap.
            if not self._known_to_node(signed.tx_hash):
                core.nonces.confirm(signed.nonce, signed.tx_hash)
                core.meter.keep_signed(
                    res, note=f"broadcast outcome unknown ({type(exc).__name__}); "
                    "reconcile will settle or release it"
                )
                core.emit(
                    "wallet.failed",
                    {**spend_event(res), "tx_hash": signed.tx_hash, "note": "broadcast outcome unknown"},
                )
                raise SendFailed(
                    f"Broadcasting {signed.tx_hash} (nonce {signed.nonce}) got no answer "
                    f"({type(exc).__name__}); expected the node to accept or refuse it. The spend "
                    "stays pending and keeps its cap share. Fix: check the RPC, then run "
                    "`nib audit reconcile`."
                ) from exc

    def _broadcast_refused(self, signed: SignedTx, res: Reservation, exc: Exception) -> None:
        core = self._core
        text = str(exc)
        if "nonce too low" in text.lower():
            core.nonces.confirm(signed.nonce, signed.tx_hash)  # the chain has used it: never reuse
            core.nonces.resync()
        else:
            core.nonces.release(signed.nonce)
        core.meter.fail(res, note=f"broadcast refused ({type(exc).__name__})")
        core.emit(
            "wallet.failed",
            {**spend_event(res), "tx_hash": signed.tx_hash, "note": "broadcast refused"},
        )
        raise SendFailed(
            f"Broadcasting {signed.tx_hash} (nonce {signed.nonce}) was refused: {text[:300]}. "
            "Expected the node to accept it. Fix: check the RPC and the wallet's ETH for "
            "gas; the spend is marked failed and its cap share freed."
        ) from exc

    def _known_to_node(self, tx_hash: str) -> bool:
        """Whether the node has ``tx_hash`` (pooled or mined); False when it cannot say."""
        try:
            self._core.chain.w3.eth.get_transaction(tx_hash)  # type: ignore[arg-type]
            return True
        except Exception:  # not found, or still no answer: treat the outcome as unknown
            return False

    def _await_receipt(self, signed: SignedTx, res: Reservation) -> TxReceipt:
        """The receipt of broadcast ``signed``, or SendFailed with the spend decided.

        Without a receipt in time the chain says which: when the wallet's mined count has
        passed the nonce and the receipt is still absent, another transaction took the
        number and this one can never be mined (spend failed, cap share freed); otherwise
        it may still be mined (spend stays 'signed' for reconcile to settle)."""
        core = self._core
        w3, timeout_s = core.chain.w3, core.receipt_timeout_s
        try:
            return w3.eth.wait_for_transaction_receipt(
                signed.tx_hash,  # type: ignore[arg-type]
                timeout=timeout_s,
                poll_latency=0.05,
            )
        except Exception as exc:
            waited = exc
        # The mined count is read before the receipt: past the nonce and still no receipt
        # means another transaction holds that number for good.
        mined = -1
        try:
            mined = int(w3.eth.get_transaction_count(core.address, "latest"))  # type: ignore[arg-type]
            return w3.eth.get_transaction_receipt(signed.tx_hash)  # type: ignore[arg-type]
        except TransactionNotFound:
            pass  # not mined: the mined count decides below
        except Exception:
            mined = -1  # no answer: nothing is decided, the spend stays pending
        if mined > signed.nonce:
            note = f"never mined: nonce {signed.nonce} was used by another transaction"
            self._failed(signed, note)
            raise SendFailed(
                f"No receipt for {signed.tx_hash} within {timeout_s:.0f} s, and "
                f"the chain has mined {mined} transactions from {core.address}, so nonce "
                f"{signed.nonce} went to another transaction; this one moved no money. The "
                "spend is marked failed and its cap share freed. Fix: quote the transfer again."
            ) from waited
        core.meter.keep_signed(
            res, note=f"no receipt within {timeout_s:.0f} s; may still be mined"
        )
        raise SendFailed(
            f"No receipt for {signed.tx_hash} within {timeout_s:.0f} s "
            f"({type(waited).__name__}); it may still be mined, so the spend stays 'signed' "
            "and keeps its cap share. Fix: run `nib audit reconcile` later; it settles the row "
            "once the tx is mined, or fails it once another transaction takes its nonce."
        ) from waited
