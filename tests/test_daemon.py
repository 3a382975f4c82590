"""The daemon as users run it: a subprocess on a fixture host root, scraped over HTTP."""

from __future__ import annotations

import json
import signal
import socket
import time

import pytest

from spark_watchd.trace import parse_line
from tests.conftest import FIXTURES, run_cli
from tests.daemon_helpers import http_get, running_daemon, samples, value

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


def test_missing_source_logged_once_systemd_notified_and_sigterm_stops_cleanly(tmp_path):
    notify_path = tmp_path / "notify.sock"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    env = {
        "SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT),
        "SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path),
        "NOTIFY_SOCKET": str(notify_path),
    }
    with running_daemon("--interval", "1", env=env) as (proc, base):
        time.sleep(2.5)  # several ticks with NVML down
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        err = proc.stderr.read()
    notify.setblocking(False)
    msgs = []
    while True:
        try:
            msgs.append(notify.recv(4096).decode())
        except BlockingIOError:
            break
    notify.close()
    assert msgs[0].startswith("WATCHDOG=1") and msgs[1].startswith("READY=1")  # ready after the first publish
    assert msgs.count("WATCHDOG=1") >= 2 and msgs[-1] == "STOPPING=1"
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    down = [ln for ln in lines if ln.get("source") == "nvml" and "down" in ln["event"]]
    assert len(down) == 1, err  # once per state change, not every tick
    assert down[0]["event"].startswith("nvml down: ")
    assert any(ln["event"] == "stopping" for ln in lines)


def test_once_json_is_a_trace_v1_line_with_findings(tmp_path):
    res = run_cli("once", "--json", env={"SPARK_WATCHD_SOURCES__PROC_ROOT": str(VM_ROOT)})
    assert res.returncode == 0, res.stderr
    obj = json.loads(res.stdout)
    assert parse_line(res.stdout)["v"] == 1
    assert obj["meminfo"]["MemAvailable"] == _meminfo_kb("MemAvailable")
    assert set(obj["findings"]) >= {"G3", "G4", "G6"} and obj["sources"]["nvml"]["up"] is False


def test_demo_serves_a_bundled_scenario_and_prints_its_url(tmp_path):
    with running_daemon("--speed", "600", verb="demo") as (proc, base):
        status, text = http_get(base + "/metrics")
        m = samples(text)
        assert value(m, "sparkwatchd_source_up", source="replay") == 1
        assert value(m, "sparkwatchd_gpu_memory_info_supported", gpu="0") == 0  # a GB10 trace
        assert json.loads(http_get(base + "/api/v1/status")[1])["mode"] == "replay"
        proc.terminate()
        out = proc.communicate(timeout=10)[0]
    assert f"open {base}/" in out
