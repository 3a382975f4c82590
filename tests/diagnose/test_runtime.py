"""Diagnosis runtime: state across a power loss, the event journal, capture on trouble, metrics."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from diag_builders import Host
from prometheus_client import CollectorRegistry, generate_latest

from spark_watchd.diagnose import metrics
from spark_watchd.diagnose.journal import EventJournal, read_events
from spark_watchd.diagnose.runtime import DiagnosisRuntime
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.model import Event
from spark_watchd.snapshot import Snapshot

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_reboot_after_throttle_survives_a_power_loss(tmp_path):
    host = Host()
    th = Thresholds()
    state = tmp_path / "state"
    # A child process judges a throttle, then dies by SIGKILL (no close(), no atexit): a power loss.
    child = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        sys.path.insert(0, {str(REPO_ROOT / "tests" / "diagnose")!r})
        from diag_builders import Host
        from spark_watchd.diagnose.runtime import DiagnosisRuntime
        h = Host()
        rt = DiagnosisRuntime(None, {str(state)!r})
        for s in h.run(3, temp=80.0) + h.run(4, temp=88.0, thermal_share=0.8):
            rt.observe(s)
        print(rt.event_counts()["throttle_start"], flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    p = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert p.returncode == -9, p.stderr
    assert p.stdout.strip() == "1"
    assert json.loads((state / "state.json").read_text())["engine"]["throttle_active"] is True

    rt = DiagnosisRuntime(th, state)
    host.reboot(boot_id="boot-after-power-loss", gap=600)
    d = rt.observe(host.sample(temp=40.0, power=4.0, util=0.0))
    reboots = [e for e in d.events if e.kind == "reboot"]
    assert len(reboots) == 1 and reboots[0].after_throttle is True
    assert d.findings["G4"].severity == "critical"
    counts = rt.event_counts()
    assert counts["throttle_start"] == 1  # carried from the killed process
    assert counts["reboot"] == 1 and counts["reboot_after_throttle"] == 1
    assert [e.kind for e in rt.recent_events(10)][:1] == ["throttle_start"]
    rt.close()


def test_restart_on_the_same_boot_is_not_a_reboot(tmp_path):
    host = Host()
    th = Thresholds()
    rt = DiagnosisRuntime(th, tmp_path)
    for s in host.run(3):
        rt.observe(s)
    rt.close()
    rt2 = DiagnosisRuntime(th, tmp_path)
    assert rt2.observe(host.sample()).events == ()
    rt2.close()


def test_reboot_without_throttle_across_restart(tmp_path):
    host = Host()
    th = Thresholds()
    rt = DiagnosisRuntime(th, tmp_path)
    for s in host.run(3, temp=60.0):
        rt.observe(s)
    rt.close()
    rt2 = DiagnosisRuntime(th, tmp_path)
    host.reboot()
    ev = [e for e in rt2.observe(host.sample()).events if e.kind == "reboot"]
    assert len(ev) == 1 and ev[0].after_throttle is False
    assert rt2.event_counts()["reboot_after_throttle"] == 0
    rt2.close()


def test_journal_tolerates_a_torn_last_line(tmp_path):
    path = tmp_path / "events.jsonl"
    j = EventJournal(path)
    j.append(Event("eviction", "G6", 1.0, "one"))
    j.close()
    with open(path, "ab") as fh:
        fh.write(b'{"kind": "oom_kill", "gotcha": "G3", "ts": 2.0, "summ')  # killed mid-write
    events, bad = read_events(path)
    assert [e.kind for e in events] == ["eviction"] and bad == 1
    j = EventJournal(path)  # appends start on a fresh line
    j.append(Event("reboot", "G4", 3.0, "three", after_throttle=False))
    j.close()
    events, bad = read_events(path)
    assert [e.kind for e in events] == ["eviction", "reboot"] and bad == 1
    assert events[1].after_throttle is False


def test_capture_on_trouble_writes_a_bounded_trace(tmp_path):
    host = Host()
    th = Thresholds()
    rt = DiagnosisRuntime(th, tmp_path, capture_pre=5, capture_post=3, capture_keep=2)
    for s in host.run(10):
        rt.observe(s)
    for s in host.run(4, psi_some=8.0):  # G3 leaves ok
        rt.observe(s)
    rt.close()
    files = sorted((tmp_path / "captures").glob("*.jsonl"))
    assert len(files) == 1 and "G3" in files[0].name
    lines = files[0].read_text().splitlines()
    assert len(lines) == 5 + 3  # 5 before (including the trouble sample), 3 after
    assert all(json.loads(x)["v"] == 1 for x in lines)


def test_capture_count_is_bounded(tmp_path):
    host = Host()
    th = Thresholds()
    rt = DiagnosisRuntime(th, tmp_path, capture_pre=2, capture_post=1, capture_keep=2)
    for _ in range(4):
        for s in host.run(3):
            rt.observe(s)
        for s in host.run(2, psi_some=8.0):
            rt.observe(s)
    rt.close()
    assert len(list((tmp_path / "captures").glob("*.jsonl"))) == 2


def test_metric_families_render():
    host = Host()
    th = Thresholds()
    rt = DiagnosisRuntime(th, None)
    for s in host.run(3, temp=80.0) + host.run(3, temp=88.0, thermal_share=0.8):
        d = rt.observe(s)
    snap = Snapshot(
        sample=s,
        diagnosis=d,
        event_counts=rt.event_counts(),
        extras={"throttle_seconds_total": rt.throttle_seconds()},
    )

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
    assert metrics.families(object()) != []  # no snapshot parts: unknown levels, zero counts
