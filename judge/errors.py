"""Errors raised by the judge package.

One root, three kinds that are never mixed (configuration mistakes, run stops,
loop signals)::

    JudgeError                      root of everything the judge raises
    ├── JudgeConfigError            configuration / caller mistake: fix the input
    │   ├── FingerprintError        a value that has no canonical form (NaN, set, ...)
    │   └── JudgeRequestInvalid     a malformed paid-call request (negative price, ...)
    │       ├── OutcomeRefused      an outcome for a verdict not issued/executed here, or twice
    │       ├── PayloadTermsInvalid a payload that is not a payable shape (see judge.terms)
    │       └── TaskRegistrationConflict  a task id registered again with other limits
    ├── VerdictInvalid              loop signal: a verdict that must not be acted on
    │   ├── VerdictMalformed        fields do not parse (bad signature hex, bad fingerprint)
    │   ├── VerdictSignatureInvalid the signature does not recover to any key
    │   ├── VerdictWrongSigner      signed by a key other than the trusted judge
    │   ├── VerdictExpired          past its expires_at
    │   ├── VerdictRevoked          revoked by the judge, or its key is no longer trusted
    │   ├── VerdictUnknown          not in this judge's record of issued verdicts
    │   └── VerdictConsumed         already used once (by any wallet)
    └── JudgeUnreachable            run stop: the judge service did not answer in time
        └── JudgeOverloaded         it answered, refusing for now: too many requests (503)

Every message says what was found, what was expected, and the fix.
"""

from __future__ import annotations


class JudgeError(Exception):
    """Root of every error the judge package raises."""


class JudgeConfigError(JudgeError):
    """The caller or the configuration is wrong; nothing was decided."""


class FingerprintError(JudgeConfigError):
    """A value cannot be canonicalised, so it has no fingerprint."""


class JudgeRequestInvalid(JudgeConfigError):
    """A paid-call request is malformed (negative amounts, mismatched fingerprint, ...)."""


class OutcomeRefused(JudgeRequestInvalid):
    """An outcome for a verdict this judge did not issue, no wallet consumed, or twice."""


class PayloadTermsInvalid(JudgeRequestInvalid):
    """A payload that is neither a TransferWithAuthorization nor a pinned USDC transfer."""


class GrantRefused(JudgeRequestInvalid):
    """A human grant that cannot be given or used: not an escalation this judge issued
    for a registered task, or granted (or used) already."""


class TaskRegistrationConflict(JudgeRequestInvalid):
    """A task id is registered once; a second registration with other limits is refused."""


class TaskScopeRefused(JudgeConfigError):
    """A task token used for another task (or another task's verdict), or a worker token
    for a task not registered as queued: a token acts for its own task only."""


class VerdictInvalid(JudgeError):
    """A verdict that must not be acted on. Signers refuse when they see this."""


class VerdictMalformed(VerdictInvalid):
    """A verdict whose fields do not parse."""


class VerdictSignatureInvalid(VerdictInvalid):
    """The verdict's signature does not recover to a key."""


class VerdictWrongSigner(VerdictInvalid):
    """The verdict was signed by a key other than the trusted judge."""


class VerdictExpired(VerdictInvalid):
    """The verdict's expires_at has passed."""


class VerdictRevoked(VerdictInvalid):
    """The judge revoked the verdict, or the key that signed it is no longer trusted."""


class VerdictUnknown(VerdictInvalid):
    """This judge has no record of issuing the verdict (or issued it with other terms)."""


class VerdictConsumed(VerdictInvalid):
    """The verdict was already consumed: each verdict pays once, whichever wallet asks."""


class JudgeUnreachable(JudgeError):
    """The judge service did not answer in time (the loop stops with judge-unreachable)."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class JudgeOverloaded(JudgeUnreachable):
    """The judge service answered, but refused the request for now: too many requests in
    flight (HTTP 503). The loop stops with judge-unreachable, its message naming overload."""
