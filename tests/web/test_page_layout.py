"""The page at 1400, 820 and 390 px in headless Chromium, checked on screenshots and on the laid-out boxes.

Two real daemons: one replaying the eviction scenario to where G6 is critical (two workloads in the
table, events, every chart drawn), one sampling this machine live with an NVML that cannot initialise
(the GPU charts say why they are empty). At every width: nothing wider than the window, no table cell
drawn over another or its text spilling out, every empty-chart message inside its chart (issue 19 §4).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.conftest import require_binary
from tests.web.browser import launch, open_page
from tests.web.test_page_browser import CUTS, LIVE_SAMPLES, replaying

pytestmark = pytest.mark.e2e
WIDTHS = (1400, 820, 390)


@pytest.fixture(scope="module")
def browser():
    require_binary("chromium")
    with launch() as b:
        yield b


@pytest.fixture(scope="module")
def origins(tmp_path_factory):
    with replaying({"eviction": CUTS["eviction"], "live": LIVE_SAMPLES}, tmp_path_factory) as started:
        yield started


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


# Per table row: the cells' boxes, and any cell whose content is wider than its box (an ellipsis is allowed
# on the command line, which shows its whole text on hover).
_TABLE_BOXES = """
rows => rows.filter(r => r.parentElement.getBoundingClientRect().width > 1)  // a head kept for screen readers only
  .map(r => Array.from(r.children).filter(c => c.getClientRects().length).map(c => {
  const b = c.getBoundingClientRect();
  return {x: b.left, y: b.top, w: b.width, h: b.height, text: c.innerText.slice(0, 40),
          spills: c.scrollWidth > c.clientWidth + 1 && !c.classList.contains("cmd")};
}))
"""


def _overlap(a, b) -> float:
    w = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
    h = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
    return max(0.0, w) * max(0.0, h)


def _check_tables(page, width: int) -> None:
    for row in page.locator("table.workloads tr").evaluate_all(_TABLE_BOXES):
        for i, a in enumerate(row):
            assert not a["spills"], f"at {width} px '{a['text']}' spills out of its cell"
            assert a["x"] >= -1 and a["x"] + a["w"] <= width + 1, f"at {width} px '{a['text']}' is off screen"
            for b in row[i + 1 :]:
                assert _overlap(a, b) < 2, f"at {width} px '{a['text']}' is drawn over '{b['text']}'"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where the screenshots go (per run and per user: never a shared fixed path)."""
    return tmp_path_factory.mktemp("page-shots")


def _shoot(page, shots: Path, name: str, width: int) -> Path:
    path = shots / f"{name}-{width}.png"
    page.screenshot(path=str(path), full_page=True)
    w, h = _png_size(path)
    assert w == width, f"the {width} px page is {w} px wide in its screenshot"  # nothing pushed it wider
    assert h > 400 and path.stat().st_size > 10_000
    return path


@pytest.mark.parametrize("width", WIDTHS)
def test_eviction_replay_fits_every_width(browser, origins, shots, width):
    with open_page(browser, origins["eviction"], width=width, height=900) as (page, log):
        page.wait_for_selector('#workloads tr[data-kind="vllm"]')
        page.wait_for_selector('.finding[data-gotcha="G6"][data-severity="critical"]')
        page.wait_for_timeout(300)  # charts drawn at this width
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        _check_tables(page, width)
        vllm = page.locator('#workloads tr[data-kind="vllm"]')
        assert "vllm" in vllm.inner_text() and "GiB" in vllm.inner_text()
        if width < 640:  # a row is a card: each value named by its column
            assert vllm.locator("td").first.get_attribute("data-label") == "Kind"
        for card in page.locator(".finding").all():
            box = card.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1
        _shoot(page, shots, "eviction", width)
        assert log.errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_live_page_without_a_gpu_keeps_every_chart_message_inside_its_chart(browser, origins, shots, width):
    with open_page(browser, origins["live"], width=width, height=900) as (page, log):
        page.wait_for_selector("#chart-power .nodata")
        page.wait_for_timeout(300)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        msgs = page.locator(".chart .nodata").evaluate_all(
            """ts => ts.map(t => {
                 const b = t.getBoundingClientRect(), s = t.ownerSVGElement.getBoundingClientRect();
                 return {text: t.textContent, inside: b.left >= s.left - 1 && b.right <= s.right + 1,
                         chart: t.closest("figure").id};
               })"""
        )
        gpu = [m for m in msgs if m["chart"] in ("chart-power", "chart-temp", "chart-clock")]
        assert len(gpu) == 3 and all(m["text"].startswith("No GPU readings: NVML missing (") for m in gpu)
        for m in msgs:
            assert m["inside"], f"at {width} px the {m['chart']} message is cut off: {m['text']}"
        _check_tables(page, width)
        # Issue 34: the Events empty state is one sentence that wraps, not a grid cell running off a phone.
        empty = page.locator("#events li.empty")
        box = empty.bounding_box()
        assert box["x"] + box["width"] <= width + 1, f"at {width} px the Events empty state is cut off"
        assert empty.evaluate(
            "e => e.scrollWidth <= e.clientWidth + 1 && e.parentElement.scrollWidth <= e.parentElement.clientWidth + 1"
        )
        _shoot(page, shots, "live", width)
        assert log.errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_a_down_server_with_a_long_error_stays_inside_its_cell(browser, width):
    # A live daemon beside a stopped vLLM shows "vllm:8000 down: ConnectionRefusedError: ..." (one long word):
    # it must wrap in its cell, not spill over the next column (seen at 820 px on a live page).
    import dataclasses

    from spark_watchd.sample.serving import ServingReading
    from spark_watchd.sample.trace import read_trace
    from tests.web.standin import SCENARIOS, FakeDaemon, RouteServer, diagnose_by_hand, snapshot_of

    sample = next(iter(read_trace(SCENARIOS / "throttle.jsonl")))
    err = "ConnectionRefusedError: [Errno 111] Connection refused (http://127.0.0.1:8000/metrics)"
    down = ServingReading(server="vllm:8000", kind="vllm", up=False, ts=sample.ts, error=err)
    sample = dataclasses.replace(sample, serving=(down,))
    daemon = FakeDaemon()
    daemon.publish(snapshot_of(sample, diagnose_by_hand(sample, evicted_at=sample.ts + 1), mode="live"))
    with (
        RouteServer(daemon.page_routes(), daemon) as srv,
        open_page(browser, srv.origin, width=width) as (page, log),
    ):
        page.wait_for_selector('#serving tr[data-kind="vllm"]', state="attached", timeout=10000)
        assert "ConnectionRefusedError" in page.locator('#serving tr[data-kind="vllm"]').inner_text()
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        _check_tables(page, width)
        assert log.errors == []
