"""Source faults through the daemon: it keeps serving, marks the source down, logs once, recovers, leaks nothing.

The daemon runs in this process on real sources (fixture /proc and /sys roots,
the fake NVML) behind the real HTTP server; each test drives ticks by hand and
scrapes /metrics over loopback, so a fault can be switched on and off mid-run.
"""

from __future__ import annotations

import threading
import time

import pytest
import structlog

from spark_watchd.testing import FakeNvml
from tests.daemon_helpers import http_get, value
from tests.reliability.rel_helpers import churn, copy_host, live_daemon
from tests.support.poll import wait_until
from tests.support.resources import Baseline, open_fds, quiet_sockets


def _gpu_temps(m: dict) -> list[float]:
    return [v for (name, _), v in m.items() if name == "sparkwatchd_gpu_temperature_celsius"]


def _down_logs(logs, source: str) -> list[dict]:
    return [e for e in logs if e.get("source") == source and "down" in e["event"]]


def _recovered_logs(logs, source: str) -> list[dict]:
    return [e for e in logs if e.get("source") == source and e["event"].endswith("recovered")]


def test_nvml_init_failure_is_down_others_up_then_recovers(tmp_path):
    nvml = FakeNvml.gb10()
    nvml.fail_init = nvml.NVML_ERROR_DRIVER_NOT_LOADED
    with structlog.testing.capture_logs() as logs, live_daemon(tmp_path, nvml) as d:
        for _ in range(5):
            d.daemon.tick()
            d.mono.advance(1)
        m = d.scrape()
        assert value(m, "sparkwatchd_source_up", source="nvml") == 0
        assert value(m, "sparkwatchd_source_up", source="meminfo") == 1
        assert value(m, "sparkwatchd_memory_available_bytes") > 0
        assert not [k for k in m if k[0].startswith("sparkwatchd_gpu_")]
        assert http_get(d.url + "healthz")[0] == 200
        # Backoff: not re-initialised on every one of the 5 ticks.
        assert nvml.call_counts["nvmlInit"] < 5
        nvml.fail_init = None
        d.mono.advance(3600)  # past any backoff
        d.daemon.tick()
        m = d.scrape()
        assert value(m, "sparkwatchd_source_up", source="nvml") == 1
        assert _gpu_temps(m) == [38]
    assert len(_down_logs(logs, "nvml")) == 1 and len(_recovered_logs(logs, "nvml")) == 1


def test_gpu_lost_mid_run_is_down_then_back_after_reinit(tmp_path):
    nvml = FakeNvml.gb10()
    with structlog.testing.capture_logs() as logs, live_daemon(tmp_path, nvml) as d:
        d.daemon.tick()
        assert d.up("nvml") == 1
        nvml.lose_gpu_after(0)
        for _ in range(4):
            d.daemon.tick()
            d.mono.advance(1)
            assert d.up("nvml") == 0
            assert d.up("meminfo") == 1
        nvml.recover()
        d.mono.advance(3600)
        d.daemon.tick()
        assert d.up("nvml") == 1
        assert nvml.call_counts["nvmlShutdown"] >= 1  # torn down and initialised again
    assert len(_down_logs(logs, "nvml")) == 1 and len(_recovered_logs(logs, "nvml")) == 1


def test_not_supported_for_everything_is_up_with_no_gpu_values(tmp_path):
    nvml = FakeNvml.gb10()
    nvml.not_supported = FakeNvml.ALL
    with structlog.testing.capture_logs() as logs, live_daemon(tmp_path, nvml) as d:
        for _ in range(3):
            d.daemon.tick()
        m = d.scrape()
        # Not Supported is not an error: the source is up, the readings are simply absent.
        assert value(m, "sparkwatchd_source_up", source="nvml") == 1
        assert value(m, "sparkwatchd_source_errors_total", source="nvml") == 0
        assert not [k for k in m if k[0] == "sparkwatchd_gpu_temperature_celsius"]
        assert value(m, "sparkwatchd_source_up", source="meminfo") == 1
    assert not _down_logs(logs, "nvml")


