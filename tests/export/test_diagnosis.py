"""The diagnosis metric families: finding levels, event counters, throttled seconds, anomaly gauges; promtool-clean."""

from __future__ import annotations

import shutil
import subprocess

from prometheus_client import CollectorRegistry, generate_latest

from spark_watchd.diagnose.runtime import DiagnosisRuntime
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.export import diagnosis as metrics
from spark_watchd.snapshot import Snapshot
from tests.diagnose.diag_builders import Host


def test_metric_families_render():
    host = Host()
    th = Thresholds()
    rt = DiagnosisRuntime(th, None)
    for s in host.run(3, temp=80.0) + host.run(3, temp=88.0, thermal_share=0.8):
        d = rt.observe(s)
    snap = Snapshot(sample=s, diagnosis=d, event_counts=rt.event_counts())

    class C:
        def collect(self):
            return metrics.families(snap)

    reg = CollectorRegistry()
    reg.register(C())
    text = generate_latest(reg).decode()
    assert 'sparkwatchd_finding_level{gotcha="G4"} 1.0' in text
    assert 'sparkwatchd_events_total{kind="throttle_start"} 1.0' in text
    assert "sparkwatchd_throttled_seconds_total 90.0" in text
    assert 'sparkwatchd_anomaly{kind="power_delivery"} 0.0' in text
    assert "sparkwatchd_thermal_throttle_active 1.0" in text
    assert rt.throttle_seconds() == 90.0
    assert metrics.families(object()) != []  # no snapshot parts: unknown levels, zero counts
    promtool = shutil.which("promtool")
    if promtool:  # exposition lint, as CI runs it for the whole exporter
        p = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
        )
        assert p.returncode == 0, p.stdout + p.stderr


def test_anomaly_gauge_follows_the_g4_finding():
    host = Host()
    rt = DiagnosisRuntime(Thresholds(), None)
    for s in host.run(3) + host.run(6, temp=50.0, power=30.0, clk=700, util=99.0):
        d = rt.observe(s)
    assert d.findings["G4"].anomaly == "power_delivery"
    fams = {m.name: m for m in metrics.families(Snapshot(sample=s, diagnosis=d))}
    vals = {tuple(x.labels.values()): x.value for x in fams["sparkwatchd_anomaly"].samples}
    assert vals == {
        ("power_delivery",): 1.0,
        ("recurring_stall",): 0.0,
        ("hung_engine",): 0.0,
        ("power_limit",): 0.0,
        ("clock_cap_lost",): 0.0,
    }
    assert fams["sparkwatchd_thermal_throttle_active"].samples[0].value == 0.0
