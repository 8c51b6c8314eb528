"""The self-contained HTML report behind ``nib report --out FILE.html``.

Charts are inline SVG drawn here in Python. The file loads nothing from anywhere (its
Content-Security-Policy forbids it), so it can be mailed, archived and opened offline.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from agent.errors import AgentConfigError
from agent.jsonvalues import as_float as _float
from agent.jsonvalues import as_int as _int
from agent.jsonvalues import as_list as _listed
from agent.loop.history import one_line
from agent.loop.result import FINISHED_STOPS
from agent.report.charts import (
    CHART_IDS,
    FAMILY_COLOURS,
    ChartRun,
    StopFamily,
    chart_reliability,
    chart_spend,
    chart_steps,
    chart_stop_reasons,
    esc,
    gwei_label,
    stop_family,
)
from agent.report.spend import LedgerSpend, reported_spend
from chain.money import format_usdc

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

    runs: Sequence[Mapping[str, object]]
    spend_cap_atomic: int
    calibration: Mapping[str, object] | None = None
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


def run_from_store(
    row: Mapping[str, object], events: Sequence[Mapping[str, object]] = (),
    ledger: LedgerSpend | None = None,
) -> dict[str, object]:
    """One report run from a ``RunStore.runs()`` row (its ``result`` column holds the
    AgentResult JSON) and that run's ``RunStore.events()``; an unfinished run shows as
    ``running`` (or ``awaiting-approval`` when paused). ``ledger``: what the ledger holds
    of the run (agent.report.spend), reported in place of the stored spend."""
    # Deferred: agent.store (the wallet package and web3 with it) costs ~680 ms to import
    # after this module (min of 3 runs, 2 busy cores); only a report from the store needs it.
    from agent.store import run_status

    stored = row.get("result")
    result = json.loads(stored if isinstance(stored, str | bytes) and stored else "{}")
    stored_spend = result.get("spend") or {}
    spend = reported_spend(stored_spend, ledger) if ledger is not None else stored_spend
    status = run_status(dict(row))
    reason = row.get("stop_reason") or result.get("stop_reason")
    if not reason:
        reason = "awaiting-approval" if status == "paused" else "running"
    return {
        "status": status,
        **_own_limits(events),
        "run_id": row.get("run_id", result.get("run_id", "")),
        "task": row.get("task") or result.get("task", ""),
        "stop_reason": reason,
        "finished": bool(row.get("finished") or result.get("finished")),
        "partial": bool(result.get("partial", reason not in FINISHED_STOPS)),
        "steps": int(result.get("steps", 0)),
        "spend_usdc_atomic": _int(spend.get("usdc_atomic", 0)),
        "gas_wei": _int(spend.get("gas_wei", 0)),
        "tokens": result.get("tokens") or 0,
        "elapsed_s": float(result.get("elapsed_s", 0.0)),
        "started_at": row.get("started_at"),
        "events": [{"seq": e["seq"], "type": e["type"], "data": e["data"]} for e in events],
        "provenance": result.get("provenance", "none"),
        "lines": [(str(x.get("grade")), str(x.get("text"))) for x in result.get("lines") or ()],
    }


def _own_limits(events: Sequence[Mapping[str, object]]) -> dict[str, int]:
    """The run's own spend cap and step limit, as its ``run.start`` event recorded them
    (each run may have its own --max-spend and --max-steps)."""
    for event in events:
        if event.get("type") != "run.start":
            continue
        stored = event.get("data")
        data = json.loads(stored) if isinstance(stored, str) else stored
        limits = (data.get("limits") if isinstance(data, Mapping) else None) or {}
        # Runs recorded before the rename stored the cap as spend_cap_usdc (limits.RENAMED).
        cap = limits.get("spend_cap_atomic", limits.get("spend_cap_usdc"))
        own = {"spend_cap_atomic": cap, "max_steps": limits.get("max_steps")}
        return {k: int(v) for k, v in own.items() if isinstance(v, int) and not isinstance(v, bool)}
    return {}


def _money(value: object, name: str) -> int:
    """Atomic money as int; a float would silently lose digits, so it is refused."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(
            f"{name} must be an int in atomic units, got {type(value).__name__} {value!r}; "
            "pass the stored integer (USDC has 6 decimals, gas is in wei), never a float"
        )
    return int(value)


