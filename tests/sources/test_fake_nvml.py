"""The fake NVML's fault controls: a lost GPU, a failing init, a wedged driver, Not Supported, faults from a file."""

from __future__ import annotations

import json
import threading

import pynvml
import pytest

from spark_watchd.sources.fake_nvml import FakeNvml, FileControlledNvml
from tests.support.poll import wait_until


def _started(nvml: FakeNvml):
    nvml.nvmlInit()
    return nvml.nvmlDeviceGetHandleByIndex(0)


def test_the_gpu_is_lost_after_the_allowed_calls_until_recovered():
    nvml = FakeNvml.gb10()
    h = _started(nvml)
    nvml.lose_gpu_after(2)
    nvml.nvmlDeviceGetTemperature(h, 0)
    nvml.nvmlDeviceGetPowerUsage(h)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetTemperature(h, 0)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetName(h)  # every device call, not only the one that tripped it
    nvml.recover()
    assert nvml.nvmlDeviceGetName(h) == "NVIDIA GB10"


def test_init_fails_with_the_configured_error_and_succeeds_once_cleared():
    nvml = FakeNvml.gb10()
    nvml.fail_init = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        nvml.nvmlInit()
    assert not nvml.initialized
    nvml.fail_init = None
    nvml.nvmlInit()
    assert nvml.initialized and nvml.nvmlDeviceGetCount() == 1


def test_not_supported_functions_answer_like_gb10_and_calls_are_counted():
    nvml = FakeNvml.gb10()
    h = _started(nvml)
    nvml.not_supported = {"nvmlDeviceGetPowerUsage"}
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetPowerUsage(h)
    nvml.nvmlDeviceGetTemperature(h, 0)
    assert (
        nvml.call_counts["nvmlDeviceGetPowerUsage"] == 1 and nvml.call_counts["nvmlDeviceGetTemperature"] == 1
    )


def test_a_blocked_driver_hangs_calls_until_unblocked():
    nvml = FakeNvml.gb10()
    h = _started(nvml)
    nvml.block()
    got = []
    t = threading.Thread(target=lambda: got.append(nvml.nvmlDeviceGetTemperature(h, 0)), daemon=True)
    t.start()
    t.join(0.2)
    assert t.is_alive() and got == []  # hung, as a wedged driver is
    nvml.unblock()
    t.join(5)
    assert got and got[0] > 0


def test_faults_follow_the_control_file_while_it_changes(tmp_path):
    ctl = tmp_path / "nvml.json"

    def write(**doc):
        tmp = tmp_path / "nvml.tmp"
        tmp.write_text(json.dumps(doc))
        tmp.replace(ctl)

    write()
    nvml = FileControlledNvml(str(ctl))
    h = _started(nvml)
    write(lost=True)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetTemperature(h, 0)
    write(gpu={"temp_c": 81})
    assert nvml.nvmlDeviceGetTemperature(h, 0) == 81
    write(not_supported=True)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetTemperature(h, 0)
    ctl.write_text("{half a doc")  # a half-written file keeps the last state
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetTemperature(h, 0)


def test_a_blocked_control_file_is_released_from_outside(tmp_path):
    ctl = tmp_path / "nvml.json"
    ctl.write_text(json.dumps({"blocked": True}))
    nvml = FileControlledNvml(str(ctl))
    done = threading.Event()
    threading.Thread(target=lambda: (nvml.nvmlInit(), done.set()), daemon=True).start()
    assert not done.wait(0.3)
    ctl.write_text(json.dumps({"blocked": False, "gpu": {"power_w": 50}}))
    wait_until(done.is_set, timeout=5, what="init released by the control file")
