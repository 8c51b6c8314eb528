"""The JEV judge: canonical fingerprints, signed verdicts, the free-read policy, the
expected-value decision model for money-moving calls, its calibration, and an
optional loopback HTTP service. Imports nothing else of nib's.

The names below are imported on first use (as chain.lazy does; judge imports no chain).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from judge.amounts import format_usdc
    from judge.calibration import (
        BetaCalibrator,
        CalibrationReport,
        Calibrator,
        FixedCalibrator,
        calibration_report,
        fact_key,
    )
    from judge.client import JudgeClient
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
    from judge.jev import Judge
    from judge.policy import FreeDecision, FreePolicyRow, FreeReadPolicy
    from judge.request import CallRecord, PaidCallRequest
    from judge.server import JudgeServer, serve
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

#: Where each exported name lives: the verdict path needs no HTTP server (uvicorn and
#: starlette) and a light reader (judge.errors, judge.storage) no eth-account.
_HOMES = {
    "BetaCalibrator": "judge.calibration",
    "CalibrationReport": "judge.calibration",
    "Calibrator": "judge.calibration",
    "CallRecord": "judge.request",
    "DEFAULT_TTL_S": "judge.verdict",
    "Decision": "judge.verdict",
    "FingerprintError": "judge.errors",
    "FixedCalibrator": "judge.calibration",
    "FreeDecision": "judge.policy",
    "FreePolicyRow": "judge.policy",
    "FreeReadPolicy": "judge.policy",
    "Judge": "judge.jev",
    "JudgeClient": "judge.client",
    "JudgeConfigError": "judge.errors",
    "JudgeError": "judge.errors",
    "JudgeOverloaded": "judge.errors",
    "JudgeRequestInvalid": "judge.errors",
    "JudgeServer": "judge.server",
    "JudgeUnreachable": "judge.errors",
    "PaidCallRequest": "judge.request",
    "Verdict": "judge.verdict",
    "VerdictExpired": "judge.errors",
    "VerdictInvalid": "judge.errors",
    "VerdictMalformed": "judge.errors",
    "VerdictRevoked": "judge.errors",
    "VerdictSignatureInvalid": "judge.errors",
    "VerdictSigner": "judge.verdict",
    "VerdictWrongSigner": "judge.errors",
    "calibration_report": "judge.calibration",
    "call_fingerprint": "judge.fingerprint",
    "canonical_json": "judge.fingerprint",
    "fact_key": "judge.calibration",
    "fingerprint": "judge.fingerprint",
    "format_usdc": "judge.amounts",
    "parse_verdict": "judge.verdict",
    "recover_signer": "judge.verdict",
    "serve": "judge.server",
    "transaction_fingerprint": "judge.fingerprint",
    "typed_data_fingerprint": "judge.fingerprint",
    "verify_verdict": "judge.verdict",
}


def __getattr__(name: str) -> object:
    """An exported name, imported from its home on first use (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'judge' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


class _Judge(ModuleType):
    def __setattr__(self, name: str, value: object) -> None:
        # Importing judge.fingerprint sets this package's ``fingerprint`` to the module;
        # the export is its function (as the eager ``from ... import`` kept it).
        if isinstance(value, ModuleType) and _HOMES.get(name) == value.__name__:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Judge
