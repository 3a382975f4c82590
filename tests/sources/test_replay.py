"""The replay feed: samples paced by their recorded spacing over the speed, time rebased to now, looping forward."""

from __future__ import annotations

import json

import pytest

from spark_watchd.sources.replay import ReplayFeed
from tests.conftest import SCENARIOS

EVICTION = SCENARIOS / "eviction.jsonl"


def test_replay_paces_by_recorded_spacing_over_speed_and_rebases_time():
    feed = ReplayFeed(str(EVICTION), speed=60, clock=lambda: 2_000_000_000.0)
    it = iter(feed)
    s1, d1 = next(it)
    s2, d2 = next(it)
    assert s1.ts == 2_000_000_000.0 and s2.ts == 2_000_000_030.0  # first sample at "now", spacing kept
    assert d1 == pytest.approx(0.5)  # 30 s recorded / 60
    assert feed.step_s == 30.0


def test_replay_loop_keeps_time_moving_forward(tmp_path):
    lines = [json.dumps({"v": 1, "ts": 100.0 + 10 * i, "uptime_s": 50.0 + 10 * i}) for i in range(3)]
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n" + "not json\n")
    bad = []
    feed = ReplayFeed(str(trace), speed=10, loop=True, clock=lambda: 1000.0, on_bad_line=bad.append)
    got = []
    for sample, _delay in feed:
        got.append((sample.ts, sample.uptime_s))
        if len(got) == 7:
            break
    ts = [t for t, _ in got]
    assert ts == [1000.0, 1010.0, 1020.0, 1030.0, 1040.0, 1050.0, 1060.0]
    assert [u for _, u in got][3] == 80.0  # uptime shifted too, so no fake reboot at the seam
    assert bad and str(bad[0]).startswith(f"{trace}:4: not JSON")


def test_empty_trace_is_refused_at_start(tmp_path):
    p = tmp_path / "empty.jsonl"
    p.write_text("")
    with pytest.raises(ValueError, match="no readable trace-v1 samples"):
        ReplayFeed(str(p))


def test_without_loop_every_sample_comes_once_and_the_last_has_no_wait(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"v": 1, "ts": 100.0 + 5 * i}) + "\n" for i in range(3)))
    got = list(ReplayFeed(str(trace), speed=5, clock=lambda: 0.0, rebase=False))
    assert [(s.ts, d) for s, d in got] == [(100.0, 1.0), (105.0, 1.0), (110.0, 0.0)]


def test_throughput_readings_move_with_the_sample_time(tmp_path):
    line = {"v": 1, "ts": 100.0, "throughput": [{"job": "sft", "ts": 99.0, "step": 3}]}
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps(line) + "\n")
    ((sample, _),) = list(ReplayFeed(str(trace), clock=lambda: 1100.0))
    assert sample.ts == 1100.0 and sample.throughput[0].ts == 1099.0  # still 1 s before its sample


def test_driver_events_and_the_end_of_their_boot_move_with_the_sample_time(tmp_path):
    ev = {
        "ts": 40.0,
        "xid": None,
        "source": "journal",
        "text": "NVRM: x [NV_ERR_NO_MEMORY]",
        "boot_end_ts": 60.0,
    }
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"v": 1, "ts": 100.0, "uptime_s": 30.0, "driver_events": [ev]}) + "\n")
    ((sample, _),) = list(ReplayFeed(str(trace), clock=lambda: 1100.0))
    (got,) = sample.driver_events
    assert (got.ts, got.boot_end_ts) == (1040.0, 1060.0)  # still 20 s before that boot's end


@pytest.mark.parametrize("speed", [0, -1])
def test_speed_must_be_positive(tmp_path, speed):
    with pytest.raises(ValueError, match="speed must be positive"):
        ReplayFeed(str(EVICTION), speed=speed)
