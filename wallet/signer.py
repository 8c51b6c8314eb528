"""The verdict-gated signer: no approving, matching, fresh, unused verdict, no signature.

``Wallet`` signs EIP-3009 authorizations (x402) and USDC transfer transactions. Right
before each signature it checks, in order: the judge's signature on the verdict, the
decision, the payload fingerprint recomputed from a private copy of the exact payload,
expiry, chain / asset / recipient / amount / sender, the judge's re-check, the live
balance, and finally consumes the verdict and reserves the spend atomically.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from eth_utils import to_checksum_address
from web3 import Web3
from web3.exceptions import TransactionNotFound, Web3RPCError
from web3.types import TxReceipt

from chain.errors import ChainError
from chain.money import DEFAULT_ETH_PRICE_USDC, gas_to_usdc
from chain.usdc import prove_authorization_settled, token_domain
from judge.errors import FingerprintError, VerdictConsumed, VerdictInvalid
from judge.fingerprint import (
    TOKEN_DOMAIN_FIELDS,
    transaction_fingerprint,
    typed_data_fingerprint,
)
from judge.storage import MutexTimeout
from judge.verdict import Verdict, verify_verdict
from wallet.cancel import abandon_authorization
from wallet.errors import (
    AuthorizationOutstanding,
    NoVerdict,
    PayloadMismatch,
    RecheckFailed,
    SendFailed,
    SettlementUnproven,
    SpendRefused,
    TaskMismatch,
    VerdictBadSignature,
    VerdictExpired,
    VerdictNotApproved,
    VerdictReplayed,
    VerdictRevoked,
    VerdictVoid,
    WalletError,
)
from wallet.failure import fail_if_proven
from wallet.keystore import KeyHandle
from wallet.ledger import LIVE, SpendKind, SpendRow
from wallet.meter import Reservation, SpendMeter
from wallet.nonces import NonceManager, wait_for_lower_nonces
from wallet.reconcile import authorization_expired, authorization_used_in
from wallet.recovery import RunRecovery, recover_run
from wallet.signed import SentTx, SignedTx, SignedTypedData
from wallet.terms import (
    PINNED_TX_FIELDS,
    TRANSFER_SELECTOR,
    Terms,
    as_int,
    hex32,
    payload_part,
    private_copy,
    transfer_terms,
    typed_data_terms,
)

if TYPE_CHECKING:
    from chain.client import ChainClient

Emit = Callable[[str, dict[str, object]], None]
_Signed = TypeVar("_Signed")

log = logging.getLogger(__name__)

#: The longest an EIP-3009 authorization may stay valid from now (x402 asks for minutes).
MAX_AUTHORIZATION_S = 3600
#: The longest a purchase waits for another payment of the same resource to be reserved.
RESOURCE_TURN_S = 30.0
#: How long a transaction waits for the lower nonces handed out before it (other calls
#: between their quote and their broadcast) to reach the node or be given back, and how
#: often it looks. Broadcasting past a number that is later given back would leave the
#: transaction unmined in the pool for good, its spend counted (a task refused by the
#: judge after quoting, the last one before a cap binds, leaves that number unused).
ORDER_WAIT_S, ORDER_POLL_S = 30.0, 0.05

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
        self._key = key
        self.chain = chain
        self.usdc = to_checksum_address(usdc)
        self.trusted_judge = to_checksum_address(trusted_judge)
        self.recheck = recheck
        self.meter = (
            meter
            if meter is not None
            else SpendMeter(db_path, chain, clock=clock, eth_price_usdc=eth_price_usdc)
        )
        self.emit = emit
        self.clock = clock
        self.receipt_timeout_s = receipt_timeout_s
        self._domain: tuple[str, str] | None = None
        #: Refuse verdicts issued to no registered task (the wallet service sets it: its
        #: callers name no run and no cap, so the verdict's task is the only one).
        self.require_task = False
        # Shared through the wallet's tables: workers in other processes draw from the
        # same sequence (see wallet.nonces).
        self.nonces = NonceManager(
            chain.w3, key.address, store=self.meter.store,
            scope=f"{chain.chain_id()}:{key.address.lower()}",
        )

    @property
    def address(self) -> str:
        return self._key.address

    def __repr__(self) -> str:
        return f"Wallet(address={self.address!r}, usdc={self.usdc!r})"

    def balance(self) -> int:
        """The wallet's live USDC balance, atomic units."""
        return self.chain.token_balance(self.usdc, self.address)

    # ------------------------------------------------------------------ typed data

    def sign_typed_data(
        self,
        payload: Mapping[str, object],
        verdict: Verdict | None,
        *,
        run_id: str,
        cap: int,
        resource: str | None = None,
    ) -> SignedTypedData:
        """MOVES MONEY: sign an EIP-3009 ``TransferWithAuthorization`` the verdict approved.

        Warning: the signature is a bearer instrument (anyone holding it can settle it).
        The checks run on a private deep copy of ``payload``, and that copy is signed.
        ``resource`` (what the authorization buys) admits one live authorization at a
        time, across runs: a second is refused with AuthorizationOutstanding.
        """
        exact = private_copy(payload)
        run_id, cap = self._verdict_task(verdict, run_id, cap, "x402")
        res = self._authorize(
            exact,
            verdict,
            run_id=run_id,
            cap=cap,
            kind="x402",
            fingerprint_of=typed_data_fingerprint,
            terms_of=typed_data_terms,
            resource=resource,
            authorization_of=_authorization_of,
        )
        assert verdict is not None  # _authorize refuses None
        # The row is already 'signed' with this nonce and validBefore (one durable write
        # before the signature exists): reconciliation can find the authorization on chain.
        # _authorize proved typed_data_fingerprint(exact), the EIP-712 digest of the exact
        # payload, equal to the approved fingerprint: that digest is what is signed.
        digest = bytes.fromhex((verdict.payload_fingerprint or "").removeprefix("0x"))
        signed = self._sign_checked(
            lambda: self._key._unsafe_sign_digest(digest), res, verdict, run_id, "x402",
            unsignable="The approved payload is not signable EIP-712",
            expected="expected a TransferWithAuthorization message. Fix: build it with "
            "chain.usdc.eip3009_typed_data.",
        )
        auth_nonce, valid_before = _authorization_of(exact)
        result = SignedTypedData(
            signature="0x" + bytes(signed.signature).hex(),
            signer=self.address,
            payload_fingerprint=verdict.payload_fingerprint or "",
            verdict_id=verdict.id,
            run_id=run_id,
            reservation=res,
            recipient=res.recipient,
            value=res.amount,
            valid_after=as_int(payload_part(exact, "message")["validAfter"]),
            valid_before=valid_before,
            auth_nonce=auth_nonce,
        )
        self._emit_signed(res, result.payload_fingerprint, auth_nonce=auth_nonce)
        return result

    def settle(self, signed: SignedTypedData | SignedTx | SpendRow, tx_hash: str) -> None:
        """Record that a signed spend settled on chain in ``tx_hash`` (x402: from the
        seller's PAYMENT-RESPONSE).

        An authorization is settled only when ``tx_hash`` is proven on chain to carry its
        ``AuthorizationUsed(wallet, nonce)`` and the matching ``Transfer`` from the
        configured USDC; otherwise the row stays ``signed`` (annotated) and
        SettlementUnproven is raised: a seller's receipt is a claim, not a proof.
        """
        event = _spend_event(signed)
        spend_id = str(event["spend_id"])
        nonce = _authorization_nonce(signed)
        if nonce is not None:
            proof = prove_authorization_settled(
                self.chain.w3,
                tx_hash,
                token=self.usdc,
                authorizer=self.address,
                nonce=nonce,
                recipient=str(event["recipient"]),
                value=as_int(event["amount"]),
            )
            if not proof.proven:
                claimed = str(tx_hash)[:80]
                note = (
                    f"claimed settlement {claimed} unproven ({proof.finding}: "
                    f"{proof.detail}); authorization {nonce} still pending"
                )
                self.meter.keep_signed(spend_id, note)
                self._emit(
                    "wallet.settlement_unproven",
                    {**event, "tx_hash": claimed, "finding": proof.finding},
                )
                raise SettlementUnproven(
                    f"Transaction {claimed} does not settle authorization {nonce} "
                    f"({proof.finding}: {proof.detail}); expected AuthorizationUsed("
                    f"{self.address}, nonce) and Transfer({self.address} -> "
                    f"{event['recipient']}, {event['amount']}) from {self.usdc}. Ledger row "
                    f"{spend_id} stays 'signed'. Fix: run `nib audit reconcile`; it settles "
                    "the row when the authorization is used on chain.",
                    finding=proof.finding,
                    tx_hash=claimed,
                )
        self.meter.settle(spend_id, tx_hash)
        self._emit("wallet.settled", {**event, "tx_hash": tx_hash})

    def spend_row(self, spend_id: str) -> SpendRow:
        """Ledger row ``spend_id`` as it stands now."""
        return self.meter.ledger.get(spend_id)

    def keep_payment(self, signed: SignedTypedData, header: tuple[str, str]) -> None:
        """Keep the signed payment header, so a retry re-sends this authorization."""
        self.meter.keep_payment(signed.reservation, header)

    def live_authorization(self, resource: str) -> SpendRow | None:
        """The live authorization for ``resource`` after asking the chain, else None.

        A signed row whose authorization the token has used is settled (under the tx
        that used it, proven); one that expired unused on both clocks is failed; either
        way it is no longer live. A reserved or still-valid signed row is returned.

        Only a row still live when it is returned: the run that owns it may settle or
        fail it while the chain is asked (the slower the machine, the likelier), and a
        row that ended meanwhile is no live authorization (the resource is looked up
        again, since another run may already hold a new one).
        """
        while True:
            row = self.meter.ledger.live_for(resource)
            if row is None or row.status != "signed" or not row.auth_nonce:
                return row
            # The chain's time is read first: unused at a block already past validBefore
            # means unused for good.
            chain_time = self.chain.block_timestamp("latest")
            used_in = authorization_used_in(self.chain, self.usdc, self.address, row.auth_nonce)
            if used_in is not None:
                self.settle(row, used_in)
                return None
            if row.valid_before is not None and authorization_expired(
                row.valid_before, chain_time=chain_time, wall_time=self.clock()
            ):
                note = f"authorization expired unused at {row.valid_before}; released"
                self.meter.fail(row.id, note)
                self._emit("wallet.failed", {**_spend_event(row), "note": note})
                return None
            now = self.meter.ledger.get(row.id)
            if now.status in LIVE:
                return now

    def fail(self, signed: SignedTypedData | SignedTx, note: str) -> None:
        """A report that a signed spend did not move money: failed only when the chain
        proves it never can, settled when the chain shows it used, else kept counted and
        FailureUnproven raised (see wallet.failure: the caller holds the signature)."""
        fail_if_proven(
            signed, note, meter=self.meter, chain=self.chain, usdc=self.usdc,
            payer=self.address, clock=self.clock, settle=self.settle, emit=self._emit,
        )

    def _failed(self, signed: SignedTx, note: str) -> None:
        """The wallet's own finding that ``signed`` moved no money (never broadcast, or
        its nonce taken by another mined transaction)."""
        self.meter.fail(signed.reservation, note)
        self._emit("wallet.failed", {**_res_event(signed.reservation), "note": note})

    def abandon_authorization(self, spend_id: str, why: str) -> SpendRow:
        """SPENDS GAS: the purchase of x402 row ``spend_id`` is abandoned (``why``); the
        wallet ends its authorization from what the chain shows: settled (used: paid for
        nothing), failed (expired unused), or cancelled on chain (``cancelAuthorization``,
        gas metered). See ``wallet.cancel.abandon_authorization``."""
        return abandon_authorization(self, self._key, spend_id, why)

    def recover_run(self, run_id: str, holder: str, why: str) -> RunRecovery:
        """Give back what a dead worker (``holder``) left for ``run_id``; see
        ``wallet.recovery.recover_run`` (and its warning: only once ``holder`` is gone)."""
        return recover_run(self.meter, self.nonces, self.chain, run_id, holder, why)

    def discard(self, signed: SignedTx, note: str = "never sent") -> None:
        """Give back a signed transaction that will not be broadcast: its nonce is reused
        and its spend marked failed. Warning: broadcasting it afterwards would move money
        the ledger records as failed (reconcile would show it as resolved)."""
        self.nonces.release(signed.nonce)
        self._failed(signed, note)

    # ------------------------------------------------------------------ transactions

    def sign_transaction(
        self, tx: Mapping[str, object], verdict: Verdict | None, *, run_id: str, cap: int
    ) -> SignedTx:
        """MOVES MONEY: sign a USDC ``transfer(to, amount)`` transaction the verdict approved.

        The fingerprint covers ``tx`` exactly as given, and ``tx`` must pin every field
        in ``PINNED_TX_FIELDS`` (nonce, gas, EIP-1559 fees) before the verdict: the wallet
        fills nothing after the checks, so one verdict names one signable transaction.
        Gas limit x max fee is held against the run's cap until the receipt says what
        the gas cost. Broadcast with ``send_transaction``, or give it back unsent with
        ``discard``.
        """
        exact = private_copy(tx)
        run_id, cap = self._verdict_task(verdict, run_id, cap, "transfer")
        full = {k: v for k, v in exact.items() if k != "from"}
        full["data"] = full.pop("input", full.get("data"))

        def hold_for_gas() -> int:
            return gas_to_usdc(
                as_int(full["gas"]) * as_int(full["maxFeePerGas"]), self.meter.eth_price_usdc
            )

        res = self._authorize(
            exact,
            verdict,
            run_id=run_id,
            cap=cap,
            kind="transfer",
            fingerprint_of=transaction_fingerprint,
            terms_of=transfer_terms,
            gas_hold_of=hold_for_gas,
        )
        assert verdict is not None
        signed = self._sign_checked(
            lambda: self._key._unsafe_sign_transaction(full),
            res,
            verdict,
            run_id,
            "transfer",
            unsignable="The approved transaction could not be signed",
            expected="expected an EIP-1559 USDC transfer. Fix: build it with chainId, to, data, "
            "value 0 and the pinned fields " + ", ".join(PINNED_TX_FIELDS) + ".",
        )
        tx_hash = "0x" + bytes(signed.hash).hex()
        with self._handed_out_or_dropped(res):
            self.meter.mark_signed(res, tx_hash=tx_hash, tx_nonce=as_int(full["nonce"]))
        result = SignedTx(
            raw_transaction="0x" + bytes(signed.raw_transaction).hex(),
            tx_hash=tx_hash,
            nonce=as_int(full["nonce"]),
            signer=self.address,
            payload_fingerprint=verdict.payload_fingerprint or "",
            verdict_id=verdict.id,
            run_id=run_id,
            reservation=res,
            recipient=res.recipient,
            amount=res.amount,
        )
        self._emit_signed(res, result.payload_fingerprint, tx_hash=tx_hash)
        return result

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
        res = reservation or signed.reservation
        self._refuse_above_gap(signed)
        self._broadcast(signed, res)
        self.nonces.confirm(signed.nonce, signed.tx_hash)
        self._emit(
            "wallet.broadcast", {**_res_event(res), "tx_hash": signed.tx_hash, "nonce": signed.nonce}
        )
        receipt = self._await_receipt(signed, res)
        gas_wei = int(receipt["gasUsed"]) * int(receipt.get("effectiveGasPrice", 0))
        gas_usdc = self.meter.record_gas(
            res.run_id, gas_wei, spend_id=res.id, tx_hash=signed.tx_hash
        )
        status = int(receipt["status"])
        block = int(receipt["blockNumber"])
        if status != 1:
            self.meter.fail(res, note=f"reverted in block {block}")
            self._emit(
                "wallet.failed",
                {
                    **_res_event(res),
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
        self.meter.settle(res, signed.tx_hash)
        self._emit(
            "wallet.settled",
            {
                **_res_event(res),
                "tx_hash": signed.tx_hash,
                "gas_wei": gas_wei,
                "block_number": block,
            },
        )
        return SentTx(
            signed.tx_hash, block, status, int(receipt["gasUsed"]), gas_wei, gas_usdc, res.id
        )

    def _sign_checked(
        self,
        sign: Callable[[], _Signed],
        res: Reservation,
        verdict: Verdict,
        run_id: str,
        kind: str,
        *,
        unsignable: str,
        expected: str,
    ) -> _Signed:
        """MOVES MONEY: ``sign()`` the payload the checks passed. A payload the key cannot
        sign gives its reservation back and is refused as PayloadMismatch (``unsignable``
        (exception type); ``expected``)."""
        try:
            return sign()
        except Exception as exc:
            note = f"signing failed ({type(exc).__name__}); no signature exists"
            if self.meter.ledger.get(res.id).status == "signed":  # written so by reserve
                self.meter.fail(res, note)
            else:
                self.meter.release(res, note)
            raise self._refuse(
                PayloadMismatch(
                    f"{unsignable} ({type(exc).__name__}); {expected}", verdict_id=verdict.id
                ),
                run_id,
                verdict,
                kind,
            ) from None

    def _emit_signed(self, res: Reservation, payload_fingerprint: str, **ids: str) -> None:
        """The ``wallet.signed`` event: the reservation, what identifies the signed
        payload on chain (``auth_nonce`` or ``tx_hash``) and its fingerprint."""
        self._emit(
            "wallet.signed", {**_res_event(res), **ids, "payload_fingerprint": payload_fingerprint}
        )

    def _await_receipt(self, signed: SignedTx, res: Reservation) -> TxReceipt:
        """The receipt of broadcast ``signed``, or SendFailed with the spend decided.

        Without a receipt in time the chain says which: when the wallet's mined count has
        passed the nonce and the receipt is still absent, another transaction took the
        number and this one can never be mined (spend failed, cap share freed); otherwise
        it may still be mined (spend stays 'signed' for reconcile to settle)."""
        w3 = self.chain.w3
        try:
            return w3.eth.wait_for_transaction_receipt(
                signed.tx_hash,  # type: ignore[arg-type]
                timeout=self.receipt_timeout_s,
                poll_latency=0.05,
            )
        except Exception as exc:
            waited = exc
        # The mined count is read before the receipt: past the nonce and still no receipt
        # means another transaction holds that number for good.
        mined = -1
        try:
            mined = int(w3.eth.get_transaction_count(self.address, "latest"))  # type: ignore[arg-type]
            return w3.eth.get_transaction_receipt(signed.tx_hash)  # type: ignore[arg-type]
        except TransactionNotFound:
            pass  # not mined: the mined count decides below
        except Exception:
            mined = -1  # no answer: nothing is decided, the spend stays pending
        if mined > signed.nonce:
            note = f"never mined: nonce {signed.nonce} was used by another transaction"
            self._failed(signed, note)
            raise SendFailed(
                f"No receipt for {signed.tx_hash} within {self.receipt_timeout_s:.0f} s, and "
                f"the chain has mined {mined} transactions from {self.address}, so nonce "
                f"{signed.nonce} went to another transaction; this one moved no money. The "
                "spend is marked failed and its cap share freed. Fix: quote the transfer again."
            ) from waited
        self.meter.keep_signed(
            res, note=f"no receipt within {self.receipt_timeout_s:.0f} s; may still be mined"
        )
        raise SendFailed(
            f"No receipt for {signed.tx_hash} within {self.receipt_timeout_s:.0f} s "
            f"({type(waited).__name__}); it may still be mined, so the spend stays 'signed' "
            "and keeps its cap share. Fix: run `nib audit reconcile` later; it settles the row "
            "once the tx is mined, or fails it once another transaction takes its nonce."
        ) from waited

    # ------------------------------------------------------------------ the checks

    def _authorize(
        self,
        payload: dict[str, object],
        verdict: Verdict | None,
        *,
        run_id: str,
        cap: int,
        kind: SpendKind,
        fingerprint_of: Callable[[Mapping[str, object]], str],
        terms_of: Callable[[dict[str, object]], Terms],
        gas_hold_of: Callable[[], int] | None = None,
        resource: str | None = None,
        authorization_of: Callable[[dict[str, object]], tuple[str, int]] | None = None,
    ) -> Reservation:
        """Run every check in order; return the reservation or raise (and emit) a refusal.

        ``authorization_of`` (typed data): the reservation is written as signed with the
        authorization's nonce and validBefore (see SpendMeter.reserve)."""
        try:
            checked = self._check_verdict(verdict)
            self._check_fingerprint(checked, payload, fingerprint_of)
            self._check_fresh(checked)
            self._check_terms(checked, payload, terms_of)
            with self._resource_turn(checked, resource):
                if resource is not None:
                    # Before the judge's re-check consumes the verdict, so a purchase that
                    # must wait for another run's payment can still use it afterwards.
                    self._check_no_live_authorization(checked, resource)
                self._recheck(checked)
                balance = self.balance()
                gas_hold = gas_hold_of() if gas_hold_of is not None else 0
                return self.meter.reserve(
                    run_id,
                    checked,
                    checked.amount,
                    cap,
                    balance,
                    kind=kind,
                    gas_hold=gas_hold,
                    resource=resource,
                    authorization=authorization_of(payload) if authorization_of else None,
                )
        except SpendRefused as exc:
            self._refuse(exc, run_id, verdict, kind)
            raise
        except ChainError as exc:
            self._emit(
                "wallet.refused",
                {**_refusal_base(run_id, verdict, kind), "code": "chain-error", "reason": str(exc)},
            )
            raise

    @contextmanager
    def _resource_turn(self, verdict: Verdict, resource: str | None) -> Iterator[None]:
        """One payment at a time per ``resource`` from the live-authorization check to the
        reservation, across threads, worker processes and machines (the wallet database's
        mutex). Without it two workers could both find the resource free, both have their
        verdicts consumed by the judge's re-check, and the loser be refused by the
        reservation with its verdict spent. A wait past the limit is refused before the
        verdict is used."""
        if resource is None:
            yield
            return
        try:
            with self.meter.store.db.mutex(f"wallet-resource:{resource}", timeout_s=RESOURCE_TURN_S):
                yield
        except MutexTimeout:
            raise AuthorizationOutstanding(
                f"Another payment for {resource} did not finish within {RESOURCE_TURN_S:g} s; "
                "expected one payment per resource at a time. Nothing was signed and the "
                "verdict is unused. Fix: retry once the other payment has settled.",
                ledger_id="",
                valid_before=None,
                verdict_id=verdict.id,
            ) from None

    def _check_no_live_authorization(self, verdict: Verdict, resource: str) -> None:
        live = self.meter.ledger.live_for(resource)
        if live is not None:
            raise AuthorizationOutstanding(
                f"An authorization for {resource} is still live (ledger row {live.id}, "
                f"{live.status}, {live.amount} atomic units, valid until {live.valid_before}); "
                "expected none, since a second one could let the seller settle both. Nothing "
                "was signed and the verdict is unused. Fix: wait until it settles or expires "
                "(`nib audit reconcile`); a retry re-sends the same authorization.",
                ledger_id=live.id,
                valid_before=live.valid_before,
                verdict_id=verdict.id,
            )

    def _verdict_task(
        self, verdict: Verdict | None, run_id: str, cap: int, kind: str
    ) -> tuple[str, int]:
        """The run and cap a payment is booked under: the task the verdict was issued to
        and its registered cap, never what the caller names (the verdict's signature is
        checked before anything is reserved). A caller naming another run is refused,
        both named; a verdict without a task (an in-process judge ruling on unregistered
        requests) keeps the caller's."""
        if isinstance(verdict, Verdict) and verdict.task_id is None and self.require_task:
            try:  # a forged one is refused as such first, in the audit trail too
                self._check_verdict(verdict)
            except SpendRefused as exc:
                raise self._refuse(exc, run_id, verdict, kind) from None
            raise self._refuse(TaskMismatch(
                f"found verdict {verdict.id} issued to no registered task; expected a verdict "
                "the judge issued to a task it registered: the wallet service books every "
                "payment under its verdict's task. Fix: register the task (nib run does).",
                verdict_id=verdict.id), run_id, verdict, kind)
        if not isinstance(verdict, Verdict) or verdict.task_id is None:
            return run_id, cap
        if run_id and run_id != verdict.task_id:
            raise self._refuse(TaskMismatch.between(run_id, verdict.id, verdict.task_id),
                               run_id, verdict, kind)
        return verdict.task_id, cap if verdict.task_cap is None else verdict.task_cap

    def _check_verdict(self, verdict: Verdict | None) -> Verdict:
        if verdict is None:
            raise NoVerdict(
                "No verdict was given; the wallet signs only with an approving verdict from "
                "the judge. Fix: send the quote to the judge first."
            )
        if not isinstance(verdict, Verdict):
            raise NoVerdict(
                f"Expected a judge.verdict.Verdict; got {type(verdict).__name__}. Fix: parse "
                "it with judge.verdict.parse_verdict first."
            )
        try:
            verify_verdict(verdict, self.trusted_judge)
        except VerdictInvalid as exc:
            raise VerdictBadSignature(
                f"Verdict {verdict.id} is not signed by the trusted judge "
                f"{self.trusted_judge}: {exc}",
                verdict_id=verdict.id,
            ) from None
        except Exception as exc:  # fail closed on anything verify cannot decide
            raise VerdictBadSignature(
                f"Verdict {verdict.id} could not be verified ({type(exc).__name__}); expected "
                f"a signature by {self.trusted_judge}. Fix: request a fresh verdict.",
                verdict_id=verdict.id,
            ) from None
        if verdict.decision != "approve":
            raise VerdictNotApproved(
                f"Verdict {verdict.id} decided {verdict.decision!r}, expected 'approve' "
                f"(judge's reason: {verdict.reason}). Fix: do not pay; follow the decision.",
                verdict_id=verdict.id,
            )
        return verdict

    def _check_fingerprint(
        self, verdict: Verdict, payload: dict[str, object], fingerprint_of: Callable[[Mapping[str, object]], str]
    ) -> None:
        try:
            found = fingerprint_of(payload)
        except FingerprintError as exc:
            raise VerdictVoid(
                f"Verdict {verdict.id} is void: the payload has no canonical fingerprint ({exc}).",
                verdict_id=verdict.id,
            ) from None
        if found != (verdict.payload_fingerprint or "").lower():
            raise VerdictVoid(
                f"Verdict {verdict.id} is void: the payload's fingerprint is {found}, the "
                f"verdict approved {verdict.payload_fingerprint}; the payload changed after "
                "approval. Fix: re-quote and ask the judge again.",
                verdict_id=verdict.id,
            )

    def _check_fresh(self, verdict: Verdict) -> None:
        now = self.clock()
        if now >= verdict.expires_at:
            raise VerdictExpired(
                f"Verdict {verdict.id} expired at {verdict.expires_at}; now is {int(now)} "
                f"({int(now) - verdict.expires_at} s late). Fix: ask the judge for a fresh "
                "verdict.",
                verdict_id=verdict.id,
            )

    def _check_terms(
        self,
        verdict: Verdict,
        payload: dict[str, object],
        terms_of: Callable[[dict[str, object]], Terms],
    ) -> None:
        try:
            terms = terms_of(payload)
        except PayloadMismatch as exc:
            raise PayloadMismatch(exc.message, verdict_id=verdict.id) from None
        live_chain = self.chain.chain_id()
        checks: list[tuple[str, object, object]] = [
            ("chain id (payload vs verdict)", terms.chain_id, verdict.chain_id),
            ("chain id (payload vs connected chain)", terms.chain_id, live_chain),
            ("asset (payload vs verdict)", terms.asset.lower(), verdict.asset.lower()),
            ("asset (payload vs wallet's USDC)", terms.asset.lower(), self.usdc.lower()),
            ("recipient", terms.recipient.lower(), verdict.recipient.lower()),
            ("amount", terms.amount, verdict.amount),
        ]
        if terms.sender is not None:
            checks.append(("sender", terms.sender.lower(), self.address.lower()))
        domain = payload.get("domain")
        if isinstance(domain, Mapping):  # the token verifies under its own domain only
            name, version = self._token_domain()
            checks.append(("EIP-712 domain name (payload vs the token on chain)",
                           domain.get("name"), name))
            checks.append(("EIP-712 domain version (payload vs the token on chain)",
                           str(domain.get("version")), version))
            checks.append(("EIP-712 domain fields (payload vs the token's)",
                           sorted(domain), sorted(TOKEN_DOMAIN_FIELDS)))
        for name, found, expected in checks:
            if found != expected:
                raise PayloadMismatch(
                    f"Verdict {verdict.id}: {name} is {found}, expected {expected}. Fix: "
                    "re-quote against the connected chain and ask the judge again.",
                    verdict_id=verdict.id,
                )
        self._check_window(verdict, payload)
        self._key.check_chain(live_chain)

    def _token_domain(self) -> tuple[str, str]:
        """The USDC contract's own EIP-712 ``(name, version)``, read from the chain once."""
        if self._domain is None:
            self._domain = token_domain(self.chain.w3, self.usdc)
        return self._domain

    def _check_window(self, verdict: Verdict, payload: dict[str, object]) -> None:
        """An EIP-3009 authorization is a bearer instrument until validBefore: refuse long ones."""
        message = payload.get("message")
        if not isinstance(message, Mapping) or "validBefore" not in message:
            return
        valid_before = as_int(message["validBefore"])
        # From the later of the two clocks: a devnet's chain may run ahead of the wall clock.
        now = max(int(self.clock()), self.chain.block_timestamp("latest"))
        limit = now + MAX_AUTHORIZATION_S
        if valid_before > limit:
            raise PayloadMismatch(
                f"Verdict {verdict.id}: the authorization is valid until {valid_before}, more "
                f"than {MAX_AUTHORIZATION_S} s from now ({limit}); a signed authorization can be "
                "relayed by anyone until then. Fix: quote with a shorter validity window.",
                verdict_id=verdict.id,
            )

    def _recheck(self, verdict: Verdict) -> None:
        if self.recheck is None:
            return
        try:
            self.recheck(verdict)
        except VerdictConsumed as exc:
            raise VerdictReplayed(
                f"Verdict {verdict.id} was already used, as the judge's record shows: {exc}",
                verdict_id=verdict.id,
            ) from exc
        except VerdictInvalid as exc:
            raise VerdictRevoked(
                f"Verdict {verdict.id} failed the judge's re-check: {exc}",
                verdict_id=verdict.id,
            ) from exc
        except Exception as exc:
            raise RecheckFailed(
                f"The judge's re-check of verdict {verdict.id} did not complete "
                f"({type(exc).__name__}: {exc}); expected a confirmation. Fix: make the judge "
                "reachable and try again.",
                verdict_id=verdict.id,
            ) from exc

    def _refuse(
        self, exc: SpendRefused, run_id: str, verdict: Verdict | None, kind: str
    ) -> SpendRefused:
        self._emit(
            "wallet.refused",
            {**_refusal_base(run_id, verdict, kind), "code": exc.code, "reason": exc.reason},
        )
        return exc

    def _refuse_above_gap(self, signed: SignedTx) -> None:
        """Broadcast in nonce order: wait while a lower number is handed out but not yet
        sent; discard (nonce released, spend failed) and refuse a transaction whose nonce
        sits above a gap, or above a number still unsent after ORDER_WAIT_S: the node
        would keep it in its pool unmined."""
        gap, waiting = wait_for_lower_nonces(self.nonces, signed.nonce, ORDER_WAIT_S, ORDER_POLL_S)
        if not gap and not waiting:
            return
        if gap:
            why = f"no send under way holds {', '.join(map(str, gap))}"
            fix = ("quote the transfer again (a lower number was given back, or the chain "
                   "moved back: a devnet reverted or reset, or a transaction was dropped)")
        else:
            why = (f"{', '.join(map(str, waiting))} were handed out and not sent within "
                   f"{ORDER_WAIT_S:g} s")
            fix = "quote the transfer again once the other sends have finished"
        first = min([*gap, *waiting])
        self.discard(signed, note=f"not broadcast: nonce {signed.nonce} above a gap {gap or waiting}")
        raise SendFailed(
            f"Transaction {signed.tx_hash} has nonce {signed.nonce}, but the chain's next "
            f"number for {self.address} is {first} and {why}; expected no gap (the node "
            "would keep it unmined). Nothing was broadcast: the spend is marked failed and "
            f"its cap share freed, the nonce given back. Fix: {fix}."
        )

    def _broadcast(self, signed: SignedTx, res: Reservation) -> None:
        """MOVES MONEY: hand ``signed`` to the node. Returns when the node took it (or
        already knew it); raises SendFailed when it refused it or did not answer."""
        try:
            self.chain.w3.eth.send_raw_transaction(bytes.fromhex(signed.raw_transaction[2:]))
        except Web3RPCError as exc:
            # The node answered and refused it: the transaction is not in its pool.
            self._broadcast_refused(signed, res, exc)
        except Exception as exc:
            # No answer (timeout, dropped connection): the node may have taken it anyway.
            # Freeing the nonce or the cap here would let a retry spend past the cap.
            if not self._known_to_node(signed.tx_hash):
                self.nonces.confirm(signed.nonce, signed.tx_hash)
                self.meter.keep_signed(
                    res, note=f"broadcast outcome unknown ({type(exc).__name__}); "
                    "reconcile will settle or release it"
                )
                self._emit(
                    "wallet.failed",
                    {**_res_event(res), "tx_hash": signed.tx_hash, "note": "broadcast outcome unknown"},
                )
                raise SendFailed(
                    f"Broadcasting {signed.tx_hash} (nonce {signed.nonce}) got no answer "
                    f"({type(exc).__name__}); expected the node to accept or refuse it. The spend "
                    "stays pending and keeps its cap share. Fix: check the RPC, then run "
                    "`nib audit reconcile`."
                ) from exc

    def _broadcast_refused(self, signed: SignedTx, res: Reservation, exc: Exception) -> None:
        text = str(exc)
        if "nonce too low" in text.lower():
            self.nonces.confirm(signed.nonce, signed.tx_hash)  # the chain has used it: never reuse
            self.nonces.resync()
        else:
            self.nonces.release(signed.nonce)
        self.meter.fail(res, note=f"broadcast refused ({type(exc).__name__})")
        self._emit(
            "wallet.failed",
            {**_res_event(res), "tx_hash": signed.tx_hash, "note": "broadcast refused"},
        )
        raise SendFailed(
            f"Broadcasting {signed.tx_hash} (nonce {signed.nonce}) was refused: {text[:300]}. "
            "Expected the node to accept it. Fix: check the RPC and the wallet's ETH for "
            "gas; the spend is marked failed and its cap share freed."
        ) from exc

    @contextmanager
    def _handed_out_or_dropped(self, res: Reservation) -> Iterator[None]:
        """Around recording a fresh signature: if that fails, the signature is dropped
        (never returned, so never broadcast or sent to a seller) and the row must not stay
        pending for money that cannot move: a reserved row is released, a signed one failed.
        """
        try:
            yield
        except BaseException as exc:
            note = f"signature dropped before it was handed out ({type(exc).__name__}); never sent"
            try:
                row = self.meter.ledger.get(res.id)
                if row.status == "reserved":
                    self.meter.release(res, note=note)
                elif row.status == "signed":
                    self.meter.fail(res, note=note)
            except Exception:  # the database is gone: reconcile's nonce check settles it
                log.exception("could not give back ledger row %s after %s", res.id, note)
            raise

    def _known_to_node(self, tx_hash: str) -> bool:
        """Whether the node has ``tx_hash`` (pooled or mined); False when it cannot say."""
        try:
            self.chain.w3.eth.get_transaction(tx_hash)  # type: ignore[arg-type]
            return True
        except Exception:  # not found, or still no answer: treat the outcome as unknown
            return False

    def _emit(self, name: str, data: dict[str, object]) -> None:
        """Hand an audit event to ``emit``; a failing sink is logged, never raised.

        The ledger (with its journal) is the book of record: an event store that cannot
        take a line must not turn a signature into one that is never broadcast, nor a
        settled payment into a failed call the loop would pay again.
        """
        if self.emit is None:
            return
        try:
            self.emit(name, data)
        except Exception:
            log.exception("wallet event %s (run %s) was not recorded", name, data.get("run_id"))


def _refusal_base(run_id: str, verdict: Verdict | None, kind: str) -> dict[str, object]:
    is_verdict = isinstance(verdict, Verdict)
    return {
        "run_id": run_id,
        "kind": kind,
        "verdict_id": verdict.id if is_verdict else None,  # type: ignore[union-attr]
        "payload_fingerprint": verdict.payload_fingerprint if is_verdict else None,  # type: ignore[union-attr]
        "amount": verdict.amount if is_verdict else None,  # type: ignore[union-attr]
    }


def _spend_event(spend: SignedTypedData | SignedTx | SpendRow) -> dict[str, object]:
    if isinstance(spend, SpendRow):
        return {
            "run_id": spend.run_id,
            "spend_id": spend.id,
            "verdict_id": spend.verdict_id,
            "kind": spend.kind,
            "asset": spend.asset,
            "amount": spend.amount,
            "recipient": spend.recipient,
            "chain_id": spend.chain_id,
        }
    return _res_event(spend.reservation)


def _authorization_nonce(spend: SignedTypedData | SignedTx | SpendRow) -> str | None:
    """The EIP-3009 nonce of an x402 spend (its settlement must carry it), else None."""
    if isinstance(spend, SignedTypedData):
        return spend.auth_nonce
    if isinstance(spend, SpendRow) and spend.kind == "x402" and spend.auth_nonce:
        return spend.auth_nonce
    return None


def _res_event(res: Reservation) -> dict[str, object]:
    return {
        "run_id": res.run_id,
        "spend_id": res.id,
        "verdict_id": res.verdict_id,
        "kind": res.kind,
        "asset": res.asset,
        "amount": res.amount,
        "recipient": res.recipient,
        "chain_id": res.chain_id,
    }


def _authorization_of(payload: dict[str, object]) -> tuple[str, int]:
    """An EIP-3009 payload's ``(auth_nonce, valid_before)``: what finds it on chain."""
    message = payload_part(payload, "message")
    return hex32(message["nonce"]), as_int(message["validBefore"])
