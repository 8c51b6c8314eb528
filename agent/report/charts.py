"""The report's charts: inline SVG drawn in Python, one function per chart.

No chart library and nothing fetched: each function turns the report's runs (or the
judge's calibration) into one ``<svg>`` with a stable id the render test looks for.
"""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from agent.loop.result import DEPENDENCY_STOPS, FINISHED_STOPS
from chain.money import format_usdc

__all__ = [
    "CHART_IDS",
    "FAMILY_COLOURS",
    "ChartRun",
    "StopFamily",
    "chart_reliability",
    "chart_spend",
    "chart_steps",
    "chart_stop_reasons",
    "esc",
    "gwei_label",
    "stop_family",
]

StopFamily = Literal["finished", "guard", "budget", "dependency", "paused"]
"""How a run ended, coarsely: ``finished`` (a finish stop), ``guard`` (a progress or
safety detector stopped it), ``budget`` (a hard envelope), ``dependency`` (model, judge
or chain silent), ``paused`` (waiting for, or denied by, a human; or still running)."""

_BUDGET_STOPS = frozenset({"max-steps", "deadline", "cost-budget", "token-budget"})
_HUMAN_STOPS = frozenset({"awaiting-approval", "approval-denied", "running"})

FAMILY_COLOURS: dict[str, str] = {
    "finished": "#1f9d6b",
    "guard": "#e3a21a",
    "budget": "#d64545",
    "dependency": "#7a5cc7",
    "paused": "#3a86c8",
}
_SPEND_COLOURS = {"under": "#4a90c2", "near": "#e3a21a", "at": "#d64545"}

#: The ``id`` of each chart's ``<svg>``; an empty chart is a ``<p id="{id}-empty">``.
CHART_IDS = ("chart-stop-reasons", "chart-spend", "chart-steps", "chart-reliability")

#: Bar charts show the most recent runs only; the table and traces show every run given.
_MAX_CHART_RUNS = 40
_W = 560  # every chart's viewBox width; CSS scales it to the card


def stop_family(reason: str) -> StopFamily:
    """The family a stop reason belongs to (unknown reasons count as ``guard``)."""
    if reason in FINISHED_STOPS:
        return "finished"
    if reason in _BUDGET_STOPS:
        return "budget"
    if reason in DEPENDENCY_STOPS:
        return "dependency"
    if reason in _HUMAN_STOPS:
        return "paused"
    return "guard"


@dataclass(frozen=True)
class ChartRun:
    ordinal: int  # 1 = oldest run in the report
    run_id: str
    anchor: str
    task: str
    stop_reason: str
    family: StopFamily
    partial: bool
    steps: int
    spend: int
    gas_wei: int
    cap: int
    tokens: int
    elapsed_s: float
    started: str
    events: tuple[Mapping[str, object], ...]
    #: The answer's grade and its lines as (grade, text): observed, derived, asserted, ...
    provenance: str = "none"
    lines: tuple[tuple[str, str], ...] = ()
    #: The run's own step limit (None: not recorded), and its status (agent.store.RunStatus).
    max_steps: int | None = None
    status: str = "stopped"


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def gwei_label(wei: int) -> str:
    return f"{Decimal(wei).scaleb(-9).normalize():f} gwei"


def _nice_step(span: int, target: int = 4) -> int:
    """Smallest 1/2/5 x 10^k integer step that covers ``span`` in ``target`` ticks."""
    magnitude = 1
    while True:
        for mult in (1, 2, 5):
            if mult * magnitude * target >= span:
                return mult * magnitude
        magnitude *= 10


def _svg(chart_id: str, height: int, label: str, body: Iterable[str]) -> str:
    return (
        f'<svg id="{chart_id}" class="chart" viewBox="0 0 {_W} {height}" role="img" '
        f'aria-label="{esc(label)}" preserveAspectRatio="xMidYMid meet">'
        f"<title>{esc(label)}</title>{''.join(body)}</svg>"
    )


def _empty(chart_id: str, message: str) -> str:
    return f'<p class="empty" id="{chart_id}-empty">{message}</p>'


def _legend(items: Sequence[tuple[str, str]], y: float, x: float = 10) -> list[str]:
    out = []
    for colour, text in items:
        out.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{x + 14:.1f}" y="{y:.1f}" class="legend">{esc(text)}</text>')
        x += 24 + 6.6 * len(text)
    return out


