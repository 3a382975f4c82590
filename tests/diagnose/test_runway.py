"""Memory runway: the robust trend, the sustained-fall test, the runway warning and its place in G3."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.runway import BudgetRunway, runway, sustained_fall, trend
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.export import runway as export_runway
from spark_watchd.sample.memory import memory_view
from spark_watchd.snapshot import Snapshot
from tests.diagnose.diag_builders import Host, proc

GIB = 1024**3
TH = Thresholds()
VLLM = ["vllm", "serve", "Qwen/Qwen3-32B"]


def creep(n=41, start=60.0, per_min=0.7, interval=30.0, noise=0.2, seed=1):
    """(ts, budget bytes) of a budget falling per_min GiB a minute with uniform noise."""
    r = random.Random(seed)
    return [
        (i * interval, (start - per_min * i * interval / 60 + r.uniform(-noise, noise)) * GIB)
        for i in range(n)
    ]


def test_trend_is_the_fall_rate_and_shrugs_off_a_spike():
    pts = creep(noise=0.0)
    assert trend(pts) == pytest.approx(-0.7 * GIB / 60, rel=1e-6)
    spiked = list(pts)
    spiked[20] = (spiked[20][0], spiked[20][1] + 30 * GIB)  # one reading 30 GiB off
    assert trend(spiked) == pytest.approx(-0.7 * GIB / 60, rel=0.05)


def test_a_noisy_creep_is_a_sustained_fall_and_its_runway_is_budget_over_rate():
    pts = creep()
    assert sustained_fall(pts, TH.runway_min_fall_bytes)
    budget = pts[-1][1]
    rw = runway(pts, budget, TH)
    assert rw.known and rw.seconds == pytest.approx(budget / (0.7 * GIB / 60), rel=0.1)


@pytest.mark.parametrize(
    "shape",
    [
        # a model load: 50 GiB in two minutes, then flat
        [(i * 30.0, (100 - (50 if i >= 20 else 12.5 * max(0, i - 16))) * GIB) for i in range(41)],
        # a leak that began half-way through the window (a flat first half)
        [(i * 30.0, (60 - max(0, i - 20) * 1.5) * GIB) for i in range(41)],
        # a fall that is settling: fast for three quarters, flat in the last
        [(i * 30.0, (80 - min(i, 30) * 1.0) * GIB) for i in range(41)],
        # noise only
        creep(per_min=0.0, noise=0.5),
    ],
    ids=["load_then_flat", "leak_began_mid_window", "settling", "noise"],
)
def test_loads_late_leaks_settling_falls_and_noise_are_no_runway(shape):
    assert not sustained_fall(shape, TH.runway_min_fall_bytes)
    assert runway(shape, shape[-1][1], TH).seconds is None


def test_no_runway_before_the_minimum_history():
    pts = creep(n=25)  # 12 minutes at 30 s
    rw = runway(pts, pts[-1][1], TH)
    assert not rw.known and rw.seconds is None


def test_warning_enters_at_the_threshold_and_leaves_only_past_the_leaving_level():
    t = BudgetRunway(TH)
    short = SimpleNamespace(known=True, seconds=1700.0, trend_bytes_per_s=-GIB / 60, budget_bytes=28 * GIB)
    assert t.warn(0.0, short)
    # 40 min at the trend: past the entering line, inside the leaving one, still falling: held.
    t.points.extend(creep())
    eased = SimpleNamespace(known=True, seconds=None, trend_bytes_per_s=-GIB / 60, budget_bytes=40 * GIB)
    assert t.warn(30.0, eased)
    gone = SimpleNamespace(known=True, seconds=None, trend_bytes_per_s=-GIB / 60, budget_bytes=60 * GIB)
    assert t.warn(60.0, gone)  # off, but held for min_dwell_s
    assert not t.warn(60.0 + TH.min_dwell_s, gone)


def _engine_run(avail_at, n, procs_at=lambda i: (), interval=30.0, **kw):
    h = Host(interval=interval)
    d = Diagnoser(TH)
    out = []
    for i in range(n):
        out.append(d.observe(h.sample(avail_gib=avail_at(i), processes=procs_at(i), **kw)))
    return d, out


def test_a_creeping_vllm_raises_g3_to_warning_with_the_runway_sentence_and_its_growth():
    # vLLM grows 0.7 GiB a minute from 40 GiB; the budget falls with it from 70 GiB available.
    def procs(i):
        return (proc(4121, VLLM, 1.0, 40 + 0.7 * i / 2, create_time=500.0),)

    d, out = _engine_run(lambda i: 70 - 0.7 * i / 2, 160, procs)
    sev = [x.findings["G3"].severity for x in out]
    first = sev.index("warning")
    g3 = out[first].findings["G3"]
    assert "Memory runway short" in g3.summary and "pool runs out in about" in g3.summary
    assert "grew" in g3.summary
    assert g3.evidence["runway_s"] <= TH.runway_warn_s
    # lead time: at the first warning the budget still had 20 GiB and more
    assert g3.evidence["budget_bytes"] > 15 * GIB
    growth = g3.evidence["workload_growth"]
    assert growth and growth[0]["growth_gib_per_h"] == pytest.approx(42, rel=0.1)
    assert all(s == "warning" for s in sev[first:])  # held, no flapping


def test_a_model_load_that_settles_never_raises_a_runway_warning():
    # 60 GiB loaded over three minutes, then steady for an hour
    d, out = _engine_run(lambda i: 100 - min(60, max(0, i - 10) * 10), 130)
    for x in out:
        g3 = x.findings["G3"]
        assert "runway" not in g3.summary.lower()
        assert g3.evidence.get("runway_s") is None


def test_an_oom_kill_restarts_the_trend():
    h = Host()
    d = Diagnoser(TH)
    for i in range(50):
        d.observe(h.sample(avail_gib=70 - 0.7 * i / 2))
    assert d.latest_runway.seconds is not None
    d.observe(h.sample(avail_gib=100, oom=1))
    assert not d.latest_runway.known


def test_cma_free_is_taken_out_of_the_budget_unless_configured_otherwise():
    h = Host()
    s = h.sample(avail_gib=10.4)
    s = type(s)(
        **{
            **{f: getattr(s, f) for f in s.__slots__},
            "meminfo": {**s.meminfo, "CmaTotal": 9437184, "CmaFree": 9227469},
        }
    )
    view = memory_view(s, 4 * GIB)
    assert view.cma_free_bytes == 9227469 * 1024
    assert view.budget_bytes == pytest.approx((10.4 - 8.8) * GIB - 4 * GIB, abs=0.01 * GIB)
    assert memory_view(s, 4 * GIB, subtract_cma=False).budget_bytes == pytest.approx(
        6.4 * GIB, abs=0.01 * GIB
    )
    g3 = Diagnoser(TH).observe(s).findings["G3"]
    assert g3.evidence["budget_bytes"] < 0 and g3.evidence["cma_free_bytes"] == 9227469 * 1024
    assert "CmaFree not counted" in g3.summary
    plain = Diagnoser(Thresholds(budget_subtracts_cma_free=False)).observe(s).findings["G3"]
    assert plain.evidence["budget_bytes"] == pytest.approx(6.4 * GIB, abs=0.01 * GIB)


def test_metrics_say_inf_without_a_fall_nothing_before_history_and_growth_per_kind():
    def procs(i):
        return (proc(4121, VLLM, 1.0, 40 + 0.7 * i / 2, create_time=500.0),)

    d, out = _engine_run(lambda i: 70 - 0.7 * i / 2, 60, procs)
    snap = Snapshot(sample=None, diagnosis=out[-1])
    fams = {f.name: f for f in export_runway.families(snap)}
    (rw,) = fams["sparkwatchd_memory_runway_seconds"].samples
    budget = out[-1].findings["G3"].evidence["budget_bytes"]
    assert rw.value == pytest.approx(budget / (0.7 * GIB / 60), rel=0.05)
    growth = {
        (s.labels["kind"], s.labels["capped"]): s.value
        for s in fams["sparkwatchd_workload_growth_bytes_per_second"].samples
    }
    assert growth[("vllm", "false")] == pytest.approx(0.7 * GIB / 60, rel=0.1)
    assert all(v == 0 for k, v in growth.items() if k != ("vllm", "false"))
    flat = _engine_run(lambda i: 70, 60)[1][-1]
    (inf,) = {f.name: f for f in export_runway.families(Snapshot(None, flat))}[
        "sparkwatchd_memory_runway_seconds"
    ].samples
    assert math.isinf(inf.value)
    early = _engine_run(lambda i: 70, 5)[1][-1]
    assert not {f.name: f for f in export_runway.families(Snapshot(None, early))}[
        "sparkwatchd_memory_runway_seconds"
    ].samples


def test_the_runway_warning_is_a_g3_rule_below_the_stalls_and_above_the_thin_budget():
    from spark_watchd.diagnose import g3_rules

    names = [r.__name__ for r in g3_rules.RULES]
    assert names.index("reclaim") < names.index("runway_short") < names.index("thin_budget")

    def procs(i):
        return (proc(4121, VLLM, 1.0, 40 + 0.7 * i / 2, create_time=500.0),)

    _, out = _engine_run(lambda i: 70 - 0.7 * i / 2, 140, procs)
    g3 = out[-1].findings["G3"]
    assert (
        g3.severity == "warning"
        and g3.state is not None
        and g3.state.budget_bytes == g3.evidence["budget_bytes"]
        and g3.state.runway_known
    )


def test_footprint_drift_is_bounded_at_any_interval_and_keeps_its_trend():
    """Issue 19 §11: at --interval 1 each workload kept a point a second (60,000 for 50 servers)."""
    from spark_watchd.diagnose.runway import DRIFT_POINTS, FootprintDrift

    th = Thresholds()
    rate = 2 * 2**30 / 3600  # a server growing 2 GiB an hour
    results = {}
    for interval in (1.0, 30.0):
        drift = FootprintDrift(th)
        growth = ()
        for i in range(int(2 * th.runway_window_s / interval)):
            ts = 1_000_000.0 + i * interval
            w = SimpleNamespace(key=(7, 1.0), kind="vllm", name="vllm", pid=7, capped=True,
                                footprint_bytes=int(40 * 2**30 + rate * (ts - 1_000_000.0)))  # fmt: skip
            growth = drift.update(ts, [w])
        assert len(drift.footprints[(7, 1.0)]) <= 1.15 * DRIFT_POINTS  # one a spacing, the newest moving
        results[interval] = growth[0].growth()
    dense, sparse = results[1.0], results[30.0]
    assert dense.bytes_per_s == pytest.approx(rate, rel=0.01) and sparse.bytes_per_s == pytest.approx(
        rate, rel=0.01
    )
    assert dense.grew_bytes == pytest.approx(sparse.grew_bytes, rel=0.03)


def test_the_budget_window_is_bounded_at_any_interval_and_keeps_its_trend():
    """Issue 24: at --interval 1 the budget's runway window held a point a second (1,200 over 20 minutes)."""
    from spark_watchd.diagnose.runway import RUNWAY_POINTS

    rate = -0.7 * GIB / 60
    results = {}
    for interval in (1.0, 30.0):
        t = BudgetRunway(TH)
        for i in range(int(2 * TH.runway_window_s / interval)):
            ts = 1_000_000.0 + i * interval
            rw = t.update(ts, int(60 * GIB + rate * (ts - 1_000_000.0)))
        assert len(t.points) <= 1.15 * RUNWAY_POINTS  # one a spacing, the newest moving
        results[interval] = rw
    dense, sparse = results[1.0], results[30.0]
    assert dense.trend_bytes_per_s == pytest.approx(rate, rel=0.01)
    assert sparse.trend_bytes_per_s == pytest.approx(rate, rel=0.01)
    assert dense.seconds == pytest.approx(sparse.seconds, rel=0.02)


