"""The status page in headless Chromium (one launch for the module).

Against real daemons: two replaying the eviction and throttle traces, each cut
where the story is told (a replay that has ended keeps serving its last
snapshot, so what the page must show is steady), and one sampling this machine
live with an NVML that cannot initialise. Against a stand-in server fed
hand-made snapshots: what a test must steer, new samples arriving while the page
is open and the history starting over.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

from spark_watchd.config import Settings
from spark_watchd.sample.findings import Diagnosis, Event, Finding
from spark_watchd.sample.trace import read_trace
from spark_watchd.web.settings import WebSettings
from tests.conftest import REPO, cli_env, free_port, require_binary
from tests.web.browser import launch, open_page
from tests.web.standin import SCENARIOS, FakeDaemon, RouteServer, diagnose_by_hand, snapshot_of

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


# (trace, samples replayed): the eviction is at sample 130 and G6 stays critical past 250;
# the throttle trace is G4 critical from sample 130 on.
CUTS = {"eviction": 250, "throttle": 200}


# The live daemon samples this machine's /proc with an NVML whose init fails as on a box without
# the NVIDIA driver (the fake NVML keeps it so on a machine that has one).
LIVE_SAMPLES = 2


def _start(name: str, n: int, tmp: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = cli_env({"SPARK_WATCHD_WEB__PAGE_REFRESH_SECONDS": "1"})
    if name == "live":
        cmd = [sys.executable, "-m", "spark_watchd", "run"]
        env["SPARK_WATCHD_FAKE_NVML"] = "fail-init"
    else:
        trace = tmp / f"{name}.jsonl"
        trace.write_text("".join((SCENARIOS / f"{name}.jsonl").read_text().splitlines(keepends=True)[:n]))
        cmd = [sys.executable, "-m", "spark_watchd", "run", "--replay", str(trace), "--speed", SPEED]
    cmd += ["--listen", f"127.0.0.1:{port}", "--interval", "1", "--state-dir", str(tmp / "state")]
    proc = subprocess.Popen(cmd, env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def replaying(wanted: dict[str, int], tmp_path_factory):
    """Replaying daemons started together, {name: samples}; yields {name: origin} once each has served them all."""
    started = {name: _start(name, n, tmp_path_factory.mktemp(name)) for name, n in wanted.items()}
    try:
        deadline = time.monotonic() + 60
        pending = dict(wanted)
        while pending and time.monotonic() < deadline:
            for name in list(pending):
                proc, origin = started[name]
                body = _get(origin + "/api/v1/history?limit=1")
                if body and body["held"] >= pending[name]:
                    del pending[name]
                elif proc.poll() is not None:
                    pytest.fail(f"daemon replaying {name} exited: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.1)
        if pending:
            pytest.fail(f"daemons did not serve all samples in time: {sorted(pending)}")
        yield {name: origin for name, (_, origin) in started.items()}
    finally:
        for proc, _ in started.values():
            proc.terminate()
        for proc, _ in started.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="module")
def daemons(tmp_path_factory):
    """Both replaying daemons, started together; yields {trace: origin} once each has served all its samples."""
    with replaying({**CUTS, "live": LIVE_SAMPLES}, tmp_path_factory) as origins:
        yield origins


def _severity(page, gotcha: str) -> str:
    return page.locator(f'.finding[data-gotcha="{gotcha}"]').get_attribute("data-severity")


def test_eviction_replay_shows_all_findings_a_critical_g6_and_the_eviction(browser, daemons):
    origin = daemons["eviction"]
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
            assert int(path.get_attribute("data-points")) >= CUTS["eviction"] - 10, chart
            assert page.locator(f"#chart-{chart} svg").get_attribute("aria-label")
        # Hovering a chart reads every series at that moment in its legend.
        page.locator("#chart-power svg").hover(position={"x": 300, "y": 80})
        expect(page.locator("#chart-power .legend li").last).to_have_text(re.compile(r"^at \d\d:\d\d$"))
        kinds = page.locator("#workloads tr").evaluate_all("rows => rows.map(r => r.dataset.kind)")
        assert sorted(kinds) == ["trainer", "vllm"]
        vllm = page.locator('#workloads tr[data-kind="vllm"]')
        # --kv-cache-memory-bytes bounds the server: capped, with the flag that capped it.
        assert vllm.locator("td").nth(1).inner_text().startswith("yes (--kv-cache-memory-bytes")
        # Accessible structure: headings, named chart images, a table with header cells.
        for name in ("Findings", "Last hours", "Events", "Workloads", "Sources"):
            assert page.get_by_role("heading", name=name).count() == 1
        assert (
            page.get_by_role(
                "img", name=re.compile(r"^Unified memory \(GiB\) from .*latest: Available")
            ).count()
            == 1
        )
        assert page.get_by_role("columnheader", name="Kind").count() == 1
        assert page.get_by_role("rowheader").count() == 2
        # Reads on a laptop screen: nothing wider than the window at 1280 px either.
        for width in (1440, 1280):
            page.set_viewport_size({"width": width, "height": 800})
            page.wait_for_timeout(300)  # charts redraw after a resize
            assert page.evaluate("document.documentElement.scrollWidth") <= width
        assert log.errors == []
        assert log.requests and log.off_origin == []


def test_throttle_replay_shows_g4_the_throttle_and_shaded_periods(browser, daemons):
    origin = daemons["throttle"]
    with open_page(browser, origin) as (page, log):
        page.wait_for_selector('.finding[data-gotcha="G4"][data-severity="critical"]')
        page.wait_for_selector('#events li[data-kind="throttle_start"]')
        assert page.locator("#chart-training rect.band").count() >= 1
        assert page.locator("#chart-power rect.band").count() >= 1
        assert {_severity(page, "G3"), _severity(page, "G6")} == {"ok"}
        # No swapping in this trace: the flat zero line sits on the axis, which starts at 0.
        assert page.locator("#chart-paging text.axis").first.text_content() == "0"
        assert log.errors == [] and log.off_origin == []


def test_dark_mode_renders_the_dark_palette(browser, daemons):
    origin = daemons["eviction"]
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


def test_live_daemon_without_a_gpu_says_nvml_is_down_and_why(browser, daemons):
    origin = daemons["live"]
    error = _get(origin + "/api/v1/status")["sources"]["nvml"]["error"]
    assert "Driver Not Loaded" in error
    with open_page(browser, origin) as (page, log):
        down = page.wait_for_selector('#sources li[data-source="nvml"].down')
        # The reason as the daemon gives it (its retry countdown may have moved on since).
        assert down.inner_text().startswith("nvml down: " + error.split("(")[0].strip())
        assert page.locator("#sources li.up").count() >= 1  # /proc is read all the same
        # Issue 18: each driver-events feed's state under its source, as /api/v1/status gives it.
        feeds = _get(origin + "/api/v1/status")["driver_feeds"]
        assert set(feeds) == {"nvml-events", "previous-boot", "kernel-log"}
        for name in feeds:
            li = page.wait_for_selector(f'#sources li[data-feed="{name}"]')
            assert li.inner_text().startswith(f"\u2514 {name}: ")
        assert (
            page.locator('#sources li[data-feed="nvml-events"]')
            .inner_text()
            .startswith("\u2514 nvml-events: " + feeds["nvml-events"]["state"])
        )
        assert _severity(page, "G4") == "unknown"
        # Not "No data yet" forever: the GPU charts say why they are empty (issue 14.8).
        for chart in ("power", "temp", "clock"):
            nodata = page.locator(f"#chart-{chart} .nodata").text_content()
            assert nodata.startswith("No GPU readings: NVML missing (") and "Driver Not Loaded" in nodata
        page.wait_for_selector('#chart-memory path[data-series="Available"]')
        assert page.locator("#mode").is_hidden()  # live, not a replay
        # Issue 34: the daemon's own cost, one line in the footer ("spark-watchd: 0.41 % of a CPU, 52 MiB").
        expect(page.locator("#daemon-cost")).to_have_text(
            re.compile(r"^spark-watchd: [0-9.]+ % of a CPU, \d+ MiB$")
        )
        assert log.errors == [] and log.off_origin == []


def test_page_follows_new_samples_in_place_and_starts_over_with_the_history(browser):
    traces = {name: list(read_trace(SCENARIOS / f"{name}.jsonl")) for name in ("eviction", "throttle")}
    daemon = FakeDaemon(Settings(web=WebSettings(page_refresh_seconds=0.5)))

    def feed(samples, extras=None):
        recent = ()
        for s in samples:
            diag = diagnose_by_hand(s, evicted_at=1764407100.0)
            recent = (recent + diag.events)[-20:]
            daemon.publish(snapshot_of(s, diag, recent, extras=extras))

    power = '#chart-power path[data-series="Power"]'
    table = daemon.page_routes()
    feed(traces["eviction"][:100])
    with RouteServer(table, daemon) as srv, open_page(browser, srv.origin) as (page, log):
        page.wait_for_selector('.finding[data-gotcha="G6"][data-severity="warning"]')
        assert page.locator('#events li[data-kind="eviction"]').count() == 0
        assert page.locator("#mode").inner_text() == "REPLAY"
        page.evaluate("window.__sameDocument = true")
        feed(traces["eviction"][100:200])
        page.wait_for_selector('#events li[data-kind="eviction"]', timeout=10_000)
        page.wait_for_selector('.finding[data-gotcha="G6"][data-severity="critical"]')
        expect(page.locator(power)).to_have_attribute("data-points", "200")
        # A trace starting earlier (time went back): the history starts over, and so does the page.
        feed(traces["throttle"][:50], extras={"demo": "throttle"})
        expect(page.locator(power)).to_have_attribute("data-points", "50")
        expect(page.locator("#mode")).to_have_text("DEMO")
        assert page.evaluate("window.__sameDocument") is True  # all updated in place, never reloaded
        assert log.errors == [] and log.off_origin == []


def test_stale_live_daemon_and_a_non_thermal_anomaly_are_spelled_out(browser):
    sample = next(iter(read_trace(SCENARIOS / "throttle.jsonl")))
    g4 = Finding(
        "G4", "warning", "Clocks pinned at 600 MHz, cool, low power, no reasons", anomaly="power_delivery"
    )
    diag = diagnose_by_hand(sample, evicted_at=float("inf"))
    diag = Diagnosis(diag.ts, {**diag.findings, "G4": g4})
    daemon = FakeDaemon()
    table = daemon.page_routes()
    daemon.publish(snapshot_of(sample, diag, mode="live"))
    daemon.fresh = False
    with RouteServer(table, daemon) as srv, open_page(browser, srv.origin) as (page, log):
        card = page.wait_for_selector('.finding[data-gotcha="G4"][data-severity="warning"]')
        assert "Not thermal: a power-delivery fault" in card.inner_text()
        expect(page.locator("#banner")).to_have_text(re.compile(r"^The last sample is 300 s old"))
        assert page.locator("#chart-power rect.band").count() == 0  # not shaded as a throttle
        assert page.locator("#mode").is_hidden()
        assert log.errors == [] and log.off_origin == []


def test_a_step_time_change_held_by_a_firmware_power_limit_is_said_on_the_page(browser):
    from spark_watchd.diagnose import g4 as g4_classifier
    from spark_watchd.diagnose.thresholds import Thresholds
    from spark_watchd.sample.board import BoardReading
    from tests.diagnose.diag_builders import Host

    def board(pl1, ewma):
        return BoardReading(
            power_w={"pl1": pl1, "ewma_pl1": ewma, "dc_input": 130.0}, power_cap_w={"pl1": pl1}
        )

    host = Host()
    window = host.run(30, temp=74.0, step=0.063, board=board(140.0, 96.0))
    window += host.run(8, temp=74.0, clk=2050, step=0.094, board=board(100.0, 99.0))
    g4 = g4_classifier.classify(window, Thresholds())
    sample = next(iter(read_trace(SCENARIOS / "throttle.jsonl")))
    diag = diagnose_by_hand(sample, evicted_at=float("inf"))
    diag = Diagnosis(diag.ts, {**diag.findings, "G4": g4})
    daemon = FakeDaemon()
    daemon.publish(snapshot_of(sample, diag, mode="live"))
    with RouteServer(daemon.page_routes(), daemon) as srv, open_page(browser, srv.origin) as (page, log):
        card = page.wait_for_selector('.finding[data-gotcha="G4"][data-severity="ok"]')
        text = card.inner_text()
        assert "step time x1.49" in text and "pl1 power limit" in text and "not heat" in text
        assert "Not thermal: the board firmware's power limit (pl1/syspl1) is holding the clocks" in text
        assert "board power limit ewma\n99 W" in text or "board power limit ewma 99 W" in text.replace(
            "\n", " "
        )
        assert log.errors == [] and log.off_origin == []


def test_a_fast_replay_is_dated_by_its_recording_and_shown_as_ending_now(browser, daemons):
    # 250 samples 30 s apart served in about a second: trace time runs two hours ahead of the wall clock.
    origin = daemons["eviction"]
    doc = _get(origin + "/api/v1/status")
    assert doc["ts"] - time.time() > 3600  # what the page must not print as is (issue 14.7)
    rep = doc["replay"]
    assert rep["trace"] == "eviction.jsonl" and rep["speed"] == float(SPEED)
    assert abs(doc["ts"] + rep["shift_s"] - time.time()) < 30
    recorded = time.strftime("%Y-%m-%d", time.gmtime(rep["recorded_ts"]))
    first = json.loads((SCENARIOS / "eviction.jsonl").read_text().splitlines()[0])["ts"]
    assert 0 < rep["recorded_ts"] - first < 250 * 31  # the newest replayed sample's own recorded time
    with open_page(browser, origin) as (page, log):
        page.wait_for_selector('#events li[data-kind="eviction"]')
        text = page.locator("#freshness").inner_text()
        assert f"replay of eviction.jsonl recorded {recorded}" in text and "times shifted to now" in text
        shown = time.mktime(time.strptime(text.split("Last sample ")[1][:19], "%Y-%m-%d %H:%M:%S"))
        now_utc = time.mktime(time.gmtime())
        assert abs(shown - now_utc) < 60, text
        when = page.locator('#events li[data-kind="eviction"] time').get_attribute("datetime")
        evt = time.mktime(time.strptime(when[:19], "%Y-%m-%dT%H:%M:%S"))
        assert evt <= now_utc + 60  # events are dated in the past, never hours ahead
        assert log.errors == []


def test_charts_keep_units_and_colours_apart_and_cards_do_not_squash(browser, daemons, tmp_path):
    origin = daemons["eviction"]
    with open_page(browser, origin, width=820) as (page, log):
        page.wait_for_selector('#chart-temp path[data-series="Slowdown threshold"]', state="attached")
        # Power alone on its chart; temperature and its slowdown line on their own, in different colours.
        assert page.locator("#chart-power path[data-series]").evaluate_all(
            "ps => ps.map(p => p.dataset.series)"
        ) == ["Power"]
        temp = page.locator('#chart-temp path[data-series="Temperature"]').get_attribute("class")
        slow = page.locator('#chart-temp path[data-series="Slowdown threshold"]').get_attribute("class")
        colour = lambda cls: next(c for c in cls.split() if re.fullmatch(r"k\d", c))  # noqa: E731
        assert colour(temp) != colour(slow)
        # One y axis each: right-axis labels are the only axis texts without a text-anchor.
        assert (
            page.locator(
                "#chart-power text.axis:not([text-anchor]), #chart-temp text.axis:not([text-anchor])"
            ).count()
            == 0
        )
        assert page.locator("#chart-paging text.axis:not([text-anchor])").count() > 0  # the probe sees one
        # The memory chart: at most five series, each its own colour.
        mem = page.locator("#chart-memory path[data-series]").evaluate_all(
            "ps => ps.map(p => p.getAttribute('class'))"
        )
        assert 0 < len(mem) <= 5 and len({colour(c) for c in mem}) == len(mem)
        # At 820 px the three finding cards wrap instead of squashing below a readable width.
        widths = page.locator(".finding").evaluate_all("cs => cs.map(c => c.getBoundingClientRect().width)")
        assert len(widths) == 3 and min(widths) >= 340, widths
        assert page.evaluate("document.documentElement.scrollWidth") <= 820
        page.screenshot(path=str(tmp_path / "page-820.png"), full_page=True)
        assert log.errors == []


def test_driver_faults_in_a_replayed_trace_show_on_the_page_and_in_metrics(browser, tmp_path):
    # The throttle trace with an Xid 79 from NVML and an NV_ERR_NO_MEMORY kernel line added to one sample.
    lines = (SCENARIOS / "throttle.jsonl").read_text().splitlines()[:60]
    obj = json.loads(lines[50])
    no_memory = (
        "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from "
        "_memdescAllocInternal(pMemDesc) @ mem_desc.c:1359"
    )
    obj["driver_events"] = [
        {"ts": obj["ts"] - 3, "gpu": 0, "xid": 79, "source": "nvml", "text": "Xid 79 (NVML event)"},
        {"ts": obj["ts"] - 2, "gpu": None, "xid": None, "source": "journal", "text": no_memory},
    ]
    lines[50] = json.dumps(obj)
    trace = tmp_path / "driver.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    port = free_port()
    cmd = [sys.executable, "-m", "spark_watchd", "run", "--replay", str(trace), "--speed", SPEED]
    cmd += ["--listen", f"127.0.0.1:{port}", "--interval", "1", "--state-dir", str(tmp_path / "state")]
    proc = subprocess.Popen(
        cmd, env=cli_env({}), cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    origin = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not ((_get(origin + "/api/v1/history?limit=1") or {}).get("held", 0) >= 60):
            assert time.monotonic() < deadline and proc.poll() is None, "replay did not finish"
            time.sleep(0.1)
        with urllib.request.urlopen(origin + "/metrics", timeout=5) as r:
            metrics = r.read().decode()
        assert 'sparkwatchd_gpu_xid_errors_total{gpu="0",xid="79"} 1.0' in metrics
        assert 'sparkwatchd_events_total{kind="driver_oom"} 1.0' in metrics
        with open_page(browser, origin) as (page, log):
            xid = page.locator('#events li[data-kind="xid"]')
            expect(xid).to_contain_text("Xid 79 (fatal)")
            expect(xid).to_contain_text("GPU fell off the bus")
            expect(page.locator('#events li[data-kind="driver_oom"]')).to_contain_text("NV_ERR_NO_MEMORY")
            assert log.errors == [] and log.off_origin == []
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _first(trace: str, gotcha: str, severity: str, key: str | None = None):
    """The first finding of `gotcha` at `severity` (whose evidence has `key`) the real engine gives for a scenario."""
    from spark_watchd.diagnose.engine import Diagnoser

    for d in Diagnoser().run(read_trace(SCENARIOS / f"{trace}.jsonl")):
        f = d.findings[gotcha]
        if f.severity == severity and (key is None or f.evidence.get(key) is not None):
            return f
    raise AssertionError(f"{trace}: no {gotcha} {severity}")


def test_evidence_shows_units_pids_as_ids_and_no_empty_rows(browser):

    g4 = _first("throttle", "G4", "critical", "thermal_counter_share")
    g6 = _first("eviction", "G6", "critical")
    g3 = _first("eviction", "G6", "warning").replace(gotcha="G3")
    g3 = g3.replace(evidence={**g3.evidence, "workloads": []})  # as on a live page with no GPU
    # Issue 34: a figure not known at this sample draws no "runway –" row; a tiny fall reads 0, never -0.
    g3 = g3.replace(
        evidence={**g3.evidence, "runway_s": None, "runway_known": True, "fall_bytes_per_s": -2e6}
    )
    sample = next(iter(read_trace(SCENARIOS / "throttle.jsonl")))
    daemon = FakeDaemon()
    daemon.publish(snapshot_of(sample, Diagnosis(sample.ts, {"G3": g3, "G4": g4, "G6": g6}), mode="live"))
    with RouteServer(daemon.page_routes(), daemon) as srv, open_page(browser, srv.origin) as (page, log):
        page.wait_for_selector('.finding[data-gotcha="G6"][data-severity="critical"]')

        def rows(gotcha):
            card = page.locator(f'.finding[data-gotcha="{gotcha}"] .evidence')
            dts, dds = card.locator("dt").all_inner_texts(), card.locator("dd").all_inner_texts()
            return dict(zip(dts, dds, strict=True))

        g4_rows, g6_rows, g3_rows = rows("G4"), rows("G6"), rows("G3")
        share = g4.evidence["thermal_counter_share"]
        shown = g4_rows["thermal counter share"]
        assert shown.endswith(" %") and abs(float(shown[:-2]) - share * 100) < 0.1, shown
        assert re.fullmatch(r"[\d.]+ s", g4_rows["step time baseline"]), g4_rows
        assert re.fullmatch(r"[\d.]+ s", g4_rows["step time recent"])
        assert re.fullmatch(r"×[\d.]+", g4_rows["step time ratio"])
        assert re.fullmatch(r"[\d.,]+ s", g4_rows["throttled"])  # throttled_seconds_total
        pids = [str(p) for w in g6.evidence["workloads"] for p in w["members"]]
        for pid in pids:
            assert f"members {pid}" in g6_rows["workloads"] or f", {pid}" in g6_rows["workloads"]
        assert not re.search(r"\b\d{1,3},\d{3}\b", g6_rows["workloads"]), g6_rows  # never "members 5,120"
        assert "workloads" not in g3_rows  # an empty list draws no row
        assert "runway" not in g3_rows and g3_rows["runway known"] == "yes", g3_rows
        assert g3_rows["fall"] == "0 GiB/s", g3_rows
        for text in (*g4_rows.values(), *g6_rows.values()):
            assert "[object" not in text and "undefined" not in text and "NaN" not in text
        assert log.errors == []


def test_an_ended_job_leaves_the_legend_saying_so_not_its_last_values(browser):
    import dataclasses

    samples = list(read_trace(SCENARIOS / "eviction.jsonl"))[:60]
    # The job reports for 40 samples, then stops (the run finished): 20 more samples without it.
    samples = samples[:40] + [dataclasses.replace(s, throughput=()) for s in samples[40:]]
    daemon = FakeDaemon(Settings(web=WebSettings(page_refresh_seconds=0.5)))
    table = daemon.page_routes()  # the chart store follows every publish from here on
    for s in samples:
        daemon.publish(snapshot_of(s, diagnose_by_hand(s, evicted_at=float("inf"))))
    with RouteServer(table, daemon) as srv, open_page(browser, srv.origin) as (page, log):
        page.wait_for_selector("#chart-training .legend li", state="attached")
        legend = page.locator("#chart-training .legend li").all_inner_texts()
        assert legend and all("(ended)" in li and li.rstrip().endswith("–") for li in legend), legend
        assert log.errors == []


def test_labels_say_what_the_text_says_a_followed_exit_and_a_server_without_a_figure(browser):
    """Issue 34: an exit after its workload's kill is an exit (no red "killed" chip), and a found llama.cpp that
    exports no TTFT or KV use is named with what it lacks, never "No inference server found"."""
    import dataclasses

    samples = list(read_trace(REPO / "tests" / "fixtures" / "traces" / "serving" / "bursty_idle_30s.jsonl"))[
        :6
    ]
    bare = [
        dataclasses.replace(
            s, serving=tuple(dataclasses.replace(r, kv_usage=None, ttft_p95_s=None) for r in s.serving)
        )
        for s in samples
    ]
    last = bare[-1]
    follows = Event(
        "workload_exit",
        "",
        last.ts,
        "python3 (pid 4121) exited, after its workload's oom kill global",
        details={"cause": "oom_kill_global", "follows": True, "pid": 4121},
    )
    killed = Event(
        "workload_exit",
        "G3",
        last.ts - 30,
        "The kernel OOM killer killed python3 (pid 4120)",
        details={"cause": "oom_kill_global", "pid": 4120},
    )
    daemon = FakeDaemon()
    routes = daemon.page_routes()
    ok = {g: Finding(g, "ok", "fine") for g in ("G3", "G4", "G6")}
    for s in bare:
        daemon.publish(snapshot_of(s, Diagnosis(s.ts, ok), recent=(killed, follows), mode="live"))
    with RouteServer(routes, daemon) as srv, open_page(browser, srv.origin) as (page, log):
        page.wait_for_selector("#events li")
        kinds = page.locator("#events .kind")
        classes = kinds.evaluate_all("els => els.map(e => e.className)")
        labels = {re.sub(r"^G\d ", "", t): c for t, c in zip(kinds.all_inner_texts(), classes, strict=True)}
        assert "bad" in labels["workload killed"] and "bad" not in labels["workload exited"], labels
        nodata = page.locator("#chart-serving-latency .nodata").text_content()
        assert nodata.startswith("llamacpp:8080 exports no time to first token or KV-cache use"), nodata
        assert (
            "No inference server found"
            not in (page.locator("#chart-serving .nodata").all_text_contents() or [""])[0]
        )
        assert log.errors == []


def test_a_server_loading_its_model_is_said_loading_in_the_serving_table_not_down(browser):
    """Issue 33: a server still loading its model (not listening yet) is "loading", a down one "down"."""
    import dataclasses

    samples = list(read_trace(REPO / "tests" / "fixtures" / "traces" / "serving" / "bursty_idle_30s.jsonl"))[
        :3
    ]
    r0 = samples[-1].serving[0]
    loading = dataclasses.replace(
        r0, up=False, loading=True, error="loading: nothing listens on 127.0.0.1:8080", **dict.fromkeys(
            ("requests_running", "requests_waiting", "generation_tokens_per_s", "kv_usage"), None))  # fmt: skip
    down = dataclasses.replace(
        loading,
        server="llamacpp:8081",
        loading=False,
        error="ConnectionRefusedError: [Errno 111] Connection refused",
    )
    last = dataclasses.replace(samples[-1], serving=(loading, down))
    daemon = FakeDaemon()
    ok = {g: Finding(g, "ok", "fine") for g in ("G3", "G4", "G6")}
    for s in (*samples[:-1], last):
        daemon.publish(snapshot_of(s, Diagnosis(s.ts, ok), recent=(), mode="live"))
    with RouteServer(daemon.page_routes(), daemon) as srv, open_page(browser, srv.origin) as (page, log):
        page.wait_for_selector('#serving tr[data-kind="llamacpp"]')
        rows = page.locator("#serving tr th").all_inner_texts()
        assert any(
            t.startswith("llamacpp:8080") and "loading: nothing listens" in t and "down" not in t
            for t in rows
        ), rows
        assert any(t.startswith("llamacpp:8081") and "down: ConnectionRefused" in t for t in rows), rows
        assert log.errors == []
