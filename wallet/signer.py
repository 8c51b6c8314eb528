"""The verdict-gated signer: no approving, matching, fresh, unused verdict, no signature.

``Wallet`` signs EIP-3009 authorizations (x402) and USDC transfer transactions. Right
before each signature it checks, in order: the judge's signature on the verdict, the
decision, the payload fingerprint recomputed from a private copy of the exact payload,
expiry, chain / asset / recipient / amount / sender, the judge's re-check, the live
balance, and finally consumes the verdict and reserves the spend atomically.

``Wallet`` is a composition; each part has one job:
``wallet.checks`` (the verdict checks), ``wallet.authorize`` (verdict to reservation, one
payment per resource at a time), ``wallet.signing`` (typed data and transactions),
``wallet.broadcast`` (nonce order, receipts, gas), ``wallet.settlement`` (settlement
proof, failure proof, the live authorization), ``wallet.cancel`` (abandoned
authorizations) and ``wallet.recovery`` (a dead worker's leftovers). They share one
``wallet.core.WalletCore``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from eth_utils import to_checksum_address
from web3 import Web3

from chain.money import DEFAULT_ETH_PRICE_USDC
from judge.verdict import Verdict
from wallet.authorize import Authorizer
from wallet.broadcast import Broadcaster
from wallet.cancel import abandon_authorization
from wallet.checks import MAX_AUTHORIZATION_S
from wallet.core import Emit, WalletCore
from wallet.errors import WalletError
from wallet.keystore import KeyHandle
from wallet.ledger import SpendRow
from wallet.meter import Reservation, SpendMeter
from wallet.nonces import NonceManager
from wallet.recovery import RunRecovery, recover_run
from wallet.settlement import Settlement
from wallet.signed import SentTx, SignedTx, SignedTypedData
from wallet.signing import PayloadSigner
from wallet.terms import PINNED_TX_FIELDS, TRANSFER_SELECTOR

if TYPE_CHECKING:
    from chain.client import ChainClient

__all__ = [
    "MAX_AUTHORIZATION_S",
    "PINNED_TX_FIELDS",
    "TRANSFER_SELECTOR",
    "SentTx",
    "SignedTx",
    "SignedTypedData",
    "Wallet",
]


class Wallet:
    """Signs only what an approving, verified, matching, unused verdict covers.

    Every refusal raises a ``wallet.errors.SpendRefused`` subclass (``.code``), emits
    ``wallet.refused`` and signs nothing.
    """

    def __init__(
        self,
        key: KeyHandle,
        *,
        db_path: str | Path,
        chain: ChainClient,
        usdc: str,
        trusted_judge: str,
        recheck: Callable[[Verdict], None] | None = None,
        meter: SpendMeter | None = None,
        emit: Emit | None = None,
        clock: Callable[[], float] = time.time,
        receipt_timeout_s: float = 60.0,
        eth_price_usdc: int = DEFAULT_ETH_PRICE_USDC,
    ) -> None:
        if not isinstance(key, KeyHandle):
            raise WalletError(
                f"Wallet needs a KeyHandle from Keystore.unlock(); got {type(key).__name__}. "
                "Fix: unlock the keystore and pass the handle."
            )
        if not Web3.is_address(trusted_judge):
            raise WalletError(
                f"trusted_judge must be the judge's 0x address; got {trusted_judge!r}. "
                "Fix: configure the judge's address (nib judge serve prints it)."
            )
        if meter is None:
            meter = SpendMeter(db_path, chain, clock=clock, eth_price_usdc=eth_price_usdc)
        # Shared through the wallet's tables: workers in other processes draw from the
        # same sequence (see wallet.nonces).
        nonces = NonceManager(
            chain.w3, key.address, store=meter.store,
            scope=f"{chain.chain_id()}:{key.address.lower()}",
        )
        self._core = core = WalletCore(
            key, chain, to_checksum_address(usdc), meter, nonces, clock, receipt_timeout_s, emit
        )
        self._authorizer = Authorizer(core, to_checksum_address(trusted_judge), recheck)
        self._signer = PayloadSigner(core, self._authorizer)
        self._broadcaster = Broadcaster(core)
        self._settlement = Settlement(core)

    # ------------------------------------------------------------------ what it holds

    @property
    def address(self) -> str:
        return self._core.address

    @property
    def chain(self) -> ChainClient:
        return self._core.chain

    @property
    def usdc(self) -> str:
        return self._core.usdc

    @property
    def meter(self) -> SpendMeter:
        return self._core.meter

    @property
    def nonces(self) -> NonceManager:
        return self._core.nonces

    @property
    def trusted_judge(self) -> str:
        return self._authorizer.checks.trusted_judge

    # Settable after construction (the service sets emit and require_task; tests, clock).

    @property
    def emit(self) -> Emit | None:
        return self._core.sink

    @emit.setter
    def emit(self, sink: Emit | None) -> None:
        self._core.sink = sink

    @property
    def clock(self) -> Callable[[], float]:
        return self._core.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self._core.clock = clock

    @property
    def receipt_timeout_s(self) -> float:
        return self._core.receipt_timeout_s

    @receipt_timeout_s.setter
    def receipt_timeout_s(self, seconds: float) -> None:
        self._core.receipt_timeout_s = seconds

    @property
    def recheck(self) -> Callable[[Verdict], None] | None:
        return self._authorizer.recheck

    @recheck.setter
    def recheck(self, recheck: Callable[[Verdict], None] | None) -> None:
        self._authorizer.recheck = recheck

    @property
    def require_task(self) -> bool:
        """Refuse verdicts issued to no registered task (the wallet service sets it: its
        callers name no run and no cap, so the verdict's task is the only one)."""
        return self._authorizer.require_task

    @require_task.setter
    def require_task(self, required: bool) -> None:
        self._authorizer.require_task = required

    def __repr__(self) -> str:
        return f"Wallet(address={self.address!r}, usdc={self.usdc!r})"

    def balance(self) -> int:
        """The wallet's live USDC balance, atomic units."""
        return self._core.balance()

    # ------------------------------------------------------------------ signing

    def sign_typed_data(
        self,
        payload: Mapping[str, object],
        verdict: Verdict | None,
        *,
        run_id: str,
        spend_cap_atomic: int,
        resource: str | None = None,
    ) -> SignedTypedData:
        """MOVES MONEY: sign an EIP-3009 ``TransferWithAuthorization`` the verdict approved.

        Warning: the signature is a bearer instrument (anyone holding it can settle it).
        The checks run on a private deep copy of ``payload``, and that copy is signed.
        ``resource`` (what the authorization buys) admits one live authorization at a
        time, across runs: a second is refused with AuthorizationOutstanding.
        """
        return self._signer.sign_typed_data(
            payload, verdict, run_id=run_id, spend_cap_atomic=spend_cap_atomic, resource=resource
        )

    def sign_transaction(
        self, tx: Mapping[str, object], verdict: Verdict | None, *, run_id: str, spend_cap_atomic: int
    ) -> SignedTx:
        """MOVES MONEY: sign a USDC ``transfer(to, amount)`` transaction the verdict approved.

        The fingerprint covers ``tx`` exactly as given, and ``tx`` must pin every field
        in ``PINNED_TX_FIELDS`` (nonce, gas, EIP-1559 fees) before the verdict: the wallet
        fills nothing after the checks, so one verdict names one signable transaction.
        Gas limit x max fee is held against the run's cap until the receipt says what
        the gas cost. Broadcast with ``send_transaction``, or give it back unsent with
        ``discard``.
        """
        return self._signer.sign_transaction(tx, verdict, run_id=run_id, spend_cap_atomic=spend_cap_atomic)

    # ------------------------------------------------------------------ sending

    def send_transaction(self, signed: SignedTx, reservation: Reservation | None = None) -> SentTx:
        """MOVES MONEY: broadcast ``signed``, wait for its receipt, meter gas, settle.

        A transaction whose nonce sits above a gap (numbers neither the chain nor a send
        under way covers) is not broadcast: it would wait in the pool unmined while its
        spend stays counted; it is discarded (nonce released, spend failed). A broadcast
        the node refuses releases the nonce and fails the spend; one that gets no answer
        keeps the nonce used and the spend pending (it may have landed), unless the node
        already knows the transaction, in which case it is awaited. A revert fails the
        spend; so does a receipt that never comes while another transaction took the
        nonce. Failures raise SendFailed. Gas is recorded whenever the tx was mined.
        """
        return self._broadcaster.send_transaction(signed, reservation)

    def discard(self, signed: SignedTx, note: str = "never sent") -> None:
        """Give back a signed transaction that will not be broadcast: its nonce is reused
        and its spend marked failed. Warning: broadcasting it afterwards would move money
        the ledger records as failed (reconcile would show it as resolved)."""
        self._broadcaster.discard(signed, note)

    # ------------------------------------------------------------------ how a spend ends

    def settle(self, signed: SignedTypedData | SignedTx | SpendRow, tx_hash: str) -> None:
        """Record that a signed spend settled on chain in ``tx_hash`` (x402: from the
        seller's PAYMENT-RESPONSE).

        An authorization is settled only when ``tx_hash`` is proven on chain to carry its
        ``AuthorizationUsed(wallet, nonce)`` and the matching ``Transfer`` from the
        configured USDC; otherwise the row stays ``signed`` (annotated) and
        SettlementUnproven is raised: a seller's receipt is a claim, not a proof.
        """
        self._settlement.settle(signed, tx_hash)

    def fail(self, signed: SignedTypedData | SignedTx, note: str) -> None:
        """A report that a signed spend did not move money: failed only when the chain
        proves it never can, settled when the chain shows it used, else kept counted and
        FailureUnproven raised (see wallet.failure: the caller holds the signature)."""
        self._settlement.fail(signed, note)

    def live_authorization(
        self, resource: str, runs: Collection[str] | None = None
    ) -> SpendRow | None:
        """The live authorization for ``resource`` after asking the chain, else None; of
        one of ``runs`` (tasks) when given (the wallet service passes a confined caller's).

        A signed row whose authorization the token has used is settled (under the tx
        that used it, proven); one that expired unused on both clocks is failed; either
        way it is no longer live. A reserved or still-valid signed row is returned.

        Only a row still live when it is returned: the run that owns it may settle or
        fail it while the chain is asked (the slower the machine, the likelier), and a
        row that ended meanwhile is no live authorization (the resource is looked up
        again, since another run may already hold a new one).
        """
        return self._settlement.live_authorization(resource, runs)

    def spend_row(self, spend_id: str) -> SpendRow:
        """Ledger row ``spend_id`` as it stands now."""
        return self.meter.ledger.get(spend_id)

    def keep_payment(self, signed: SignedTypedData, header: tuple[str, str]) -> None:
        """Keep the signed payment header, so a retry re-sends this authorization."""
        self.meter.keep_payment(signed.reservation, header)

    def abandon_authorization(self, spend_id: str, why: str) -> SpendRow:
        """SPENDS GAS: the purchase of x402 row ``spend_id`` is abandoned (``why``); the
        wallet ends its authorization from what the chain shows: settled (used: paid for
        nothing), failed (expired unused), or cancelled on chain (``cancelAuthorization``,
        gas metered). See ``wallet.cancel.abandon_authorization``."""
        return abandon_authorization(self, self._core.key, spend_id, why)

    def recover_run(self, run_id: str, holder: str, why: str) -> RunRecovery:
        """Give back what a dead worker (``holder``) left for ``run_id``; see
        ``wallet.recovery.recover_run`` (and its warning: only once ``holder`` is gone)."""
        return recover_run(self.meter, self.nonces, self.chain, run_id, holder, why)

    def _emit(self, name: str, data: dict[str, object]) -> None:
        """Hand an audit event to ``emit``; a failing sink is logged, never raised."""
        self._core.emit(name, data)
