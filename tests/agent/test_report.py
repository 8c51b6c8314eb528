"""The HTML report: escaping, empty data, money labels, and a real headless Chromium render.

The browser test opens the written file in Debian's ``chromium`` (installed by ``make
setup``), dumps the DOM and takes a screenshot, then checks each chart's box in the PNG
is drawn (many colours, the data's bar colours present) and the run table lists every run.
"""

from __future__ import annotations

import struct
import subprocess
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, get_args

import pytest

from agent.errors import AgentConfigError
from agent.loop.result import DEPENDENCY_STOPS, FINISHED_STOPS, StopReason
from agent.report.page import (
    CHART_IDS,
    FAMILY_COLOURS,
    ReportData,
    render_report,
    run_from_store,
    stop_family,
    write_report,
)
from agent.store import RunStore
from judge.calibration import calibration_report

CHROMIUM = Path("/usr/bin/chromium")
CAP = 1_000_000  # 1 USDC
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="document.title=1">'


def _run(i: int, reason: str, spend: int, steps: int, task: str = "") -> dict[str, Any]:
    return {
        "run_id": f"run-{i:02d}",
        "task": task or f"What is the base fee at block {100 + i}?",
        "stop_reason": reason,
        "finished": reason in FINISHED_STOPS,
        "partial": reason not in FINISHED_STOPS,
        "steps": steps,
        "spend_usdc_atomic": spend,
        "gas_wei": 42_000 * 10**9,
        "tokens": {"input": 1200 * i, "output": 300},
        "elapsed_s": 2.5 * i,
        "started_at": 1_732_900_000 + 60 * i,
        "events": [
            {"seq": 1, "type": "run.start", "data": {"task": "base fee"}},
            {"seq": 2, "type": "tool.call", "data": {"tool": "base_fee", "cost": 0}},
            {"seq": 3, "type": "judge.verdict", "data": {"decision": "approve", "p": "0.8"}},
            {"seq": 4, "type": "run.stop", "data": {"reason": reason}},
        ],
    }


def _runs() -> list[dict[str, Any]]:
    return [
        _run(1, "finish-tool", 250_000, 4),
        _run(2, "evidence-covered", 10_000, 3),
        _run(3, "cost-budget", CAP, 5),  # spent exactly the cap
        _run(4, "no-novelty", 850_000, 6, task=HOSTILE),
        _run(5, "llm-unreachable", 0, 1),
        _run(6, "awaiting-approval", 1_234_567, 2),  # above the report cap: its own cap
        _run(7, "max-steps", 500_000, 6),
    ]


def _calibration() -> dict[str, Any]:
    counts = [0, 3, 8, 15, 20, 25, 22, 14, 9, 4]
    bins = [
        {"lo": i / 10, "hi": (i + 1) / 10, "n": n, "mean_p": i / 10 + 0.05, "rate": i / 10}
        for i, n in enumerate(counts)
    ]
    return {"n": sum(counts), "brier": 0.1834, "ece": "0.0712", "bins": bins}


def _data(**overrides: Any) -> ReportData:
    runs = _runs()
    runs[5]["spend_cap_atomic"] = 2_000_000
    fields: dict[str, Any] = {
        "runs": runs,
        "spend_cap_atomic": CAP,
        "calibration": _calibration(),
        "generated_at": "2024-11-29 18:00:00 UTC",
        "network": "anvil",
        "chain_id": 31337,
        "version": "0.1.0",
        "max_steps": 6,
    }
    fields.update(overrides)
    return ReportData(**fields)


# ---- unit tests -------------------------------------------------------------------------


def test_task_html_is_escaped_everywhere() -> None:
    page = render_report(_data())
    assert page.count("<script") == 1  # only the report's own, hash-allowed script
    assert "<img src=x" not in page
    assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in page
    hostile_id = render_report(_data(runs=[_run(1, "done-signal", 0, 1) | {"run_id": 'a"b<'}]))
    assert 'data-run-id="a&quot;b&lt;"' in hostile_id
    assert 'a"b<' not in hostile_id


def test_event_data_is_escaped_in_the_trace() -> None:
    run = _run(1, "finish-tool", 0, 1)
    run["events"] = [{"seq": 1, "type": "tool.call", "data": {"summary": "</li><b>x</b>"}}]
    page = render_report(_data(runs=[run]))
    assert "<b>x</b>" not in page
    assert "&lt;/li&gt;&lt;b&gt;x&lt;/b&gt;" in page


def test_each_answer_line_shows_its_provenance_grade_escaped() -> None:
    run = _run(1, "unbacked-answer", 0, 1) | {
        "provenance": "asserted",
        "lines": [("observed", "fee: 1 gwei (evidence e1)"), ("asserted", "<b>42</b> gwei")],
    }
    page = render_report(_data(runs=[run]))
    assert 'answer provenance <b class="provenance">asserted</b>' in page
    assert '<li data-grade="observed"><b>observed</b> fee: 1 gwei (evidence e1)</li>' in page
    assert '<li data-grade="asserted"><b>asserted</b> &lt;b&gt;42&lt;/b&gt; gwei</li>' in page


