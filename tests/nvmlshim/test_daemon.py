"""The real daemon on the real binding over the shim: a GPU lost and back, a driver reload, a hung call,
Xid events and a throttle seen only through the cumulative counters."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import FIXTURES
from tests.daemon_helpers import http_get, running_daemon, samples, value
from tests.support.poll import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def daemon_env(gpu, tmp_path, **extra: str) -> dict:
    return gpu.env(
        SPARK_WATCHD_SOURCES__PROC_ROOT=str(FIXTURES / "hosts" / "daemon-vm" / "proc"),
        SPARK_WATCHD_DAEMON__STATE_DIR=str(tmp_path / "state"),
        SPARK_WATCHD_SOURCES__NVML_BACKOFF_INITIAL_S="0.5",
        SPARK_WATCHD_SOURCES__NVML_BACKOFF_MAX_S="1",
        **extra,
    )


def metrics(base: str) -> dict:
    return samples(http_get(base + "/metrics")[1])


def nvml_status(base: str) -> dict:
    return json.loads(http_get(base + "/api/v1/status")[1])["sources"]["nvml"]


def wait_nvml_up(base: str, up: bool, timeout: float = 20.0) -> dict:
    want = 1.0 if up else 0.0
    wait_until(
        lambda: value(metrics(base), "sparkwatchd_source_up", source="nvml") == want,
        timeout,
        0.2,
        f"nvml source up={up}",
    )
    return nvml_status(base)


def test_a_lost_gpu_marks_the_source_down_and_it_recovers(shim_gpu, tmp_path):
    with running_daemon("--interval", "1", env=daemon_env(shim_gpu, tmp_path)) as (_, base):
        wait_nvml_up(base, True)
        assert value(metrics(base), "sparkwatchd_gpu_temperature_celsius", gpu="0") == 38.0
        # GB10: memory info Not Supported is a state, not an error.
        assert value(metrics(base), "sparkwatchd_gpu_memory_info_supported", gpu="0") == 0.0
        shim_gpu.write("fault=GPU_IS_LOST\n")
        down = wait_nvml_up(base, False)
        assert "GPU is lost" in down["error"], down
        assert value(metrics(base), "sparkwatchd_gpu_temperature_celsius", gpu="0") is None
        assert value(metrics(base), "sparkwatchd_source_up", source="meminfo") == 1.0  # the rest goes on
        shim_gpu.write("temp=45\n")
        wait_nvml_up(base, True)
        wait_until(
            lambda: value(metrics(base), "sparkwatchd_gpu_temperature_celsius", gpu="0") == 45.0, 10, 0.2
        )


def test_a_driver_reload_is_an_rm_mismatch_until_it_clears(shim_gpu, tmp_path):
    with running_daemon("--interval", "1", env=daemon_env(shim_gpu, tmp_path)) as (_, base):
        wait_nvml_up(base, True)
        # The kernel module was replaced under a running process: calls fail, re-initialising is refused.
        shim_gpu.write("fault=LIB_RM_VERSION_MISMATCH\ninit=LIB_RM_VERSION_MISMATCH\n")
        down = wait_nvml_up(base, False)
        wait_until(
            lambda: "nvmlInit failed" in (nvml_status(base)["error"] or ""), 15, 0.2, "re-init refused"
        )
        assert "version mismatch" in nvml_status(base)["error"]
        shim_gpu.write("")
        wait_nvml_up(base, True)
        assert down["errors_total"] >= 1


def test_a_hung_call_times_out_and_the_daemon_keeps_serving(shim_gpu, tmp_path):
    env = daemon_env(shim_gpu, tmp_path, SPARK_WATCHD_SOURCES__NVML_TIMEOUT_S="1")
    with running_daemon("--interval", "1", env=env) as (_, base):
        wait_nvml_up(base, True)
        shim_gpu.write("hang.nvmlDeviceGetPowerUsage=4\n")
        down = wait_nvml_up(base, False)
        assert "NVML hung" in down["error"], down
        t0 = time.monotonic()
        assert http_get(base + "/metrics", timeout=2)[0] == 200  # scrapes never wait for the driver
        assert time.monotonic() - t0 < 1.0
        shim_gpu.write("")  # the stuck call still sleeps out its 4 s, then the source recovers
        wait_nvml_up(base, True, timeout=30)


def test_xid_events_reach_the_counter_once_each(shim_gpu, tmp_path):
    with running_daemon("--interval", "1", env=daemon_env(shim_gpu, tmp_path)) as (_, base):
        wait_nvml_up(base, True)

        def xid79():
            # A rewrite fires the file's Xid again; one before the events thread registered is lost, as on
            # a real driver, so deliver until one is counted.
            shim_gpu.write(f"xid=79\n# round {time.monotonic()}\n")
            time.sleep(0.5)
            return value(metrics(base), "sparkwatchd_gpu_xid_errors_total", gpu="0", xid="79")

        wait_until(xid79, 30, 0.5, "Xid 79 counted")
        shim_gpu.write("xid=13\n")  # registered now: exactly one delivery
        wait_until(
            lambda: value(metrics(base), "sparkwatchd_gpu_xid_errors_total", gpu="0", xid="13") == 1.0,
            10,
            0.2,
        )
        time.sleep(1.5)
        assert value(metrics(base), "sparkwatchd_gpu_xid_errors_total", gpu="0", xid="13") == 1.0
        events = json.loads(http_get(base + "/api/v1/status")[1])["recent_events"]
        xids = sorted(e["details"]["xid"] for e in events if e["kind"] == "xid")
        assert 79 in xids and 13 in xids, events
        assert value(metrics(base), "sparkwatchd_source_up", source="driver_events") == 1.0


def test_a_throttle_seen_only_through_the_counters(shim_gpu, tmp_path):
    # GB10: the instant mask can read 0 while the cumulative counters move (the capture's note).
    shim_gpu.write(
        "util=97\npower_mw=98000\ntemp=84\nsm_clock=2100\nreasons=0\n"
        "fi.269=173453251000+600000000/s\n"  # SW thermal slowdown 60 % of the time
    )
    with running_daemon("--interval", "1", env=daemon_env(shim_gpu, tmp_path)) as (_, base):
        wait_until(
            lambda: value(metrics(base), "sparkwatchd_thermal_throttle_active") == 1.0, 30, 0.3, "throttle"
        )
        m = metrics(base)
        assert value(m, "sparkwatchd_gpu_clock_event_active", gpu="0", reason="sw_thermal") == 0.0
        assert value(m, "sparkwatchd_gpu_clock_event_seconds_total", gpu="0", reason="sw_thermal") > 173.45
        assert value(m, "sparkwatchd_finding_level", gotcha="G4") >= 1.0
