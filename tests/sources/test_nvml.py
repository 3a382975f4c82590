"""The NVML source against the fake NVML: GB10 readings, Not Supported, faults, backoff, hangs."""

from __future__ import annotations

import os
import threading

import pynvml
import pytest

from spark_watchd.sample.model import GpuReading
from spark_watchd.sources.base import SourceUnavailable
from spark_watchd.sources.collect import _kind
from spark_watchd.sources.nvml import NvmlSource
from spark_watchd.testing import FakeGpu, FakeNvml
from tests.conftest import FIXTURES

GB10_PROC = str(FIXTURES / "hosts" / "gb10-eviction" / "proc")


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make(nvml, **kw):
    kw.setdefault("proc_root", GB10_PROC)
    kw.setdefault("call_timeout_s", 2.0)
    return NvmlSource(nvml=nvml, **kw)


def test_gb10_reading_has_every_trace_v1_field():
    nvml = FakeNvml.gb10()
    nvml.gpus[0].compute_procs = [(114687, 19135 * 2**20)]
    src = make(nvml)
    out = src.collect({})
    (g,) = out["gpus"]
    assert isinstance(g, GpuReading)
    assert g.name == "NVIDIA GB10" and g.uuid.startswith("GPU-") and g.driver_version == "580.95.05"
    assert g.power_w == 11.17 and g.temp_c == 38.0
    assert (g.slowdown_temp_c, g.shutdown_temp_c) == (86.0, 90.0)
    assert g.applications_clock_mhz == 2418 and g.sm_clock_mhz == 2405
    assert g.util_pct == 0.0 and g.energy_j == 1_200_121.0
    assert g.clocks_event_reasons == 0x1
    # ns -> us, matching `nvidia-smi -q -d PERFORMANCE` on the same GB10.
    assert g.clocks_event_counters_us == {
        "sw_power_cap": 0,
        "hw_slowdown": None,
        "sw_thermal": 173453251,
        "hw_thermal": 403805,
        "hw_power_brake": 0,
    }
    assert g.mem_used_bytes is None and g.mem_total_bytes is None
    assert out["_gpu_processes"] == {114687: 19135 * 2**20}
    src.close()
    assert not nvml.initialized


def test_readings_change_between_collects_and_counters_accumulate():
    nvml = FakeNvml.gb10()
    src = make(nvml)
    src.collect({})
    gpu = nvml.gpus[0]
    gpu.temp_c, gpu.power_mw, gpu.reasons = 86, 92_400, 0x20
    gpu.counters_ns[269] += 30_000_000_000
    (g,) = src.collect({})["gpus"]
    assert (g.temp_c, g.power_w, g.clocks_event_reasons) == (86.0, 92.4, 0x20)
    assert g.clocks_event_counters_us["sw_thermal"] == 173453251 + 30_000_000
    src.close()


def test_memory_info_reporting_memtotal_is_treated_as_unsupported():
    # Some GB10 drivers answer SUCCESS with total = MemTotal (127600748 kB): that is the pool, not VRAM.
    memtotal = 127600748 * 1024
    src = make(FakeNvml.gb10(memory=(memtotal - 4096, 60 * 2**30)))
    (g,) = src.collect({})["gpus"]
    assert g.mem_total_bytes is None and g.mem_used_bytes is None
    src.close()
    # A discrete GPU's own 80 GiB is real device memory.
    src = make(FakeNvml([FakeGpu(name="NVIDIA H100", memory=(80 * 2**30, 10 * 2**30))]))
    (g,) = src.collect({})["gpus"]
    assert (g.mem_total_bytes, g.mem_used_bytes) == (80 * 2**30, 10 * 2**30)
    src.close()


def test_everything_not_supported_keeps_source_up_with_none_fields():
    nvml = FakeNvml.gb10(counters_ns={})
    # Handles still resolve; every reading answers Not Supported.
    nvml.not_supported = {n for n in dir(FakeNvml) if n.startswith("nvmlDevice")} - {
        "nvmlDeviceGetHandleByIndex"
    }
    src = make(nvml)
    (g,) = src.collect({})["gpus"]
    assert g.index == 0 and g.name == "" and g.uuid == ""
    for field in GpuReading.__slots__:
        if field not in ("index", "name", "uuid", "driver_version"):
            assert getattr(g, field) is None, field
    src.close()


def test_per_field_errors_leave_only_those_counters_none():
    nvml = FakeNvml.gb10(counters_ns={269: 5_000_000})  # the other ids answer an error in nvmlReturn
    src = make(nvml)
    (g,) = src.collect({})["gpus"]
    assert g.clocks_event_counters_us == {
        "sw_power_cap": None,
        "hw_slowdown": None,
        "sw_thermal": 5000,
        "hw_thermal": None,
        "hw_power_brake": None,
    }
    src.close()


def test_old_driver_falls_back_to_throttle_reasons_and_violation_status():
    nvml = FakeNvml.gb10(reasons=0x40, violation_ns={pynvml.NVML_PERF_POLICY_POWER: 7_000_000})
    nvml.not_supported = {"nvmlDeviceGetFieldValues"}

    def gone(*a):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    nvml.nvmlDeviceGetCurrentClocksEventReasons = gone  # the pre-535 binding lacks the new name
    src = make(nvml)
    (g,) = src.collect({})["gpus"]
    assert g.clocks_event_reasons == 0x40
    assert nvml.call_counts["nvmlDeviceGetCurrentClocksThrottleReasons"] == 1
    assert g.clocks_event_counters_us["sw_power_cap"] == 7000
    src.close()


