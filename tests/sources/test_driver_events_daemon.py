"""The real daemon on a fake GPU whose driver reports an Xid: the counter, the event and the source's states."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import FIXTURES
from tests.daemon_helpers import http_get, running_daemon, samples, value


@pytest.mark.slow
def test_running_daemon_counts_an_xid_the_driver_reports_and_lists_the_event(tmp_path):
    ctl = tmp_path / "nvml.json"
    ctl.write_text("{}")
    env = {
        "SPARK_WATCHD_FAKE_NVML": f"file:{ctl}",
        "SPARK_WATCHD_SOURCES__PROC_ROOT": str(FIXTURES / "hosts" / "daemon-vm" / "proc"),
        "SPARK_WATCHD_SOURCES__JOURNALCTL_PATH": "",  # this machine's journal is not the test's business
        "SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path / "state"),
    }
    with running_daemon("--interval", "1", env=env) as (proc, base):
        deadline = time.monotonic() + 30
        n = 0
        while True:
            # Re-deliver until the events thread has registered (an Xid before registration is not delivered).
            n += 1
            tmp = tmp_path / "nvml.json.tmp"
            tmp.write_text(json.dumps({"xids": [79], "round": n}))
            tmp.replace(ctl)
            time.sleep(0.5)
            text = http_get(base + "/metrics")[1]
            got = value(samples(text), "sparkwatchd_gpu_xid_errors_total", gpu="0", xid="79")
            if got:
                break
            assert time.monotonic() < deadline, "the Xid never reached /metrics"
        assert value(samples(text), "sparkwatchd_gpu_xid_errors_total", gpu="0", xid="13") == 0
        assert value(samples(text), "sparkwatchd_source_up", source="driver_events") == 1
        doc = json.loads(http_get(base + "/api/v1/status")[1])
        xids = [e for e in doc["recent_events"] if e["kind"] == "xid"]
        assert xids and xids[0]["details"]["xid"] == 79 and xids[0]["details"]["fatal"] is True
        assert "GPU fell off the bus" in xids[0]["summary"]
        # Issue 18: each feed's state on /api/v1/status and /metrics (the page renders the same document).
        feeds = doc["driver_feeds"]
        assert feeds["nvml-events"]["state"] == "watching" and feeds["kernel-log"]["state"] == "off"
        assert feeds["previous-boot"] == {
            "state": "off",
            "detail": "off (no journalctl configured)",
            "lines_rejected": 0,
        }
        got = samples(text)
        assert value(got, "sparkwatchd_driver_feed_state", feed="nvml-events", state="watching") == 1
        assert value(got, "sparkwatchd_driver_feed_state", feed="kernel-log", state="watching") == 0
        assert value(got, "sparkwatchd_driver_lines_rejected_total", feed="kernel-log") == 0
        proc.terminate()
        assert proc.wait(timeout=15) == 0
