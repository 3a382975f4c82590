"""The daemon as users run it: a subprocess on a fixture host root, scraped over HTTP."""

from __future__ import annotations

import json
import signal
import socket

import pytest

from spark_watchd.sample.trace import read_trace
from tests.conftest import FIXTURES
from tests.daemon_helpers import http_get, running_daemon, samples, value
from tests.support.poll import wait_until

VM_ROOT = FIXTURES / "hosts" / "daemon-vm" / "proc"


def _meminfo_kb(key: str) -> int:
    for line in (VM_ROOT / "meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


@pytest.fixture(scope="module")
def live_daemon(tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    env = {"SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT), "SPARK_WATCHD_DAEMON__STATE_DIR": str(state)}
    with running_daemon("--interval", "1", env=env) as (proc, base):
        yield proc, base


def test_gpu_less_host_serves_meminfo_up_and_nvml_down(live_daemon):
    _, base = live_daemon
    status, text = http_get(base + "/metrics")
    assert status == 200
    m = samples(text)
    assert value(m, "sparkwatchd_source_up", source="nvml") == 0
    assert value(m, "sparkwatchd_source_up", source="meminfo") == 1
    assert value(m, "sparkwatchd_source_errors_total", source="nvml") >= 1
    # Read from the fixture root, not this machine's /proc.
    assert value(m, "sparkwatchd_memory_available_bytes") == _meminfo_kb("MemAvailable") * 1024
    assert value(m, "sparkwatchd_memory_total_bytes") == _meminfo_kb("MemTotal") * 1024
    assert value(m, "sparkwatchd_build_info", version=__import__("spark_watchd").__version__) == 1
    assert value(m, "sparkwatchd_last_sample_timestamp_seconds") > 1.7e9


def test_healthz_ok_while_fresh(live_daemon):
    _, base = live_daemon
    assert http_get(base + "/healthz") == (200, "ok\n")


def test_status_api_reports_sources_memory_and_findings(live_daemon):
    _, base = live_daemon
    status, body = http_get(base + "/api/v1/status")
    assert status == 200
    doc = json.loads(body)
    assert doc["mode"] == "live"
    assert doc["sources"]["nvml"]["up"] is False and doc["sources"]["nvml"]["error"]
    assert doc["sources"]["meminfo"]["up"] is True
    assert doc["memory"]["available_bytes"] == _meminfo_kb("MemAvailable") * 1024
    assert set(doc["findings"]) >= {"G3", "G4", "G6"}


def test_unknown_path_404_and_wrong_method_405(live_daemon):
    _, base = live_daemon
    assert http_get(base + "/nope")[0] == 404
    import urllib.request

    req = urllib.request.Request(base + "/metrics", data=b"x", method="POST")
    try:
        urllib.request.urlopen(req, timeout=5)
        code = 200
    except urllib.error.HTTPError as err:
        code = err.code
        assert "GET" in err.headers["Allow"]
    assert code == 405


def test_lifecycle_missing_source_once_sd_notify_sighup_reload_record_and_sigterm(tmp_path):
    notify_path = tmp_path / "notify.sock"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    cfg = tmp_path / "config.toml"
    cfg.write_text("[daemon]\ninterval = 1\n")
    env = {
        "SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT),
        "SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path / "state"),
        "NOTIFY_SOCKET": str(notify_path),
    }
    notify.setblocking(False)
    msgs: list[str] = []

    def received() -> list[str]:
        """Every notify message so far (the daemon pings WATCHDOG=1 per publish, READY=1 per reload)."""
        while True:
            try:
                msgs.append(notify.recv(4096).decode())
            except BlockingIOError:
                return msgs

    def readies() -> int:
        return sum(m.startswith("READY=1") for m in received())

    traces = tmp_path / "traces"
    with running_daemon("--config", str(cfg), "--record", str(traces), env=env) as (proc, base):
        wait_until(lambda: received().count("WATCHDOG=1") >= 3, what="three ticks published with NVML down")
        cfg.write_text("[daemon]\ninterval = 2\n")
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: readies() >= 2, what="the reload acknowledged with READY=1")
        cfg.write_text("[daemon]\ninterval = 0\n")  # invalid: must be refused, the daemon goes on
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: readies() >= 3, what="the refused reload acknowledged with READY=1")
        assert http_get(base + "/healthz")[0] == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        err = proc.stderr.read()
    received()
    notify.close()
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    nvml = [ln for ln in lines if ln.get("source") == "nvml" and ln["level"] != "debug"]
    assert len(nvml) == 1, err  # said once at start-up, not every tick
    assert nvml[0]["event"].startswith("nvml missing: ") and "libnvidia-ml.so.1 not found" in nvml[0]["event"]
    reloaded = [ln for ln in lines if ln["event"] == "configuration reloaded"]
    assert len(reloaded) == 1 and reloaded[0]["interval_s"] == 2
    refused = [ln for ln in lines if ln["event"].startswith("reload failed")]
    assert len(refused) == 1 and "key 'daemon.interval'" in refused[0]["error"]
    assert any(ln["event"] == "stopping" for ln in lines)
    # systemd: ready after the first publish, a watchdog ping per publish, reload acknowledged, stopping last.
    assert msgs[0] == "WATCHDOG=1" and msgs[1].startswith("READY=1")
    assert msgs.count("WATCHDOG=1") >= 2 and msgs[-1] == "STOPPING=1"
    assert any(m.startswith("RELOADING=1\nMONOTONIC_USEC=") for m in msgs)
    # --record: rolling trace-v1 files, one line per published sample.
    files = list(traces.glob("spark-watchd-*.jsonl"))
    assert len(files) == 1
    recorded = list(read_trace(files[0]))
    assert len(recorded) >= 3 and all(
        s.meminfo["MemAvailable"] == _meminfo_kb("MemAvailable") for s in recorded
    )


def test_fake_gb10_through_the_real_daemon(tmp_path):
    env = {
        "SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT),
        "SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path),
        "SPARK_WATCHD_FAKE_NVML": "gb10",
    }
    with running_daemon("--interval", "1", env=env) as (_, base):
        m = samples(http_get(base + "/metrics")[1])
        doc = json.loads(http_get(base + "/api/v1/status")[1])
    assert value(m, "sparkwatchd_source_up", source="nvml") == 1
    # GB10: NVML memory info is Not Supported; the thresholds and app clock are what the capture shows.
    assert value(m, "sparkwatchd_gpu_memory_info_supported", gpu="0") == 0
    assert value(m, "sparkwatchd_gpu_slowdown_temperature_celsius", gpu="0") == 86
    assert value(m, "sparkwatchd_gpu_applications_clock_hertz", gpu="0") == 2418e6
    info = [k for k in m if k[0] == "sparkwatchd_gpu_info"]
    assert len(info) == 1 and ("name", "NVIDIA GB10") in info[0][1]
    assert doc["gpus"][0]["mem_total_bytes"] is None and doc["sources"]["nvml"]["up"] is True