def test_init_failure_is_down_and_retried_with_backoff_not_every_tick():
    nvml = FakeNvml.gb10()
    nvml.fail_init = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    clock = Clock()
    src = make(nvml, clock=clock, backoff_initial_s=10, backoff_max_s=40)
    with pytest.raises(SourceUnavailable, match="nvmlInit failed: Driver Not Loaded"):
        src.collect({})
    attempts = []
    for _ in range(40):  # 40 ticks of 5 s
        clock.t += 5
        with pytest.raises(SourceUnavailable):
            src.collect({})
        attempts.append(nvml.call_counts["nvmlInit"])
    # Retried at once, then after 10, 20, 40, 40... s: far fewer than 40 attempts.
    assert 5 <= nvml.call_counts["nvmlInit"] <= 9
    nvml.fail_init = None
    clock.t += 41
    assert src.collect({})["gpus"][0].temp_c == 38.0
    src.close()


def test_library_missing_names_the_library():
    nvml = FakeNvml.gb10()
    nvml.fail_init = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    src = make(nvml)
    with pytest.raises(SourceUnavailable, match="libnvidia-ml.so.1 not found"):
        src.collect({})
    src.close()


def test_gpu_lost_mid_run_reinitialises_and_recovers():
    nvml = FakeNvml.gb10()
    clock = Clock()
    src = make(nvml, clock=clock)
    src.collect({})
    nvml.lose_gpu_after(3)
    with pytest.raises(SourceUnavailable, match="GPU is lost"):
        src.collect({})
    assert not nvml.initialized  # shut down, to initialise afresh
    with pytest.raises(SourceUnavailable, match="GPU is lost"):
        src.collect({})  # re-init works, the device still answers lost
    nvml.recover()
    clock.t += 600
    assert src.collect({})["gpus"][0].name == "NVIDIA GB10"
    assert nvml.call_counts["nvmlInit"] == 3
    src.close()


def test_hung_driver_is_bounded_marks_down_and_recovers_without_leaking_threads():
    threads_before = threading.active_count()
    nvml = FakeNvml.gb10()
    src = make(nvml, call_timeout_s=0.2)
    src.collect({})
    nvml.block()
    done = threading.Event()
    result: list = []

    def tick():
        try:
            src.collect({})
        except SourceUnavailable as exc:
            result.append(str(exc))
        done.set()

    t = threading.Thread(target=tick)
    t.start()
    # The tick returns on its own, bounded by call_timeout_s, while the driver call is still stuck.
    assert done.wait(10)
    t.join()
    assert "did not return within 0.2 s" in result[0]
    # While the call is stuck, later ticks are refused at once instead of piling up threads.
    with pytest.raises(SourceUnavailable, match="still blocked"):
        src.collect({})
    assert threading.active_count() <= threads_before + 1
    nvml.unblock()
    for _ in range(50):
        try:
            src.collect({})
            break
        except SourceUnavailable:
            threading.Event().wait(0.05)
    assert src.collect({})["gpus"][0].temp_c == 38.0
    src.close()
    assert threading.active_count() == threads_before


def test_no_thread_or_fd_leak_over_many_collects_and_faults():
    fds_before = len(os.listdir("/proc/self/fd"))
    threads_before = threading.active_count()
    for _ in range(3):
        nvml = FakeNvml.gb10()
        src = make(nvml)
        for i in range(20):
            if i == 5:
                nvml.lose_gpu_after(0)
            if i == 8:
                nvml.recover()
            try:
                src.collect({})
            except SourceUnavailable:
                pass
        src.close()
    assert threading.active_count() == threads_before
    assert len(os.listdir("/proc/self/fd")) == fds_before


def test_real_pynvml_without_driver_is_down_not_crashing():
    # On a machine without libnvidia-ml the real binding fails to initialise: a reason, not a crash.
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has a working NVML")
    src = NvmlSource(call_timeout_s=10)
    with pytest.raises(SourceUnavailable, match="nvmlInit failed"):
        src.collect({})
    src.close()


def test_down_message_keeps_its_words_while_the_state_holds():
    # The daemon logs once per state change, comparing messages without their digits.
    nvml = FakeNvml.gb10()
    nvml.fail_init = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    clock = Clock()
    src = make(nvml, clock=clock)
    words = set()
    for _ in range(6):
        with pytest.raises(SourceUnavailable) as exc:
            src.collect({})
        words.add(_kind(str(exc.value)))
        assert "retry in 0 s" not in str(exc.value)  # the first retry is on the next tick, said so
        clock.t += 7
    assert words == {"nvmlInit failed: libnvidia-ml.so. not found"}
    src.close()


def test_a_process_in_both_lists_of_one_gpu_is_counted_once_and_summed_across_gpus():
    gib = 1024**3
    a = FakeGpu(index=0, compute_procs=[(41, gib), (42, None)], graphics_procs=[(41, gib), (42, 5)])
    b = FakeGpu(index=1, uuid="GPU-other", compute_procs=[(41, 2 * gib)])
    got = NvmlSource(nvml=FakeNvml([a, b])).collect({})
    assert got["_gpu_processes"] == {41: 3 * gib, 42: 5}


def test_a_binding_mismatch_error_loses_only_that_reading():
    # nvidia-ml-py raises NVMLLibraryMismatchError (not an NVMLError) for the process lists on a
    # library without the _v3 calls; it took every GPU reading down.
    nvml = FakeNvml.gb10()

    def mismatch(h):
        raise pynvml.NVMLLibraryMismatchError("Unversioned function called")

    nvml.nvmlDeviceGetComputeRunningProcesses = mismatch
    got = NvmlSource(nvml=nvml).collect({})
    assert got["gpus"][0].temp_c == 38.0 and got["_gpu_processes"] == {}
