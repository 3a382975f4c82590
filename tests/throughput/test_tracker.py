"""JobTracker: derived step time and tokens/s, baseline and slowdown, runs, expiry, the job cap."""

from __future__ import annotations

import pytest

from spark_watchd.throughput.models import ProgressReport
from spark_watchd.throughput.settings import ProgressSettings
from spark_watchd.throughput.tracker import JobTracker, ReportRejected, TooManyJobs
from tests.support.progress import T0


def R(step, tokens=None, ts=None, job="j", **kw):
    return ProgressReport(job=job, step=step, tokens=tokens, ts=ts, **kw)


def tracker(clock, **kw) -> tuple[JobTracker, list]:
    t = JobTracker(ProgressSettings(**kw), clock)
    ended = []
    t.add_run_listener(ended.append)
    return t, ended


def test_six_reports_20s_apart_give_2s_per_step_and_2048_tokens_per_second(clock):
    t, _ = tracker(clock)
    for i in range(6):
        stats = t.report(R(10 * i, 40960 * i, T0 + 20 * i))
    assert stats.step_seconds == 2.0
    assert stats.tokens_per_second == 2048.0
    assert (stats.step, stats.tokens, stats.reports, stats.ts) == (50, 204800, 6, T0 + 100)
    (reading,) = t.collect({})["throughput"]
    assert (reading.job, reading.step, reading.step_seconds, reading.tokens_per_second) == (
        "j",
        50,
        2.0,
        2048.0,
    )


def test_report_without_ts_is_timed_by_arrival(clock):
    t, _ = tracker(clock)
    t.report(R(0))
    clock.advance(30)
    stats = t.report(R(15))
    assert stats.ts == clock.t and stats.step_seconds == 2.0


def test_heartbeat_without_progress_keeps_the_interval_open(clock):
    t, _ = tracker(clock)
    t.report(R(100, ts=T0))
    t.report(R(110, ts=T0 + 10))
    stats = t.report(R(110, ts=T0 + 40))  # stalled 30 s (checkpoint save)
    assert stats.step_seconds == 1.0
    stats = t.report(R(120, ts=T0 + 50))  # the stall is part of these 10 steps
    assert stats.step_seconds == 4.0


def test_tokens_reported_every_few_steps_still_give_a_rate(clock):
    t, _ = tracker(clock)
    t.report(R(0, tokens=0, ts=T0))
    t.report(R(5, ts=T0 + 5))
    stats = t.report(R(10, tokens=10000, ts=T0 + 10))
    assert stats.tokens_per_second == 1000.0
    stats = t.report(R(15, ts=T0 + 20))
    assert stats.tokens_per_second == 1000.0 and stats.step_seconds == 2.0


def test_smaller_step_is_a_restart_and_ends_the_previous_run(clock):
    t, ended = tracker(clock)
    first = t.report(R(0, ts=T0))
    t.report(R(100, ts=T0 + 100))
    second = t.report(R(3, ts=T0 + 200))
    assert second.run_id != first.run_id and second.first_step == 3 and second.step_seconds is None
    assert [(e.reason, e.stats.run_id, e.stats.step) for e in ended] == [("restart", first.run_id, 100)]


def test_explicit_start_and_end_bound_a_run(clock):
    t, ended = tracker(clock)
    a = t.report(R(500, ts=T0, event="start"))  # resumed from a checkpoint: a new run at step 500
    t.report(R(600, ts=T0 + 100))
    b = t.report(R(700, ts=T0 + 200, event="end"))
    assert b.run_id == a.run_id and b.ended and b.end_reason == "end"
    assert [(e.reason, e.stats.first_step, e.stats.step) for e in ended] == [("end", 500, 700)]
    c = t.report(R(700, ts=T0 + 300))  # anything after the end starts the next run
    assert c.run_id != a.run_id and not c.ended and len(ended) == 1


def test_start_on_an_open_run_restarts_it(clock):
    t, ended = tracker(clock)
    t.report(R(10, ts=T0))
    t.report(R(20, ts=T0 + 10, event="start"))
    assert [e.reason for e in ended] == ["restart"]


def test_ts_going_back_is_rejected_without_changing_state(clock):
    t, _ = tracker(clock)
    t.report(R(10, ts=T0 + 10))
    with pytest.raises(ReportRejected, match="earlier than"):
        t.report(R(20, ts=T0))
    (s,) = t.stats()
    assert (s.step, s.reports) == (10, 1)


