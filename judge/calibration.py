"""Calibration of p: a Beta-binomial per (tool, fact kind), and how good it has been.

p starts at the tool's declared coverage (worth ``prior_strength`` pseudo-outcomes)
and moves with every recorded outcome. Each outcome is stored with the p the judge
used at the time, so the report (Brier score, expected calibration error, reliability
bins) measures the predictions that were actually acted on.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import Protocol, TypedDict

import sqlite_utils

from judge.errors import JudgeConfigError

OUTCOMES_TABLE = "judge_outcomes"
#: p is quantised to this many decimals so EV arithmetic on it stays exact.
P_QUANTUM = Decimal("0.000001")
DEFAULT_PRIOR = Decimal("0.5")
DEFAULT_PRIOR_STRENGTH = Decimal(2)
N_BINS = 10


class ReliabilityBin(TypedDict):
    lo: float
    hi: float
    n: int
    mean_p: float | None
    freq: float | None


class CalibrationReport(TypedDict):
    n: int
    brier: float | None
    ece: float | None
    bins: list[ReliabilityBin]


def fact_key(fact: str) -> str:
    """Match key for fact kinds and checklist items: 'Base fee (gwei)' -> 'base_fee_gwei'."""
    return re.sub(r"[^0-9a-z]+", "_", fact.lower()).strip("_")


def _probability(name: str, value: Decimal | str | int) -> Decimal:
    if isinstance(value, bool | float):
        raise JudgeConfigError(
            f"found {name}={value!r} ({type(value).__name__}); expected a Decimal or decimal "
            f"string in [0, 1]; fix: pass Decimal(...) (verdict.p is already a string)."
        )
    try:
        number = Decimal(value)
    except InvalidOperation as exc:
        raise JudgeConfigError(
            f"found {name}={value!r}; expected a probability in [0, 1]; fix: pass a Decimal."
        ) from exc
    if not (number.is_finite() and 0 <= number <= 1):
        raise JudgeConfigError(
            f"found {name}={value}; expected a probability in [0, 1]; fix: clamp it."
        )
    return number


def calibration_report(
    pairs: Iterable[tuple[Decimal | float, bool]], n_bins: int = N_BINS
) -> CalibrationReport:
    """Brier score, expected calibration error (equal-width bins) and reliability bins."""
    sums = [[0.0, 0.0, 0] for _ in range(n_bins)]  # sum p, sum y, n
    brier_sum, n = 0.0, 0
    for p_raw, covered in pairs:
        p, y = float(p_raw), 1.0 if covered else 0.0
        brier_sum += (p - y) ** 2
        n += 1
        b = sums[min(int(p * n_bins), n_bins - 1)]
        b[0] += p
        b[1] += y
        b[2] += 1
    bins: list[ReliabilityBin] = []
    ece = 0.0
    for i, (sp, sy, nb) in enumerate(sums):
        count = int(nb)
        mean_p = sp / count if count else None
        freq = sy / count if count else None
        if count and mean_p is not None and freq is not None:
            ece += count / n * abs(mean_p - freq)
        bins.append(
            {
                "lo": round(i / n_bins, 6),
                "hi": round((i + 1) / n_bins, 6),
                "n": count,
                "mean_p": None if mean_p is None else round(mean_p, 6),
                "freq": None if freq is None else round(freq, 6),
            }
        )
    return {
        "n": n,
        "brier": round(brier_sum / n, 6) if n else None,
        "ece": round(ece, 6) if n else None,
        "bins": bins,
    }


class Calibrator(Protocol):
    """What the judge needs from a calibrator (the real one and the double below)."""

    def p(self, tool: str, fact_kind: str, prior: Decimal | None = None) -> Decimal:
        """Calibrated probability that ``tool`` yields ``fact_kind``."""
        ...

    def record(self, tool: str, fact_kind: str, p_used: Decimal | str, covered: bool) -> None:
        """Store one outcome with the p the judge used for it."""
        ...

    def report(self, tool: str | None = None) -> CalibrationReport:
        """Calibration quality over the recorded outcomes."""
        ...


def ensure_tables(db: sqlite_utils.Database) -> None:
    """Create the judge's outcomes table and index if missing (idempotent)."""
    if not db.table(OUTCOMES_TABLE).exists():
        db.create_table(
            OUTCOMES_TABLE,
            {
                "id": int,
                "ts": int,
                "tool": str,
                "fact_kind": str,
                "p_used": str,
                "covered": int,
            },
            pk="id",
            not_null={"ts", "tool", "fact_kind", "p_used", "covered"},
            if_not_exists=True,
        )
    db.execute(
        f"CREATE INDEX IF NOT EXISTS idx_{OUTCOMES_TABLE}_tool_kind "
        f"ON {OUTCOMES_TABLE}(tool, fact_kind)"
    )


