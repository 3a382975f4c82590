"""G4's per-sample shortcuts decide exactly what the full path would (the quiet state's shortcut over RULES:
tests/diagnose/test_rule_declarations.py): words are written only when read (and say what they said at their sample), the step ratio and the clock cap's
status, and a serving baseline's rate are kept while their inputs stand still (issue 24)."""

from __future__ import annotations

import pytest

from spark_watchd.diagnose import features as feat
from spark_watchd.diagnose import g4
from spark_watchd.diagnose.serving import Baseline, point
from spark_watchd.diagnose.serving_thresholds import ServingThresholds
from spark_watchd.diagnose.steady import Dwell
from spark_watchd.diagnose.steps import step_ratio
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.findings import Finding
from spark_watchd.sample.model import Sample, ThroughputReading
from tests.diagnose.diag_builders import Host

TH = Thresholds()


def _window():
    host = Host()
    return (
        host.run(12, temp=80.0, step=1.0)  # past the warm-up: a baseline
        + host.run(2, temp=88.0, thermal_share=0.8, step=1.0)
        + host.run(6, temp=88.0, thermal_share=0.8, step=2.0)  # slowing training
        + host.run(4, temp=75.0, step=1.0)
    )


def _fold(samples):
    t, prev = g4.G4Tracker(TH), None
    for s in samples:
        f = feat.compute(prev, s, TH)
        yield t.observe(s, f).finding
        prev = f


def test_a_g4_finding_read_long_after_its_sample_says_what_it_said_then():
    at_once = [f.to_dict() for f in _fold(_window())]
    late = list(_fold(_window()))  # every finding kept, the tracker moved on, then read
    assert [f.to_dict() for f in late] == at_once
    assert [d["severity"] for d in at_once[11:15]] == ["ok", "warning", "warning", "critical"]
    assert len({d["evidence"]["throttled_seconds_total"] for d in at_once}) > 5  # a counter that moved on


def test_g4_writes_no_words_until_a_finding_is_read(monkeypatch):
    built = []
    real = g4.evidence
    monkeypatch.setattr(g4, "evidence", lambda *a: built.append(1) or real(*a))
    findings = list(_fold(_window()))
    assert built == []
    assert findings[-1].evidence["temp_c"] == 75.0 and built == [1]
    assert findings[-1].summary and built == [1]  # summary and evidence are built once, together


def test_a_held_severity_keeps_its_finding_deferred():
    built = []

    def words():
        built.append(1)
        return "cool again", {"temp_c": 70.0}

    d = Dwell()
    d.apply(Finding("G4", "warning", "hot"), 0.0, 120.0)
    held = d.apply(Finding.deferred("G4", "ok", words), 30.0, 120.0)
    assert held.severity == "warning" and built == []
    assert held.summary.startswith("hot (easing to ok; held 90 s more")
    assert held.evidence == {"temp_c": 70.0, "held_severity_s": 90.0} and built == [1]


def test_a_standing_report_keeps_its_ratio_until_the_recent_window_lets_it_go():
    th = Thresholds(baseline_warmup_s=10.0, baseline_window_s=30.0, baseline_min_points=3, step_recent_s=20.0)
    jobs, got = {}, []
    for ts in range(80):  # a sample a second, a report every 5 s up to 55 s, then that report standing
        at = min(ts - ts % 5, 55)
        sample = Sample(ts=ts, throughput=(ThroughputReading(job="a", ts=at, step=at, step_seconds=1.0),))
        got.append(step_ratio(jobs, sample, float(ts), False, False, th))
    assert got[56] is not None and got[57] is got[56]  # nothing moved: the same record, not a new one
    assert got[75] is not None and got[76] is None  # the 55 s reading left the 20 s window at 76 s


@pytest.mark.parametrize("expected", [None, 2100])
def test_the_clock_cap_status_is_one_record_while_nothing_changes(expected):
    host = Host()
    t, prev, statuses = g4.G4Tracker(Thresholds(expected_clock_cap_mhz=expected)), None, []
    for s in host.run(30, temp=60.0, clk=2100):
        f = feat.compute(prev, s, t.th)
        t.observe(s, f)
        statuses.append(t.cap.status)
        prev = f
    assert statuses[-1].cap_mhz == 2100 and statuses[-1] is statuses[-2]
    t.set_thresholds(Thresholds(expected_clock_cap_mhz=2000))  # a reload finds the ceiling again
    s = host.sample(temp=60.0, clk=2100)
    t.observe(s, feat.compute(prev, s, t.th))
    assert t.cap.status.cap_mhz == 2100 and t.cap.status.expected_mhz == 2000


def test_a_serving_baseline_keeps_its_rate_at_each_load_until_an_interval_joins():
    th = ServingThresholds()
    base = Baseline((point(float(i), 40.0, 2.0, 0.5, 0.0, False) for i in range(10)), maxlen=120)
    first = base.rate_at(2.0, th)
    assert first == (20.0, 10) and base.rate_at(2.0, th) is first  # kept, not worked out again
    base.append(point(10.0, 36.0, 2.0, 0.5, 0.0, False))
    assert base.rate_at(2.0, th) == (20.0, 11)  # the new interval counts
    assert base.rate_at(2.0, ServingThresholds(serving_baseline_min_points=12)) is None  # a reload counts
    for load in range(100):
        base.rate_at(1.0 + load / 100, th)
    assert len(base._rates) <= 32  # bounded: a load that never repeats
