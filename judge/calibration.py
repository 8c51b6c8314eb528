"""Calibration of p: a Beta-binomial per (tool, fact kind), and how good it has been.

p starts at the tool's declared coverage (worth ``prior_strength`` pseudo-outcomes)
and moves with every recorded outcome. Each outcome is stored with the p the judge
used at the time, so the report (Brier score, expected calibration error, reliability
bins) measures the predictions that were actually acted on.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Callable, Iterable
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Literal, Protocol

from typing_extensions import TypedDict  # pydantic validates it on the wire (Python < 3.12)

from judge._store import LOCK
from judge.errors import JudgeConfigError
from judge.storage import (
    Database,
    Location,
    Migration,
    Tx,
    add_missing_columns,
    cell_float,
    cell_int,
    migrate,
    open_database,
)

OUTCOMES_TABLE = "judge_outcomes"
#: Running counts per (tool, fact kind, reliability bin), moved in each outcome's own
#: transaction: p and the report read these, never the outcomes.
COUNTS_TABLE = "judge_outcome_counts"
#: Per (tool, fact kind): how often the seller took the money and did not deliver.
LOST_TABLE = "judge_non_deliveries"
#: p is quantised to this many decimals so EV arithmetic on it stays exact.
P_QUANTUM = Decimal("0.000001")
DEFAULT_PRIOR = Decimal("0.5")
#: p for a seller nib has never bought from (no declared coverage of ours backs it):
#: conservative, so a few failed purchases take it below :data:`MIN_P_TO_PAY`.
NEW_SELLER_PRIOR = Decimal("0.4")
#: Below this calibrated p the judge pays no seller, however cheap: with the default
#: strength 2, a new seller that covers nothing is refused after its third failure of
#: full weight (0.4 -> 0.267 -> 0.2 -> 0.16).
MIN_P_TO_PAY = Decimal("0.2")
DEFAULT_PRIOR_STRENGTH = Decimal(2)
N_BINS = 10
#: Outcome weights are kept as whole thousandths of an outcome: an outcome of a purchase
#: that paid little counts for a fraction of one (judge.outcomes.outcome_weight).
WEIGHT_SCALE = 1000

Delivery = Literal["delivered", "paid-not-delivered"]
"""What a paid call's seller did with the payment.

