"""Acknowledging a finding from the status page (Chromium), against a real daemon (issue 34)."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.commands.test_ack import TRACE
from tests.conftest import require_binary
from tests.daemon_helpers import http_get, running_daemon
from tests.web.browser import launch, open_page

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("width", [1400, 390])
def test_the_page_acknowledges_a_warning_shows_it_as_such_and_withdraws_it(tmp_path, width):
    require_binary("chromium")
    trace = tmp_path / "tenant.jsonl"
    trace.write_text("\n".join(TRACE.read_text().splitlines()[80:120]) + "\n")  # G6 warning throughout
    args = ("--replay", str(trace), "--speed", "100000", "--state-dir", str(tmp_path / "state"))
    with (
        running_daemon(*args) as (_proc, base),
        launch() as browser,
        open_page(browser, base, width=width) as (
            page,
            log,
        ),
    ):
        card = page.locator('article.finding[data-gotcha="G6"]')
        expect(card).to_have_attribute("data-severity", "warning", timeout=20000)
        answers = iter(["2", "Ollama kept on purpose"])
        page.on("dialog", lambda d: d.accept(next(answers)))
        card.locator("button.ack-add").click()
        note = card.locator(".ack-note")
        expect(note).to_contain_text("Acknowledged until ")
        expect(note).to_contain_text(": Ollama kept on purpose")
        expect(card).to_have_class(re.compile(r"\backed\b"))
        assert card.get_attribute("data-severity") == "warning"  # still shown as the warning it is
        ack = json.loads(http_get(base + "/api/v1/status")[1])["findings"]["G6"]["acknowledged"]
        assert 2 * 3600 - 60 < ack["until"] - ack["at"] <= 2 * 3600
        box, view = note.bounding_box(), page.viewport_size
        assert box["x"] + box["width"] <= view["width"]  # nothing cut off at 390 px
        card.locator("button.ack-withdraw").click()
        expect(card.locator("button.ack-add")).to_be_visible()
        assert "acknowledged" not in json.loads(http_get(base + "/api/v1/status")[1])["findings"]["G6"]
        assert log.errors == [] and log.off_origin == []
