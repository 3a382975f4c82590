"""step_ratio: each training job's recent step time against the baseline it set after warm-up (G4 damage)."""

from __future__ import annotations

import pytest

from spark_watchd.diagnose.steps import step_ratio
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.model import Sample, ThroughputReading

# warm-up 10 s, baseline window 30 s, 3 points, recent mean over 20 s, progress stale after 300 s
TH = Thresholds(baseline_warmup_s=10.0, baseline_window_s=30.0, baseline_min_points=3, step_recent_s=20.0)


def _tick(jobs, ts, readings, episode=False, thermal=False, th=TH):
    sample = Sample(ts=ts, throughput=tuple(readings))
    return step_ratio(jobs, sample, ts, episode, thermal, th)


def _job(job, ts, step=None, tps=None, at=None):
    return ThroughputReading(
        job=job, ts=ts if at is None else at, step=1, step_seconds=step, tokens_per_second=tps
    )


def _run(jobs, job, t0, t1, step, every=5.0, **kw):
    """Report `step` for `job` every `every` seconds from t0 up to t1 (exclusive); the last result."""
    got, ts = None, t0
    while ts < t1:
        got = _tick(jobs, ts, [_job(job, ts, step)], **kw)
        ts += every
    return got


def test_no_ratio_until_warm_up_and_window_have_passed():
    jobs = {}
    assert _run(jobs, "a", 0.0, 40.0, 1.0) is None  # 0..35 s: warm-up plus window not over
    assert jobs["a"].baseline is None and jobs["a"].vals == [1.0] * 6


def test_baseline_is_the_median_after_warm_up_and_the_ratio_is_recent_over_it():
    jobs = {}
    for ts, step in ((0, 9.0), (5, 9.0), (10, 1.0), (15, 3.0), (20, 2.0), (25, 2.0), (30, 2.0), (35, 2.0)):
        _tick(jobs, float(ts), [_job("a", float(ts), step)])
    ratio, job, mean, base = _tick(jobs, 40.0, [_job("a", 40.0, 4.0)])
    assert (job, base) == ("a", 2.0)  # the warm-up's 9 s steps are not in it
    recent = [2.0, 2.0, 2.0, 2.0, 4.0]  # 20..40 s, both ends in
    assert mean == pytest.approx(sum(recent) / 5) and ratio == pytest.approx(mean / 2.0)


def test_recent_readings_older_than_the_recent_span_drop_out_of_the_mean():
    jobs = {}
    _run(jobs, "a", 0.0, 45.0, 2.0)
    _, _, mean, _ = _run(jobs, "a", 45.0, 70.0, 6.0)  # 45..65: the 2 s readings are now past 20 s
    assert mean == pytest.approx(6.0)


def test_a_hot_reading_is_kept_out_of_the_baseline():
    jobs = {}
    _run(jobs, "a", 0.0, 15.0, 2.0)  # 0, 5, 10
    _run(jobs, "a", 15.0, 30.0, 8.0, thermal=True)  # throttled: 15, 20, 25
    _run(jobs, "a", 30.0, 45.0, 2.0)
    assert jobs["a"].baseline == 2.0


def test_heat_before_the_window_fills_takes_a_best_effort_baseline_from_warm_up():
    jobs = {}
    _run(jobs, "a", 0.0, 10.0, 3.0)  # 0 (ignored), 5: one early reading
    assert _tick(jobs, 8.0, [_job("a", 8.0, 5.0)], episode=True) is None  # hot: not a baseline reading
    _tick(jobs, 9.0, [_job("a", 9.0, 1.0)])  # second early reading
    ratio, _, _, base = _tick(jobs, 12.0, [_job("a", 12.0, 6.0)], episode=True)
    assert base == 3.0 and ratio > 1.0  # median of the early 3.0 and 1.0 (upper middle)


def test_an_episode_with_enough_baseline_points_ends_the_window_early():
    jobs = {}
    _run(jobs, "a", 0.0, 25.0, 2.0)  # 10, 15, 20 after warm-up
    assert jobs["a"].baseline is None
    got = _tick(jobs, 25.0, [_job("a", 25.0, 4.0)], episode=True)
    assert got is not None and got[3] == 2.0


def test_tokens_per_second_stands_in_for_step_time():
    jobs = {}
    got = None
    for ts in range(0, 45, 5):
        got = _tick(jobs, float(ts), [_job("a", float(ts), tps=100.0 if ts < 40 else 50.0)])
    assert got[3] == pytest.approx(0.01) and got[2] > got[3]


@pytest.mark.parametrize(
    "reading",
    [
        _job("a", 0.0),  # neither step time nor tokens
        _job("a", 0.0, step=0.0),
        _job("a", 0.0, step=-1.0),
        _job("a", 0.0, tps=0.0),
    ],
)
def test_a_reading_without_a_positive_step_time_is_ignored(reading):
    jobs = {}
    assert _tick(jobs, 0.0, [reading]) is None and jobs == {}


def test_stale_progress_is_ignored():
    jobs = {}
    assert _tick(jobs, 1000.0, [_job("a", 1000.0, 2.0, at=1000.0 - TH.step_stale_s - 1)]) is None
    assert jobs == {}


def test_the_same_report_seen_twice_counts_once():
    jobs = {}
    for ts in (10.0, 15.0):
        _tick(jobs, ts, [_job("a", ts, 2.0, at=10.0)])
    assert len(jobs["a"].recent) == 1


def test_the_worst_job_is_returned():
    jobs = {}
    for ts in range(0, 45, 5):
        t = float(ts)
        slow = 2.0 if ts < 40 else 6.0
        got = _tick(jobs, t, [_job("fine", t, 1.0), _job("slow", t, slow)])
    assert got[1] == "slow" and got[0] > 1.0


def test_jobs_that_stopped_reporting_are_forgotten_once_there_are_many():
    jobs = {}
    for i in range(65):
        _tick(jobs, 0.0, [_job(f"old{i}", 0.0, 1.0)])
    _tick(jobs, 1.0, [_job("still", 1.0, 1.0)])
    late = 1.0 + TH.step_stale_s + 1
    _tick(jobs, late, [_job("still", late, 1.0), _job("new", late, 1.0)])
    assert set(jobs) == {"still", "new"}
