"""The composition root: every part built and wired in one place, nothing wired by side effect."""

from __future__ import annotations

import json

import structlog

from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.sources.replay import ReplayFeed
from spark_watchd.throughput.ledger import read_runs
from spark_watchd.web.http import Request
from tests.conftest import REPO

EVICTION = REPO / "spark_watchd" / "scenarios" / "eviction.jsonl"


class _Mem:
    name = "meminfo"

    def collect(self, partial):
        return {"meminfo": {"MemTotal": 100, "MemAvailable": 60}}

    def close(self):
        pass


def _settings(tmp_path, **env):
    return load_settings(None, environ={"SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path), **env})


def _post(route, body: dict):
    headers = {"content-type": "application/json"}
    req = Request("POST", route.path, {}, headers, json.dumps(body).encode(), "127.0.0.1")
    return route.handler(req)


def test_build_wires_routes_throughput_and_ledger(tmp_path):
    daemon = build(_settings(tmp_path), sources=(_Mem(),))
    table = {r.path: r for r in daemon.routes}
    assert {"/metrics", "/healthz", "/api/v1/status", "/", "/api/v1/history", "/api/v1/workloads"} <= set(
        table
    )
    assert _post(table["/api/v1/progress"], {"job": "sft", "step": 3}).status == 200
    snap = daemon.tick()
    # The tracker reports beside the sources, guarded by the same collector.
    assert snap.sources["progress"].up and snap.sources["meminfo"].up
    assert [r.job for r in snap.sample.throughput] == ["sft"] and snap.extras["jobs"][0].job == "sft"
    assert (
        "sparkwatchd_memory_available_bytes 61440.0"
        in table["/metrics"].handler(Request("GET", "/metrics", {}, {}, b"", "127.0.0.1")).body.decode()
    )
    assert (
        json.loads(table["/api/v1/history"].handler(Request("GET", "/api/v1/history", {}, {}, b"", "")).body)[
            "held"
        ]
        == 1
    )  # the page's chart store follows each snapshot
    daemon.close()  # ends the open run: the ledger writes it
    assert [r["job"] for r in read_runs(tmp_path / "runs.jsonl")[0]] == ["sft"]


def test_progress_disabled_builds_no_tracker_and_no_route(tmp_path):
    daemon = build(_settings(tmp_path, SPARK_WATCHD_PROGRESS__ENABLED="false"), sources=(_Mem(),))
    assert "/api/v1/progress" not in {r.path for r in daemon.routes}
    assert "progress" not in daemon.tick().sources
    daemon.close()


def test_replay_without_a_state_dir_writes_no_ledger(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    daemon = build(_settings(tmp_path / "state"), replay=ReplayFeed(str(EVICTION), speed=1e9), state_dir=None)
    (route,) = [r for r in daemon.routes if r.path == "/api/v1/progress"]
    assert _post(route, {"job": "b", "step": 1, "event": "end"}).status == 200
    daemon.tick()
    daemon.close()
    assert list(tmp_path.iterdir()) == []


def test_serve_false_builds_only_sources_and_diagnosis(tmp_path):
    daemon = build(_settings(tmp_path), sources=(_Mem(),), state_dir=None, serve=False)
    assert daemon.routes == () and daemon.contributors is None
    snap = daemon.tick()
    assert set(snap.sources) == {"meminfo"} and snap.diagnosis is not None
    daemon.close()


class _Down:
    name = "nvml"

    def collect(self, partial):
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    def close(self):
        pass


def test_a_source_named_missing_at_start_up_is_expected_down_from_the_build(tmp_path):
    daemon = build(_settings(tmp_path), sources=(_Down(), _Mem()), expected_down={"nvml"}, state_dir=None)
    try:
        with structlog.testing.capture_logs() as logs:
            assert not daemon.tick().sources["nvml"].up
        # Said once at start-up: its first "down" is no warning (debug lines may be filtered: judge warnings).
        assert [e["event"] for e in logs if e["log_level"] not in ("debug", "info")] == []
        assert daemon.collector.expected_down == {"nvml"}
    finally:
        daemon.close()


def test_the_pair_view_reads_this_daemons_own_status_once_started(tmp_path):
    settings = _settings(tmp_path, SPARK_WATCHD_FLEET__PEERS='["spark-b=127.0.0.1:9"]')
    daemon = build(settings, sources=(_Mem(),), state_dir=None)
    try:
        daemon.tick()
        fleet = dict(daemon.extras)["fleet"].__self__
        assert fleet.own_status()["interval_seconds"] == daemon.expected_period()
        assert "/api/v1/fleet" in {r.path for r in daemon.routes}
    finally:
        daemon.close()


def test_a_verb_says_a_bad_configuration_under_its_own_name(tmp_path, capsys):
    import argparse

    from spark_watchd.app import settings_or_say

    bad = tmp_path / "config.toml"
    bad.write_text("[daemon]\ninterval = 0\n", encoding="utf-8")
    assert settings_or_say(argparse.Namespace(config=str(bad)), "plan") is None
    err = capsys.readouterr().err
    assert err.startswith("spark-watchd plan: bad configuration: ") and "daemon.interval" in err
