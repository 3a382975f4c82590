"""Diagnosis runtime: state across a power loss, the event journal, capture on trouble, metrics."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.runtime import DiagnosisRuntime
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.trace import read_trace
from tests.diagnose.diag_builders import Host

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


# The engine section of a state.json as main wrote it before the trackers shared one interface
# (issue 11): a flat object, the G4 tracker's keys beside boot_id and uptime_s.
STATE_BEFORE_ISSUE_11 = {
    "version": 1,
    "engine": {
        "boot_id": "boot-a",
        "uptime_s": 5000.0,
        "last_ts": 1_700_000_300.0,
        "throttle_active": True,
        "throttle_start_ts": 1_700_000_100.0,
        "last_thermal_ts": 1_700_000_300.0,
        "throttle_seconds_total": 212.5,
        "reboot_hold_until": None,
    },
    "event_counts": {"throttle_start": 3, "reboot": 1},
    "xid_counts": {"0:79": 2},
}


def test_a_state_file_written_before_the_tracker_interface_restores_unchanged(tmp_path):
    (tmp_path / "state.json").write_text(json.dumps(STATE_BEFORE_ISSUE_11))
    rt = DiagnosisRuntime(Thresholds(), tmp_path)
    assert rt.engine.state() == STATE_BEFORE_ISSUE_11["engine"]
    assert rt.throttle_seconds() == 212.5
    assert rt.event_counts()["throttle_start"] == 3 and rt.xid_error_counts()["0:79"] == 2
    host = Host()
    host.boot_id = "boot-b"  # the power loss during that throttle
    d = rt.observe(host.sample(temp=40.0, power=4.0, util=0.0))
    assert [(e.kind, e.after_throttle) for e in d.events] == [("throttle_end", None), ("reboot", True)]
    assert d.findings["G4"].severity == "critical"
    rt.close()
    written = json.loads((tmp_path / "state.json").read_text())
    assert set(written["engine"]) == set(STATE_BEFORE_ISSUE_11["engine"])  # the same shape written back
    assert written["engine"]["boot_id"] == "boot-b" and written["event_counts"]["reboot"] == 2


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


def test_capture_replays_and_state_write_leaves_no_temp_file(tmp_path):
    th = Thresholds()
    host = Host()
    rt = DiagnosisRuntime(th, tmp_path, capture_pre=4, capture_post=2)
    for s in host.run(5) + host.run(3, temp=88.0, thermal_share=0.8):
        rt.observe(s)
    rt.close()
    (cap,) = (tmp_path / "captures").glob("*.jsonl")
    assert "G4" in cap.name
    replayed = [d.findings["G4"].severity for d in Diagnoser(th).run(read_trace(cap))]
    assert replayed[0] == "ok" and replayed[-1] == "warning"
    assert not list(tmp_path.glob("*.tmp"))
    assert json.loads((tmp_path / "state.json").read_text())["event_counts"]["throttle_start"] == 1


def test_update_thresholds_applies_without_losing_state():
    host = Host()
    rt = DiagnosisRuntime(Thresholds(), None)
    for s in host.run(3, psi_some=3.0):
        assert rt.observe(s).findings["G3"].severity == "warning"
    rt.update_thresholds(Thresholds(psi_some_warn_pct=5.0))
    assert rt.observe(host.sample(psi_some=3.0)).findings["G3"].severity == "ok"


def test_unwritable_state_dir_keeps_judging(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    rt = DiagnosisRuntime(Thresholds(), blocker / "state")  # mkdir under a file fails
    assert rt.storage_error is not None and rt.state_dir is None
    host = Host()
    d = rt.observe(host.sample(oom=0))
    assert d.findings["G3"].severity == "ok"
    rt.close()


def test_write_failure_is_reported_once_and_recovers(tmp_path, monkeypatch):
    host = Host()
    rt = DiagnosisRuntime(Thresholds(), tmp_path)
    rt.observe(host.sample())
    import spark_watchd.diagnose.runtime as mod

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(mod, "write_state_atomic", boom)
    rt._saved_key = None
    d = rt.observe(host.sample(oom=1))  # an event, so the state must be written
    assert [e.kind for e in d.events] == ["oom_kill"]
    assert "No space left" in rt.storage_error and rt.storage_errors_total == 1
    monkeypatch.undo()
    rt.observe(host.sample())
    assert rt.storage_error is None
    assert json.loads((tmp_path / "state.json").read_text())["event_counts"]["oom_kill"] == 1
    rt.close()


def test_update_thresholds_reaches_every_classifier():
    rt = DiagnosisRuntime(Thresholds(), None)
    new = Thresholds(anomaly_min_s=1.0)
    rt.update_thresholds(new)
    e = rt.engine
    g4, g3, g6 = e.trackers
    assert e.th is e.driver.th is g6.th is new
    assert g4.th.anomaly_min_s == g4.anomalies.th.anomaly_min_s == 1.0  # G4 reads a plain copy of them
    assert g3.th.anomaly_min_s == g3.runway.th.anomaly_min_s == 1.0  # and G3
