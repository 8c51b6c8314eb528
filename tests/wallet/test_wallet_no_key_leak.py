"""No private key in the DB file, events, reprs, exception texts, logs or stdout."""

from __future__ import annotations

import json
import logging
import traceback
from pathlib import Path
from typing import Any

import pytest
from _wallet_support import FAST_SCRYPT_N, Events, approve, quote, submit_authorization, transfer_tx

from chain.client import ChainClient
from chain.devkeys import AGENT, dev_account
from judge.verdict import VerdictSigner
from wallet.errors import WalletError
from wallet.keystore import Keystore
from wallet.reconcile import reconcile
from wallet.signer import Wallet

DEV_KEYS = [bytes(dev_account(i).key) for i in range(10)]


def _exc_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc)


def test_exercising_the_wallet_leaks_no_key(
    chain: Any,
    tmp_path: Path,
    judge_signer: VerdictSigner,
    client: ChainClient,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    events = Events()
    store = Keystore(tmp_path / "home" / "wallet.json", scrypt_n=FAST_SCRYPT_N)
    store.import_key("0x" + DEV_KEYS[AGENT].hex(), "pw")
    for attempt in (
        lambda: store.unlock("wrong"),
        lambda: store.import_key("0x" + DEV_KEYS[AGENT].hex() + "zz", "pw", overwrite=True),
        lambda: store.import_key(DEV_KEYS[AGENT], "pw"),
        lambda: store.unlock("pw", chain_id=1),
    ):
        with pytest.raises(WalletError) as info:
            attempt()
        texts.append(_exc_text(info.value))
    handle = store.unlock("pw")
    db = tmp_path / "nib.db"
    wallet = Wallet(
        handle,
        db_path=db,
        chain=client,
        usdc=chain.usdc,
        trusted_judge=judge_signer.address,
        emit=events,
    )

    payload = quote(chain)
    verdict = approve(judge_signer, payload)
    signed = wallet.sign_typed_data(payload, verdict, run_id="r", spend_cap_atomic=10**6)
    wallet.settle(signed, submit_authorization(chain, signed))
    tx = transfer_tx(chain)
    sent = wallet.send_transaction(
        wallet.sign_transaction(tx, approve(judge_signer, tx), run_id="r", spend_cap_atomic=10**6)
    )
    refusals = [
        lambda: wallet.sign_typed_data(payload, None, run_id="r", spend_cap_atomic=10**6),
        lambda: wallet.sign_typed_data(payload, verdict, run_id="r", spend_cap_atomic=10**6),
        lambda: wallet.sign_typed_data(quote(chain), verdict, run_id="r", spend_cap_atomic=10**6),
        lambda: wallet.sign_transaction(
            dict(tx, value=5), approve(judge_signer, dict(tx, value=5)), run_id="r", spend_cap_atomic=10**6
        ),
    ]
    for refuse in refusals:
        with pytest.raises(WalletError) as info:
            refuse()
        texts.append(_exc_text(info.value))
    report = reconcile(db, client, chain.usdc, handle.address, 0)

    texts += [
        repr(o) + str(o)
        for o in (
            handle,
            store,
            wallet,
            wallet.meter,
            wallet.nonces,
            signed,
            sent,
            signed.reservation,
            report,
        )
    ]
    texts += [json.dumps(report.to_dict()), json.dumps(events.items), caplog.text]
    captured = capsys.readouterr()
    texts += [captured.out, captured.err, store.path.read_text()]
    blobs = [p.read_bytes() for p in tmp_path.glob("nib.db*")]
    assert blobs and len(events.items) >= 6

    haystack = "\n".join(texts)
    for key in DEV_KEYS:
        assert key.hex() not in haystack.lower()
        for blob in blobs:
            assert key not in blob
            assert key.hex().encode() not in blob.lower()
