"""Calibration of p: a Beta-binomial per (tool, fact kind), and how good it has been.

p starts at the tool's declared coverage (worth ``prior_strength`` pseudo-outcomes)
and moves with every recorded outcome. Each outcome is stored with the p the judge
used at the time, so the report (Brier score, expected calibration error, reliability
bins) measures the predictions that were actually acted on.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Protocol

from typing_extensions import TypedDict  # pydantic validates it on the wire (Python < 3.12)

from judge.errors import JudgeConfigError
from judge.storage import Database, Location, Migration, cell_int, migrate, open_database

OUTCOMES_TABLE = "judge_outcomes"
#: p is quantised to this many decimals so EV arithmetic on it stays exact.
P_QUANTUM = Decimal("0.000001")
DEFAULT_PRIOR = Decimal("0.5")
#: p for a seller nib has never bought from (no declared coverage of ours backs it):
#: conservative, so a few failed purchases take it below :data:`MIN_P_TO_PAY`.
NEW_SELLER_PRIOR = Decimal("0.4")
#: Below this calibrated p the judge pays no seller, however cheap: with the default
#: strength 2, a new seller that covers nothing is refused after its third failure
#: (0.4 -> 0.267 -> 0.2 -> 0.16).
MIN_P_TO_PAY = Decimal("0.2")
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


@functools.lru_cache(maxsize=4096)
def fact_key(fact: str) -> str:
    """Match key for fact kinds and checklist items: 'Base fee (gwei)' -> 'base_fee_gwei'."""
    return _NOT_KEY.sub("_", fact.lower()).strip("_")


_NOT_KEY = re.compile(r"[^0-9a-z]+")


def calibration_subject(tool: str, seller: str | None = None) -> str:
    """What p is calibrated for: the tool, or the tool at one seller, e.g.
    ``pay_http@http://127.0.0.1:8402`` (outcomes are stored under this name)."""
    return f"{tool}@{seller}" if seller else tool


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


#: The judge's outcomes schema (version 1 is what sqlite-utils created before versioning).
MIGRATIONS: list[Migration] = [
    Migration(
        1,
        "calibration outcomes",
        (
            f"""CREATE TABLE IF NOT EXISTS {OUTCOMES_TABLE} (
                id {{id}}, ts {{int}} NOT NULL, tool TEXT NOT NULL, fact_kind TEXT NOT NULL,
                p_used TEXT NOT NULL, covered {{int}} NOT NULL)""",
            f"CREATE INDEX IF NOT EXISTS idx_{OUTCOMES_TABLE}_tool_kind "
            f"ON {OUTCOMES_TABLE}(tool, fact_kind)",
        ),
    ),
]


def ensure_tables(db: Database) -> None:
    """Bring the judge's outcomes table to the newest schema version (idempotent)."""
    migrate(db, "judge.calibration", MIGRATIONS)


class BetaCalibrator:
    """Beta-binomial calibration per (tool, fact kind), outcomes in ``judge_outcomes``.

    ``db`` is a path to the nib SQLite file, a ``postgresql://`` URL, an open
    ``storage.Database``, or ``None`` / ``":memory:"`` for an in-memory store (tests, benches).
    """

    def __init__(
        self,
        db: Location | Database | None = None,
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
        self.db = open_database(db or ":memory:")
        # Counts read since the database last changed (SQLite only; see _unchanged).
        self._counts: dict[tuple[str, str], tuple[int, int]] = {}
        self._seen: tuple[int, int] | None = None
        with self._lock:
            ensure_tables(self.db)

    def counts(self, tool: str, fact_kind: str) -> tuple[int, int]:
        """(covered, total) outcomes recorded for (tool, fact kind)."""
        key = (tool, fact_key(fact_kind))
        with self._lock:
            cacheable = self._unchanged()
            if cacheable and key in self._counts:
                return self._counts[key]
            [row] = self.db.query(
                f"SELECT COALESCE(SUM(covered), 0) AS hits, COUNT(*) AS n FROM {OUTCOMES_TABLE} "
                "WHERE tool = ? AND fact_kind = ?",
                list(key),
            )
            found = cell_int(row["hits"]), cell_int(row["n"])
            if cacheable:
                self._counts[key] = found
        return found

    def _unchanged(self) -> bool:
        """Whether cached counts may be used, emptying the cache when the database changed.

        On SQLite, ``PRAGMA data_version`` changes when another connection (another
        judge process) commits, and the connection's ``total_changes`` when this one
        writes (any table, any user of the shared connection): one cheap read instead of
        an aggregate over the outcomes on every decision. PostgreSQL has no such
        counter: always read.
        """
        conn = self.db.conn
        if not isinstance(conn, sqlite3.Connection):
            return False
        mark = (cell_int(self.db.scalar("PRAGMA data_version")), conn.total_changes)
        if mark != self._seen:
            self._counts.clear()
            self._seen = mark
        return True

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
        with self._lock:
            self.db.execute(
                f"INSERT INTO {OUTCOMES_TABLE} (ts, tool, fact_kind, p_used, covered) "
                "VALUES (?, ?, ?, ?, ?)",
                (int(self._clock()), tool, fact_key(fact_kind), format(p, "f"), int(covered)),
            )

    def report(self, tool: str | None = None) -> CalibrationReport:
        sql = f"SELECT p_used, covered FROM {OUTCOMES_TABLE}"
        params: list[str] = []
        if tool is not None:
            sql += " WHERE tool = ?"
            params.append(tool)
        with self._lock:
            rows = self.db.query(sql + " ORDER BY id", params)
        return calibration_report((Decimal(str(r["p_used"])), bool(r["covered"])) for r in rows)


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