def test_hung_nvml_is_bounded_tick_publishes_and_metrics_answer(tmp_path):
    nvml = FakeNvml.gb10()
    with structlog.testing.capture_logs() as logs, live_daemon(tmp_path, nvml, nvml_timeout_s=0.3) as d:
        d.daemon.tick()
        threads_before = threading.active_count()
        nvml.block()
        try:
            for _ in range(4):
                before = d.daemon.ticks
                t0 = time.monotonic()
                d.daemon.tick()
                assert time.monotonic() - t0 < 10  # bounded, not hung (generous: shared machine)
                assert d.daemon.ticks == before + 1  # the tick still published
                assert d.up("nvml") == 0 and d.up("meminfo") == 1
            # At most the one stuck worker thread, never one per tick.
            assert threading.active_count() <= threads_before + 1
        finally:
            nvml.unblock()
        for _ in range(50):  # the abandoned call returns once the driver unblocks
            d.daemon.tick()
            if d.up("nvml") == 1:
                break
            time.sleep(0.05)
        assert d.up("nvml") == 1
    downs = [e for e in _down_logs(logs, "nvml") if e["event"].startswith("nvml down:")]
    assert len(downs) == 1 and "hung" in downs[0]["error"], downs
    # "did not return" then "an earlier call is still blocked": at most one more line, never one per tick.
    assert len(_down_logs(logs, "nvml")) <= 2
    assert len(_recovered_logs(logs, "nvml")) == 1


def test_hung_nvidia_smi_is_killed_and_the_daemon_serves(tmp_path, monkeypatch):
    import spark_watchd.sources as sources_pkg
    from tests.sources.test_smi import FAKE_SMI, GB10_PERF

    mode = tmp_path / "mode"
    mode.write_text("hang")
    smi = tmp_path / "nvidia-smi"
    import sys

    smi.write_text(FAKE_SMI.format(python=sys.executable, mode=str(mode), perf=GB10_PERF))
    smi.chmod(0o755)
    # As on a host whose libnvidia-ml cannot load: build_sources picks the nvidia-smi fallback.
    monkeypatch.setattr(sources_pkg, "nvml_library_problem", lambda: "libnvidia-ml.so.1 not found")
    monkeypatch.delenv("SPARK_WATCHD_FAKE_NVML", raising=False)
    with (
        structlog.testing.capture_logs() as logs,
        live_daemon(tmp_path, None, nvidia_smi_path=str(smi), nvidia_smi_timeout_s=0.5) as d,
    ):
        for _ in range(2):
            d.daemon.tick()
            assert d.up("nvidia_smi") == 0 and d.up("meminfo") == 1
        err = d.daemon.snapshot().sources["nvidia_smi"].error
        assert "timed out" in err
        mode.write_text("ok")
        d.daemon.tick()
        assert d.up("nvidia_smi") == 1
        m = d.scrape()
        assert [k for k in m if k[0] == "sparkwatchd_gpu_temperature_celsius"]
    # No hung nvidia-smi left behind: it was killed at its timeout.
    import os

    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    assert str(smi).encode() not in f.read()
            except OSError:
                pass
    assert len(_down_logs(logs, "nvidia_smi")) == 1 and len(_recovered_logs(logs, "nvidia_smi")) == 1


@pytest.mark.parametrize(
    ("breakage", "needle"),
    [
        ("directory", "meminfo"),  # unreadable: EISDIR (tests run as root, so chmod 000 would still read)
        ("garbage", "meminfo"),
        ("empty", "meminfo"),
    ],
)
def test_unreadable_or_malformed_proc_file_marks_meminfo_down_and_recovers(tmp_path, breakage, needle):
    host = copy_host(tmp_path)
    meminfo = host / "proc" / "meminfo"
    good = meminfo.read_text()
    with structlog.testing.capture_logs() as logs, live_daemon(tmp_path, FakeNvml.gb10(), host=host) as d:
        d.daemon.tick()
        assert d.up("meminfo") == 1
        meminfo.unlink()
        if breakage == "directory":
            meminfo.mkdir()
        else:
            meminfo.write_text("" if breakage == "empty" else "MemTotal: lots\n\x00\xff garbage\n")
        for _ in range(3):
            d.daemon.tick()
            m = d.scrape()
            assert value(m, "sparkwatchd_source_up", source="meminfo") == 0
            assert value(m, "sparkwatchd_source_up", source="nvml") == 1  # the others go on
            assert value(m, "sparkwatchd_source_up", source="vmstat") == 1
        assert needle in d.daemon.snapshot().sources["meminfo"].error
        if meminfo.is_dir():
            meminfo.rmdir()
        meminfo.write_text(good)
        d.daemon.tick()
        assert d.up("meminfo") == 1
    assert len(_down_logs(logs, "meminfo")) == 1 and len(_recovered_logs(logs, "meminfo")) == 1


