"""The page's routes without a browser: shell, assets, history and workloads APIs, wiring."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request

import pytest

from spark_watchd.config import Settings
from spark_watchd.sample.groups import group_workloads
from spark_watchd.sample.model import ProcessInfo
from spark_watchd.sample.trace import read_trace
from spark_watchd.snapshot import Snapshot
from spark_watchd.web.charts import History
from spark_watchd.web.http import Request
from spark_watchd.web.page import parse_since, routes, workloads_json
from spark_watchd.web.settings import WebSettings
from tests.conftest import REPO, cli_env, free_port
from tests.web.standin import SCENARIOS, FakeDaemon, diagnose_by_hand, snapshot_of


def _get(table, path, **query):
    req = Request("GET", path, {k: [v] for k, v in query.items()}, {}, b"", "127.0.0.1")
    return table[path].handler(req)


@pytest.fixture(scope="module")
def eviction_samples():
    return list(read_trace(SCENARIOS / "eviction.jsonl"))


@pytest.fixture
def served(eviction_samples):
    daemon = FakeDaemon(
        Settings(web=WebSettings(page_refresh_seconds=2.5, page_hours=6, history_api_max_records=100))
    )
    table = {r.path: r for r in daemon.page_routes()}
    for s in eviction_samples[:150]:
        daemon.publish(snapshot_of(s, diagnose_by_hand(s, evicted_at=1764407100.0)))
    return daemon, table


def test_history_api_serves_the_chart_store_it_is_handed(served):
    daemon, table = served
    assert len(daemon.history) == 150
    assert json.loads(_get(table, "/api/v1/history").body)["held"] == 150


def test_routes_subscribe_nothing_themselves():
    daemon = FakeDaemon()
    history = History(WebSettings(history_max_records=10))
    table = {r.path: r for r in routes(daemon, history, daemon.settings.web)}
    assert daemon._subs == []  # the composition root wires the store, not the routes
    assert json.loads(_get(table, "/api/v1/history").body)["held"] == 0


def test_page_shell_carries_settings_and_a_same_origin_only_policy(served):
    _, table = served
    resp = _get(table, "/")
    html = resp.body.decode()
    assert resp.status == 200 and resp.content_type.startswith("text/html")
    assert 'data-refresh-s="2.5"' in html and 'data-page-hours="6"' in html
    csp = resp.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "script-src 'self'" in csp
    for gotcha in ("G3", "G4", "G6"):
        assert f'data-gotcha="{gotcha}"' in html


def test_every_asset_the_page_names_is_served_and_nothing_points_off_origin(served):
    _, table = served
    html = _get(table, "/").body.decode()
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', html)
    assert {"/static/app.js", "/static/chart.js", "/static/style.css", "/static/favicon.svg"} <= set(assets)
    for path in assets:
        resp = _get(table, path)
        assert resp.status == 200 and resp.body
    assert _get(table, "/static/app.js").content_type.startswith("text/javascript")
    assert _get(table, "/static/style.css").content_type.startswith("text/css")
    for path in [p for p in table if p.startswith("/static/")] + ["/"]:
        text = _get(table, path).body.decode()
        # The only absolute URL allowed is the SVG namespace, which is an identifier, never fetched.
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.[a-z]{2,}[^\s\"')]*", text)) - {
            "http://www.w3.org/2000/svg"
        }
        assert not urls, f"{path} names {urls}"
        assert "@import" not in text and "@font-face" not in text


def test_history_api_returns_records_since_a_time(served):
    _, table = served
    body = json.loads(_get(table, "/api/v1/history", since="1764407100").body)
    assert body["count"] == 19 and not body["truncated"]  # samples 131..149 of the trace
    assert all(r["ts"] > 1764407100 for r in body["records"])
    assert body["records"][0]["findings"]["G6"] == "critical"
    evict = json.loads(_get(table, "/api/v1/history", since="1764407099").body)["records"][0]
    assert evict["events"][0]["kind"] == "eviction"


def test_history_api_caps_the_answer_at_the_configured_size(served):
    _, table = served
    body = json.loads(_get(table, "/api/v1/history").body)
    assert body["count"] == 100 and body["truncated"] and body["held"] == 150
    body = json.loads(_get(table, "/api/v1/history", limit="100000").body)
    assert body["count"] == 100
    body = json.loads(_get(table, "/api/v1/history", limit="5").body)
    assert body["count"] == 5 and body["records"][-1]["ts"] == body["last_ts"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"since": "yesterday"}, "since: not a number"),
        ({"since": "nan"}, "since: must be finite"),
        ({"limit": "-3"}, "limit:"),
    ],
)
def test_history_api_refuses_bad_parameters_naming_them(served, query, message):
    _, table = served
    resp = _get(table, "/api/v1/history", **query)
    assert resp.status == 400
    assert json.loads(resp.body)["error"].startswith(message.split(" must")[0])


def test_parse_since_accepts_empty_and_numbers():
    assert parse_since({}) == (None, None)
    assert parse_since({"since": ["1764407100.5"], "limit": ["10"]}) == (1764407100.5, 10)


def test_workloads_api_lists_processes_biggest_first_with_kind(served, eviction_samples):
    daemon, table = served
    s = eviction_samples[200]  # trainer and an uncapped vLLM share the pool
    daemon.publish(snapshot_of(s, diagnose_by_hand(s, evicted_at=1764407100.0)))
    rows = json.loads(_get(table, "/api/v1/workloads").body)["workloads"]
    assert [r["pid"] for r in rows] == [7731, 5120]
    assert [r["kind"] for r in rows] == ["vllm", "trainer"]
    # A KV budget in bytes bounds the server: capped, with the flag that capped it; a trainer has no cap.
    assert [r["capped"] for r in rows] == [True, None]
    assert rows[0]["cap"].startswith("--kv-cache-memory-bytes ")
    by_pid = {p.pid: p for p in s.processes}
    assert (
        rows[0]["gpu_mem_bytes"] == by_pid[7731].gpu_mem_bytes
        and rows[1]["rss_bytes"] == by_pid[5120].rss_bytes
    )
    assert rows[0]["members"] == [7731] and rows[0]["footprint_bytes"] >= by_pid[7731].gpu_mem_bytes
    assert "--kv-cache-memory-bytes" in rows[0]["cmdline"]


def test_workloads_json_without_a_sample_is_empty():
    assert workloads_json(Snapshot(None, None)) == {"ts": None, "workloads": []}


def test_workloads_api_shows_one_row_per_server_process_group():
    """A vLLM V1 launcher and its renamed engine are one row: the launcher's argv and cap, both members."""
    procs = (
        ProcessInfo(100, 10.0, "vllm", ("vllm", "serve", "m", "--gpu-memory-utilization", "0.35"), 2 * 2**30),
        ProcessInfo(101, 12.0, "VLLM::EngineCor", ("VLLM::EngineCore",), 2**30, 40 * 2**30, True, 100),
    )
    snap = Snapshot(None, None, workloads=group_workloads(procs))
    (row,) = workloads_json(snap)["workloads"]
    assert row["pid"] == 100 and row["members"] == [100, 101]
    assert row["capped"] is True and row["cap"] == "--gpu-memory-utilization 0.35"
    assert row["footprint_bytes"] == 42 * 2**30 and row["cmdline"].startswith("vllm serve m")


def test_demo_verb_tells_the_page_it_is_a_demo(tmp_path):
    """`spark-watchd demo` marks its snapshots (extras.demo = scenario) so the page shows a DEMO badge."""
    port = free_port()
    cmd = [sys.executable, "-m", "spark_watchd", "demo", "--scenario", "throttle", "--no-loop"]
    cmd += ["--speed", "100000", "--listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(
        cmd, env=cli_env(), cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline, status = time.monotonic() + 30, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/status", timeout=2) as r:
                    status = json.load(r)
                if status.get("ts"):
                    break
            except OSError:
                pass
            time.sleep(0.1)
        assert status is not None and status.get("ts"), proc.stderr.read().decode()[-2000:]
        assert status["mode"] == "replay" and status["extras"]["demo"] == "throttle"
    finally:
        proc.terminate()
        proc.wait(10)
