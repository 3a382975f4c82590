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
