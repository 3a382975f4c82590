"""Faults through the daemon as users run it (a subprocess), and a tick that overruns its interval."""

from __future__ import annotations

import json
import threading

import pytest
import structlog

from spark_watchd.app import build
from spark_watchd.config import load_settings
from spark_watchd.daemon import Runner
from spark_watchd.web.server import HttpServer
from tests.conftest import FIXTURES
from tests.daemon_helpers import http_get, running_daemon, samples, value
from tests.reliability.rel_helpers import fd_count, thread_count
from tests.support.poll import wait_until

BROKEN = FIXTURES / "hosts" / "broken"


@pytest.mark.slow
def test_running_daemon_on_a_broken_host_with_failing_nvml_serves_and_leaks_nothing(tmp_path):
    env = {
        "SPARK_WATCHD_FAKE_NVML": "fail-init",
        "SPARK_WATCHD_SOURCES__PROC_ROOT": str(BROKEN / "proc"),
        "SPARK_WATCHD_SOURCES__SYS_ROOT": str(tmp_path / "nosys"),
        "SPARK_WATCHD_SOURCES__NVML_BACKOFF_INITIAL_S": "1",
        "SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path / "state"),
    }

    def scrape() -> dict:
        status, text = http_get(base + "/metrics")
        assert status == 200
        return samples(text)

    def next_tick(after: float) -> dict:
        """The first scrape showing a sample newer than `after`."""
        return wait_until(
            lambda: (value(m := scrape(), "sparkwatchd_last_sample_timestamp_seconds") or 0) > after and m,
            what=f"a sample after {after}",
        )

    with running_daemon("--interval", "1", env=env) as (proc, base):
        m = next_tick(0)
        threads0, fds0 = thread_count(proc.pid), fd_count(proc.pid)
        ticks = [value(m, "sparkwatchd_last_sample_timestamp_seconds")]
        for _ in range(3):
            m = next_tick(ticks[-1])
            ticks.append(value(m, "sparkwatchd_last_sample_timestamp_seconds"))
            for src in ("nvml", "meminfo", "vmstat", "boot"):
                assert value(m, "sparkwatchd_source_up", source=src) == 0, src
            assert value(m, "sparkwatchd_source_up", source="processes") == 1
        assert ticks[-1] > ticks[0]  # still ticking
        status, body = http_get(base + "/api/v1/status")
        doc = json.loads(body)
        assert status == 200 and "meminfo" in doc["sources"]["meminfo"]["error"]
        assert "nvmlInit failed" in doc["sources"]["nvml"]["error"]
        # Counted from outside, a scrape's socket may still be closing: wait for the counts to settle.
        wait_until(
            lambda: thread_count(proc.pid) <= threads0 + 1 and fd_count(proc.pid) <= fds0 + 2,
            timeout=5, what="threads and descriptors back near the baseline",
        )  # fmt: skip
        proc.terminate()
        assert proc.wait(timeout=10) == 0
        err = proc.stderr.read()
    lines = [json.loads(x) for x in err.splitlines() if x.startswith("{")]
    for src in ("nvml", "meminfo", "vmstat"):
        down = [x for x in lines if x.get("source") == src and x["event"].startswith(f"{src} down")]
        assert len(down) == 1, (src, down)  # once, not once per tick


class _Slow:
    """A source whose first collects hang until released: a tick that overruns the 1 s interval."""

    name = "slow"

    def __init__(self):
        self.release = threading.Event()
        self.entered = threading.Event()
        self.running = 0
        self.max_running = 0
        self.calls = 0
        self._lock = threading.Lock()

    def collect(self, partial):
        with self._lock:
            self.running += 1
            self.calls += 1
            self.max_running = max(self.max_running, self.running)
        self.entered.set()
        try:
            self.release.wait(10)
            return {"meminfo": {"MemTotal": 1000, "MemAvailable": 500}}
        finally:
            with self._lock:
                self.running -= 1

    def close(self):
        self.release.set()


