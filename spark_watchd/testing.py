"""Test doubles shipped in the package so users can test their own integrations.

    from spark_watchd.testing import FakeNvml
    from spark_watchd.sources.nvml import NvmlSource

    nvml = FakeNvml.gb10()          # memory Not Supported, 2418 MHz app clock, 86/90 C thresholds
    src = NvmlSource(nvml=nvml)

See `spark_watchd.sources.fake_nvml` for every knob (faults, hangs, lost GPU, counters).
"""

from spark_watchd.sources.fake_nvml import (
    FAKE_NVML_ENV,
    FI_HW_POWER_BRAKE,
    FI_HW_THERMAL,
    FI_SW_POWER_CAP,
    FI_SW_THERMAL,
    FakeGpu,
    FakeNvml,
    FileControlledNvml,
    nvml_from_env,
)

__all__ = [
    "FAKE_NVML_ENV",
    "FI_HW_POWER_BRAKE",
    "FI_HW_THERMAL",
    "FI_SW_POWER_CAP",
    "FI_SW_THERMAL",
    "FakeGpu",
    "FakeNvml",
    "FileControlledNvml",
    "nvml_from_env",
]