- ``delivered``: it answered (the outcome's ``covered`` says whether that helped).
- ``paid-not-delivered``: it took the money (the payment settled on chain) and delivered
  nothing usable. Counted (per seller and fact kind, named in the judge's reasons) and
  weighed as a failure of what was paid: what every task reads of a seller moves by at
  most one outcome per reporting task (the reporting task itself no longer pays it:
  judge.jev). One task's word cannot take a seller under the pay floor for everyone.
"""


def weight_thousandths(weight: Decimal | int) -> int:
    """``weight`` pseudo-outcomes as the whole thousandths they are stored as (at least
    one); JudgeConfigError unless it is a positive number."""
    if isinstance(weight, bool) or not isinstance(weight, int | Decimal) or not weight > 0:
        raise JudgeConfigError(
            f"found weight={weight!r}; expected a positive int or Decimal (pseudo-outcomes); "
            "fix: scale what was paid to outcomes before recording (judge.outcomes.outcome_weight)."
        )
    return max(1, int((Decimal(weight) * WEIGHT_SCALE).to_integral_value(ROUND_HALF_EVEN)))


def check_outcome(covered: object, delivery: object) -> None:
    """Raise JudgeConfigError unless ``covered`` is a bool and ``delivery`` a Delivery that
    agrees with it (a call that covered an item delivered)."""
    if not isinstance(covered, bool):
        raise JudgeConfigError(
            f"found covered={covered!r}; expected True or False; fix: pass whether the "
            "call covered a missing checklist item."
        )
    if delivery not in ("delivered", "paid-not-delivered"):
        raise JudgeConfigError(
            f"found delivery={delivery!r}; expected 'delivered' or 'paid-not-delivered'."
        )
    if covered and delivery != "delivered":
        raise JudgeConfigError(
            "found covered=True with delivery='paid-not-delivered'; expected a call that "
            "covered an item to have delivered; fix: report covered=False."
        )


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
@functools.lru_cache(maxsize=4096)  # a pure function of short strings, ~8 calls a decision
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


#: One reliability bin's running sums: sum of p, sum of outcomes, count, sum of squared error.
BinSums = tuple[float, float, int, float]


def _bin_of(p: float, n_bins: int = N_BINS) -> int:
    return min(int(p * n_bins), n_bins - 1)


def calibration_report(
    pairs: Iterable[tuple[Decimal | float, bool]], n_bins: int = N_BINS
) -> CalibrationReport:
    """Brier score, expected calibration error (equal-width bins) and reliability bins."""
    sums = [[0.0, 0.0, 0.0, 0.0] for _ in range(n_bins)]  # sum p, sum y, n, sum (p - y)^2
    for p_raw, covered in pairs:
        p, y = float(p_raw), 1.0 if covered else 0.0
        b = sums[_bin_of(p, n_bins)]
        b[0] += p
        b[1] += y
        b[2] += 1
        b[3] += (p - y) ** 2
    return report_from_bins([(b[0], b[1], int(b[2]), b[3]) for b in sums])


def report_from_bins(sums: list[BinSums]) -> CalibrationReport:
    """The report of :func:`calibration_report` from each bin's running sums (what the
    calibration store keeps per outcome, so reporting never re-reads the outcomes)."""
    n_bins = len(sums)
    n = sum(nb for _, _, nb, _ in sums)
    brier_sum = sum(sq for _, _, _, sq in sums)
    bins: list[ReliabilityBin] = []
    ece = 0.0
    for i, (sp, sy, count, _) in enumerate(sums):
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

    def record(
        self,
        tool: str,
        fact_kind: str,
        p_used: Decimal | str,
        covered: bool,
        *,
        weight: Decimal | int = 1,
        delivery: Delivery = "delivered",
    ) -> None:
        """Store one outcome with the p the judge used for it, counting ``weight``
        pseudo-outcomes toward p (``paid-not-delivered`` is also counted as such)."""
        ...

    def non_deliveries(self, tool: str, fact_kind: str) -> int:
        """How often ``tool`` took the money for ``fact_kind`` and did not deliver."""
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
    Migration(
        2,
        "running counts per (tool, fact kind, bin) and each outcome's weight: p and the "
        "report read the counts, so a decision costs the same at 10 or 10 million outcomes",
        (
            add_missing_columns(OUTCOMES_TABLE, (("weight", "{int} NOT NULL DEFAULT 1"),)),
            f"""CREATE TABLE IF NOT EXISTS {COUNTS_TABLE} (
                tool TEXT NOT NULL, fact_kind TEXT NOT NULL, bin {{int}} NOT NULL,
                n {{int}} NOT NULL, hits {{int}} NOT NULL,
                weight {{int}} NOT NULL, hit_weight {{int}} NOT NULL,
                sum_p {{real}} NOT NULL, sum_sq {{real}} NOT NULL,
                PRIMARY KEY (tool, fact_kind, bin))""",
            lambda tx: recount(tx),
        ),
    ),
    Migration(
        3,
        "settled non-deliveries: whether each outcome's seller delivered, and a counter per "
        "(tool, fact kind) the judge names in its reasons",
        (
            add_missing_columns(OUTCOMES_TABLE, (("delivered", "{int} NOT NULL DEFAULT 1"),)),
            f"""CREATE TABLE IF NOT EXISTS {LOST_TABLE} (
                tool TEXT NOT NULL, fact_kind TEXT NOT NULL, n {{int}} NOT NULL,
                PRIMARY KEY (tool, fact_kind))""",
        ),
    ),
    Migration(
        4,
        f"weights in thousandths of an outcome (WEIGHT_SCALE {WEIGHT_SCALE}): an outcome of "
        "a purchase that paid little counts for a fraction of one",
        (
            f"UPDATE {OUTCOMES_TABLE} SET weight = weight * {WEIGHT_SCALE}",
            f"UPDATE {COUNTS_TABLE} SET weight = weight * {WEIGHT_SCALE}, "
            f"hit_weight = hit_weight * {WEIGHT_SCALE}",
        ),
    ),
]

_COUNT_SQL = (
    f"INSERT INTO {COUNTS_TABLE} (tool, fact_kind, bin, n, hits, weight, hit_weight, sum_p, "
    "sum_sq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tool, fact_kind, bin) DO UPDATE "
    f"SET n = {COUNTS_TABLE}.n + excluded.n, hits = {COUNTS_TABLE}.hits + excluded.hits, "
    f"weight = {COUNTS_TABLE}.weight + excluded.weight, "
    f"hit_weight = {COUNTS_TABLE}.hit_weight + excluded.hit_weight, "
    f"sum_p = {COUNTS_TABLE}.sum_p + excluded.sum_p, "
    f"sum_sq = {COUNTS_TABLE}.sum_sq + excluded.sum_sq"
)


def _count_row(tool: str, kind: str, p: float, covered: bool, weight: int) -> tuple[object, ...]:
    """One outcome as the increments of its (tool, fact kind, bin) counter row."""
    y = 1.0 if covered else 0.0
    hit_weight = weight if covered else 0
    return (tool, kind, _bin_of(p), 1, int(covered), weight, hit_weight, p, (p - y) ** 2)


def recount(tx: Tx) -> None:
    """Rebuild the running counts from the stored outcomes in one statement (the migration
    that adds them, and a bulk load that wrote outcomes directly). Each outcome lands in
    the bin ``_bin_of`` gives it: p parsed from its decimal text, times ten, truncated."""
    real, whole = ("REAL", "CAST({} AS INTEGER)") if tx.dialect == "sqlite" else (
        "DOUBLE PRECISION", "CAST(FLOOR({}) AS BIGINT)")
    p = f"CAST(p_used AS {real})"
    bin_of = f"CASE WHEN {p} >= 1 THEN {N_BINS - 1} ELSE {whole.format(f'{p} * {N_BINS}')} END"
    tx.execute(f"DELETE FROM {COUNTS_TABLE}")
    tx.execute(
        f"INSERT INTO {COUNTS_TABLE} (tool, fact_kind, bin, n, hits, weight, hit_weight, "
        "sum_p, sum_sq) SELECT tool, fact_kind, b, COUNT(*), SUM(covered), SUM(weight), "
        "SUM(covered * weight), SUM(p), SUM((p - covered) * (p - covered)) FROM (SELECT tool, "
        f"fact_kind, covered, weight, {p} AS p, {bin_of} AS b FROM {OUTCOMES_TABLE}) o "
        "GROUP BY tool, fact_kind, b"
    )


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
        with self._lock:
            ensure_tables(self.db)

    def counts(self, tool: str, fact_kind: str) -> tuple[Decimal, Decimal]:
        """(covered, total) outcome weight recorded for (tool, fact kind), in outcomes,
        from the running counts (one primary-key range of at most ten rows), never from
        the outcomes."""
        with self._lock:
            row = self.db.one(
                f"SELECT COALESCE(SUM(hit_weight), 0), COALESCE(SUM(weight), 0) "
                f"FROM {COUNTS_TABLE} WHERE tool = ? AND fact_kind = ?",
                (tool, fact_key(fact_kind)),
            ) or (0, 0)
        return (Decimal(cell_int(row[0])) / WEIGHT_SCALE, Decimal(cell_int(row[1])) / WEIGHT_SCALE)

    def non_deliveries(self, tool: str, fact_kind: str) -> int:
        """How often ``tool`` took the money for ``fact_kind`` and did not deliver (one
        primary-key read)."""
        with self._lock:
            found = self.db.scalar(
                f"SELECT n FROM {LOST_TABLE} WHERE tool = ? AND fact_kind = ?",
                [tool, fact_key(fact_kind)],
            )
        return 0 if found is None else cell_int(found)

    def p(self, tool: str, fact_kind: str, prior: Decimal | None = None) -> Decimal:
        """Posterior mean, quantised to 6 decimals: (a + hits) / (a + b + n)."""
        mean = self._default_prior if prior is None else _probability("prior", prior)
        hits, total = self.counts(tool, fact_kind)
        alpha = mean * self._strength + hits
        posterior = alpha / (self._strength + total)
        return posterior.quantize(P_QUANTUM, rounding=ROUND_HALF_EVEN)

    def record(
        self,
        tool: str,
        fact_kind: str,
        p_used: Decimal | str,
        covered: bool,
        *,
        weight: Decimal | int = 1,
        delivery: Delivery = "delivered",
    ) -> None:
        """Store one outcome and move its running counts, in one transaction.

        ``weight`` is how many pseudo-outcomes it counts for toward p (kept in whole
        thousandths); the report counts each outcome once, as the prediction it was. A
        ``paid-not-delivered`` outcome (the seller took the money for nothing) is counted
        per (tool, fact kind) too, and weighs what it is given, like any failure.
        """
        p = _probability("p_used", p_used)
        check_outcome(covered, delivery)
        thousandths = weight_thousandths(weight)
        kind = fact_key(fact_kind)
        lost = delivery == "paid-not-delivered"
        with self._lock, self.db.transaction(lock=LOCK) as tx:
            tx.execute(
                f"INSERT INTO {OUTCOMES_TABLE} (ts, tool, fact_kind, p_used, covered, weight, "
                "delivered) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (int(self._clock()), tool, kind, format(p, "f"), int(covered), thousandths,
                 int(not lost)),
            )
            tx.execute(_COUNT_SQL, _count_row(tool, kind, float(p), covered, thousandths))
            if lost:
                tx.execute(
                    f"INSERT INTO {LOST_TABLE} (tool, fact_kind, n) VALUES (?, ?, 1) "
                    f"ON CONFLICT (tool, fact_kind) DO UPDATE SET n = {LOST_TABLE}.n + 1",
                    (tool, kind),
                )

    def report(self, tool: str | None = None) -> CalibrationReport:
        """Brier score, ECE and reliability bins from the running counts (a row per tool,
        fact kind and bin): the figures a pass over every outcome gives, at any count."""
        sql = (
            f"SELECT bin, SUM(sum_p) AS sp, SUM(hits) AS sy, SUM(n) AS n, SUM(sum_sq) AS sq "
            f"FROM {COUNTS_TABLE}"
        )
        params: list[str] = []
        if tool is not None:
            sql += " WHERE tool = ?"
            params.append(tool)
        with self._lock:
            rows = self.db.query(sql + " GROUP BY bin", params)
        sums: list[BinSums] = [(0.0, 0.0, 0, 0.0)] * N_BINS
        for r in rows:
            sums[cell_int(r["bin"])] = (
                cell_float(r["sp"]),
                float(cell_int(r["sy"])),
                cell_int(r["n"]),
                cell_float(r["sq"]),
            )
        return report_from_bins(sums)


class FixedCalibrator:
    """Deterministic double: p is the declared prior (or ``p``); outcomes kept in memory."""

    def __init__(self, p: Decimal | None = None) -> None:
        self._p = None if p is None else _probability("p", p)
        self.outcomes: list[tuple[str, str, Decimal, bool]] = []
        self.lost: list[tuple[str, str]] = []

    def p(self, tool: str, fact_kind: str, prior: Decimal | None = None) -> Decimal:
        if self._p is not None:
            return self._p
        return DEFAULT_PRIOR if prior is None else _probability("prior", prior)

    def record(
        self,
        tool: str,
        fact_kind: str,
        p_used: Decimal | str,
        covered: bool,
        *,
        weight: Decimal | int = 1,
        delivery: Delivery = "delivered",
    ) -> None:
        check_outcome(covered, delivery)
        weight_thousandths(weight)
        self.outcomes.append((tool, fact_key(fact_kind), _probability("p_used", p_used), covered))
        if delivery != "delivered":
            self.lost.append((tool, fact_key(fact_kind)))

    def non_deliveries(self, tool: str, fact_kind: str) -> int:
        return self.lost.count((tool, fact_key(fact_kind)))

    def report(self, tool: str | None = None) -> CalibrationReport:
        return calibration_report(
            (p, c) for t, _, p, c in self.outcomes if tool is None or t == tool
        )
