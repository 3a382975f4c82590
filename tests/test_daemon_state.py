"""State across restarts and a failing state disk, as scrapes and /api/v1/status see them (issue 13 section 4)."""

from __future__ import annotations

import json
import shutil

from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.web.http import Request
from tests.daemon_helpers import samples, value


class _Mem:
    name = "meminfo"

    def collect(self, partial):
        return {"meminfo": {"MemTotal": 1000, "MemAvailable": 400}}

    def close(self):
        pass


def _get(table, path):
    reply = table[path].handler(Request("GET", path, {}, {"accept": "text/plain"}, b"", "127.0.0.1"))
    assert reply.status == 200
    return reply.body.decode()


def _daemon(state_dir):
    d = build(load_settings(None, environ={}), sources=(_Mem(),), state_dir=str(state_dir))
    return d, {r.path: r for r in d.routes if r.method == "GET"}


def test_first_scrape_after_a_restart_shows_the_restored_event_counts(tmp_path):
    state = {
        "version": 1,
        "engine": {},
        "event_counts": {"eviction": 5, "oom_kill": 2, "reboot_after_throttle": 1},
    }
    (tmp_path / "state.json").write_text(json.dumps(state))
    d, table = _daemon(tmp_path)
    try:
        m = samples(_get(table, "/metrics"))  # before the first tick
        assert value(m, "sparkwatchd_events_total", kind="eviction") == 5
        assert value(m, "sparkwatchd_events_total", kind="oom_kill") == 2
        assert value(m, "sparkwatchd_events_total", kind="reboot_after_throttle") == 1
        assert json.loads(_get(table, "/api/v1/status"))["event_counts"]["eviction"] == 5
    finally:
        d.close()


def test_a_failing_state_disk_is_exported_shown_in_status_and_recovers(tmp_path):
    d, table = _daemon(tmp_path)
    try:
        d.tick()
        m = samples(_get(table, "/metrics"))
        assert value(m, "sparkwatchd_source_up", source="state") == 1
        (tmp_path / "state.json").unlink()
        (tmp_path / "state.json").mkdir()  # the atomic rename now fails, like a read-only remount
        d.runtime._saved_key = None  # the next tick must write (a change that matters for a reboot verdict)
        d.tick()
        m = samples(_get(table, "/metrics"))
        assert value(m, "sparkwatchd_source_up", source="state") == 0
        assert value(m, "sparkwatchd_source_errors_total", source="state") >= 1
        doc = json.loads(_get(table, "/api/v1/status"))
        assert doc["sources"]["state"]["up"] is False and "write" in doc["sources"]["state"]["error"]
        shutil.rmtree(tmp_path / "state.json")
        d.tick()
        assert value(samples(_get(table, "/metrics")), "sparkwatchd_source_up", source="state") == 1
    finally:
        d.close()


def test_no_state_source_when_nothing_is_kept_on_disk():
    d = build(load_settings(None, environ={}), sources=(_Mem(),), state_dir=None)
    try:
        assert "state" not in d.tick().sources
    finally:
        d.close()
