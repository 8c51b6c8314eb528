"""The wallet's public API is its sorted ``__all__`` (checked in a clean interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = [
    "AuthorizationOutstanding",
    "CancelOverCap",
    "CapExceeded",
    "DevKeyRefused",
    "FailureUnproven",
    "GasRow",
    "InsufficientBalance",
    "InvalidKey",
    "KeyHandle",
    "Keystore",
    "KeystoreCorrupt",
    "KeystoreError",
    "KeystoreExists",
    "KeystoreMissing",
    "Ledger",
    "LedgerCheck",
    "LedgerError",
    "Match",
    "MeasuredSpend",
    "NoVerdict",
    "NonceHoldRefused",
    "NonceManager",
    "NotYourTask",
    "OnchainTransfer",
    "PassphraseMissing",
    "PayloadMismatch",
    "RecheckFailed",
    "ReconcileReport",
    "Reservation",
    "RunSpend",
    "SendFailed",
    "SentTx",
    "SettlementUnproven",
    "SignedTx",
    "SignedTypedData",
    "SpendKind",
    "SpendMeter",
    "SpendRefused",
    "SpendRow",
    "SpendStatus",
    "TaskMismatch",
    "VerdictBadSignature",
    "VerdictExpired",
    "VerdictNotApproved",
    "VerdictReplayed",
    "VerdictRevoked",
    "VerdictVoid",
    "Wallet",
    "WalletError",
    "WalletOverloaded",
    "WalletUnreachable",
    "WrongPassphrase",
    "check_dev_key",
    "default_keystore_path",
    "ensure_devnet_wallet",
    "nib_home",
    "reconcile",
    "verify_ledger",
]


def test_all_is_sorted_pinned_and_importable() -> None:
    code = (
        "import json, wallet; "
        "print(json.dumps([wallet.__all__, [n for n in wallet.__all__ if not hasattr(wallet, n)]]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    names, missing = json.loads(out)
    assert names == sorted(names)
    assert names == EXPECTED
    assert missing == []


def test_error_codes_are_stable() -> None:
    from wallet import errors

    codes = {
        name: cls.code
        for name, cls in vars(errors).items()
        if isinstance(cls, type) and issubclass(cls, errors.WalletError) and "code" in vars(cls)
    }
    assert codes == {
        "WalletError": "wallet-error",
        "KeystoreError": "keystore-error",
        "KeystoreMissing": "keystore-missing",
        "KeystoreExists": "keystore-exists",
        "KeystoreCorrupt": "keystore-corrupt",
        "PassphraseMissing": "passphrase-missing",
        "WrongPassphrase": "wrong-passphrase",
        "InvalidKey": "invalid-key",
        "SpendRefused": "refused",
        "NoVerdict": "no-verdict",
        "VerdictBadSignature": "bad-signature",
        "VerdictNotApproved": "not-approved",
        "VerdictVoid": "verdict-void",
        "VerdictExpired": "expired",
        "PayloadMismatch": "mismatch",
        "DevKeyRefused": "dev-key",
        "VerdictRevoked": "revoked",
        "RecheckFailed": "recheck-failed",
        "VerdictReplayed": "replayed",
        "CapExceeded": "cap-exceeded",
        "InsufficientBalance": "insufficient-balance",
        "LedgerError": "ledger-state",
        "SendFailed": "send-failed",
        "SettlementUnproven": "settlement-unproven",
        "AuthorizationOutstanding": "authorization-outstanding",
        "FailureUnproven": "failure-unproven",
        "CancelOverCap": "cancel-over-cap",
        "NonceHoldRefused": "nonce-hold-refused",
        "NotYourTask": "not-your-task",
        "TaskMismatch": "task-mismatch",
        "WalletOverloaded": "overloaded",
        "WalletUnreachable": "wallet-unreachable",
    }
