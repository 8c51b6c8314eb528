"""The self-contained HTML report behind ``nib report --out FILE.html``.

Charts are inline SVG drawn here in Python. The file loads nothing from anywhere (its
Content-Security-Policy forbids it), so it can be mailed, archived and opened offline.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from agent.errors import AgentConfigError
from agent.result import DEPENDENCY_STOPS, FINISHED_STOPS, usdc_display

__all__ = [
    "CHART_IDS",
    "FAMILY_COLOURS",
    "ReportData",
    "StopFamily",
    "render_report",
    "run_from_store",
    "stop_family",
    "write_report",
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
class ReportData:
    """Everything one report shows; the CLI gathers it from the run store and the judge.

    ``runs``: mappings with ``run_id, task, stop_reason, finished, partial, steps,
    spend_usdc_atomic, gas_wei, tokens`` (int, or ``{input, output}``), ``elapsed_s``,
    ``started_at`` (unix seconds or ISO text) and ``events`` (``[{seq, type, data}]``);
    an optional ``spend_cap_atomic`` overrides the report-wide cap for that run. Charts
    order runs by ``started_at`` (input order when missing). ``calibration`` is what
    ``nib judge calibration --json`` prints: ``{n, brier, ece, bins: [{lo, hi, n, mean_p,
    rate}]}`` (``freq`` is read as ``rate``), or None when the judge has no outcomes yet.
    """

    runs: Sequence[Mapping[str, Any]]
    spend_cap_atomic: int
    calibration: Mapping[str, Any] | None = None
    generated_at: str = field(
        default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    )
    network: str = ""
    chain_id: int | None = None
    version: str = ""
    max_steps: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "runs", tuple(self.runs))
        _money(self.spend_cap_atomic, "spend_cap_atomic")


@dataclass(frozen=True)
class _Run:
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
    events: tuple[Mapping[str, Any], ...]


def run_from_store(
    row: Mapping[str, Any], events: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """One report run from a ``RunStore.runs()`` row (its ``result`` column holds the
    AgentResult JSON) and that run's ``RunStore.events()``; an unfinished run shows as
    ``running`` (or ``awaiting-approval`` when paused)."""
    result = json.loads(row["result"]) if row.get("result") else {}
    spend = result.get("spend") or {}
    status = str(row.get("status") or "")
    reason = row.get("stop_reason") or result.get("stop_reason")
    if not reason:
        reason = "awaiting-approval" if status == "paused" else "running"
    return {
        "run_id": row.get("run_id", result.get("run_id", "")),
        "task": row.get("task") or result.get("task", ""),
        "stop_reason": reason,
        "finished": bool(row.get("finished") or result.get("finished")),
        "partial": bool(result.get("partial", reason not in FINISHED_STOPS)),
        "steps": int(result.get("steps", 0)),
        "spend_usdc_atomic": int(spend.get("usdc_atomic", 0)),
        "gas_wei": int(spend.get("gas_wei", 0)),
        "tokens": result.get("tokens") or 0,
        "elapsed_s": float(result.get("elapsed_s", 0.0)),
        "started_at": row.get("started_at"),
        "events": [{"seq": e["seq"], "type": e["type"], "data": e["data"]} for e in events],
    }


def _money(value: Any, name: str) -> int:
    """Atomic money as int; a float would silently lose digits, so it is refused."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(
            f"{name} must be an int in atomic units, got {type(value).__name__} {value!r}; "
            "pass the stored integer (USDC has 6 decimals, gas is in wei), never a float"
        )
    return int(value)


def _tokens(value: Any) -> int:
    if isinstance(value, Mapping):
        return int(value.get("input", 0) or 0) + int(value.get("output", 0) or 0)
    return int(value or 0)


