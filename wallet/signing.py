"""MOVES MONEY: signing what the authorizer reserved, and nothing else.

An EIP-3009 authorization (x402) or a USDC transfer transaction: the checks run on a
private deep copy of the payload, and that copy is signed. A signature that cannot be
handed out (signing or recording it failed) gives its ledger row back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar

from chain.money import gas_to_usdc
from judge.fingerprint import transaction_fingerprint, typed_data_fingerprint
from judge.verdict import Verdict
from wallet.authorize import Authorizer
from wallet.core import WalletCore, spend_event
from wallet.errors import PayloadMismatch
from wallet.meter import Reservation
from wallet.signed import SignedTx, SignedTypedData
from wallet.terms import (
    PINNED_TX_FIELDS,
    as_int,
    hex32,
    payload_part,
    private_copy,
    transfer_terms,
    typed_data_terms,
)

__all__ = ["PayloadSigner"]

_Signed = TypeVar("_Signed")

log = logging.getLogger(__name__)


class PayloadSigner:
    """Signs typed data and transactions once the authorizer has reserved their spend."""

    def __init__(self, core: WalletCore, authorizer: Authorizer) -> None:
        self._core = core
        self._authorizer = authorizer

    def sign_typed_data(
        self,
        payload: Mapping[str, object],
        verdict: Verdict | None,
        *,
        run_id: str,
        spend_cap_atomic: int,
        resource: str | None = None,
    ) -> SignedTypedData:
        """MOVES MONEY: see ``Wallet.sign_typed_data``."""
        exact = private_copy(payload)
        run_id, spend_cap_atomic = self._authorizer.booked_under(verdict, run_id, spend_cap_atomic, "x402")
        res = self._authorizer.authorize(
            exact,
            verdict,
            run_id=run_id,
            spend_cap_atomic=spend_cap_atomic,
            kind="x402",
            fingerprint_of=typed_data_fingerprint,
            terms_of=typed_data_terms,
            resource=resource,
            authorization_of=_authorization_of,
        )
        assert verdict is not None  # authorize refuses None
        # The row is already 'signed' with this nonce and validBefore (one durable write
        # before the signature exists): reconciliation can find the authorization on chain.
        # authorize proved typed_data_fingerprint(exact), the EIP-712 digest of the exact
        # payload, equal to the approved fingerprint: that digest is what is signed.
        digest = bytes.fromhex((verdict.payload_fingerprint or "").removeprefix("0x"))
        key = self._core.key
        signed = self._sign_checked(
            lambda: key._unsafe_sign_digest(digest), res, verdict, run_id, "x402",
            unsignable="The approved payload is not signable EIP-712",
            expected="expected a TransferWithAuthorization message. Fix: build it with "
            "chain.usdc.eip3009_typed_data.",
        )
        auth_nonce, valid_before = _authorization_of(exact)
        result = SignedTypedData(
            signature="0x" + bytes(signed.signature).hex(),
            signer=self._core.address,
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

    def sign_transaction(
        self, tx: Mapping[str, object], verdict: Verdict | None, *, run_id: str, spend_cap_atomic: int
    ) -> SignedTx:
        """MOVES MONEY: see ``Wallet.sign_transaction``."""
        core = self._core
        exact = private_copy(tx)
        run_id, spend_cap_atomic = self._authorizer.booked_under(verdict, run_id, spend_cap_atomic, "transfer")
        full = {k: v for k, v in exact.items() if k != "from"}
        full["data"] = full.pop("input", full.get("data"))

        def hold_for_gas() -> int:
            return gas_to_usdc(
                as_int(full["gas"]) * as_int(full["maxFeePerGas"]), core.meter.eth_price_usdc
            )

        res = self._authorizer.authorize(
            exact,
            verdict,
            run_id=run_id,
            spend_cap_atomic=spend_cap_atomic,
            kind="transfer",
            fingerprint_of=transaction_fingerprint,
            terms_of=transfer_terms,
            gas_hold_of=hold_for_gas,
        )
        assert verdict is not None
        signed = self._sign_checked(
            lambda: core.key._unsafe_sign_transaction(full),
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
            core.meter.mark_signed(res, tx_hash=tx_hash, tx_nonce=as_int(full["nonce"]))
        result = SignedTx(
            raw_transaction="0x" + bytes(signed.raw_transaction).hex(),
            tx_hash=tx_hash,
            nonce=as_int(full["nonce"]),
            signer=core.address,
            payload_fingerprint=verdict.payload_fingerprint or "",
            verdict_id=verdict.id,
            run_id=run_id,
            reservation=res,
            recipient=res.recipient,
            amount=res.amount,
        )
        self._emit_signed(res, result.payload_fingerprint, tx_hash=tx_hash)
        return result

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
        meter = self._core.meter
        try:
            return sign()
        except Exception as exc:
            note = f"signing failed ({type(exc).__name__}); no signature exists"
            if meter.ledger.get(res.id).status == "signed":  # written so by reserve
                meter.fail(res, note)
            else:
                meter.release(res, note)
            raise self._authorizer.refuse(
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
        self._core.emit(
            "wallet.signed", {**spend_event(res), **ids, "payload_fingerprint": payload_fingerprint}
        )

    @contextmanager
    def _handed_out_or_dropped(self, res: Reservation) -> Iterator[None]:
        """Around recording a fresh signature: if that fails, the signature is dropped
        (never returned, so never broadcast or sent to a seller) and the row must not stay
        pending for money that cannot move: a reserved row is released, a signed one failed.
        """
        meter = self._core.meter
        try:
            yield
        except BaseException as exc:
            note = f"signature dropped before it was handed out ({type(exc).__name__}); never sent"
            try:
                row = meter.ledger.get(res.id)
                if row.status == "reserved":
                    meter.release(res, note=note)
                elif row.status == "signed":
                    meter.fail(res, note=note)
            except Exception:  # the database is gone: reconcile's nonce check settles it
                log.exception("could not give back ledger row %s after %s", res.id, note)
            raise


def _authorization_of(payload: dict[str, object]) -> tuple[str, int]:
    """An EIP-3009 payload's ``(auth_nonce, valid_before)``: what finds it on chain."""
    message = payload_part(payload, "message")
    return hex32(message["nonce"]), as_int(message["validBefore"])