def test_overrunning_tick_is_coalesced_logged_and_scrapes_still_answer(tmp_path):
    settings = load_settings(None, {"daemon": {"interval": 1}}, environ={})
    slow = _Slow()
    daemon = build(settings, sources=(slow,), state_dir=str(tmp_path))
    server = HttpServer("127.0.0.1:0", daemon.routes, workers=4, timeout=2)
    server.start()
    runner = Runner(daemon)
    with structlog.testing.capture_logs() as logs:
        try:
            runner.start()
            assert slow.entered.wait(10)
            wait_until(
                lambda: daemon.overruns >= 2, what="two more runs falling due while the first tick hangs"
            )
            # A scrape during the hung tick answers from the previous (here: empty) snapshot at once.
            status, _ = http_get(server.url + "metrics", timeout=5)
            assert status == 200
            assert slow.calls == 1 and daemon.ticks == 0  # no pile-up behind the stuck tick
            slow.release.set()
            wait_until(lambda: daemon.ticks >= 2, what="ticking to go on after the overrun")
        finally:
            runner.stop()
            server.stop()
    assert slow.max_running == 1
    assert daemon.overruns >= 1
    overrun = [e for e in logs if e["event"].startswith("tick overrun")]
    assert overrun and overrun[0]["interval_s"] == 1.0
    # Coalesced: the missed runs did not all fire afterwards.
    assert slow.calls <= daemon.ticks + 1


def _nvml_up(base: str) -> float | None:
    status, text = http_get(base + "/metrics")
    assert status == 200  # whatever NVML does, the scrape answers
    return value(samples(text), "sparkwatchd_source_up", source="nvml")


def _wait_nvml(base: str, want: float, timeout: float = 20) -> None:
    wait_until(lambda: _nvml_up(base) == want, timeout, interval=0.2, what=f"nvml up == {want}")


@pytest.mark.slow
def test_running_daemon_rides_out_gpu_loss_and_a_hung_driver_switched_from_outside(tmp_path):
    ctl = tmp_path / "nvml.json"

    def fault(**doc):
        tmp = tmp_path / "nvml.json.tmp"
        tmp.write_text(json.dumps(doc))
        tmp.replace(ctl)  # atomic: the fake never reads half a file

    fault()
    env = {
        "SPARK_WATCHD_FAKE_NVML": f"file:{ctl}",
        "SPARK_WATCHD_SOURCES__PROC_ROOT": str(FIXTURES / "hosts" / "daemon-vm" / "proc"),
        "SPARK_WATCHD_SOURCES__NVML_TIMEOUT_S": "0.5",
        "SPARK_WATCHD_SOURCES__NVML_BACKOFF_INITIAL_S": "1",
        "SPARK_WATCHD_SOURCES__NVML_BACKOFF_MAX_S": "1",
        "SPARK_WATCHD_DAEMON__STATE_DIR": str(tmp_path / "state"),
    }
    with running_daemon("--interval", "1", env=env) as (proc, base):
        _wait_nvml(base, 1)
        fault(lost=True)  # the GPU falls off the bus
        _wait_nvml(base, 0)
        fault()  # and is back after a driver reload
        _wait_nvml(base, 1)
        fault(blocked=True)  # the driver wedges: calls never return
        _wait_nvml(base, 0)
        doc = json.loads(http_get(base + "/api/v1/status")[1])
        assert "hung" in doc["sources"]["nvml"]["error"]
        assert doc["sources"]["meminfo"]["up"] is True and doc["fresh"] is True  # still ticking
        fault()  # unwedged: the stuck call returns
        _wait_nvml(base, 1)
        proc.terminate()
        assert proc.wait(timeout=15) == 0
        err = proc.stderr.read()
    lines = [json.loads(x) for x in err.splitlines() if x.startswith("{")]
    nvml = [x for x in lines if x.get("source") == "nvml"]
    downs = [x for x in nvml if x["event"].startswith("nvml down")]
    ups = [x for x in nvml if x["event"] == "nvml recovered"]
    assert len(downs) == 2 and len(ups) == 2, [x["event"] for x in nvml]  # once per change, not per tick
    assert len(nvml) <= 5  # at most one "still down" line when the reason changes
