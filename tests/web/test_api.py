"""The core routes: /healthz by freshness, /api/v1/status as the published snapshot's document, /metrics."""

from __future__ import annotations

import json
import time

import spark_watchd
from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.web.server import HttpServer
from tests.daemon_helpers import http_get
from tests.support.fakes import MEMINFO, FakeSource


def test_healthz_503_before_the_first_sample_and_when_stale(tmp_path):
    import dataclasses

    daemon = build(
        load_settings(None, environ={}),
        sources=(FakeSource(reading={**MEMINFO, "vmstat": {"oom_kill": 2}}),),
        state_dir=None,
    )
    srv = HttpServer("127.0.0.1:0", daemon.routes, workers=2, timeout=1.0)
    srv.start()
    try:
        assert http_get(srv.url + "healthz") == (503, "no sample yet\n")
        snap = daemon.tick()
        assert http_get(srv.url + "healthz") == (200, "ok\n")
        daemon._snapshot = dataclasses.replace(snap, published_at=time.time() - 95)  # > 3 x 30 s
        status, body = http_get(srv.url + "healthz")
        assert status == 503 and body.startswith("stale: last sample 95 s ago")
        assert http_get(srv.url + "metrics")[0] == 200
    finally:
        srv.stop()
        daemon.close()


def test_status_document_carries_memory_budget_sources_and_findings_of_the_published_tick():
    reading = {
        "meminfo": {"MemTotal": 8 * 2**20, "MemAvailable": 6 * 2**20, "SwapTotal": 2048, "SwapFree": 1024}
    }
    daemon = build(load_settings(None, environ={}), sources=(FakeSource(reading=reading),), state_dir=None)
    srv = HttpServer("127.0.0.1:0", daemon.routes, workers=2, timeout=1.0)
    srv.start()
    try:
        before = json.loads(http_get(srv.url + "api/v1/status")[1])
        assert before["ts"] is None and before["worst"] == "unknown" and before["fresh"] is False
        daemon.tick()
        status, body = http_get(srv.url + "api/v1/status")
        doc = json.loads(body)
    finally:
        srv.stop()
        daemon.close()
    assert status == 200 and doc["version"] == spark_watchd.__version__ and doc["fresh"] is True
    mem = doc["memory"]
    assert (mem["total_bytes"], mem["available_bytes"], mem["swap_used_bytes"]) == (
        8 * 2**30,
        6 * 2**30,
        1024 * 1024,
    )
    reserve = daemon.settings.thresholds.os_reserve_bytes
    assert mem["os_reserve_bytes"] == reserve and mem["budget_bytes"] == max(0, 6 * 2**30 - reserve)
    assert doc["sources"]["meminfo"]["up"] is True and doc["sources"]["meminfo"]["errors_total"] == 0
    rank = {"unknown": -1, "ok": 0, "warning": 1, "critical": 2}
    assert set(doc["findings"]) >= {"G3", "G4", "G6"}
    assert doc["worst"] == max((f["severity"] for f in doc["findings"].values()), key=rank.__getitem__)


def test_status_findings_carry_the_classifiers_typed_state():
    """Code reads the verdict's state (throttling, rates, counts), never evidence key names."""
    from spark_watchd.web.api import status_dict

    reading = {"meminfo": {"MemTotal": 8 * 2**20, "MemAvailable": 6 * 2**20}}
    daemon = build(load_settings(None, environ={}), sources=(FakeSource(reading=reading),), state_dir=None)
    try:
        daemon.tick()
        doc = json.loads(json.dumps(status_dict(daemon)))
    finally:
        daemon.close()
    g3, g4, g6 = (doc["findings"][g]["state"] for g in ("G3", "G4", "G6"))
    assert g3["budget_bytes"] == 6 * 2**30 - daemon.settings.thresholds.os_reserve_bytes
    assert g3["swapout_per_s"] is None  # one sample: no rate yet
    assert g4["throttling"] is False and g4["reason"] is None and g4["step"] is None
    assert g6 == {"heavy": 0, "uncapped": 0, "large": 0, "footprint_bytes": 0, "majfault_per_s": None}


def test_metrics_render_once_per_published_tick():
    from spark_watchd.export.prometheus import build_registry
    from spark_watchd.web import api
    from spark_watchd.web.http import Request

    daemon = build(load_settings(None, environ={}), sources=(FakeSource(reading=MEMINFO),), state_dir=None)
    reg = build_registry(daemon)
    calls = []
    real = reg.collect
    reg.collect = lambda: calls.append(1) or real()
    route = next(r for r in api.routes(daemon, reg) if r.path == "/metrics")
    req = Request("GET", "/metrics", {}, {}, b"", "127.0.0.1")
    try:
        daemon.tick()
        first, second = route.handler(req).body, route.handler(req).body
        assert first == second and len(calls) == 1  # the second scrape is served the same bytes
        daemon.tick()
        third = route.handler(req).body
        assert len(calls) == 2 and b"sparkwatchd_build_info" in third
        daemon.overruns += 1  # the one figure not on the snapshot
        assert b"sparkwatchd_tick_overruns_total 1.0" in route.handler(req).body and len(calls) == 3
    finally:
        daemon.close()
