"""The page in headless Chromium against a stand-in server fed hand-made snapshots.

Covers what the real-daemon test cannot steer: refresh without reload as new
samples arrive, a history reset, and a source that is down.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from spark_watchd.trace import read_trace
from spark_watchd.web.page import routes
from tests.conftest import require_binary
from tests.web.browser import launch, open_page
from tests.web.standin import SCENARIOS, FakeDaemon, RouteServer, diagnose_by_hand, snapshot_of

pytestmark = pytest.mark.e2e
EVICTED_AT = 1764407100.0


@pytest.fixture(scope="module")
def browser():
    require_binary("chromium")
    with launch() as b:
        yield b


@pytest.fixture(scope="module")
def traces():
    return {name: list(read_trace(SCENARIOS / f"{name}.jsonl")) for name in ("eviction", "throttle")}


@pytest.fixture
def served():
    from spark_watchd.config import Settings
    from spark_watchd.web.settings import WebSettings

    daemon = FakeDaemon(Settings(web=WebSettings(page_refresh_seconds=0.5)))
    with RouteServer(routes(daemon), daemon) as srv:
        yield daemon, srv


def _feed(daemon, samples, nvml_error=None):
    recent = ()
    for s in samples:
        diag = diagnose_by_hand(s, EVICTED_AT)
        recent = (recent + diag.events)[-20:]
        daemon.publish(snapshot_of(s, diag, recent, nvml_error=nvml_error))


def test_page_follows_new_samples_without_reloading(browser, served, traces):
    daemon, srv = served
    _feed(daemon, traces["eviction"][:100])
    with open_page(browser, srv.origin) as (page, log):
        page.wait_for_selector('.finding[data-gotcha="G6"][data-severity="warning"]')
        assert page.locator('#events li[data-kind="eviction"]').count() == 0
        page.evaluate("window.__sameDocument = true")
        _feed(daemon, traces["eviction"][100:200])
        page.wait_for_selector('#events li[data-kind="eviction"]', timeout=10_000)
        page.wait_for_selector('.finding[data-gotcha="G6"][data-severity="critical"]')
        assert page.evaluate("window.__sameDocument") is True  # updated in place, no reload
        points = int(page.locator('#chart-power path[data-series="Power"]').get_attribute("data-points"))
        assert points == 200
        # A new trace starting earlier (a looping replay): the daemon clears its history and so does the page.
        _feed(daemon, traces["throttle"][:50])
        expect(page.locator('#chart-power path[data-series="Power"]')).to_have_attribute("data-points", "50")
        assert log.errors == []
        assert log.off_origin == []


def test_source_down_is_shown_with_its_reason(browser, served, traces):
    daemon, srv = served
    _feed(daemon, traces["eviction"][:5], nvml_error="NVML Shared Library Not Found")
    with open_page(browser, srv.origin) as (page, log):
        down = page.wait_for_selector('#sources li[data-source="nvml"].down')
        assert down.inner_text() == "nvml down: NVML Shared Library Not Found"
        assert log.errors == []


def test_throttle_periods_are_shaded(browser, served, traces):
    daemon, srv = served
    _feed(daemon, traces["throttle"])
    with open_page(browser, srv.origin) as (page, log):
        page.wait_for_selector("#chart-training path.line")
        bands = page.locator("#chart-training rect.band").count()
        assert bands >= 1
        assert page.locator("#chart-power rect.band").count() == bands
        assert page.locator("#chart-memory rect.band").count() == 0  # memory has nothing to do with heat
        assert log.errors == []
