"""The JEV judge: canonical fingerprints, signed verdicts, free-read policy, the
expected-value decision model for money-moving calls, its calibration, and an
optional HTTP service. Imports nothing else of nib's."""

from __future__ import annotations

from judge.errors import (
    FingerprintError,
    JudgeConfigError,
    JudgeError,
    JudgeRequestInvalid,
    JudgeUnreachable,
    VerdictExpired,
    VerdictInvalid,
    VerdictMalformed,
    VerdictRevoked,
    VerdictSignatureInvalid,
    VerdictWrongSigner,
)
from judge.fingerprint import (
    call_fingerprint,
    canonical_json,
    fingerprint,
    transaction_fingerprint,
    typed_data_fingerprint,
)
from judge.verdict import (
    DEFAULT_TTL_S,
    Decision,
    Verdict,
    VerdictSigner,
    parse_verdict,
    recover_signer,
    verify_verdict,
)

__all__ = [
    "DEFAULT_TTL_S",
    "Decision",
    "FingerprintError",
    "JudgeConfigError",
    "JudgeError",
    "JudgeRequestInvalid",
    "JudgeUnreachable",
    "Verdict",
    "VerdictExpired",
    "VerdictInvalid",
    "VerdictMalformed",
    "VerdictRevoked",
    "VerdictSignatureInvalid",
    "VerdictSigner",
    "VerdictWrongSigner",
    "call_fingerprint",
    "canonical_json",
    "fingerprint",
    "parse_verdict",
    "recover_signer",
    "transaction_fingerprint",
    "typed_data_fingerprint",
    "verify_verdict",
]
