"""The fake NVML users test against: same surface as pynvml, configurable from the environment."""

from __future__ import annotations

import pynvml
import pytest

from spark_watchd.testing import FakeNvml, nvml_from_env


def test_fake_has_pynvml_exceptions_constants_and_missing_functions():
    nvml = FakeNvml.gb10()
    assert nvml.NVMLError is pynvml.NVMLError
    assert nvml.NVMLError_NotSupported is pynvml.NVMLError_NotSupported
    assert nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN == pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetMemoryInfo(h)  # GB10
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetEnforcedPowerLimit(h)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlDeviceGetFanSpeed(h)  # not implemented: what a driver without the symbol answers
    fv = nvml.nvmlDeviceGetFieldValues(h, [269, 76])
    assert (fv[0].nvmlReturn, fv[0].value.ullVal) == (pynvml.NVML_SUCCESS, 173_453_251_000)
    assert fv[1].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    nvml.nvmlShutdown()
    assert not nvml.initialized


def test_nvml_from_env():
    assert nvml_from_env({}) is None
    assert nvml_from_env({"SPARK_WATCHD_FAKE_NVML": "gb10"}).gpus[0].app_clock_mhz == 2418
    assert nvml_from_env({"SPARK_WATCHD_FAKE_NVML": "none"}).gpus == []
    assert (
        nvml_from_env({"SPARK_WATCHD_FAKE_NVML": "fail-init"}).fail_init
        == pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    )
    gpu = nvml_from_env({"SPARK_WATCHD_FAKE_NVML": '{"temp_c": 86, "counters_ns": {"269": 5}}'}).gpus[0]
    assert gpu.temp_c == 86 and gpu.counters_ns == {269: 5}
    with pytest.raises(ValueError, match="SPARK_WATCHD_FAKE_NVML"):
        nvml_from_env({"SPARK_WATCHD_FAKE_NVML": '{"warp_drive": 1}'})
    with pytest.raises(ValueError, match="SPARK_WATCHD_FAKE_NVML"):
        nvml_from_env({"SPARK_WATCHD_FAKE_NVML": "gb11"})