def _tokens(value: object) -> int:
    if isinstance(value, Mapping):
        return int(value.get("input", 0) or 0) + int(value.get("output", 0) or 0)
    return _int(value or 0)


def _when(value: object) -> tuple[float | None, str]:
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


def _normalise(data: ReportData) -> list[ChartRun]:
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
        max_steps = raw.get("max_steps", data.max_steps)
        runs.append(
            ChartRun(
                ordinal=ordinal,
                run_id=run_id,
                anchor=anchor,
                task=str(raw.get("task", "")),
                stop_reason=reason,
                family=stop_family(reason),
                partial=bool(raw.get("partial", reason not in FINISHED_STOPS)),
                steps=_int(raw.get("steps", 0) or 0),
                spend=_money(raw.get("spend_usdc_atomic", 0), "spend_usdc_atomic"),
                gas_wei=_money(raw.get("gas_wei", 0), "gas_wei"),
                cap=_money(cap, "spend_cap_atomic"),
                max_steps=_int(max_steps) if max_steps else None,
                status=str(raw.get("status") or ("finished" if stop_family(reason) == "finished"
                                                 else "stopped")),
                tokens=_tokens(raw.get("tokens", 0)),
                elapsed_s=_float(raw.get("elapsed_s", 0.0) or 0.0),
                started=started,
                events=tuple(e for e in _listed(raw.get("events")) if isinstance(e, Mapping)),
                provenance=str(raw.get("provenance") or "none"),
                lines=tuple((str(g), str(t)) for g, t in _pairs(raw.get("lines"))),
            )
        )
    return runs


def _pairs(value: object) -> list[tuple[object, object]]:
    """A JSON array of (grade, text) pairs; a malformed pair is refused."""
    pairs: list[tuple[object, object]] = []
    for item in _listed(value):
        if not isinstance(item, list | tuple) or len(item) != 2:
            raise ValueError(f"expected a (grade, text) pair, found {item!r}")
        pairs.append((item[0], item[1]))
    return pairs


def _event_summary(data: object, limit: int = 240) -> str:
    if isinstance(data, Mapping):
        parts = []
        for key, value in data.items():
            shown = value if isinstance(value, str) else json.dumps(value, default=str)
            parts.append(f"{key}={shown}")
        text = ", ".join(parts)
    else:
        text = json.dumps(data, default=str)
    return one_line(text, limit)


def _trace(run: ChartRun) -> str:
    items = []
    for event in run.events:
        kind = str(event.get("type", ""))
        css = re.sub(r"[^a-z]", "", kind.split(".")[0].lower()) or "other"
        data = event.get("data", {})
        full = json.dumps(data, indent=2, sort_keys=True, default=str)
        summary = _event_summary(data)
        detail = ""
        if len(full) > len(summary) + 40:
            detail = f"<details><summary>data</summary><pre>{esc(full)}</pre></details>"
        items.append(
            f'<li class="event ev-{css}"><span class="seq">{esc(event.get("seq", ""))}</span>'
            f'<span class="type">{esc(kind)}</span><span class="data">{esc(summary)}</span>'
            f"{detail}</li>"
        )
    timeline = (
        f'<ol class="timeline">{"".join(items)}</ol>'
        if items
        else '<p class="empty">No events recorded for this run.</p>'
    )
    return (
        f'<section class="trace" id="{run.anchor}"><h3>#{run.ordinal} '
        f"<code>{esc(run.run_id)}</code> {_badge(run)}</h3>"
        f'<p class="task">{esc(run.task)}</p>'
        f'<p class="meta">{run.steps} steps · {esc(format_usdc(run.spend))} · '
        f"gas {gwei_label(run.gas_wei)} · "
        f"{run.tokens:,} tokens · {run.elapsed_s:.1f} s"
        f'{" · partial answer" if run.partial else ""} · answer provenance '
        f'<b class="provenance">{esc(run.provenance)}</b> · <a href="#runs">back to runs</a></p>'
        f"{_answer_lines(run)}{timeline}</section>"
    )


def _answer_lines(run: ChartRun) -> str:
    """The answer, one row per line with its provenance grade."""
    if not run.lines:
        return ""
    rows = "".join(
        f'<li data-grade="{esc(grade)}"><b>{esc(grade)}</b> {esc(text)}</li>'
        for grade, text in run.lines
    )
    return f'<ul class="answer-lines">{rows}</ul>'


