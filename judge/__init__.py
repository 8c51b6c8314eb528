"""The JEV judge: canonical fingerprints, signed verdicts, the free-read policy, the
expected-value decision model for money-moving calls, its calibration, and an
optional loopback HTTP service. Imports nothing else of nib's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from judge.calibration import (
    BetaCalibrator,
    CalibrationReport,
    Calibrator,
    FixedCalibrator,
    calibration_report,
    fact_key,
)
from judge.errors import (
    FingerprintError,
    JudgeConfigError,
    JudgeError,
    JudgeOverloaded,
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
from judge.jev import Judge, format_usdc
from judge.policy import FreeDecision, FreePolicyRow, FreeReadPolicy
from judge.request import CallRecord, PaidCallRequest
from judge.verdict import (
    DEFAULT_TTL_S,
    Decision,
    Verdict,
    VerdictSigner,
    parse_verdict,
    recover_signer,
    verify_verdict,
)

if TYPE_CHECKING:
    from judge.client import JudgeClient
    from judge.server import JudgeServer, serve

# The HTTP server pulls in uvicorn and starlette (~1 s of imports); the wallet only
# needs verdicts and fingerprints, so the service's parts load on first use.
def __getattr__(name: str) -> object:
    if name == "JudgeClient":
        from judge.client import JudgeClient

        return JudgeClient
    if name in ("JudgeServer", "serve"):
        from judge import server

        return getattr(server, name)
    raise AttributeError(f"module 'judge' has no attribute {name!r}")


__all__ = [
    "BetaCalibrator",
    "CalibrationReport",
    "Calibrator",
    "CallRecord",
    "DEFAULT_TTL_S",
    "Decision",
    "FingerprintError",
    "FixedCalibrator",
    "FreeDecision",
    "FreePolicyRow",
    "FreeReadPolicy",
    "Judge",
    "JudgeClient",
    "JudgeConfigError",
    "JudgeError",
    "JudgeOverloaded",
    "JudgeRequestInvalid",
    "JudgeServer",
    "JudgeUnreachable",
    "PaidCallRequest",
    "Verdict",
    "VerdictExpired",
    "VerdictInvalid",
    "VerdictMalformed",
    "VerdictRevoked",
    "VerdictSignatureInvalid",
    "VerdictSigner",
    "VerdictWrongSigner",
    "calibration_report",
    "call_fingerprint",
    "canonical_json",
    "fact_key",
    "fingerprint",
    "format_usdc",
    "parse_verdict",
    "recover_signer",
    "serve",
    "transaction_fingerprint",
    "typed_data_fingerprint",
    "verify_verdict",
]
