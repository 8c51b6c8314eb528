"""Judge: decide + sign with records, and verify, against a like-for-like limit.

Ours is the JEV judge as ``nib run`` builds it (``build_local_judge``): its calibration
store and its record of verdicts on one SQLite file, so every ``decide`` checks the
request's call fingerprint, rules (calibrated p from the running counts, EV), builds and
validates the verdict, signs it and records it (one unsynced insert, as the judge does).
The limit does the least work that gives the same thing: the same canonical form of the
same verdict body (RFC 8785 JSON, keccak-256), the same signature scheme (the EIP-191
personal-message digest of that fingerprint, one libsecp256k1 signature through
coincurve, the fastest signer installed) and the same record (one unsynced insert of the
verdict's row, under a random id as a verdict's is, into the judge's own verdict table made
by its own migrations: the same columns and index, on a SQLite file in WAL mode). The limit of
verifying is one public-key recovery over the same EIP-191 digest; ours is
``verify_verdict`` (recover, compare with the verdict's judge and the trusted one).

The four are timed in CPU time, in short slices interleaved round after round (the
machine is shared: each side sees the same load); each rate is the median over its
rounds, and each ratio the median of the per-round ratios.

``python -m bench.judge [--quick]``
"""

from __future__ import annotations

import secrets
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from bench._util import (
    Figure,
    LoadWindow,
    bench_main,
    fmt_ratio,
    median,
    ratio,
    report_rows,
    with_details,
)

if TYPE_CHECKING:
    from judge.jev import PaidCallRequest

__all__ = ["main", "rate", "run"]

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
SELLER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
ARGS = {"symbol": "ETH", "venue": "paywall", "window_blocks": 50}
#: The goal of issue 17: at least half the limit's rate, signing and verifying.
GOAL = 0.5


def _request() -> PaidCallRequest:
    from judge.fingerprint import call_fingerprint, fingerprint
    from judge.jev import PaidCallRequest

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
        per_call_cap_atomic=500_000,
        spend_cap_atomic=1_000_000,
        missing=("eth price usd", "base fee gwei"),
        covered=("gas price",),
        tool_facts=("eth_price_usd",),
        declared_coverage=Decimal("0.8"),
    )


def rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per CPU second of ``fn`` over about ``seconds`` of CPU (in batches of 20).

    CPU time, not wall time: on a shared machine another process's burst stretches the
    wall clock of whichever side happens to run then, but not its CPU time.
    """
    n, start = 0, time.process_time()
    deadline = start + seconds
    while True:
        for _ in range(20):
            fn()
        n += 20
        now = time.process_time()
        if now >= deadline:
            return n / (now - start)


def _sides(folder: Path) -> dict[str, Callable[[], object]]:
    import coincurve
    from eth_account import Account

    from judge.calibration import BetaCalibrator
    from judge.jev import Judge
    from judge.records import VERDICTS, VerdictRecords
    from judge.verdict import VerdictSigner, _digest_for, verify_verdict

    account = Account.create()  # throwaway key, never printed
    signer = VerdictSigner(account)
    db = folder / "judge.db"  # as build_local_judge: one file for both
    judge = Judge(signer, BetaCalibrator(db), allowed_assets={31337: [USDC]},
                  records=VerdictRecords(db))
    req = _request()
    verdict = judge.decide(req)
    if verdict.decision != "approve":
        raise RuntimeError(f"benchmark: the judge ruled {verdict.decision}; expected approve")
    body = verdict.body()
    key = coincurve.PrivateKey(bytes(account.key))
    sig = key.sign_recoverable(_digest_for(body), hasher=None)
    # The same record: a row of the judge's own verdict table (its columns and its index,
    # made by the judge's own migrations on a file of its own), under an id made as the
    # judge makes a verdict's (random: a B-tree insert at a random place, not at the end).
    limit_db = VerdictRecords(folder / "limit.db")._store.db
    columns = ("id, decision, subject, task_id, payload_fingerprint, amount, asset, recipient, "
               "chain_id, p, facts, issued_at, expires_at, grant_id, paid_with")
    insert = f"INSERT INTO {VERDICTS} ({columns}) VALUES ({', '.join('?' * 15)})"

    def limit_sign() -> object:
        signature = key.sign_recoverable(_digest_for(body), hasher=None)
        limit_db.execute(insert, (
            secrets.token_hex(16), "approve", "price_feed", "", verdict.payload_fingerprint,
            verdict.amount, USDC.lower(), SELLER.lower(), 31337, verdict.p, "eth_price_usd",
            verdict.issued_at, verdict.expires_at, None, None), durable=False)
        return signature

    def limit_recover() -> object:
        return coincurve.PublicKey.from_signature_and_message(
            sig, _digest_for(body), hasher=None)

    return {
        "decide + sign + record": lambda: judge.decide(req),
        "limit: canonical form + EIP-191 sign + record": limit_sign,
        "verify_verdict": lambda: verify_verdict(verdict, signer.address),
        "limit: canonical form + EIP-191 recover": limit_recover,
    }


def run(quick: bool = False) -> list[dict[str, object]]:
    """Rates of the four sides over interleaved rounds; two rows (sign, verify)."""
    rounds, slice_s = (3, 0.05) if quick else (15, 0.2)
    with tempfile.TemporaryDirectory(prefix="nib-bench-judge-") as tmp:
        return _measure(_sides(Path(tmp)), rounds, slice_s)


def _measure(
    sides: dict[str, Callable[[], object]], rounds: int, slice_s: float
) -> list[dict[str, object]]:
    load = LoadWindow()
    for fn in sides.values():  # warm-up
        rate(fn, 0.02)
    rates: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for r in range(rounds):
        load.sample()
        for name in names[r % len(names) :] + names[: r % len(names)]:
            rates[name].append(rate(sides[name], slice_s))
    load.sample()
    med = {name: median(v) for name, v in rates.items()}
    details = [
        f"{rounds} interleaved rounds of {slice_s:.2f} CPU s per side; median rates per CPU s:"
    ]
    details += [
        f"  {name:<30} {med[name]:>10,.0f} /s   (rounds: "
        + ", ".join(f"{x:,.0f}" for x in rates[name])
        + ")"
        for name in names
    ]
    rows = []
    for ours, limit, what, how in (
        (
            "decide + sign + record",
            "limit: canonical form + EIP-191 sign + record",
            "judge decide + sign with records (rate)",
            "the JEV judge as nib run builds it (calibration store and record of verdicts "
            "on one SQLite file): check the call fingerprint, rule, build, sign and record "
            "the verdict / the same body's RFC 8785 keccak fingerprint, its EIP-191 digest "
            "signed by libsecp256k1, one unsynced insert of its row",
        ),
        (
            "verify_verdict",
            "limit: canonical form + EIP-191 recover",
            "verdict verification (rate)",
            "verify_verdict (recover, compare with the verdict's judge and the trusted "
            "judge) / one libsecp256k1 public-key recovery over the same EIP-191 digest",
        ),
    ):
        per_round = [ratio(a, b) for a, b in zip(rates[ours], rates[limit], strict=True)]
        share = median(per_round)
        details.append(f"  {what}: ours/limit {fmt_ratio(share)} (goal >= {GOAL}x)")
        rows.append(
            Figure(
                benchmark=what,
                ours=f"{med[ours]:,.0f} /s",
                peer=f"{med[limit]:,.0f} /s (limit: {limit.removeprefix('limit: ')})",
                ratio=share,
                notes=f"{how}; a rate ratio, higher is better; per-round ratios "
                f"{fmt_ratio(min(per_round))}-{fmt_ratio(max(per_round))} over {rounds} rounds.",
                details=tuple(details),
                raw={"kind": "limit", "goal": f">= {GOAL}x", "met": share >= GOAL,
                     "load": load.summary()},
            ).as_dict()
        )
    return with_details(rows, details)


def report(rows: list[dict[str, object]]) -> str:
    return report_rows(rows)


def main(argv: list[str] | None = None) -> int:
    return bench_main("python -m bench.judge", __doc__, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