def _when(value: Any) -> tuple[float | None, str]:
    """(sort key, display text) for a unix time or ISO timestamp."""
    if value is None or value == "":
        return None, ""
    try:
        if isinstance(value, int | float):
            moment = datetime.fromtimestamp(float(value), UTC)
        else:
            moment = datetime.fromisoformat(str(value))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        return None, str(value)
    return moment.timestamp(), moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _normalise(data: ReportData) -> list[_Run]:
    keyed = []
    for index, raw in enumerate(data.runs):
        key, started = _when(raw.get("started_at"))
        keyed.append((key if key is not None else math.inf, index, raw, started))
    keyed.sort(key=lambda item: (item[0], item[1]))
    runs, anchors = [], set()
    for ordinal, (_, _, raw, started) in enumerate(keyed, start=1):
        run_id = str(raw.get("run_id", ""))
        anchor = "trace-" + (re.sub(r"[^A-Za-z0-9_-]", "-", run_id) or "run")
        if anchor in anchors:
            anchor = f"{anchor}-{ordinal}"
        anchors.add(anchor)
        reason = str(raw.get("stop_reason", "") or "unknown")
        cap = raw.get("spend_cap_atomic", data.spend_cap_atomic)
        runs.append(
            _Run(
                ordinal=ordinal,
                run_id=run_id,
                anchor=anchor,
                task=str(raw.get("task", "")),
                stop_reason=reason,
                family=stop_family(reason),
                partial=bool(raw.get("partial", reason not in FINISHED_STOPS)),
                steps=int(raw.get("steps", 0) or 0),
                spend=_money(raw.get("spend_usdc_atomic", 0), "spend_usdc_atomic"),
                gas_wei=_money(raw.get("gas_wei", 0), "gas_wei"),
                cap=_money(cap, "spend_cap_atomic"),
                tokens=_tokens(raw.get("tokens", 0)),
                elapsed_s=float(raw.get("elapsed_s", 0.0) or 0.0),
                started=started,
                events=tuple(raw.get("events") or ()),
            )
        )
    return runs


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _usdc(atomic: int) -> str:
    return usdc_display(atomic)


def _gwei(wei: int) -> str:
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
        f'aria-label="{_e(label)}" preserveAspectRatio="xMidYMid meet">'
        f"<title>{_e(label)}</title>{''.join(body)}</svg>"
    )


def _empty(chart_id: str, message: str) -> str:
    return f'<p class="empty" id="{chart_id}-empty">{message}</p>'


def _legend(items: Sequence[tuple[str, str]], y: float, x: float = 10) -> list[str]:
    out = []
    for colour, text in items:
        out.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{x + 14:.1f}" y="{y:.1f}" class="legend">{_e(text)}</text>')
        x += 24 + 6.6 * len(text)
    return out


def _chart_stop_reasons(runs: Sequence[_Run]) -> str:
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
            f'<g class="bar" data-reason="{_e(reason)}"><title>{_e(tip)}</title>'
            f'<text x="{left - 8}" y="{y + 17}" class="label" text-anchor="end">{_e(reason)}</text>'
            f'<rect x="{left}" y="{y + 4}" width="{width:.1f}" height="{row - 8}" rx="3" '
            f'fill="{colour}"/>'
            f'<text x="{left + width + 6:.1f}" y="{y + 17}" class="value">'
            f"{counts[reason]} · {share:.0f}%</text></g>"
        )
    families: Counter[str] = Counter(run.family for run in runs)
    legend = [(FAMILY_COLOURS[f], f"{f} {families[f]}") for f in order if families[f]]
    body += _legend(legend, height - 10)
    return _svg("chart-stop-reasons", height, "How runs ended: stop reasons", body)


def _run_bars(
    runs: Sequence[_Run],
    chart_id: str,
    label: str,
    value: Callable[[_Run], int],
    colour: Callable[[_Run], str],
    tip: Callable[[_Run], str],
    top_value: int,
    tick_text: Callable[[int], str],
    limit: tuple[int, str] | None,
    legend: Sequence[tuple[str, str]],
    unit: str,
    own_limit: Callable[[_Run], int | None] | None = None,
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
        f'text-anchor="middle">{_e(unit)}</text>'
    ]
    for tick in range(0, y_max + 1, step):
        y = y_of(tick)
        body.append(f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        body.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">'
            f"{_e(tick_text(tick))}</text>"
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
            f'<a href="#{run.anchor}"><g class="bar" data-run-id="{_e(run.run_id)}">'
            f"<title>{_e(tip(run))}</title>"
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
            f"{_e(limit[1])}</text>"
        )
    caption = f"run # (oldest → newest), last {len(shown)} of {len(runs)}"
    if len(shown) == len(runs):
        caption = "run # (oldest → newest)"
    body.append(
        f'<text x="{(left + right) / 2:.1f}" y="{top + plot_h + 32}" class="axis" '
        f'text-anchor="middle">{_e(caption)}</text>'
    )
    body += _legend(legend, height - 6)
    return _svg(chart_id, height, label, body)


