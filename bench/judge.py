"""Benchmark: in-process JEV decisions per second (signing included) against a bare
call fingerprint, the cheapest thing the judge does on every call.

Run: .venv/bin/python bench/judge.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

# Run as a script, this file's folder is sys.path[0] and this file would shadow the
# judge package it measures; import from the repository instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from eth_account import Account  # noqa: E402

from judge.calibration import BetaCalibrator, FixedCalibrator  # noqa: E402
from judge.fingerprint import call_fingerprint, fingerprint  # noqa: E402
from judge.jev import Judge, PaidCallRequest  # noqa: E402
from judge.verdict import VerdictSigner, verify_verdict  # noqa: E402

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
SELLER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
ARGS = {"symbol": "ETH", "venue": "paywall", "window_blocks": 50}


def _request() -> PaidCallRequest:
    return PaidCallRequest(
        tool="price_feed",
        args=ARGS,
        call_fingerprint=call_fingerprint("price_feed", ARGS),
        payload_fingerprint=fingerprint({"x402": "quote"}),
        price=100_000,
        asset=USDC,
        recipient=SELLER,
        chain_id=31337,
        remaining_budget=900_000,
        balance=100_000_000,
        per_call_cap=500_000,
        spend_cap=1_000_000,
        missing=("eth price usd", "base fee gwei"),
        covered=("gas price",),
        tool_facts=("eth_price_usd",),
        declared_coverage=Decimal("0.8"),
    )


def rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``fn`` over about ``seconds`` (after a short warm-up)."""
    for _ in range(20):
        fn()
    n, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(20):
            fn()
        n += 20
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0)
    seconds = parser.parse_args().seconds

    signer = VerdictSigner(Account.create())  # throwaway key, never printed
    req = _request()
    beta = Judge(signer, BetaCalibrator(), allowed_assets={31337: [USDC]})
    fixed = Judge(signer, FixedCalibrator(), allowed_assets={31337: [USDC]})
    verdict = beta.decide(req)

    fp = rate(lambda: call_fingerprint("price_feed", ARGS), seconds)
    d_beta = rate(lambda: beta.decide(req), seconds)
    d_fixed = rate(lambda: fixed.decide(req), seconds)
    verify = rate(lambda: verify_verdict(verdict, signer.address), seconds)

    print(f"bare call fingerprint            {fp:>10,.0f} /s")
    print(
        f"decide + sign (Beta, SQLite mem) {d_beta:>10,.0f} /s   ratio {fp / d_beta:,.1f}x slower"
    )
    print(
        f"decide + sign (fixed p double)   {d_fixed:>10,.0f} /s   ratio {fp / d_fixed:,.1f}x slower"
    )
    print(
        f"verify_verdict (recover signer)  {verify:>10,.0f} /s   ratio {fp / verify:,.1f}x slower"
    )


if __name__ == "__main__":
    main()