def open_db(path: str | Path) -> sqlite_utils.Database:
    """Open the nib SQLite file the way every package does (WAL, autocommit, 30 s busy)."""
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    if str(path) != ":memory:":
        conn.execute("PRAGMA journal_mode=WAL")
    return sqlite_utils.Database(conn)


class BetaCalibrator:
    """Beta-binomial calibration per (tool, fact kind), outcomes in ``judge_outcomes``.

    ``db`` is a path to the nib SQLite file, an open ``sqlite_utils.Database``, or
    ``None`` / ``":memory:"`` for an in-memory store (tests, benches).
    """

    def __init__(
        self,
        db: str | Path | sqlite_utils.Database | None = None,
        *,
        prior_strength: Decimal | int = DEFAULT_PRIOR_STRENGTH,
        default_prior: Decimal = DEFAULT_PRIOR,
        clock: Callable[[], float] = time.time,
    ) -> None:
        strength = Decimal(prior_strength)
        if not strength > 0:
            raise JudgeConfigError(
                f"found prior_strength={prior_strength}; expected > 0 pseudo-outcomes; "
                "fix: use the default 2."
            )
        self._strength = strength
        self._default_prior = _probability("default_prior", default_prior)
        self._clock = clock
        self._lock = threading.Lock()
        self.db = db if isinstance(db, sqlite_utils.Database) else open_db(db or ":memory:")
        with self._lock:
            ensure_tables(self.db)

    def counts(self, tool: str, fact_kind: str) -> tuple[int, int]:
        """(covered, total) outcomes recorded for (tool, fact kind)."""
        with self._lock:
            row = self.db.execute(
                f"SELECT COALESCE(SUM(covered), 0), COUNT(*) FROM {OUTCOMES_TABLE} "
                "WHERE tool = ? AND fact_kind = ?",
                [tool, fact_key(fact_kind)],
            ).fetchone()
        return int(row[0]), int(row[1])

    def p(self, tool: str, fact_kind: str, prior: Decimal | None = None) -> Decimal:
        """Posterior mean, quantised to 6 decimals: (a + hits) / (a + b + n)."""
        mean = self._default_prior if prior is None else _probability("prior", prior)
        hits, total = self.counts(tool, fact_kind)
        alpha = mean * self._strength + hits
        posterior = alpha / (self._strength + total)
        return posterior.quantize(P_QUANTUM, rounding=ROUND_HALF_EVEN)

    def record(self, tool: str, fact_kind: str, p_used: Decimal | str, covered: bool) -> None:
        p = _probability("p_used", p_used)
        if not isinstance(covered, bool):
            raise JudgeConfigError(
                f"found covered={covered!r}; expected True or False; fix: pass whether the "
                "call covered a missing checklist item."
            )
        row = {
            "ts": int(self._clock()),
            "tool": tool,
            "fact_kind": fact_key(fact_kind),
            "p_used": format(p, "f"),
            "covered": int(covered),
        }
        with self._lock:
            self.db.table(OUTCOMES_TABLE).insert(row)

    def report(self, tool: str | None = None) -> CalibrationReport:
        sql = f"SELECT p_used, covered FROM {OUTCOMES_TABLE}"
        params: list[str] = []
        if tool is not None:
            sql += " WHERE tool = ?"
            params.append(tool)
        with self._lock:
            rows = self.db.execute(sql + " ORDER BY id", params).fetchall()
        return calibration_report((Decimal(p), bool(c)) for p, c in rows)


class FixedCalibrator:
    """Deterministic double: p is the declared prior (or ``p``); outcomes kept in memory."""

    def __init__(self, p: Decimal | None = None) -> None:
        self._p = None if p is None else _probability("p", p)
        self.outcomes: list[tuple[str, str, Decimal, bool]] = []

    def p(self, tool: str, fact_kind: str, prior: Decimal | None = None) -> Decimal:
        if self._p is not None:
            return self._p
        return DEFAULT_PRIOR if prior is None else _probability("prior", prior)

    def record(self, tool: str, fact_kind: str, p_used: Decimal | str, covered: bool) -> None:
        self.outcomes.append((tool, fact_key(fact_kind), _probability("p_used", p_used), covered))

    def report(self, tool: str | None = None) -> CalibrationReport:
        return calibration_report(
            (p, c) for t, _, p, c in self.outcomes if tool is None or t == tool
        )
