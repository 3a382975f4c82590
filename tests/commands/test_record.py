"""`record` writes trace-v1 line for line; a recorder killed with SIGKILL leaves a trace the next `record` repairs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from spark_watchd.sample.trace import read_trace
from tests.conftest import FIXTURES, REPO, cli_env, run_cli

VM_ROOT = FIXTURES / "hosts" / "daemon-vm" / "proc"
ENV = {"SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT)}
# trace-v1.md, key for key.
SAMPLE_KEYS = {
    "v", "ts", "host", "boot_id", "uptime_s", "gpus", "meminfo", "psi_memory", "vmstat",
    "mem_available_min_kb", "sensors", "processes", "throughput",
}  # fmt: skip


def test_record_writes_trace_v1_line_for_line(tmp_path):
    out = tmp_path / "t.jsonl"
    res = run_cli("record", str(out), "--interval", "1", "--duration", "1.5", env=ENV)
    assert res.returncode == 0, res.stderr
    lines = out.read_text().splitlines()
    assert len(lines) >= 2
    for line in lines:
        obj = json.loads(line)
        assert set(obj) >= SAMPLE_KEYS, SAMPLE_KEYS - set(obj)
        assert obj["v"] == 1 and isinstance(obj["ts"], float)
        assert obj["meminfo"]["MemAvailable"] > 0 and isinstance(obj["vmstat"], dict)
        assert isinstance(obj["gpus"], list) and isinstance(obj["processes"], list)
    ts = [json.loads(x)["ts"] for x in lines]
    assert ts == sorted(ts)


def test_record_takes_a_sub_second_interval_as_its_help_says(tmp_path):
    # --interval accepts (0, 3600]; the daemon.interval it hands the server scrapers starts at 1 s.
    out = tmp_path / "t.jsonl"
    res = run_cli("record", str(out), "--interval", "0.5", "--duration", "1.2", env=ENV)
    assert res.returncode == 0, res.stderr
    ts = [json.loads(x)["ts"] for x in out.read_text().splitlines()]
    assert len(ts) >= 3 and all(0.3 < b - a < 0.9 for a, b in zip(ts, ts[1:], strict=False)), ts


def test_sigkilled_recorder_leaves_a_trace_the_next_record_repairs(tmp_path):
    out = tmp_path / "t.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", "record", str(out), "--interval", "1"],
        env=cli_env(ENV),
        cwd=str(REPO),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while (not out.exists() or out.read_text().count("\n") < 2) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    whole = out.read_text().count("\n")
    assert whole >= 2
    # The kill landed mid-write: the last line is cut short.
    with open(out, "a") as fh:
        fh.write('{"v":1,"ts":1795000000.0,"host":"spa')
    res = run_cli("record", str(out), "--interval", "1", "--duration", "0", env=ENV)
    assert res.returncode == 0, res.stderr
    assert "repaired a torn last line" in res.stderr
    samples = list(read_trace(out))  # reads whole: no TraceError
    assert len(samples) == whole + 1


def test_record_writes_the_previous_boots_driver_faults_into_the_first_sample(tmp_path):
    # A stand-in journalctl: `-b -1` prints a previous boot ending in Xid 79, `-f` follows (prints nothing).
    excerpt = FIXTURES / "journal" / "previous-boot-xid79.jsonl"
    fake = tmp_path / "journalctl"
    fake.write_text(
        f"#!{sys.executable}\nimport sys, time\n"
        "if '-f' in sys.argv:\n    time.sleep(60)\n"
        f"else:\n    sys.stdout.write(open({str(excerpt)!r}).read())\n"
    )
    fake.chmod(0o755)
    out = tmp_path / "t.jsonl"
    env = {**ENV, "SPARK_WATCHD_FAKE_NVML": "gb10", "SPARK_WATCHD_SOURCES__JOURNALCTL_PATH": str(fake)}
    res = run_cli("record", str(out), "--interval", "1", "--duration", "1.5", env=env)
    assert res.returncode == 0, res.stderr
    samples = list(read_trace(out))
    first = samples[0].driver_events
    assert [(e.xid, e.source) for e in first][-1] == (79, "journal")
    assert "fallen off the bus" in first[-1].text
    assert all(not s.driver_events for s in samples[1:])  # handed over once, not every tick


def test_record_and_the_daemon_share_one_upper_bound_on_the_interval(tmp_path):
    from spark_watchd.config import INTERVAL_MAX_S, DaemonSettings

    over = str(INTERVAL_MAX_S + 1)
    res = run_cli("record", str(tmp_path / "t.jsonl"), "--interval", over, "--duration", "1", env=ENV)
    assert res.returncode == 2 and f"--interval must be in (0, {INTERVAL_MAX_S}]" in res.stderr
    assert DaemonSettings.model_fields["interval"].metadata[-1].le == INTERVAL_MAX_S
    assert run_cli("run", "--help").stdout.count(f"(1-{INTERVAL_MAX_S})") == 1
