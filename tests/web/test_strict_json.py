"""Strict JSON everywhere (issue 29, break 5): no NaN or Infinity leaves the daemon, on any HTTP answer or
file; null in their place. A real daemon beside a real NaN peer, the routes of a daemon whose snapshot
holds non-finite numbers (a server's 1e308 on two engines sums to inf), and a recorded trace."""

from __future__ import annotations

import dataclasses
import json
import time

from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.sample.serving import ServingReading
from spark_watchd.sample.trace import TraceWriter, read_trace
from spark_watchd.sources.replay import ReplayFeed
from spark_watchd.web.http import Request
from tests.conftest import REPO
from tests.daemon_helpers import http_get, running_daemon
from tests.web.test_fleet_hostile import good_body, own, peer, strict_json

TRACE = str(REPO / "spark_watchd" / "scenarios" / "throttle.jsonl")
INF = float("inf")


def test_a_nan_peer_beside_bad_and_good_peers_leaves_every_answer_strict_json_and_is_logged_once(tmp_path):
    nan = json.dumps(own(host="spark-n")).replace('"temp_c": 82', '"temp_c": NaN').encode()
    deep = b'{"gpus": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    with (
        peer(nan) as p_nan,
        peer(deep) as p_deep,
        peer(b'{"gpus": [1, "x", null]}') as p_typed,
        peer(good_body()) as p_good,
    ):
        peers = [f"nan=127.0.0.1:{p_nan}", f"deep=127.0.0.1:{p_deep}", f"typed=127.0.0.1:{p_typed}",
                 f"good=127.0.0.1:{p_good}"]  # fmt: skip
        env = {"SPARK_WATCHD_FLEET__PEERS": json.dumps(peers), "SPARK_WATCHD_FLEET__INTERVAL_S": "1",
               "SPARK_WATCHD_FLEET__TIMEOUT_S": "3"}  # fmt: skip
        args = ("--replay", TRACE, "--speed", "60", "--loop", "--interval", "1", "--state-dir", str(tmp_path / "s"))  # fmt: skip
        with running_daemon(*args, env=env) as (proc, base):
            deadline = time.monotonic() + 60
            while True:
                doc = strict_json(http_get(base + "/api/v1/fleet")[1])
                if len((doc["history"] or {}).get("good", [])) >= 4:
                    break
                assert time.monotonic() < deadline, doc
                time.sleep(0.5)
            m = {r["name"]: r for r in doc["view"]["members"]}
            assert m["nan"]["error"] == "non-finite number NaN" and not m["nan"]["up"]
            assert "nested deeper than" in m["deep"]["error"] and "gpus[0]" in m["typed"]["error"]
            assert m["good"]["up"] and m["good"]["temp_c"] == 70
            assert [r["up"] for r in doc["view"]["members"] if r["self"]] == [True]
            for path in ("/api/v1/status", "/api/v1/fleet", "/api/v1/history", "/api/v1/workloads"):
                status, body = http_get(base + path)
                assert status == 200, path
                strict_json(body)
            proc.terminate()
            _, err = proc.communicate(timeout=20)
    for name in ("nan", "deep", "typed"):
        assert err.count(f"peer {name} down") == 1, err[-3000:]
    assert "Traceback" not in err and "fleet poll failed" not in err


def _daemon_with_infinities(tmp_path):
    """A replaying daemon whose published snapshot carries what a server's 1e308 on two engines sums to."""
    settings = load_settings(None, environ={})
    d = build(settings, replay=ReplayFeed(TRACE, speed=1e6), state_dir=str(tmp_path / "s"))
    for _ in range(3):
        d.tick()
    snap = d.snapshot()
    row = ServingReading("vllm:8000", "vllm", True, ts=snap.sample.ts, requests_running=INF,
                         generation_tokens_total=INF, generation_tokens_per_s=float("nan"))  # fmt: skip
    sample = dataclasses.replace(snap.sample, serving=(row,))
    extras = {**snap.extras, "probe": {"x": float("nan"), "y": [-INF, 1.5]}}
    bad = dataclasses.replace(snap, sample=sample, extras=extras)
    d.snapshot = lambda: bad
    return d, sample


def test_non_finite_numbers_in_the_snapshot_leave_every_json_route_as_null(tmp_path):
    d, _ = _daemon_with_infinities(tmp_path)
    try:
        table = {r.path: r for r in d.routes if r.method == "GET"}
        checked = 0
        for path, route in table.items():
            if not path.startswith("/api/"):
                continue
            resp = route.handler(Request("GET", path, {}, {"accept": "application/json"}, b"", "127.0.0.1"))
            if resp.content_type.startswith("application/json"):
                strict_json(resp.body)
                checked += 1
        assert checked >= 3
        status = strict_json(
            table["/api/v1/status"].handler(Request("GET", "/api/v1/status", {}, {}, b"", "127.0.0.1")).body
        )
        assert status["serving"][0]["requests_running"] is None and status["extras"]["probe"] == {
            "x": None,
            "y": [None, 1.5],
        }
    finally:
        d.close()


def test_a_recorded_trace_writes_null_for_a_non_finite_reading_and_stays_readable(tmp_path):
    d, sample = _daemon_with_infinities(tmp_path)
    d.close()
    out = tmp_path / "t.jsonl"
    w = TraceWriter(out)
    w.write(sample)
    w.close()
    line = out.read_text()
    assert "Infinity" not in line and "NaN" not in line
    (back,) = list(read_trace(out))
    assert back.serving[0].requests_running is None and back.serving[0].up
