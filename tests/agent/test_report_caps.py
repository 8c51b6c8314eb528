"""The report draws each run against its own cap and step limit, read from the run's own
``run.start`` event in a real run store, as headless Chromium renders it: no global cap
line paints a 2.50 USDC run with a 10 USDC cap red, and the badges carry their colours."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agent.report.charts import FAMILY_COLOURS
from agent.report.page import ReportData, run_from_store, write_report
from agent.store import RunStore
from tests.agent.test_report import CHROMIUM, _chromium, _crop, _read_png, _rgb

UNDER, AT = "#4a90c2", "#d64545"  # the spend chart's colours (agent.report.charts)


def _run(store: RunStore, run_id: str, *, cap: int, steps_limit: int, spend: int, steps: int,
         reason: str, finished: bool) -> None:
    store.start_run(run_id, f"task {run_id}", "cost-optimized")
    store.event(run_id, "run.start", {"limits": {"spend_cap_atomic": cap, "max_steps": steps_limit}})
    store.finish_run(run_id, {
        "run_id": run_id, "stop_reason": reason, "finished": finished, "partial": not finished,
        "steps": steps, "spend": {"usdc_atomic": spend, "gas_wei": 0}, "elapsed_s": 1.0,
        "lines": [{"grade": "observed", "text": f"answer of {run_id}"}],
    })


class _Page(HTMLParser):
    """Boxes the report's script measured, the badges' families, the limit labels."""

    def __init__(self) -> None:
        super().__init__()
        self.boxes: dict[str, tuple[int, int, int, int]] = {}
        self.badges: list[tuple[str, tuple[int, int, int, int]]] = []
        self.own_limits = 0
        self.limit_labels: list[str] = []
        self._label = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        box = tuple(int(v) for v in a["data-box"].split(",")) if a.get("data-box") else None
        if tag == "svg" and box:
            self.boxes[a["id"]] = box  # type: ignore[assignment]
        if "badge" in a.get("class", "").split() and box:
            self.badges.append((a["data-family"], box))  # type: ignore[arg-type]
        if tag == "line" and "own-limit" in a.get("class", ""):
            self.own_limits += 1
        self._label = tag == "text" and "limit-label" in a.get("class", "")

    def handle_data(self, data: str) -> None:
        if self._label:
            self.limit_labels.append(data)
            self._label = False


def test_each_run_is_drawn_against_its_own_cap_in_chromium(tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}; expected Debian's chromium package. "
                    "Fix: run `make setup` (it runs `apt-get install -y chromium`).")
    store = RunStore(tmp_path / "nib.db")
    _run(store, "big-cap", cap=10_000_000, steps_limit=10, spend=2_500_000, steps=10,
         reason="evidence-covered", finished=True)
    _run(store, "small-cap", cap=1_000_000, steps_limit=6, spend=1_000_000, steps=6,
         reason="max-steps", finished=False)
    runs = [run_from_store(row, store.events(row["run_id"])) for row in store.runs()]
    assert {r["run_id"]: (r["status"], r["spend_cap_atomic"], r["max_steps"]) for r in runs} == {
        "big-cap": ("finished", 10_000_000, 10), "small-cap": ("stopped", 1_000_000, 6)}
    # The report-wide figures are the configured default (1 USDC, 6 steps), as `nib report` passes.
    report = write_report(tmp_path / "report.html",
                          ReportData(runs=runs, spend_cap_atomic=1_000_000, max_steps=6))
    html = report.read_text()
    assert "1.00 USDC to 10.00 USDC (each run&#x27;s own)" in html
    assert "observed: answer of big-cap" in html  # the answer line in the runs table
    assert ">gas<" not in html and ">tokens<" not in html.split('id="runs"')[0]  # not measured

    png, url = tmp_path / "report.png", report.resolve().as_uri()
    shot = _chromium(f"--screenshot={png}", url, profile=tmp_path / "p1")
    dump = _chromium("--dump-dom", url, profile=tmp_path / "p2")
    dom, dom_err = dump.communicate(timeout=60)
    _, shot_err = shot.communicate(timeout=60)
    assert dump.returncode == 0 and dom.strip(), dom_err[-2000:]
    assert shot.returncode == 0 and png.exists(), shot_err[-2000:]
    page = _Page()
    page.feed(dom)
    # No line across the spend or steps chart (the runs' caps and limits differ): each bar
    # has its own short dash, two per chart.
    assert not any(label.startswith(("cap ", "max steps")) for label in page.limit_labels), page.limit_labels
    assert page.own_limits == 4
    bottom = max(y + h for _, y, _, h in [*page.boxes.values(), *(b for _, b in page.badges)])
    _, rows = _read_png(png, bottom)
    spend = _crop(rows, page.boxes["chart-spend"])
    # The 2.50 USDC run is a quarter of its 10 USDC cap: blue, not red; the 1 USDC run is
    # at its own 1 USDC cap: red.
    assert spend[_rgb(UNDER)] >= 30 and spend[_rgb(AT)] >= 30, (spend[_rgb(UNDER)], spend[_rgb(AT)])
    families = {family for family, _ in page.badges}
    assert families == {"finished", "budget"}
    for family, box in page.badges:
        pixels = _crop(rows, box)
        assert pixels[_rgb(FAMILY_COLOURS[family])] >= 20, (family, box, pixels.most_common(3))
    json.dumps(runs)  # the runs as the CLI hands them over are plain data