def chart_stop_reasons(runs: Sequence[ChartRun]) -> str:
    if not runs:
        return _empty("chart-stop-reasons", 'No runs yet. Run <code>nib run "TASK"</code>.')
    counts = Counter(run.stop_reason for run in runs)
    order = list(FAMILY_COLOURS)
    reasons = sorted(counts, key=lambda r: (-counts[r], order.index(stop_family(r)), r))
    row, left, right = 26, 150, _W - 90
    top = 8
    height = top + row * len(reasons) + 34
    most = max(counts.values())
    body = []
    for i, reason in enumerate(reasons):
        y = top + i * row
        width = max(2.0, (right - left) * counts[reason] / most)
        share = Decimal(counts[reason] * 100) / Decimal(len(runs))
        colour = FAMILY_COLOURS[stop_family(reason)]
        tip = f"{reason}: {counts[reason]} of {len(runs)} runs ({share:.0f}%)"
        body.append(
            f'<g class="bar" data-reason="{esc(reason)}"><title>{esc(tip)}</title>'
            f'<text x="{left - 8}" y="{y + 17}" class="label" text-anchor="end">{esc(reason)}</text>'
            f'<rect x="{left}" y="{y + 4}" width="{width:.1f}" height="{row - 8}" rx="3" '
            f'fill="{colour}"/>'
            f'<text x="{left + width + 6:.1f}" y="{y + 17}" class="value">'
            f"{counts[reason]} · {share:.0f}%</text></g>"
        )
    families: Counter[str] = Counter(run.family for run in runs)
    legend = [(FAMILY_COLOURS[f], f"{f} {families[f]}") for f in order if families[f]]
    body += _legend(legend, height - 10)
    return _svg("chart-stop-reasons", height, "How runs ended: stop reasons", body)


# Long by design: one SVG drawn top to bottom (axes, bars, labels, legend); the
# pieces share the scale computed at the top.
def _run_bars(
    runs: Sequence[ChartRun],
    chart_id: str,
    label: str,
    value: Callable[[ChartRun], int],
    colour: Callable[[ChartRun], str],
    tip: Callable[[ChartRun], str],
    top_value: int,
    tick_text: Callable[[int], str],
    limit: tuple[int, str] | None,
    legend: Sequence[tuple[str, str]],
    unit: str,
    own_limit: Callable[[ChartRun], int | None] | None = None,
) -> str:
    """Vertical bars, one per run (oldest left), with integer ticks and an optional limit line."""
    shown = runs[-_MAX_CHART_RUNS:]
    left, right, top, plot_h = 78, _W - 12, 14, 190
    height = top + plot_h + 54
    step = _nice_step(max(top_value, 1))
    y_max = step * math.ceil(max(top_value, 1) / step)
    if y_max == top_value and limit is not None:
        y_max += step  # keep the limit line clear of the top edge

    def y_of(v: int) -> float:
        return top + plot_h - plot_h * v / y_max

    body = [
        f'<text transform="translate(14 {top + plot_h / 2}) rotate(-90)" class="axis" '
        f'text-anchor="middle">{esc(unit)}</text>'
    ]
    for tick in range(0, y_max + 1, step):
        y = y_of(tick)
        body.append(f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        body.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">'
            f"{esc(tick_text(tick))}</text>"
        )
    slot = (right - left) / len(shown)
    bar_w = max(2.0, min(34.0, slot * 0.7))
    every = max(1, math.ceil(len(shown) / 12))
    for i, run in enumerate(shown):
        x = left + slot * i + (slot - bar_w) / 2
        v = value(run)
        y = y_of(v)
        h = max(1.5, top + plot_h - y)
        body.append(
            f'<a href="#{run.anchor}"><g class="bar" data-run-id="{esc(run.run_id)}">'
            f"<title>{esc(tip(run))}</title>"
            f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
            f'rx="2" fill="{colour(run)}"/></g></a>'
        )
        own = own_limit(run) if own_limit else None
        if own is not None:
            oy = y_of(own)
            body.append(
                f'<line x1="{x - 3:.1f}" x2="{x + bar_w + 3:.1f}" y1="{oy:.1f}" y2="{oy:.1f}" '
                'class="limit own-limit"/>'
            )
        if i % every == 0 or i == len(shown) - 1:
            body.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h + 15}" class="tick" '
                f'text-anchor="middle">#{run.ordinal}</text>'
            )
    if limit is not None:
        y = y_of(limit[0])
        body.append(
            f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" class="limit"/>'
            f'<text x="{right}" y="{y - 5:.1f}" class="limit-label" text-anchor="end">'
            f"{esc(limit[1])}</text>"
        )
    caption = f"run # (oldest → newest), last {len(shown)} of {len(runs)}"
    if len(shown) == len(runs):
        caption = "run # (oldest → newest)"
    body.append(
        f'<text x="{(left + right) / 2:.1f}" y="{top + plot_h + 32}" class="axis" '
        f'text-anchor="middle">{esc(caption)}</text>'
    )
    body += _legend(legend, height - 6)
    return _svg(chart_id, height, label, body)


