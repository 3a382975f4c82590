"""The post-mortem report in real Chromium at 1400, 820 and 390 px: every chart drawn, nothing fetched, no
overflow, axes readable, and what to do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_watchd.postmortem import list_bundles
from tests.conftest import REPO, require_binary
from tests.postmortem.helpers import feed, scenario
from tests.web.browser import launch

pytestmark = pytest.mark.e2e
# UPDATE_POSTMORTEM_SCREENSHOTS=1 refreshes docs/img/postmortem-*.png from this test.
SHOTS = REPO / "docs" / "img"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    state = tmp_path_factory.mktemp("state")
    feed(state, scenario("vllm_creep_oom_30s"))
    (b,) = list_bundles(state / "bundles")
    return b.path / "report.html"


@pytest.mark.parametrize("width", [1400, 820, 390])
def test_the_report_renders_offline_at_desktop_and_narrow_widths(report, width, tmp_path):
    require_binary("chromium")
    with launch() as ctx:
        page = ctx.new_page()
        page.set_viewport_size({"width": width, "height": 1000})
        errors, requests = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(report.as_uri())
        assert errors == []
        assert requests == [report.as_uri()]  # nothing fetched: readable offline
        assert page.locator("svg").count() >= 6
        assert page.locator("svg path").count() >= 8  # the series are drawn
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0
        widths = page.evaluate(
            "[...document.querySelectorAll('svg')].map(s => s.getBoundingClientRect().width)"
        )
        if width >= 640:
            assert all(w <= width for w in widths) and min(widths) > width * 0.6
        else:  # a phone: each chart scrolls in its own frame at a width its axes can be read at
            assert min(widths) >= 600
        # Issue 34: tick labels a person can read (about 9 px and up on screen), never 2.67e+03.
        ticks = page.evaluate(
            "[...document.querySelectorAll('svg text')].map(t => [t.textContent, t.getBoundingClientRect().height])"
        )
        assert ticks and all("e+" not in text and "e-" not in text for text, _ in ticks)
        assert min(h for _, h in ticks) >= 8, min(ticks, key=lambda t: t[1])
        # What to do: the advice the page gave for what happened.
        assert page.locator("h2", has_text="What to do").count() == 1
        assert page.locator(".advice li").count() >= 1
        assert "under global memory pressure" in page.inner_text(".trigger")
        shot = tmp_path / f"postmortem-{width}.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 20_000
        if os.environ.get("UPDATE_POSTMORTEM_SCREENSHOTS") == "1":
            page.screenshot(path=str(SHOTS / f"postmortem-{width}.png"), full_page=False)
