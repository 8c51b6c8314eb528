"""nib's wallet: keystore, verdict-gated signer, spend meter, nonces, ledger, reconciliation.

The private key never leaves this package: it is not in any repr, log line,
exception, event or database row.
"""

from __future__ import annotations

from wallet.errors import (
    CapExceeded,
    DevKeyRefused,
    InsufficientBalance,
    InvalidKey,
    KeystoreCorrupt,
    KeystoreError,
    KeystoreExists,
    KeystoreMissing,
    LedgerError,
    NoVerdict,
    PassphraseMissing,
    PayloadMismatch,
    RecheckFailed,
    SendFailed,
    SpendRefused,
    VerdictBadSignature,
    VerdictExpired,
    VerdictNotApproved,
    VerdictReplayed,
    VerdictRevoked,
    VerdictVoid,
    WalletError,
    WrongPassphrase,
)
from wallet.keystore import (
    KeyHandle,
    Keystore,
    check_dev_key,
    default_keystore_path,
    ensure_devnet_wallet,
    nib_home,
)
from wallet.ledger import GasRow, Ledger, SpendKind, SpendRow, SpendStatus
from wallet.meter import MeasuredSpend, Reservation, RunSpend, SpendMeter, gas_to_usdc
from wallet.nonces import NonceManager
from wallet.reconcile import Match, OnchainTransfer, ReconcileReport, reconcile
from wallet.signer import SentTx, SignedTx, SignedTypedData, VerdictBoundSigner, Wallet

__all__ = [
    "CapExceeded",
    "DevKeyRefused",
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
    "LedgerError",
    "Match",
    "MeasuredSpend",
    "NoVerdict",
    "NonceManager",
    "OnchainTransfer",
    "PassphraseMissing",
    "PayloadMismatch",
    "RecheckFailed",
    "ReconcileReport",
    "Reservation",
    "RunSpend",
    "SendFailed",
    "SentTx",
    "SignedTx",
    "SignedTypedData",
    "SpendKind",
    "SpendMeter",
    "SpendRefused",
    "SpendRow",
    "SpendStatus",
    "VerdictBadSignature",
    "VerdictBoundSigner",
    "VerdictExpired",
    "VerdictNotApproved",
    "VerdictReplayed",
    "VerdictRevoked",
    "VerdictVoid",
    "Wallet",
    "WalletError",
    "WrongPassphrase",
    "check_dev_key",
    "default_keystore_path",
    "ensure_devnet_wallet",
    "gas_to_usdc",
    "nib_home",
    "reconcile",
]