def chart_spend(runs: Sequence[ChartRun], cap: int) -> str:
    if not runs:
        return _empty("chart-spend", "No runs yet, so nothing spent.")

    def colour(run: ChartRun) -> str:
        if run.cap and run.spend >= run.cap:
            return _SPEND_COLOURS["at"]
        return _SPEND_COLOURS["near" if run.spend * 5 >= run.cap * 4 else "under"]

    def tip(run: ChartRun) -> str:
        share = Decimal(run.spend * 100) / Decimal(run.cap) if run.cap else Decimal(0)
        return (
            f"#{run.ordinal} {run.run_id}: {format_usdc(run.spend)} of {format_usdc(run.cap)} cap "
            f"({share:.0f}%), gas {gwei_label(run.gas_wei)}"
        )

    shown = runs[-_MAX_CHART_RUNS:]
    # One line across the chart only when every run shown had that cap; else each bar
    # carries its own run's cap (a 10 USDC run is not drawn against a 1 USDC line).
    caps = {r.cap for r in shown}
    common = caps.pop() if len(caps) == 1 else None
    top_value = max([*(r.spend for r in shown), *(r.cap for r in shown)])
    legend = [
        (_SPEND_COLOURS["under"], "under 80% of its cap"),
        (_SPEND_COLOURS["near"], "80% or more"),
        (_SPEND_COLOURS["at"], "at cap"),
    ]
    if common is None:
        legend.append(("#b3261e", "short dash: the run's own cap"))
    return _run_bars(
        runs, "chart-spend", "USDC spend per run against its cap",
        value=lambda r: r.spend, colour=colour, tip=tip, top_value=top_value,
        tick_text=lambda t: format_usdc(t).removesuffix(" USDC"),
        limit=(common, f"cap {format_usdc(common)}") if common else None, legend=legend,
        unit="USDC", own_limit=None if common is not None else (lambda r: r.cap),
    )  # fmt: skip


def chart_steps(runs: Sequence[ChartRun], max_steps: int | None) -> str:
    if not runs:
        return _empty("chart-steps", "No runs yet, so no steps.")
    shown = runs[-_MAX_CHART_RUNS:]
    # Each run's own step limit (its profile or --max-steps), as for the spend cap.
    own = {r.max_steps or max_steps for r in shown}
    common = own.pop() if len(own) == 1 else None
    top_value = max([*(r.max_steps or max_steps or 0 for r in shown), *(r.steps for r in shown)])
    families: Counter[str] = Counter(r.family for r in shown)
    legend = [(c, f) for f, c in FAMILY_COLOURS.items() if families[f]]
    if common is None:
        legend.append(("#b3261e", "dash: its own limit"))
    return _run_bars(
        runs, "chart-steps", "Steps per run, coloured by how the run ended",
        value=lambda r: r.steps, colour=lambda r: FAMILY_COLOURS[r.family],
        tip=lambda r: f"#{r.ordinal} {r.run_id}: {r.steps} of {r.max_steps or max_steps or '?'} "
                      f"steps, {r.stop_reason}",
        top_value=top_value, tick_text=str,
        limit=(common, f"max steps {common}") if common else None,
        legend=legend, unit="steps",
        own_limit=None if common is not None else (lambda r: r.max_steps or max_steps),
    )  # fmt: skip


def _metric(value: object) -> str:
    if value is None or value == "":
        return "n/a"
    return f"{Decimal(str(value)):.3f}"


