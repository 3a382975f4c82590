"""The pair view in headless Chromium: two real daemons on loopback, each the other's [fleet] peer.

spark-a replays the hot DDP rank, spark-b the rank that waits on it (tests/fixtures/traces/pair/). The page
of spark-b shows both Sparks side by side with the verdict naming spark-a; once spark-a's daemon is
stopped, its row reads down.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request

import pytest
from playwright.sync_api import expect

from tests.conftest import FIXTURES, REPO, cli_env, free_port, require_binary
from tests.web.browser import launch, open_page

pytestmark = pytest.mark.e2e
PAIR = FIXTURES / "traces" / "pair"


def _fleet(base: str) -> dict | None:
    try:
        with urllib.request.urlopen(base + "/api/v1/fleet", timeout=2) as r:
            return json.load(r)
    except OSError:
        return None


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    require_binary("chromium")
    tmp = tmp_path_factory.mktemp("pair")
    ports = {"a": free_port(), "b": free_port()}
    traces = {"a": PAIR / "hot_spark_ddp_45s.jsonl", "b": PAIR / "peer_waiting_ddp_45s.jsonl"}
    procs = {}
    for me, other in (("a", "b"), ("b", "a")):
        cfg = tmp / f"{me}.toml"
        cfg.write_text(f'[fleet]\nname = "spark-{me}"\ninterval_s = 1\ntimeout_s = 1\n'
                       f'peers = ["spark-{other}=127.0.0.1:{ports[other]}"]\n[web]\npage_refresh_seconds = 1\n')  # fmt: skip
        procs[me] = subprocess.Popen(
            [sys.executable, "-m", "spark_watchd", "run", "--config", str(cfg), "--replay", str(traces[me]),
             "--speed", "600", "--interval", "1", "--listen", f"127.0.0.1:{ports[me]}",
             "--state-dir", str(tmp / f"state-{me}")],
            env=cli_env(), cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
    bases = {k: f"http://127.0.0.1:{p}" for k, p in ports.items()}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            views = [(_fleet(b) or {}).get("view") for b in bases.values()]
            if all(v and v.get("straggler") == "spark-a" for v in views):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"no straggler verdict on both daemons: {views}")
        yield bases, procs
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                p.wait(10)
            p.stderr.close()


def test_the_waiting_spark_shows_both_side_by_side_and_names_the_hot_one(pair):
    bases, procs = pair
    with launch() as browser, open_page(browser, bases["b"]) as (page, log):
        expect(page.locator("#fleet")).to_be_visible(timeout=15000)
        rows = page.locator("#fleet-members tr")
        expect(rows).to_have_count(2)
        expect(rows.nth(0)).to_contain_text("spark-b (this Spark)")
        expect(rows.nth(1)).to_contain_text("spark-a")
        expect(rows.nth(1)).to_contain_text("G4 critical")
        expect(page.locator("#fleet-verdict")).to_contain_text(
            "DDP peer spark-a is throttling and this Spark waits on it"
        )
        expect(page.locator("#link-line")).to_contain_text(
            "ConnectX-7 link up: rocep1s0f0 200 Gb/s, roceP2p1s0f0 200 Gb/s"
        )
        for chart in ("fleet-temp", "fleet-clock", "fleet-budget", "fleet-tokens"):
            expect(page.locator(f"#{chart} svg")).to_have_count(1)
        # Issue 34: one series per Spark, legend values rounded to their unit, lines unbroken between reads.
        page.wait_for_selector("#fleet-temp path.line")
        legend = page.locator("#fleet-temp .legend li").all_inner_texts()
        assert len(legend) == 2 and sorted(t.split()[0] for t in legend) == ["spark-a", "spark-b"], legend
        assert all(re.search(r"\b\d+ °C$", t) for t in legend), legend  # never 58.10824680328369
        for d in page.locator("#fleet-temp path.line").evaluate_all("ps => ps.map(p => p.getAttribute('d'))"):
            assert d.count("M") == 1, d  # one unbroken line per Spark across its peer reads
        procs["a"].terminate()
        procs["a"].wait(10)
        expect(rows.nth(1)).to_contain_text("down", timeout=20000)
        expect(page.locator("#fleet-verdict")).to_contain_text("peer spark-a down")
        # Why it is down is in its State cell, never under Link.
        expect(rows.nth(1).locator("td.state")).to_contain_text("down: ")
        assert rows.nth(1).locator("td").last.inner_text() == "–"
        assert not log.errors, log.errors
        assert not log.off_origin


def test_the_pair_table_is_cards_that_fit_a_phone(pair):
    bases, _ = pair
    with launch() as browser, open_page(browser, bases["b"], width=390) as (page, log):
        expect(page.locator("#fleet")).to_be_visible(timeout=15000)
        row = page.locator("#fleet-members tr").nth(0)
        expect(row).to_contain_text("spark-b (this Spark)")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        for cell in row.locator("td").all():
            box = cell.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= 391, cell.inner_text()
        assert row.locator("td").nth(2).get_attribute("data-label") == "Temperature"
        assert not log.errors, log.errors
