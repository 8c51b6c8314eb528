"""Errors raised by the wallet: keystore mistakes, signing refusals, ledger and send faults.

Every error carries a stable ``code`` (tests, events and the agent branch on it) and a
message that says what was found, what was expected and the fix. None of them ever
contains key material.

    WalletError                      root; ``.code``
    ├── KeystoreError                the user's mistake: configuration of the keystore
    │   ├── KeystoreMissing          "keystore-missing"   no wallet.json where expected
    │   ├── KeystoreExists           "keystore-exists"    refusing to overwrite a keystore
    │   ├── KeystoreCorrupt          "keystore-corrupt"   the file is not a v3 keystore
    │   ├── PassphraseMissing        "passphrase-missing" no argument, env var or terminal
    │   ├── WrongPassphrase          "wrong-passphrase"   decryption failed
    │   └── InvalidKey               "invalid-key"        import of something that is no key
    ├── SpendRefused                 a loop signal: the wallet refused to sign; nothing signed
    │   ├── NoVerdict                "no-verdict"
    │   ├── VerdictBadSignature      "bad-signature"      not signed by the trusted judge
    │   ├── VerdictNotApproved       "not-approved"       decision is not "approve"
    │   ├── VerdictVoid              "verdict-void"       payload fingerprint differs
    │   ├── VerdictExpired           "expired"
    │   ├── PayloadMismatch          "mismatch"           chain/asset/recipient/amount/sender
    │   ├── DevKeyRefused            "dev-key"            Anvil dev key off chain 31337
    │   ├── VerdictRevoked           "revoked"            the judge's re-check refused it
    │   ├── RecheckFailed            "recheck-failed"     the re-check itself failed (cause)
    │   ├── VerdictReplayed          "replayed"           verdict already consumed
    │   ├── CapExceeded              "cap-exceeded"       ``.limit`` / ``.observed``
    │   └── InsufficientBalance      "insufficient-balance"  ``.limit`` / ``.observed``
    │   ├── AuthorizationOutstanding "authorization-outstanding"  one live per resource
    │   └── TaskMismatch             "task-mismatch"      a body naming another task than the verdict's
    ├── LedgerError                  "ledger-state"       unknown row or illegal transition
    ├── SettlementUnproven           "settlement-unproven" receipt does not carry our auth
    ├── FailureUnproven              "failure-unproven"   a reported failure the chain does not show
    ├── CancelOverCap                "cancel-over-cap"    a cancel's gas would pass its run's cap
    ├── NonceHoldRefused             "nonce-hold-refused" a task's nonce hold past its bound
    ├── NotYourTask                  "not-your-task"      a row of a task the calling process has not proven
    ├── SendFailed                   "send-failed"        broadcast failed or tx reverted
    ├── WalletOverloaded             "overloaded"         too many connections; nothing was run
    └── WalletUnreachable            "wallet-unreachable" the wallet service did not answer
"""

from __future__ import annotations


class WalletError(Exception):
    """Root of every wallet error; ``code`` is a stable machine-readable name."""

    code: str = "wallet-error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ------------------------------------------------------------------------------ keystore


class KeystoreError(WalletError):
    """The keystore is missing, unreadable, or the passphrase does not open it."""

    code = "keystore-error"


class KeystoreMissing(KeystoreError):
    code = "keystore-missing"


class KeystoreExists(KeystoreError):
    code = "keystore-exists"


class KeystoreCorrupt(KeystoreError):
    code = "keystore-corrupt"


class PassphraseMissing(KeystoreError):
    code = "passphrase-missing"


class WrongPassphrase(KeystoreError):
    code = "wrong-passphrase"


class InvalidKey(KeystoreError):
    code = "invalid-key"


# ------------------------------------------------------------------------------ refusals


class SpendRefused(WalletError):
    """The wallet refused to sign. Nothing was signed and no money can move.

    ``reason`` repeats the message for audit events; ``verdict_id`` names the verdict
    when there was one.
    """

    code = "refused"

    def __init__(self, message: str, *, verdict_id: str | None = None) -> None:
        super().__init__(message)
        self.reason = message
        self.verdict_id = verdict_id


class NoVerdict(SpendRefused):
    code = "no-verdict"


class VerdictBadSignature(SpendRefused):
    code = "bad-signature"


class VerdictNotApproved(SpendRefused):
    code = "not-approved"


