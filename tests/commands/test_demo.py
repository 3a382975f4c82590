"""`spark-watchd demo`: a bundled GB10 scenario served by a real daemon, its URL printed."""

from __future__ import annotations

import json

from tests.daemon_helpers import http_get, running_daemon, samples, value


def test_demo_serves_a_bundled_scenario_and_prints_its_url(tmp_path):
    with running_daemon("--speed", "600", verb="demo") as (proc, base):
        status, text = http_get(base + "/metrics")
        m = samples(text)
        assert value(m, "sparkwatchd_source_up", source="replay") == 1
        assert value(m, "sparkwatchd_gpu_memory_info_supported", gpu="0") == 0  # a GB10 trace
        assert json.loads(http_get(base + "/api/v1/status")[1])["mode"] == "replay"
        proc.terminate()
        out = proc.communicate(timeout=10)[0]
    assert f"open {base}/" in out


def test_one_replay_clock_for_the_api_metrics_cli_and_events(tmp_path):
    # At 6000x the eviction scenario's trace time runs hours ahead of the wall clock within seconds
    # (a 14-minute demo at 60x was 13.7 h ahead): every output must date it by the wall clock.
    import re
    import time

    from tests.conftest import run_cli

    with running_daemon("--speed", "6000", verb="demo") as (proc, base):
        deadline = time.monotonic() + 30
        while True:
            doc = json.loads(http_get(base + "/api/v1/status")[1])
            if doc.get("recent_events") and doc["ts"] - time.time() > 3600:
                break
            assert time.monotonic() < deadline, "the demo did not run ahead with an event"
            time.sleep(0.2)
        now = time.time()
        shift = doc["replay"]["shift_s"]
        assert abs(doc["ts"] + shift - now) < 30
        for e in doc["recent_events"]:
            assert e["ts"] + shift <= now + 30  # events are in the past, never hours ahead
        m = samples(http_get(base + "/metrics")[1])
        assert abs(value(m, "sparkwatchd_last_sample_timestamp_seconds") - time.time()) < 30
        out = run_cli("status", "--url", base, "--color", "never", env={"COLUMNS": "200"}).stdout
        stamps = re.findall(r"^  (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)Z ", out, re.M)
        assert stamps, out
        for st in stamps:
            t = time.mktime(time.strptime(st, "%Y-%m-%d %H:%M:%S")) - time.mktime(time.gmtime(0))
            assert t <= time.time() + 60, f"status dates an event ahead of the clock: {st}"
        proc.terminate()
        proc.communicate(timeout=10)