def _badge(run: ChartRun) -> str:
    return (
        f'<span class="badge" data-family="{run.family}" '
        f'style="background:{FAMILY_COLOURS[run.family]}">{esc(run.stop_reason)}</span>'
    )


def _table(runs: Sequence[ChartRun]) -> str:
    if not runs:
        return '<p class="empty" id="runs-empty">No runs recorded yet.</p>'
    rows = []
    for run in reversed(runs):
        rows.append(
            f'<tr class="run-row" data-run-id="{esc(run.run_id)}">'
            f"<td>#{run.ordinal}</td>"
            f'<td><a href="#{run.anchor}"><code>{esc(run.run_id)}</code></a></td>'
            f"<td>{esc(run.started)}</td>"
            f'<td class="task" title="{esc(run.task)}">{esc(run.task)}</td>'
            f'<td class="status">{esc(run.status)}</td>'
            f"<td>{_badge(run)}</td>"
            f'<td class="answer" title="{esc(_answer_text(run))}">{esc(_answer_text(run))}</td>'
            f'<td class="num">{run.steps}</td>'
            f'<td class="num" title="gas {gwei_label(run.gas_wei)}">{esc(format_usdc(run.spend))}</td>'
            f'<td class="num">{f"{run.tokens:,}" if run.tokens else "-"}</td>'
            f'<td class="num">{run.elapsed_s:.1f} s</td></tr>'
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("#", "run", "started", "task", "status", "stop reason", "answer", "steps",
                  "spend", "tokens", "elapsed")
    )  # fmt: skip
    return (
        f'<table id="runs-table"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _answer_text(run: ChartRun) -> str:
    """The answer's first line (its grade first), for the runs table."""
    if not run.lines:
        return "-"
    grade, text = run.lines[0]
    return f"{grade}: {text}"


def _summary(runs: Sequence[ChartRun], data: ReportData) -> str:
    """The tiles: only what was measured (an offline run has no tokens, a run that paid
    no gas has no gas), in the status words of ``nib runs``."""
    finished = sum(1 for r in runs if r.status == "finished")
    spend = sum(r.spend for r in runs)
    steps = sorted(r.steps for r in runs)
    median = steps[len(steps) // 2] if steps else 0
    caps = sorted({r.cap for r in runs}) or [data.spend_cap_atomic]
    gas, tokens = sum(r.gas_wei for r in runs), sum(r.tokens for r in runs)
    tiles = [
        ("runs", str(len(runs))),
        ("finished", f"{finished} of {len(runs)}"),
        ("total spend", format_usdc(spend)),
        *([("gas", gwei_label(gas))] if gas else []),
        *([("tokens", f"{tokens:,}")] if tokens else []),
        ("median steps", str(median)),
        ("spend cap", format_usdc(caps[0]) if len(caps) == 1
         else f"{format_usdc(caps[0])} to {format_usdc(caps[-1])} (each run's own)"),
    ]
    return '<div class="tiles">' + "".join(
        f'<div class="tile"><div class="k">{esc(k)}</div><div class="v">{esc(v)}</div></div>'
        for k, v in tiles
    ) + "</div>"  # fmt: skip


# Records each chart's (and each stop badge's) drawn box (page pixels) on it, so a headless
# browser check can crop the screenshot to it. Allowed by hash in the CSP; no other script can run.
_SCRIPT = (
    'document.querySelectorAll("svg.chart,.badge").forEach(function(s){'
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
td.task,td.answer{max-width:300px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
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
        ("How runs ended", chart_stop_reasons(runs)),
        ("Spend per run against its cap", chart_spend(runs, data.spend_cap_atomic)),
        ("Steps per run against the step limit", chart_steps(runs, data.max_steps)),
        ("Judge reliability (predicted p vs observed)", chart_reliability(data.calibration)),
    ]
    charts = "".join(f'<div class="card"><h2>{esc(t)}</h2>{c}</div>' for t, c in cards)
    traces = "".join(_trace(run) for run in reversed(runs))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>nib report</title><style>{_CSS}</style></head><body><main>"
        f'<h1>nib report</h1><p class="sub">{esc(sub)}</p>'
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