def _chart_spend(runs: Sequence[_Run], cap: int) -> str:
    if not runs:
        return _empty("chart-spend", "No runs yet, so nothing spent.")

    def colour(run: _Run) -> str:
        if run.cap and run.spend >= run.cap:
            return _SPEND_COLOURS["at"]
        return _SPEND_COLOURS["near" if run.spend * 5 >= run.cap * 4 else "under"]

    def tip(run: _Run) -> str:
        share = Decimal(run.spend * 100) / Decimal(run.cap) if run.cap else Decimal(0)
        return (
            f"#{run.ordinal} {run.run_id}: {_usdc(run.spend)} of {_usdc(run.cap)} cap "
            f"({share:.0f}%), gas {_gwei(run.gas_wei)}"
        )

    shown = runs[-_MAX_CHART_RUNS:]
    top_value = max([cap, *(r.spend for r in shown), *(r.cap for r in shown)])
    legend = [
        (_SPEND_COLOURS["under"], "under 80% of cap"),
        (_SPEND_COLOURS["near"], "80% or more"),
        (_SPEND_COLOURS["at"], "at cap"),
    ]
    if any(r.cap != cap for r in shown):
        legend.append(("#b3261e", "short dash: the run's own cap"))
    return _run_bars(
        runs, "chart-spend", "USDC spend per run against the cap",
        value=lambda r: r.spend, colour=colour, tip=tip, top_value=top_value,
        tick_text=lambda t: _usdc(t).removesuffix(" USDC"),
        limit=(cap, f"cap {_usdc(cap)}") if cap else None, legend=legend, unit="USDC",
        own_limit=lambda r: r.cap if r.cap != cap else None,
    )  # fmt: skip


def _chart_steps(runs: Sequence[_Run], max_steps: int | None) -> str:
    if not runs:
        return _empty("chart-steps", "No runs yet, so no steps.")
    shown = runs[-_MAX_CHART_RUNS:]
    top_value = max([max_steps or 0, *(r.steps for r in shown)])
    families: Counter[str] = Counter(r.family for r in shown)
    legend = [(c, f) for f, c in FAMILY_COLOURS.items() if families[f]]
    return _run_bars(
        runs, "chart-steps", "Steps per run, coloured by how the run ended",
        value=lambda r: r.steps, colour=lambda r: FAMILY_COLOURS[r.family],
        tip=lambda r: f"#{r.ordinal} {r.run_id}: {r.steps} steps, {r.stop_reason}",
        top_value=top_value, tick_text=str,
        limit=(max_steps, f"max steps {max_steps}") if max_steps else None,
        legend=legend, unit="steps",
    )  # fmt: skip


def _metric(value: Any) -> str:
    if value is None or value == "":
        return "n/a"
    return f"{Decimal(str(value)):.3f}"


def _chart_reliability(calibration: Mapping[str, Any] | None) -> str:
    bins = [b for b in (calibration or {}).get("bins", []) if int(b.get("n", 0) or 0) > 0]
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
            f'<text x="{sx}" y="{sy}" class="stat-name">{_e(name)}</text>'
            f'<text x="{sx}" y="{sy + 26}" class="stat">{_e(val)}</text>'
        )
    body.append(
        f'<text x="{sx}" y="{top + 200}" class="legend">dashed: perfect calibration</text>'
        f'<text x="{sx}" y="{top + 216}" class="legend">dot size, bars: outcomes per bin</text>'
        f'<text x="{sx}" y="{top + 232}" class="legend">lower Brier and ECE are better</text>'
    )
    return _svg("chart-reliability", height, "Judge reliability diagram", body)


