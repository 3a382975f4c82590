"""The status page in headless Chromium against a real daemon replaying the eviction and throttle traces.

Each daemon replays a trace cut where the story is told (the eviction trace an
hour past the eviction, the throttle trace to its end); a replay that has ended
keeps serving its last snapshot, so what the page must show is steady.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import REPO, cli_env, free_port, require_binary
from tests.web.browser import launch, open_page
from tests.web.standin import SCENARIOS

pytestmark = pytest.mark.e2e
SPEED = "100000"  # as fast as the daemon ticks: the classifiers judge recorded time, not replay time


@pytest.fixture(scope="module")
def browser():
    require_binary("chromium")
    with launch() as b:
        yield b


def _get(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return json.load(r)
    except OSError:
        return None


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    """Start `spark-watchd run --replay` on the first N samples of a trace; wait until all are served."""
    procs, started = [], {}

    def start(name: str, n: int) -> str:
        if (name, n) in started:
            return started[(name, n)]
        tmp = tmp_path_factory.mktemp(name)
        trace = tmp / f"{name}.jsonl"
        trace.write_text("".join((SCENARIOS / f"{name}.jsonl").read_text().splitlines(keepends=True)[:n]))
        port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "spark_watchd",
            "run",
            "--replay",
            str(trace),
            "--speed",
            SPEED,
            "--listen",
            f"127.0.0.1:{port}",
            "--interval",
            "1",
            "--state-dir",
            str(tmp / "state"),
        ]
        env = cli_env({"SPARK_WATCHD_WEB__PAGE_REFRESH_SECONDS": "1"})
        proc = subprocess.Popen(
            cmd, env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        procs.append(proc)
        origin = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            body = _get(origin + "/api/v1/history?limit=1")
            if body and body["held"] == n:
                started[(name, n)] = origin
                return origin
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        proc.kill()
        pytest.fail(
            f"daemon replaying {name} did not serve {n} samples: {proc.stderr.read().decode()[-2000:]}"
        )

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _severity(page, gotcha: str) -> str:
    return page.locator(f'.finding[data-gotcha="{gotcha}"]').get_attribute("data-severity")


def test_eviction_replay_shows_all_findings_a_critical_g6_and_the_eviction(browser, replay):
    origin = replay("eviction", 250)  # samples 127-300 are the eviction; 250 is an hour past it
    with open_page(browser, origin) as (page, log):
        page.wait_for_selector('#events li[data-kind="eviction"]')
        page.wait_for_selector('.finding[data-gotcha="G6"][data-severity="critical"]')
        for gotcha in ("G3", "G4", "G6"):
            card = page.locator(f'.finding[data-gotcha="{gotcha}"]')
            assert card.locator("h3").inner_text().startswith(gotcha)
            assert card.locator(".sev").inner_text().lower() == _severity(page, gotcha)
            assert card.locator(".summary").inner_text().strip()
        assert _severity(page, "G3") == "critical"
        assert page.locator('.finding[data-gotcha="G6"] .evidence dt').count() >= 1
        assert page.locator('.finding[data-gotcha="G6"] .advice li').count() >= 1
        assert page.locator("#mode").inner_text() == "REPLAY"
        event = page.locator('#events li[data-kind="eviction"]')
        assert "G6" in event.inner_text() and event.locator("time").inner_text()
        # Every chart with data in this trace is drawn with (nearly) every sample.
        for chart, series in [
            ("power", "Power"),
            ("clock", "SM clock"),
            ("memory", "Available"),
            ("psi", "some"),
            ("paging", "Swap-out pages"),
            ("training", "step time"),
        ]:
            path = page.locator(f'#chart-{chart} path[data-series="{series}"]')
            assert int(path.get_attribute("data-points")) >= 240, chart
            assert page.locator(f"#chart-{chart} svg").get_attribute("aria-label")
        kinds = page.locator("#workloads tr").evaluate_all("rows => rows.map(r => r.dataset.kind)")
        assert sorted(kinds) == ["trainer", "vllm"]
        assert log.errors == []
        assert log.requests and log.off_origin == []


def test_throttle_replay_shows_g4_the_throttle_and_shaded_periods(browser, replay):
    origin = replay("throttle", 360)
    with open_page(browser, origin) as (page, log):
        page.wait_for_selector('.finding[data-gotcha="G4"][data-severity="critical"]')
        page.wait_for_selector('#events li[data-kind="throttle_start"]')
        assert page.locator("#chart-training rect.band").count() >= 1
        assert page.locator("#chart-power rect.band").count() >= 1
        assert {_severity(page, "G3"), _severity(page, "G6")} == {"ok"}
        assert log.errors == [] and log.off_origin == []


def test_dark_mode_renders_the_dark_palette(browser, replay):
    origin = replay("eviction", 250)
    with open_page(browser, origin, color_scheme="dark") as (page, log):
        page.wait_for_selector("#chart-memory path.line")
        bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        fg = page.evaluate("getComputedStyle(document.body).color")
        assert bg == "rgb(15, 18, 22)" and fg == "rgb(230, 233, 238)"
        card_bg = page.locator('.finding[data-gotcha="G4"]').evaluate(
            "e => getComputedStyle(e).backgroundColor"
        )
        assert card_bg == "rgb(23, 27, 33)"
        assert log.errors == [] and log.off_origin == []