def test_empty_data_shows_messages_instead_of_charts() -> None:
    page = render_report(ReportData(runs=[], spend_cap_atomic=CAP, calibration=None))
    for chart_id in CHART_IDS:
        assert f'id="{chart_id}-empty"' in page
        assert f'id="{chart_id}"' not in page
    assert 'id="runs-empty"' in page
    assert "No runs yet" in page
    assert "No judged outcomes yet" in page


def test_calibration_with_no_outcomes_is_empty() -> None:
    calibration = {"n": 0, "brier": None, "ece": None, "bins": [{"lo": 0, "hi": 1, "n": 0}]}
    page = render_report(_data(calibration=calibration))
    assert 'id="chart-reliability-empty"' in page
    assert 'id="chart-spend"' in page


def test_money_labels_are_exact_decimals() -> None:
    page = render_report(_data())
    assert "1.00 USDC to 2.00 USDC (each run&#x27;s own)" in page  # run 6 had a 2 USDC cap
    assert "cap 1.00 USDC" in render_report(_data(runs=_runs()))  # one cap: one line
    assert "1.234567 USDC" in page  # six decimals kept, no float rounding
    assert "0.01 USDC" in page  # 10_000 atomic
    assert "0.85 USDC" in page
    assert "Brier" in page and "0.183" in page and "0.071" in page


def test_float_money_is_refused_with_the_fix() -> None:
    run = _run(1, "finish-tool", 0, 1) | {"spend_usdc_atomic": 0.25}
    with pytest.raises(TypeError, match=r"spend_usdc_atomic must be an int in atomic units"):
        render_report(_data(runs=[run]))


def test_every_stop_reason_has_a_family_and_colour() -> None:
    for reason in get_args(StopReason):
        assert stop_family(reason) in FAMILY_COLOURS
    assert {stop_family(r) for r in FINISHED_STOPS} == {"finished"}
    assert {stop_family(r) for r in DEPENDENCY_STOPS} == {"dependency"}
    assert stop_family("cost-budget") == "budget"
    assert stop_family("awaiting-approval") == "paused"
    assert stop_family("oscillation") == "guard"


def test_report_is_self_contained() -> None:
    benign = [run for run in _runs() if run["task"] != HOSTILE]
    page = render_report(_data(runs=benign))
    for needle in ("http://", "https://", "src=", "<link", "@import", "url("):
        assert needle not in page, needle
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_runs_from_the_real_store_and_judge_calibration(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "nib.sqlite")
    store.start_run("r-done", "base fee now?", "cost-optimized")
    store.event("r-done", "tool.call", {"tool": "base_fee", "summary": "1.2 gwei"})
    result = {
        "run_id": "r-done", "task": "base fee now?", "stop_reason": "finish-tool",
        "finished": True, "partial": False, "steps": 3, "elapsed_s": 4.5,
        "spend": {"usdc_atomic": 10_000, "gas_wei": 0, "format_usdc": "0.01 USDC"},
        "tokens": {"input": 900, "output": 100, "estimated": False},
    }  # fmt: skip
    store.finish_run("r-done", result)
    store.start_run("r-live", "still going", "cost-optimized")
    runs = [run_from_store(row, store.events(row["run_id"])) for row in store.runs()]
    by_id = {run["run_id"]: run for run in runs}
    assert by_id["r-done"]["spend_usdc_atomic"] == 10_000
    assert by_id["r-done"]["events"][0]["data"]["tool"] == "base_fee"
    assert by_id["r-live"]["stop_reason"] == "running"
    calibration = calibration_report([(0.2, False), (0.25, True), (0.8, True), (0.85, True)])
    page = render_report(_data(runs=runs, calibration=calibration))
    assert 'id="chart-reliability"' in page  # judge bins carry ``freq``; read as the rate
    assert page.count('class="run-row"') == 2
    assert "1,000" in page and "0.01 USDC" in page and "base_fee" in page
    store.close()


def test_write_report_into_a_missing_folder_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(AgentConfigError, match=r"does not exist.*Fix: create it"):
        write_report(tmp_path / "nope" / "r.html", _data())


# ---- headless Chromium ------------------------------------------------------------------