def test_g3_words_are_written_when_read_from_that_samples_values_alone():
    """Finding.deferred: the summary and evidence of a G3 finding (with its growth rows) read after the whole
    run are those read at once, sample by sample."""

    def procs(i):
        return (proc(4121, VLLM, 1.0, 40 + 0.7 * i / 2, create_time=500.0),)

    def run(read_now):
        h = Host()
        d = Diagnoser(TH)
        out = []
        for i in range(160):
            g3 = d.observe(
                h.sample(avail_gib=70 - 0.7 * i / 2, processes=procs(i), oom=int(i == 120))
            ).findings["G3"]
            out.append((g3.summary, g3.evidence) if read_now else g3)
        return out

    late = run(False)
    assert all(f._build is not None for f in late[:100])  # nothing written while classifying
    words = [(f.summary, f.evidence) for f in late]
    assert words == run(True)
    assert any("Memory runway short" in s and "grew" in s for s, _ in words)
    assert any(ev.get("workload_growth") for _, ev in words)


def test_a_footprint_history_hands_out_windows_no_later_sample_changes_and_stays_compact():
    from spark_watchd.diagnose.runway import FootprintHistory

    h = FootprintHistory()
    handed = []
    ts = 0.0
    for i in range(2000):
        ts += 1.0 if i % 500 < 100 else 30.0  # stretches at --interval 1: the newest point replaced
        if i == 1500:
            h.clear()  # (a clock step back)
        h.fold(ts, float(i), 10.0, 1200.0)
        handed.append((list(h.points[h.lo :]), h.points, h.lo, len(h.points)))
        assert len(h.points) <= 1.4 * len(h) + 16  # compacted: what lies behind the window is dropped
    for window, pts, lo, hi in handed:
        assert pts[lo:hi] == window  # each sample's slice is still what it was
