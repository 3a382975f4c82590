"""A fake NVML for tests, shipped in the package so users can test their own integrations.

`FakeNvml` is a module-like object with the function names, exception classes
and constants of `pynvml` (nvidia-ml-py): pass it wherever code takes the NVML
module. Exception classes and constants are the real pynvml ones (importing
pynvml loads no library), so `except pynvml.NVMLError_NotSupported` works
against the fake. Field values, memory info, utilisation and violation times
are the real pynvml ctypes structures.

    from spark_watchd.testing import FakeNvml
    from spark_watchd.sources.nvml import NvmlSource

    nvml = FakeNvml.gb10()                  # memory Not Supported, 2418 MHz app clock, 86/90 C thresholds
    src = NvmlSource(nvml=nvml)
    nvml.gpus[0].temp_c = 86                # readings are plain attributes: change them between collects
    nvml.gpus[0].counters_ns[269] += 5_000_000_000   # 5 s more of SW thermal slowdown
    nvml.fail_init = nvml.NVML_ERROR_DRIVER_NOT_LOADED   # nvmlInit raises until set back to None
    nvml.lose_gpu_after(3)                  # 3 more device calls succeed, then every one is GPU_IS_LOST
    nvml.recover()                          # the GPU is back
    nvml.not_supported = FakeNvml.ALL       # or a set of function names that answer Not Supported
    nvml.block()                            # device calls hang until nvml.unblock()
    nvml.call_counts["nvmlInit"]            # how often each function was called
    nvml.inject_xid(79)                     # Xid 79 on GPU 0 to every registered event set (see fake_nvml_events)

Functions the fake does not implement raise `NVMLError_FunctionNotFound`, as
the real binding does when the driver lacks a symbol.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml as _real

from spark_watchd.sources.fake_nvml_events import FakeEventsMixin

# Field ids of the cumulative clocks-event counters (values in ns).
FI_SW_POWER_CAP = 74
FI_SW_THERMAL = 269
FI_HW_THERMAL = 270
FI_HW_POWER_BRAKE = 271


@dataclass
class FakeGpu:
    """One fake device; every attribute may be changed between calls. None means Not Supported."""

    index: int = 0
    name: str = "NVIDIA GB10"
    uuid: str = "GPU-2dee1e25-b3b5-007e-2b55-79f2d0f2ebe5"
    power_mw: int | None = 11170
    temp_c: int | None = 38
    slowdown_c: int | None = 86
    shutdown_c: int | None = 90
    gpu_max_c: int | None = 99
    sm_clock_mhz: int | None = 2405
    app_clock_mhz: int | None = 2418
    util_gpu: int | None = 0
    util_mem: int | None = 0
    reasons: int | None = 0x1  # GPU idle
    # Field id -> cumulative ns; a missing id answers NOT_SUPPORTED in its nvmlReturn.
    counters_ns: dict[int, int] = field(
        default_factory=lambda: {
            FI_SW_POWER_CAP: 0,
            FI_SW_THERMAL: 173_453_251_000,  # the GB10 capture: 173453251 us
            FI_HW_THERMAL: 403_805_000,
            FI_HW_POWER_BRAKE: 0,
        }
    )
    violation_ns: dict[int, int] | None = None  # NVML_PERF_POLICY_* -> ns, None: Not Supported
    energy_mj: int | None = 1_200_121_000
    memory: tuple[int, int] | None = None  # (total, used) bytes; None: Not Supported (GB10)
    power_limit_mw: int | None = None  # GB10: enforced limit N/A
    compute_procs: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, used bytes)
    graphics_procs: list[tuple[int, int | None]] = field(default_factory=list)


class FakeNvml(FakeEventsMixin):
    """Module-like stand-in for pynvml; see the module docstring."""

    ALL = frozenset({"*"})

    def __init__(self, gpus: list[FakeGpu] | None = None, driver_version: str = "580.95.05"):
        self.gpus = gpus if gpus is not None else [FakeGpu()]
        self.driver_version = driver_version
        self.cuda_driver_version = 13000  # CUDA 13.0, as nvidia-smi shows beside driver 580 on a Spark
        self.fail_init: int | None = None  # an NVML_ERROR_* code nvmlInit raises
        self.not_supported: frozenset[str] | set[str] = set()
        self.call_counts: Counter[str] = Counter()
        self.lost = False
        self._lose_after: int | None = None
        self._init_count = 0
        self._gate = threading.Event()
        self._gate.set()
        self._lock = threading.Lock()

    @classmethod
    def gb10(cls, **overrides: Any) -> FakeNvml:
        """One GB10 as DGX Spark owners report it (see shared captures)."""
        return cls([FakeGpu(**overrides)])

    # --- fault controls -------------------------------------------------
    def lose_gpu_after(self, calls: int) -> None:
        """Let `calls` more device calls succeed, then answer GPU_IS_LOST until recover()."""
        self._lose_after = calls

    def recover(self) -> None:
        """The lost GPU is back (after a driver reload, say)."""
        self.lost = False
        self._lose_after = None

    def block(self) -> None:
        """Make every device call (and nvmlInit) hang until unblock(): a wedged driver."""
        self._gate.clear()

    def unblock(self) -> None:
        self._gate.set()

    @property
    def initialized(self) -> bool:
        return self._init_count > 0

    # --- module-like surface --------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name.startswith(("NVML", "c_nvml")):
            return getattr(_real, name)
        if name.startswith("nvml"):

            def missing(*args: Any, **kwargs: Any) -> Any:
                self.call_counts[name] += 1
                raise _real.NVMLError(_real.NVML_ERROR_FUNCTION_NOT_FOUND)

            return missing
        raise AttributeError(name)

    def _enter(self, fn: str, device: bool = True) -> None:
        with self._lock:
            self.call_counts[fn] += 1
        self._gate.wait()
        if device and (fn in self.not_supported or "*" in self.not_supported):
            raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        if not self.initialized:
            raise _real.NVMLError(_real.NVML_ERROR_UNINITIALIZED)
        if not device:
            return
        with self._lock:
            if self._lose_after is not None:
                if self._lose_after <= 0:
                    self.lost = True
                else:
                    self._lose_after -= 1
        if self.lost:
            raise _real.NVMLError(_real.NVML_ERROR_GPU_IS_LOST)

    @staticmethod
    def _some(value: Any) -> Any:
        if value is None:
            raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        return value

    def nvmlInit(self) -> None:
        self.call_counts["nvmlInit"] += 1
        self._gate.wait()
        if self.fail_init is not None:
            raise _real.NVMLError(self.fail_init)
        self._init_count += 1

    def nvmlInitWithFlags(self, flags: int) -> None:
        self.nvmlInit()

    def nvmlShutdown(self) -> None:
        self.call_counts["nvmlShutdown"] += 1
        if not self.initialized:
            raise _real.NVMLError(_real.NVML_ERROR_UNINITIALIZED)
        self._init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion", device=False)
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2", device=False)
        return self.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount", device=False)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise _real.NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        return self.gpus[index]

    def nvmlDeviceGetName(self, h: FakeGpu) -> str:
        self._enter("nvmlDeviceGetName")
        return h.name

    def nvmlDeviceGetUUID(self, h: FakeGpu) -> str:
        self._enter("nvmlDeviceGetUUID")
        return h.uuid

    def nvmlDeviceGetPowerUsage(self, h: FakeGpu) -> int:
        self._enter("nvmlDeviceGetPowerUsage")
        return self._some(h.power_mw)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: FakeGpu) -> int:
        self._enter("nvmlDeviceGetEnforcedPowerLimit")
        return self._some(h.power_limit_mw)

    def nvmlDeviceGetTemperature(self, h: FakeGpu, sensor: int) -> int:
        self._enter("nvmlDeviceGetTemperature")
        return self._some(h.temp_c)

    def nvmlDeviceGetTemperatureThreshold(self, h: FakeGpu, threshold: int) -> int:
        self._enter("nvmlDeviceGetTemperatureThreshold")
        by_kind = {
            _real.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: h.slowdown_c,
            _real.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: h.shutdown_c,
            _real.NVML_TEMPERATURE_THRESHOLD_GPU_MAX: h.gpu_max_c,
        }
        return self._some(by_kind.get(threshold))

    def nvmlDeviceGetClockInfo(self, h: FakeGpu, clock: int) -> int:
        self._enter("nvmlDeviceGetClockInfo")
        return self._some(
            h.sm_clock_mhz if clock in (_real.NVML_CLOCK_SM, _real.NVML_CLOCK_GRAPHICS) else None
        )

    def nvmlDeviceGetApplicationsClock(self, h: FakeGpu, clock: int) -> int:
        self._enter("nvmlDeviceGetApplicationsClock")
        return self._some(
            h.app_clock_mhz if clock in (_real.NVML_CLOCK_SM, _real.NVML_CLOCK_GRAPHICS) else None
        )

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> Any:
        self._enter("nvmlDeviceGetUtilizationRates")
        self._some(h.util_gpu)
        return _real.c_nvmlUtilization_t(gpu=h.util_gpu, memory=h.util_mem or 0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: FakeGpu) -> int:
        self._enter("nvmlDeviceGetCurrentClocksEventReasons")
        return self._some(h.reasons)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: FakeGpu) -> int:
        self._enter("nvmlDeviceGetCurrentClocksThrottleReasons")
        return self._some(h.reasons)

    def nvmlDeviceGetFieldValues(self, h: FakeGpu, field_ids: list[int]) -> Any:
        self._enter("nvmlDeviceGetFieldValues")
        values = (_real.c_nvmlFieldValue_t * len(field_ids))()
        for i, fid in enumerate(field_ids):
            values[i].fieldId = fid
            values[i].valueType = _real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            if fid in h.counters_ns:
                values[i].nvmlReturn = _real.NVML_SUCCESS
                values[i].value.ullVal = h.counters_ns[fid]
            else:
                values[i].nvmlReturn = _real.NVML_ERROR_NOT_SUPPORTED
        return values

    def nvmlDeviceGetViolationStatus(self, h: FakeGpu, policy: int) -> Any:
        self._enter("nvmlDeviceGetViolationStatus")
        if h.violation_ns is None or policy not in h.violation_ns:
            raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        return _real.c_nvmlViolationTime_t(referenceTime=0, violationTime=h.violation_ns[policy])

    def nvmlDeviceGetTotalEnergyConsumption(self, h: FakeGpu) -> int:
        self._enter("nvmlDeviceGetTotalEnergyConsumption")
        return self._some(h.energy_mj)

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu, version: Any = None) -> Any:
        self._enter("nvmlDeviceGetMemoryInfo")
        total, used = self._some(h.memory)
        return _real.c_nvmlMemory_t(total=total, free=total - used, used=used)

    @staticmethod
    def _procs(rows: list[tuple[int, int | None]]) -> list[SimpleNamespace]:
        none = 0xFFFFFFFF
        return [
            SimpleNamespace(pid=pid, usedGpuMemory=used, gpuInstanceId=none, computeInstanceId=none)
            for pid, used in rows
        ]

    def nvmlDeviceGetComputeRunningProcesses(self, h: FakeGpu) -> list[SimpleNamespace]:
        self._enter("nvmlDeviceGetComputeRunningProcesses")
        return self._procs(h.compute_procs)

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: FakeGpu) -> list[SimpleNamespace]:
        self._enter("nvmlDeviceGetGraphicsRunningProcesses")
        return self._procs(h.graphics_procs)


class FileControlledNvml(FakeNvml):
    """A GB10 whose faults follow a JSON file, re-read on every call: faults switched on and off from outside a
    running daemon (`SPARK_WATCHD_FAKE_NVML=file:PATH`). Keys, all optional: `fail_init` (an NVML_ERROR_* code
    or null), `lost`, `blocked`, `not_supported` (true: every call), `gpu` (FakeGpu attributes), `xids` (a list of
    Xid codes on GPU 0, delivered once each time the file changes)."""

    def __init__(self, path: str):
        super().__init__([FakeGpu()])
        self.path = path
        self._seen: tuple[int, int] | None = None

    def _sync(self) -> None:
        import json
        import os

        try:
            st = os.stat(self.path)
            if (st.st_mtime_ns, st.st_size) == self._seen:
                return
            with open(self.path) as fh:
                doc = json.load(fh)
            self._seen = (st.st_mtime_ns, st.st_size)
        except (OSError, ValueError):
            return  # missing or half-written: keep the last state
        self.fail_init = doc.get("fail_init")
        self.lost = bool(doc.get("lost"))
        self.not_supported = self.ALL if doc.get("not_supported") else set()
        if doc.get("blocked"):
            self.block()
        else:
            self.unblock()
        for key, val in (doc.get("gpu") or {}).items():
            setattr(self.gpus[0], key, val)
        for xid in doc.get("xids") or ():
            self.inject_xid(int(xid))

    def _wait_unblocked(self) -> None:
        while not self._gate.wait(0.1):  # a blocked call polls the file: the test unblocks it from outside
            self._sync()

    def nvmlInit(self) -> None:
        self._sync()
        self._wait_unblocked()
        super().nvmlInit()

    def _enter(self, fn: str, device: bool = True) -> None:
        self._sync()
        self._wait_unblocked()
        super()._enter(fn, device)


FAKE_NVML_ENV = "SPARK_WATCHD_FAKE_NVML"


def nvml_from_env(environ: dict[str, str] | None = None) -> FakeNvml | None:
    """A FakeNvml when SPARK_WATCHD_FAKE_NVML is set (for end-to-end tests of the CLI and daemon), else None.

    `gb10` gives FakeNvml.gb10(); a JSON object gives a GB10 with those FakeGpu
    attributes changed (`{"temp_c": 86, "power_mw": 92000}`); `fail-init` one
    whose nvmlInit answers Driver Not Loaded; `none` a driver with no GPU; `file:PATH` a
    FileControlledNvml whose faults follow the JSON file PATH.
    """
    import json
    import os

    value = (environ if environ is not None else os.environ).get(FAKE_NVML_ENV, "").strip()
    if not value:
        return None
    if value == "gb10":
        return FakeNvml.gb10()
    if value == "none":
        return FakeNvml([])
    if value.startswith("file:"):
        return FileControlledNvml(value[len("file:") :])
    if value == "fail-init":
        nvml = FakeNvml.gb10()
        nvml.fail_init = _real.NVML_ERROR_DRIVER_NOT_LOADED
        return nvml
    try:
        overrides = json.loads(value)
        if not isinstance(overrides, dict):
            raise ValueError("not an object")
        overrides = {
            k: ({int(f): v for f, v in val.items()} if k == "counters_ns" else val)
            for k, val in overrides.items()
        }
        return FakeNvml.gb10(**overrides)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"{FAKE_NVML_ENV}: expected gb10, none, fail-init or a JSON object of FakeGpu fields ({exc})"
        ) from None