# Long by design: one SVG drawn top to bottom (axes, bars, labels, legend); the
# pieces share the scale computed at the top.
def chart_reliability(calibration: Mapping[str, object] | None) -> str:
    listed = (calibration or {}).get("bins", [])
    bins = [b for b in listed if isinstance(b, Mapping) and int(b.get("n", 0) or 0) > 0] \
        if isinstance(listed, list) else []
    if not calibration or not bins:
        return _empty(
            "chart-reliability",
            "No judged outcomes yet. The judge calibrates once paid calls record "
            "whether they covered a missing checklist item.",
        )
    left, top, size = 56, 16, 250
    hist_h = 40
    hist_top = top + size + 54
    height = hist_top + hist_h + 6

    def px(p: float) -> float:
        return left + size * min(max(p, 0.0), 1.0)

    def py(p: float) -> float:
        return top + size - size * min(max(p, 0.0), 1.0)

    body = [f'<rect x="{left}" y="{top}" width="{size}" height="{size}" class="plot"/>']
    for i in range(6):
        t = i / 5
        body.append(
            f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{top}" y2="{top + size}" class="grid"/>'
            f'<line x1="{left}" x2="{left + size}" y1="{py(t):.1f}" y2="{py(t):.1f}" class="grid"/>'
            f'<text x="{px(t):.1f}" y="{top + size + 14}" class="tick" text-anchor="middle">'
            f"{t:.1f}</text>"
            f'<text x="{left - 6}" y="{py(t) + 4:.1f}" class="tick" text-anchor="end">'
            f"{t:.1f}</text>"
        )
    body.append(
        f'<line x1="{px(0)}" y1="{py(0)}" x2="{px(1)}" y2="{py(1)}" class="diagonal"/>'
        f'<text x="{left + size / 2}" y="{top + size + 30}" class="axis" text-anchor="middle">'
        "predicted p</text>"
        f'<text transform="translate(16 {top + size / 2}) rotate(-90)" class="axis" '
        'text-anchor="middle">observed rate</text>'
    )
    most = max(int(b["n"]) for b in bins)
    points = []
    for b in bins:
        n, p, rate = int(b["n"]), float(b["mean_p"]), float(b.get("rate", b.get("freq")))
        lo, hi = float(b.get("lo", p)), float(b.get("hi", p))
        points.append(f"{px(p):.1f},{py(rate):.1f}")
        bar_h = max(1.5, hist_h * n / most)
        body.append(
            f'<g class="bin"><title>p {lo:.2f}–{hi:.2f}: n={n}, mean p {p:.3f}, '
            f"observed {rate:.3f}</title>"
            f'<line x1="{px(p):.1f}" x2="{px(p):.1f}" y1="{py(p):.1f}" y2="{py(rate):.1f}" '
            'class="gap"/>'
            f'<rect x="{px(lo) + 1:.1f}" y="{hist_top + hist_h - bar_h:.1f}" '
            f'width="{max(1.0, px(hi) - px(lo) - 2):.1f}" height="{bar_h:.1f}" class="hist"/>'
            f'<text x="{(px(lo) + px(hi)) / 2:.1f}" y="{hist_top + hist_h - bar_h - 3:.1f}" '
            f'class="tick" text-anchor="middle">{n}</text></g>'
        )
    body.append(f'<polyline points="{" ".join(points)}" class="curve"/>')
    for b, point in zip(bins, points, strict=True):
        radius = 3 + 6 * math.sqrt(int(b["n"]) / most)
        x, y = point.split(",")
        body.append(f'<circle cx="{x}" cy="{y}" r="{radius:.1f}" class="dot"/>')
    sx = left + size + 30
    stats = [
        ("outcomes", str(calibration.get("n", sum(int(b["n"]) for b in bins)))),
        ("Brier", _metric(calibration.get("brier"))),
        ("ECE", _metric(calibration.get("ece"))),
    ]
    for i, (name, val) in enumerate(stats):
        sy = top + 30 + i * 52
        body.append(
            f'<text x="{sx}" y="{sy}" class="stat-name">{esc(name)}</text>'
            f'<text x="{sx}" y="{sy + 26}" class="stat">{esc(val)}</text>'
        )
    body.append(
        f'<text x="{sx}" y="{top + 200}" class="legend">dashed: perfect calibration</text>'
        f'<text x="{sx}" y="{top + 216}" class="legend">dot size, bars: outcomes per bin</text>'
        f'<text x="{sx}" y="{top + 232}" class="legend">lower Brier and ECE are better</text>'
    )
    return _svg("chart-reliability", height, "Judge reliability diagram", body)