def test_silent_jobs_expire_and_their_runs_end(clock):
    t, ended = tracker(clock, job_expiry_s=600)
    t.report(R(1, job="a"))
    clock.advance(400)
    t.report(R(1, job="b"))
    clock.advance(201)
    assert [s.job for s in t.stats()] == ["b"]
    assert [(e.stats.job, e.reason) for e in ended] == [("a", "expired")]
    assert [r.job for r in t.collect({})["throughput"]] == ["b"]


def test_job_cap_refuses_new_jobs_until_one_expires(clock):
    t, _ = tracker(clock, max_jobs=2, job_expiry_s=60)
    t.report(R(1, job="a"))
    t.report(R(1, job="b"))
    with pytest.raises(TooManyJobs, match="max_jobs"):
        t.report(R(1, job="c"))
    t.report(R(2, job="a"))  # known jobs keep reporting
    clock.advance(61)
    assert t.report(R(1, job="c")).job == "c"


def test_slowdown_ratio_against_the_baseline_after_warm_up(clock):
    t, _ = tracker(clock, warmup_steps=20, warmup_s=60, baseline_s=300)
    t.report(R(0, ts=T0))
    for i in range(1, 6):  # warm-up: 5 s/step (compilation, allocator growth) stays out of the baseline
        t.report(R(2 * i, ts=T0 + 10 * i))
    ts, step = T0 + 50, 10
    while ts < T0 + 350:  # steady 1 s/step; warm-up ends at T0+60 (step 20), baseline spans 300 s
        ts, step = ts + 10, step + 10
        stats = t.report(R(step, ts=ts))
        assert stats.baseline_step_seconds is None and stats.slowdown_ratio is None
    stats = t.report(R(step + 10, ts=ts + 10))
    assert stats.baseline_step_seconds == 1.0 and stats.slowdown_ratio == 1.0
    ts, step = ts + 10, step + 10
    for _ in range(3):  # throttled: steps take twice as long
        ts, step = ts + 20, step + 10
        stats = t.report(R(step, ts=ts))
    assert (stats.step_seconds, stats.slowdown_ratio, stats.max_slowdown_ratio) == (2.0, 2.0, 2.0)
    stats = t.report(R(step + 10, ts=ts + 10))  # recovers; the run's worst stays on record
    assert (stats.slowdown_ratio, stats.max_slowdown_ratio) == (1.0, 2.0)


def test_collect_reports_the_mean_since_the_previous_tick(clock):
    t, _ = tracker(clock)
    t.report(R(0, 0, T0))
    t.collect({})
    t.report(R(10, 1000, T0 + 10))  # 1 s/step
    t.report(R(20, 2000, T0 + 40))  # 3 s/step: the latest interval
    (r,) = t.collect({})["throughput"]
    assert r.step_seconds == 2.0 and r.tokens_per_second == 50.0
    (r,) = t.collect({})["throughput"]  # nothing new: the latest interval's values
    assert r.step_seconds == 3.0


def test_close_ends_open_runs_as_shutdown(clock):
    t, ended = tracker(clock)
    t.report(R(1, job="a"))
    t.report(R(1, job="b", event="end"))
    t.close()
    assert sorted((e.stats.job, e.reason) for e in ended) == [("a", "shutdown"), ("b", "end")]
    assert t.stats() == ()


def test_a_failing_listener_does_not_lose_the_report(clock):
    t = JobTracker(ProgressSettings(), clock)
    t.add_run_listener(lambda ev: 1 / 0)
    assert t.report(R(5, event="end")).ended


def test_job_table_has_a_json_view_keyed_by_job(clock):
    import json

    t, _ = tracker(clock)
    t.report(R(10, 4096, T0, job="b"))
    t.report(R(20, 8192, T0 + 10, job="b"))
    t.report(R(1, job="a"))
    table = t.stats()
    assert [s.job for s in table] == ["a", "b"]
    view = json.loads(json.dumps(table.to_dict()))
    assert (
        view["b"]["step_seconds"] == 1.0
        and view["b"]["tokens_per_second"] == 409.6
        and view["a"]["step"] == 1
    )


def test_an_ended_run_is_sampled_once_more_then_leaves_the_samples(clock):
    t, _ = tracker(clock)
    t.report(R(0, 0, T0))
    t.collect({})
    t.report(R(10, 1000, T0 + 10, event="end"))
    (r,) = t.collect({})["throughput"]  # the final interval still reaches the page's line and the ledger
    assert (r.step, r.step_seconds) == (10, 1.0)
    clock.advance(60)
    assert t.collect({})["throughput"] == ()  # the line stops at the end, `status` no longer lists it
    t.report(R(1, 10, T0 + 100))  # the same name starting again is a new run and is sampled again
    assert [x.step for x in t.collect({})["throughput"]] == [1]
