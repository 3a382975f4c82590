"""The status page links the latest post-mortem, and the link opens the report from the daemon's own route."""

from __future__ import annotations

import pytest

from spark_watchd.web import postmortem as postmortem_web
from tests.conftest import require_binary
from tests.postmortem.helpers import feed, scenario
from tests.web.browser import launch, open_page
from tests.web.standin import FakeDaemon, RouteServer, snapshot_of

pytestmark = pytest.mark.e2e


def test_the_page_links_the_latest_report_which_opens_offline(tmp_path):
    require_binary("chromium")
    samples = scenario("vllm_creep_oom_30s")
    pm = feed(tmp_path, samples)
    from spark_watchd.diagnose.engine import Diagnoser

    d = Diagnoser()
    diag = [d.observe(s) for s in samples][-1]
    daemon = FakeDaemon()
    latest = postmortem_web.latest_info(pm.root)
    daemon.publish(snapshot_of(samples[-1], diag, mode="live", extras={"postmortem": latest}))
    routes = daemon.page_routes() + postmortem_web.routes(pm.root)
    with (
        launch() as browser,
        RouteServer(routes, daemon) as srv,
        open_page(browser, srv.origin) as (page, log),
    ):
        link = page.wait_for_selector("#postmortem a")
        assert "Post-mortem of the last oom kill" in link.inner_text()
        assert link.get_attribute("href") == "/postmortem/latest"
        link.click()
        page.wait_for_selector(".trigger")
        assert "under global memory pressure" in page.inner_text(".trigger")
        assert page.locator("svg").count() >= 6
        assert log.off_origin == []