class _Dom(HTMLParser):
    """What the browser test reads back from the dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.boxes: dict[str, tuple[int, int, int, int]] = {}
        self.row_ids: list[str] = []
        self.row_links: list[str] = []
        self.sections: set[str] = set()
        self.title = ""
        self._in_row = self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "svg" and "data-box" in a:
            x, y, w, h = (int(v) for v in a["data-box"].split(","))
            self.boxes[a["id"]] = (x, y, w, h)
        elif tag == "tr" and a.get("class") == "run-row":
            self.row_ids.append(a["data-run-id"])
            self._in_row = True
        elif tag == "a" and self._in_row:
            self.row_links.append(a["href"].lstrip("#"))
        elif tag == "section" and a.get("class") == "trace":
            self.sections.add(a["id"])
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag: str) -> None:
        self._in_row = self._in_row and tag != "tr"
        self._in_title = self._in_title and tag != "title"

    def handle_data(self, data: str) -> None:
        if self._in_title and not self.title:
            self.title = data


def _read_png(path: Path, rows: int) -> tuple[int, list[bytes]]:
    """Decode the first ``rows`` scanlines of an 8-bit RGB/RGBA PNG (stdlib only)."""
    blob = path.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, width, bpp = 8, bytearray(), 0, 0
    while pos < len(blob):
        (length,) = struct.unpack(">I", blob[pos : pos + 4])
        kind, chunk = blob[pos + 4 : pos + 8], blob[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour)
            bpp = 3 if colour == 2 else 4
            rows = min(rows, height)
        elif kind == b"IDAT":
            idat += chunk
    raw = zlib.decompress(bytes(idat))
    stride = width * bpp
    out: list[bytes] = []
    prev = bytearray(stride)
    for r in range(rows):
        filt = raw[r * (stride + 1)]
        line = bytearray(raw[r * (stride + 1) + 1 : (r + 1) * (stride + 1)])
        if filt == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif filt == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
        elif filt == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif filt == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        rgb = bytearray(line)
        if bpp == 4:
            del rgb[3::4]  # drop alpha
        out.append(bytes(rgb))
        prev = line
    return width, out


def _crop(rows: list[bytes], box: tuple[int, int, int, int]) -> Counter[bytes]:
    x, y, w, h = box
    pixels: Counter[bytes] = Counter()
    for line in rows[y : y + h]:
        segment = line[x * 3 : (x + w) * 3]
        pixels.update(segment[i : i + 3] for i in range(0, len(segment), 3))
    return pixels


def _rgb(hex_colour: str) -> bytes:
    return bytes.fromhex(hex_colour.lstrip("#"))


def _chromium(*args: str, profile: Path) -> subprocess.Popen[str]:
    # Every flag that could reach the network or a GPU is off: the page is local only.
    command = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1",
        f"--user-data-dir={profile}", "--window-size=1280,2400", *args,
    ]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}; expected Debian's chromium package. "
            "Fix: run `make setup` (it runs `apt-get install -y chromium`)."
        )
    data = _data()
    report = write_report(tmp_path / "report.html", data)
    png = tmp_path / "report.png"
    url = report.resolve().as_uri()
    shot = _chromium(f"--screenshot={png}", url, profile=tmp_path / "profile-shot")
    dump = _chromium("--dump-dom", url, profile=tmp_path / "profile-dom")
    dom_text, dom_err = dump.communicate(timeout=60)
    _, shot_err = shot.communicate(timeout=60)
    assert dump.returncode == 0 and dom_text.strip(), f"--dump-dom failed: {dom_err[-2000:]}"
    assert shot.returncode == 0 and png.exists(), f"--screenshot failed: {shot_err[-2000:]}"

    dom = _Dom()
    dom.feed(dom_text)
    # The injected task stayed text: no script of its ran, so the title is untouched.
    assert dom.title == "nib report"
    assert "&lt;script&gt;document.title" in dom_text
    # One table row per run, each linking to its own trace section.
    expected = [str(run["run_id"]) for run in data.runs]
    assert sorted(dom.row_ids) == sorted(expected)
    assert len(dom.row_ids) == len(expected)
    assert set(dom.row_links) == dom.sections and len(dom.sections) == len(expected)
    # The four charts were laid out (the report's hashed script ran and measured them).
    assert set(dom.boxes) == set(CHART_IDS), f"chart boxes in the DOM: {dom.boxes}"

    bottom = max(y + h for _, y, _, h in dom.boxes.values())
    width, rows = _read_png(png, bottom)
    assert width == 1280 and len(rows) == bottom, "charts must sit inside the screenshot"
    must_show = {
        "chart-stop-reasons": [FAMILY_COLOURS[f] for f in FAMILY_COLOURS],
        "chart-spend": ["#4a90c2", "#e3a21a", "#d64545"],
        "chart-steps": [FAMILY_COLOURS["finished"], FAMILY_COLOURS["budget"]],
        "chart-reliability": ["#3a86c8", "#b9d3ea"],
    }
    for chart_id, box in dom.boxes.items():
        pixels = _crop(rows, box)
        total = sum(pixels.values())
        assert box[2] > 200 and box[3] > 150, f"{chart_id} is too small: {box}"
        assert len(pixels) >= 20, f"{chart_id} looks blank: {len(pixels)} distinct colours"
        flat = pixels.most_common(1)[0][1] / total
        assert flat < 0.95, f"{chart_id} is {flat:.0%} one colour"
        for colour in must_show[chart_id]:
            assert pixels[_rgb(colour)] >= 30, f"{chart_id} shows no {colour} bar"