def test_processes_vanishing_mid_scan_never_take_the_source_down(tmp_path):
    stop = threading.Event()
    t = threading.Thread(target=churn, args=(stop,), daemon=True)
    t.start()
    try:
        with live_daemon(tmp_path, FakeNvml.gb10(), fast_watch_interval_s=0) as d:
            for _ in range(15):
                d.daemon.tick()
                st = d.daemon.snapshot().sources["processes"]
                assert st.up, st.error
            assert d.up("processes") == 1
    finally:
        stop.set()
        t.join(timeout=10)


def test_wall_clock_jumps_back_and_forward_keep_publishing(tmp_path):
    wall = [time.time()]
    with live_daemon(tmp_path, FakeNvml.gb10(), clock=lambda: wall[0]) as d:
        seen = []
        for jump in (0, 30, -3600, 30, 86400, 30, -86400 * 2, 30):
            wall[0] += jump
            snap = d.daemon.tick()
            assert snap is not None and snap.diagnosis is not None
            m = d.scrape()
            seen.append(value(m, "sparkwatchd_last_sample_timestamp_seconds"))
            assert value(m, "sparkwatchd_source_up", source="meminfo") == 1
            assert (
                http_get(d.url + "healthz")[0] == 200
            )  # freshness is judged on publish time, not sample time
            assert http_get(d.url + "api/v1/status")[0] == 200
        assert seen[2] == pytest.approx(seen[1] - 3600)  # the sample carries the clock as it is
        assert seen[4] == pytest.approx(seen[3] + 86400)


def test_no_thread_or_fd_leak_over_many_ticks_with_faults(tmp_path):
    nvml = FakeNvml.gb10()
    host = copy_host(tmp_path)
    meminfo = host / "proc" / "meminfo"
    good = meminfo.read_text()
    with live_daemon(tmp_path, nvml, host=host, nvml_timeout_s=0.2) as d:
        listening = open_fds()["socket"]  # before any scrape: only the server's own sockets
        for _ in range(5):  # warm up: lazy threads (NVML worker, memory watch) start here
            d.daemon.tick()
            d.scrape()
        # The memory watch keeps its two descriptors open from its first reading on, and a scrape's
        # socket closes a moment after the answer: the baseline waits for both, so neither reads as a leak.
        wait_until(lambda: d.memwatch().readings >= 1, what="the memory watch's first reading")
        quiet_sockets(listening)
        base = Baseline()
        for i in range(120):
            phase = i % 40
            if phase == 10:
                nvml.lose_gpu_after(0)
                meminfo.write_text("garbage\n")
            elif phase == 20:
                nvml.recover()
                meminfo.write_text(good)
                d.mono.advance(3600)
            elif phase == 25:
                nvml.fail_init = nvml.NVML_ERROR_DRIVER_NOT_LOADED
                nvml.lose_gpu_after(0)
            elif phase == 30:
                nvml.fail_init = None
                nvml.recover()
                d.mono.advance(3600)
            d.daemon.tick()
            if i % 10 == 0:
                d.scrape()
        assert d.up("nvml") == 1 and d.up("meminfo") == 1
        base.assert_no_leak()


def test_leak_check_names_a_leaked_thread_while_an_older_one_ends():
    """An earlier test's thread finishing during this one kept the count level and hid the leak."""
    done, stop = threading.Event(), threading.Event()
    older = threading.Thread(target=done.wait, name="older", daemon=True)
    older.start()
    base = Baseline()
    leaked_thread = threading.Thread(target=stop.wait, name="leaky", daemon=True)
    leaked_thread.start()
    done.set()
    older.join()
    try:
        with pytest.raises(AssertionError) as err:
            base.assert_no_leak(timeout=0.2)
        assert "leaky" in str(err.value) and "older" not in str(err.value)
    finally:
        stop.set()
        leaked_thread.join()


def test_leak_check_names_a_leaked_descriptor_and_thread(tmp_path):
    base = Baseline()
    stop = threading.Event()
    leaked_thread = threading.Thread(target=stop.wait, name="leaky", daemon=True)
    leaked_thread.start()
    leaked = open(tmp_path / "leaked.txt", "w")  # noqa: SIM115 - the leak under test
    try:
        with pytest.raises(AssertionError) as err:
            base.assert_no_leak(timeout=0.2)
        assert str(tmp_path / "leaked.txt") in str(err.value) and "leaky" in str(err.value)
    finally:
        leaked.close()
        stop.set()
        leaked_thread.join()
    base.assert_no_leak()