def _event_summary(data: Any, limit: int = 240) -> str:
    if isinstance(data, Mapping):
        parts = []
        for key, value in data.items():
            shown = value if isinstance(value, str) else json.dumps(value, default=str)
            parts.append(f"{key}={shown}")
        text = ", ".join(parts)
    else:
        text = json.dumps(data, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _trace(run: _Run) -> str:
    items = []
    for event in run.events:
        kind = str(event.get("type", ""))
        css = re.sub(r"[^a-z]", "", kind.split(".")[0].lower()) or "other"
        data = event.get("data", {})
        full = json.dumps(data, indent=2, sort_keys=True, default=str)
        summary = _event_summary(data)
        detail = ""
        if len(full) > len(summary) + 40:
            detail = f"<details><summary>data</summary><pre>{_e(full)}</pre></details>"
        items.append(
            f'<li class="event ev-{css}"><span class="seq">{_e(event.get("seq", ""))}</span>'
            f'<span class="type">{_e(kind)}</span><span class="data">{_e(summary)}</span>'
            f"{detail}</li>"
        )
    timeline = (
        f'<ol class="timeline">{"".join(items)}</ol>'
        if items
        else '<p class="empty">No events recorded for this run.</p>'
    )
    return (
        f'<section class="trace" id="{run.anchor}"><h3>#{run.ordinal} '
        f"<code>{_e(run.run_id)}</code> {_badge(run)}</h3>"
        f'<p class="task">{_e(run.task)}</p>'
        f'<p class="meta">{run.steps} steps · {_e(_usdc(run.spend))} · '
        f"gas {_gwei(run.gas_wei)} · "
        f"{run.tokens:,} tokens · {run.elapsed_s:.1f} s"
        f'{" · partial answer" if run.partial else ""} · <a href="#runs">back to runs</a></p>'
        f"{timeline}</section>"
    )


def _badge(run: _Run) -> str:
    return (
        f'<span class="badge" data-family="{run.family}" '
        f'style="background:{FAMILY_COLOURS[run.family]}">{_e(run.stop_reason)}</span>'
    )


def _table(runs: Sequence[_Run]) -> str:
    if not runs:
        return '<p class="empty" id="runs-empty">No runs recorded yet.</p>'
    rows = []
    for run in reversed(runs):
        rows.append(
            f'<tr class="run-row" data-run-id="{_e(run.run_id)}">'
            f"<td>#{run.ordinal}</td>"
            f'<td><a href="#{run.anchor}"><code>{_e(run.run_id)}</code></a></td>'
            f"<td>{_e(run.started)}</td>"
            f'<td class="task" title="{_e(run.task)}">{_e(run.task)}</td>'
            f"<td>{_badge(run)}</td>"
            f'<td class="num">{run.steps}</td>'
            f'<td class="num" title="gas {_gwei(run.gas_wei)}">{_e(_usdc(run.spend))}</td>'
            f'<td class="num">{run.tokens:,}</td>'
            f'<td class="num">{run.elapsed_s:.1f} s</td></tr>'
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("#", "run", "started", "task", "stop reason", "steps", "spend", "tokens",
                  "elapsed")
    )  # fmt: skip
    return (
        f'<table id="runs-table"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _summary(runs: Sequence[_Run], data: ReportData) -> str:
    finished = sum(1 for r in runs if r.family == "finished")
    spend = sum(r.spend for r in runs)
    steps = sorted(r.steps for r in runs)
    median = steps[len(steps) // 2] if steps else 0
    tiles = [
        ("runs", str(len(runs))),
        ("finished", f"{finished} of {len(runs)}"),
        ("total spend", _usdc(spend)),
        ("gas", _gwei(sum(r.gas_wei for r in runs))),
        ("tokens", f"{sum(r.tokens for r in runs):,}"),
        ("median steps", str(median)),
        ("spend cap", _usdc(data.spend_cap_atomic)),
    ]
    return '<div class="tiles">' + "".join(
        f'<div class="tile"><div class="k">{_e(k)}</div><div class="v">{_e(v)}</div></div>'
        for k, v in tiles
    ) + "</div>"  # fmt: skip


# Records each chart's drawn box (page pixels) on the <svg>, so a headless browser check
# can crop the screenshot to it. Allowed by hash in the CSP; no other script can run.
_SCRIPT = (
    'document.querySelectorAll("svg.chart").forEach(function(s){'
    "var r=s.getBoundingClientRect();"
    's.setAttribute("data-box",[r.left+scrollX,r.top+scrollY,r.width,r.height]'
    '.map(Math.round).join(","));});'
)

_CSS = """
:root{--ink:#1d2430;--muted:#667085;--line:#e4e7ec;--bg:#f6f7f9;--card:#fff}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
 font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
main{max-width:1200px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:17px;margin:0 0 10px}h3{font-size:15px;margin:0}
.sub{color:var(--muted);margin:0 0 18px}
.tiles{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:18px}
.tile{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:8px 14px}
.tile .k{color:var(--muted);font-size:12px}.tile .v{font-size:18px;font-weight:600}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:16px;margin-bottom:20px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:14px 16px}
svg.chart{width:100%;height:auto;display:block}
svg text{font-family:inherit;fill:var(--ink)}
.label{font-size:12px}.value{font-size:12px;fill:var(--muted)}.tick{font-size:10px;fill:#667085}
.axis{font-size:11px;fill:#667085}.legend{font-size:11px}
.grid{stroke:#eef0f3;stroke-width:1}.plot{fill:#fbfbfc;stroke:#d0d5dd}
.limit{stroke:#b3261e;stroke-width:2;stroke-dasharray:6 4}
svg text.limit-label{font-size:11px;font-weight:600;fill:#b3261e;
 paint-order:stroke;stroke:#fff;stroke-width:3px}
.diagonal{stroke:#98a2b3;stroke-width:1.5;stroke-dasharray:5 4}
.curve{fill:none;stroke:#3a86c8;stroke-width:2}.dot{fill:#3a86c8;stroke:#fff;stroke-width:1.5}
.gap{stroke:#d64545;stroke-width:1.5}.hist{fill:#b9d3ea}
.stat-name{font-size:12px;fill:#667085}.stat{font-size:22px;font-weight:600}
.bar:hover rect{opacity:.8}
.empty{color:var(--muted);font-style:italic;padding:24px 8px;margin:0}
table{width:100%;border-collapse:collapse;background:var(--card);border:1px solid var(--line)}
th,td{padding:6px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-size:12px;color:var(--muted);font-weight:600;background:#fafbfc}
td.num{text-align:right;white-space:nowrap}
td.task{max-width:360px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.badge{color:#fff;border-radius:10px;padding:1px 8px;font-size:12px;white-space:nowrap}
a{color:#2760a8;text-decoration:none}a:hover{text-decoration:underline}
.trace{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 16px;
 margin:14px 0}
.trace .task{margin:6px 0;font-weight:500}.trace .meta{color:var(--muted);margin:0 0 8px}
.timeline{list-style:none;margin:0;padding:0 0 0 14px;border-left:2px solid var(--line)}
.event{position:relative;padding:3px 0 3px 10px;font-size:13px}
.event:before{content:"";position:absolute;left:-20px;top:9px;width:10px;height:10px;
 border-radius:50%;background:#98a2b3}
.ev-tool:before{background:#4a90c2}.ev-judge:before{background:#7a5cc7}
.ev-wallet:before{background:#1f9d6b}.ev-run:before{background:#e3a21a}
.ev-model:before{background:#667085}
.seq{color:var(--muted);display:inline-block;min-width:2.5em}
.type{font-family:ui-monospace,monospace;font-weight:600;margin-right:8px}
.data{color:#344054;word-break:break-word}
pre{background:#f2f4f7;padding:8px;border-radius:6px;overflow:auto;font-size:12px}
@media (max-width:900px){.grid2{grid-template-columns:1fr}}
"""


def render_report(data: ReportData) -> str:
    """The whole report as one HTML document (inline CSS and SVG, nothing fetched)."""
    runs = _normalise(data)
    script_hash = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{script_hash}'; base-uri 'none'; form-action 'none'"
    )
    where = [p for p in (data.network, f"chain {data.chain_id}" if data.chain_id else "") if p]
    sub = " · ".join(
        [
            f"generated {data.generated_at}",
            *where,
            *([f"nib {data.version}"] if data.version else []),
        ]
    )
    cards = [
        ("How runs ended", _chart_stop_reasons(runs)),
        ("Spend per run against the cap", _chart_spend(runs, data.spend_cap_atomic)),
        ("Steps per run", _chart_steps(runs, data.max_steps)),
        ("Judge reliability (predicted p vs observed)", _chart_reliability(data.calibration)),
    ]
    charts = "".join(f'<div class="card"><h2>{_e(t)}</h2>{c}</div>' for t, c in cards)
    traces = "".join(_trace(run) for run in reversed(runs))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>nib report</title><style>{_CSS}</style></head><body><main>"
        f'<h1>nib report</h1><p class="sub">{_e(sub)}</p>'
        f"{_summary(runs, data)}"
        f'<div class="grid2">{charts}</div>'
        f'<h2 id="runs">Recent runs</h2>{_table(runs)}'
        f'<h2 id="traces" style="margin-top:22px">Traces</h2>{traces}'
        f"</main><script>{_SCRIPT}</script></body></html>\n"
    )


def write_report(path: str | os.PathLike[str], data: ReportData) -> Path:
    """Render and write the report atomically (temp file + rename); returns the path."""
    target = Path(path)
    if not target.parent.is_dir():
        raise AgentConfigError(
            f"cannot write the report to {target}: folder {target.parent} does not exist; "
            "expected an existing folder. Fix: create it or pass --out in an existing folder",
            source="--out",
        )
    document = render_report(data)
    fd, tmp = tempfile.mkstemp(prefix=".nib-report-", suffix=".html", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(document)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    os.chmod(target, 0o644)
    return target