class VerdictVoid(SpendRefused):
    code = "verdict-void"


class VerdictExpired(SpendRefused):
    code = "expired"


class PayloadMismatch(SpendRefused):
    code = "mismatch"


class DevKeyRefused(SpendRefused):
    code = "dev-key"


class VerdictRevoked(SpendRefused):
    code = "revoked"


class RecheckFailed(SpendRefused):
    """The judge's re-check could not run (e.g. the judge is unreachable); see __cause__."""

    code = "recheck-failed"


class VerdictReplayed(SpendRefused):
    code = "replayed"


class _LimitRefusal(SpendRefused):
    """A refusal against a numeric limit; ``limit`` and ``observed`` are atomic units."""

    def __init__(
        self, message: str, *, limit: int, observed: int, verdict_id: str | None = None
    ) -> None:
        super().__init__(message, verdict_id=verdict_id)
        self.limit = limit
        self.observed = observed


class CapExceeded(_LimitRefusal):
    """``observed`` is what the run would have committed with this call; ``limit`` the cap."""

    code = "cap-exceeded"


class InsufficientBalance(_LimitRefusal):
    """``observed`` is the amount asked; ``limit`` what the balance can still cover."""

    code = "insufficient-balance"


class AuthorizationOutstanding(SpendRefused):
    """An authorization for the same (seller, resource) is still live: signing another
    could let the seller settle both. ``ledger_id`` names the live row."""

    code = "authorization-outstanding"

    def __init__(
        self, message: str, *, ledger_id: str, valid_before: int | None, verdict_id: str | None
    ) -> None:
        super().__init__(message, verdict_id=verdict_id)
        self.ledger_id = ledger_id
        self.valid_before = valid_before


class TaskMismatch(SpendRefused):
    """The request names a task or run other than the one the verdict was issued to."""

    code = "task-mismatch"

    @classmethod
    def between(cls, run_id: str, verdict_id: str, task_id: str) -> TaskMismatch:
        """The refusal of a payment asked for ``run_id`` under a verdict of ``task_id``."""
        return cls(
            f"found a payment asked for run {run_id!r} under verdict {verdict_id}, which the "
            f"judge issued to task {task_id!r}; expected the verdict's own task: a payment is "
            "booked under the task it was approved for. Nothing was signed and the verdict "
            f"is unused. Fix: pay under run {task_id!r}.",
            verdict_id=verdict_id,
        )


# ------------------------------------------------------------------------------ faults


class LedgerError(WalletError):
    """A ledger row is unknown or asked to make a transition its status forbids."""

    code = "ledger-state"


class SettlementUnproven(WalletError):
    """A claimed settlement transaction does not carry our authorization: the spend stays
    pending. ``finding`` is chain.usdc's SettlementFinding for it."""

    code = "settlement-unproven"

    def __init__(self, message: str, *, finding: str, tx_hash: str) -> None:
        super().__init__(message)
        self.finding = finding
        self.tx_hash = tx_hash


class FailureUnproven(WalletError):
    """A caller reported that a signed spend failed, but the chain does not show that it
    can never move money: the row stays counted until the wallet can prove it."""

    code = "failure-unproven"


class CancelOverCap(WalletError):
    """Cancelling an authorization on chain would cost more gas than is left of its run's
    cap: the cancel is not sent (the authorization stays counted until it settles or
    expires), so a cancel never takes a task past its cap."""

    code = "cancel-over-cap"


class NonceHoldRefused(WalletError):
    """A confined process's task may take no more nonce numbers now: it holds MAX_HELD, its
    hold began a lease ago, or a lease of its ran out unsent (wallet.nonces). Nothing was
    allocated."""

    code = "nonce-hold-refused"


class NotYourTask(WalletError):
    """A confined process named a ledger row (or run) of a task it has not proven it acts
    for (its task token, or a verdict of that task the wallet signed under for it)."""

    code = "not-your-task"


class SendFailed(WalletError):
    """A signed transaction could not be broadcast, or it was mined and reverted."""

    code = "send-failed"


class WalletOverloaded(WalletError):
    """The wallet service holds as many connections as it serves (from this process or in
    all): the request was not run, so nothing was signed."""

    code = "overloaded"


class WalletUnreachable(WalletError):
    """The wallet service did not answer in time, or is not running (a run stop)."""

    code = "wallet-unreachable"
