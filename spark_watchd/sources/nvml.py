"""The NVML source: per-GPU readings through nvidia-ml-py, each call guarded on its own.

The NVML module is injected (`spark_watchd.testing.FakeNvml` in tests) or
imported lazily (`pynvml`). Only NVML is used: no CUDA, so no CUDA context is
ever created on the GPU being watched. Every reading runs on one worker thread
under a time bound (`sources.bounded`), so a wedged driver marks the source
down instead of stalling the tick.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from spark_watchd.sample.model import GpuReading
from spark_watchd.sources.base import SourceUnavailable
from spark_watchd.sources.worker import BoundedWorker, CallTimeout

# NVML_ERROR_* codes after which the handle is worthless: shut NVML down and initialise again.
# 1 uninitialized, 9 driver not loaded, 15 GPU lost, 16 reset required, 18 RM mismatch,
# 28 GPU not found, 999 unknown (what a GPU that fell off the bus answers).
FATAL_ERRORS = frozenset({1, 9, 15, 16, 18, 28, 999})
_NOT_FOUND_FN = 13  # NVML_ERROR_FUNCTION_NOT_FOUND: the driver predates this call
_LIBRARY_NOT_FOUND = 12
# nvmlDeviceGetTemperatureV answers these where the driver does not have it (or not for this struct):
# 3 not supported, 13 function not found, 25 argument version mismatch. Then the old call is asked.
_NO_TEMPERATURE_V = frozenset({3, _NOT_FOUND_FN, 25})

# trace-v1 clocks_event_counters_us key -> nvmlDeviceGetFieldValues id (cumulative ns).
COUNTER_FIELDS = (
    ("sw_power_cap", 74),  # NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP
    ("sw_thermal", 269),  # ..._SW_THERM_SLOWDOWN
    ("hw_thermal", 270),  # ..._HW_THERM_SLOWDOWN
    ("hw_power_brake", 271),  # ..._HW_POWER_BRAKE_SLOWDOWN
)
# No field id counts HW slowdown (0x08) alone; it stays None rather than a guessed sum.
COUNTER_KEYS = ("sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
_VALUE_ATTR = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
# NVML memory "total" this close to MemTotal is the whole UMA pool, not device memory.
UMA_TOTAL_TOLERANCE = 0.05


class _GpuGone(Exception):
    """A fatal NVML error: re-initialise on the next collect."""


def load_pynvml() -> Any:
    """The real binding; SourceUnavailable when nvidia-ml-py is not installed."""
    try:
        import pynvml
    except ImportError as exc:
        raise SourceUnavailable(f"nvidia-ml-py not installed ({exc})") from None
    return pynvml


def describe_nvml_error(exc: BaseException) -> str:
    """Readable text of an NVMLError (without calling into a library that may be missing)."""
    value = getattr(exc, "value", None)
    if value == _LIBRARY_NOT_FOUND:
        return "libnvidia-ml.so.1 not found"
    try:
        text = str(exc)
    except Exception:
        text = ""
    return f"{text or type(exc).__name__} (NVML error {value})" if value is not None else (text or repr(exc))


def binding_errors(nv: Any) -> tuple[type[BaseException], ...]:
    """What a guarded call catches: NVMLError, and the binding's NVMLLibraryMismatchError (not an NVMLError),
    raised for an unversioned call the library lacks (nvmlDeviceGetComputeRunningProcesses before R510)."""
    mismatch = getattr(nv, "NVMLLibraryMismatchError", None)
    extra = (mismatch,) if isinstance(mismatch, type) and issubclass(mismatch, BaseException) else ()
    return (nv.NVMLError, *extra)


def read_temperature(nv: Any, h: Any) -> int:
    """GPU temperature, C: nvmlDeviceGetTemperatureV (nvml.h deprecates the old call), else
    nvmlDeviceGetTemperature (drivers and bindings without the new one). Raises the NVMLError that ended it."""
    fn = getattr(nv, "nvmlDeviceGetTemperatureV", None)
    if fn is not None:
        try:
            return int(fn(h, nv.NVML_TEMPERATURE_GPU))
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) not in _NO_TEMPERATURE_V:
                raise
    return int(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def cuda_version(nv: Any) -> str | None:
    """The CUDA driver API version NVML reports (13000 -> "13.0"), None where it cannot say."""
    try:
        v = int(nv.nvmlSystemGetCudaDriverVersion_v2())
    except Exception:  # an older library without the call, or an NVML error: not known, not a fault
        return None
    return f"{v // 1000}.{v % 1000 // 10}" if v > 0 else None


def _field_int(fv: Any) -> int | None:
    attr = _VALUE_ATTR.get(int(fv.valueType), "ullVal")
    return int(getattr(fv.value, attr))


def read_memtotal_bytes(proc_root: str) -> int | None:
    """MemTotal of /proc/meminfo in bytes (None if unreadable): the GB10 memory-info quirk check."""
    try:
        with open(os.path.join(proc_root, "meminfo"), encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    kb = int(line.split()[1])
                    return kb * 1024 if 0 <= kb < 2**54 else None  # past 2**64 bytes: a broken file
    except (OSError, ValueError, IndexError):
        return None
    return None


class NvmlSource:
    """`gpus` (GpuReading per index) and private `_gpu_processes` ({pid: used bytes or None})."""

    name = "nvml"

    def __init__(
        self,
        nvml: Any = None,
        *,
        proc_root: str = "/proc",
        call_timeout_s: float = 5.0,
        backoff_initial_s: float = 10.0,
        backoff_max_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        also: str | None = None,
    ):
        self._nvml = nvml
        self.also = also  # e.g. "no nvidia-smi either": said with every error, so the page can say it
        self.proc_root = proc_root
        self.call_timeout_s = call_timeout_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self._clock = clock
        self._worker = BoundedWorker("nvml")
        self._ready = False
        self._count = 0
        self._driver: str | None = None
        self._cuda: str | None = None  # the CUDA driver API version, for the platform source
        self._static: dict[int, dict[str, Any]] = {}
        self._failures = 0
        self._next_attempt = 0.0
        self._last_error = ""
        self._memtotal: int | None = None

    # --- state ------------------------------------------------------------
    def _fail(self, reason: str) -> SourceUnavailable:
        """Count a failure and schedule the next attempt: next tick first, then exponential backoff."""
        self._failures += 1
        delay = 0.0 if self._failures == 1 else self.backoff_initial_s * 2 ** (self._failures - 2)
        self._next_attempt = self._clock() + min(delay, self.backoff_max_s)
        self._last_error = reason
        return SourceUnavailable(self._retry_text())

    def _retry_text(self) -> str:
        # The same words every tick while the state holds (only the number moves), so the daemon's
        # log-once-per-state-change sees one state, not a new error each tick.
        wait = max(0.0, self._next_attempt - self._clock())
        when = "on the next tick" if wait < 1 else f"in {wait:.0f} s"  # never "in 0 s"
        also = f"; {self.also}" if self.also else ""
        return f"{self._last_error}{also} (next retry {when})"

    def _module(self) -> Any:
        if self._nvml is None:
            self._nvml = load_pynvml()
        return self._nvml

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return self._worker.call(fn, *args, timeout=self.call_timeout_s)
        except CallTimeout as exc:
            # A hung driver: down now; the stuck call is abandoned and later calls refused until it returns.
            raise SourceUnavailable(f"NVML hung: {exc}") from None

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        if not self._ready:
            if self._next_attempt - self._clock() > 0:
                raise SourceUnavailable(self._retry_text())
            try:
                nv = self._module()
            except SourceUnavailable as exc:
                raise self._fail(str(exc)) from None
            try:
                self._call(self._init, nv)
            except nv.NVMLError as exc:
                raise self._fail(f"nvmlInit failed: {describe_nvml_error(exc)}") from None
            self._ready = True
        nv = self._module()
        try:
            gpus, procs = self._call(self._read_all, nv)
        except _GpuGone as exc:
            self._teardown(nv)
            raise self._fail(str(exc)) from None
        self._failures = 0
        return {"gpus": gpus, "_gpu_processes": procs, "_cuda_driver_version": self._cuda}

    def _init(self, nv: Any) -> None:
        nv.nvmlInit()
        try:
            self._driver = _text(nv.nvmlSystemGetDriverVersion())
        except nv.NVMLError:
            self._driver = None
        self._cuda = cuda_version(nv)
        self._count = int(nv.nvmlDeviceGetCount())
        self._static.clear()

    def _teardown(self, nv: Any) -> None:
        self._ready = False
        self._static.clear()
        try:
            self._call(nv.nvmlShutdown)
        except (SourceUnavailable, Exception):
            pass

    def close(self) -> None:
        if self._ready and self._nvml is not None and not self._worker.stuck:
            self._teardown(self._nvml)
        self._worker.close()

    # --- reading (runs on the worker thread) ---------------------------------
    def _opt(self, nv: Any, fn_name: str, *args: Any, fn: Callable[..., Any] | None = None) -> Any:
        """One guarded call: Not Supported (or any non-fatal error) is None; fatal errors raise _GpuGone."""
        fn = fn or getattr(nv, fn_name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except binding_errors(nv) as exc:
            if getattr(exc, "value", None) in FATAL_ERRORS:
                raise _GpuGone(f"{fn_name}: {describe_nvml_error(exc)}") from None
            return None

    def _read_all(self, nv: Any) -> tuple[tuple[GpuReading, ...], dict[int, int | None]]:
        gpus: list[GpuReading] = []
        procs: dict[int, int | None] = {}
        for index in range(self._count):
            try:
                handle = nv.nvmlDeviceGetHandleByIndex(index)
            except nv.NVMLError as exc:
                if getattr(exc, "value", None) in FATAL_ERRORS:
                    raise _GpuGone(f"GPU {index}: {describe_nvml_error(exc)}") from None
                continue  # e.g. no permission on this one device: skip it, keep the others
            gpus.append(self._read_gpu(nv, index, handle, procs))
        return tuple(gpus), procs

    def _static_for(self, nv: Any, index: int, h: Any) -> dict[str, Any]:
        st = self._static.get(index)
        if st is None:
            name = self._opt(nv, "nvmlDeviceGetName", h)
            uuid = self._opt(nv, "nvmlDeviceGetUUID", h)
            slow = self._opt(
                nv, "nvmlDeviceGetTemperatureThreshold", h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
            )
            shut = self._opt(
                nv, "nvmlDeviceGetTemperatureThreshold", h, nv.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
            )
            st = {
                "name": _text(name) if name is not None else "",
                "uuid": _text(uuid) if uuid is not None else "",
                "slowdown_temp_c": float(slow) if slow is not None else None,
                "shutdown_temp_c": float(shut) if shut is not None else None,
            }
            self._static[index] = st
        return st

    def _read_gpu(self, nv: Any, index: int, h: Any, procs: dict[int, int | None]) -> GpuReading:
        st = self._static_for(nv, index, h)
        power = self._opt(nv, "nvmlDeviceGetPowerUsage", h)
        temp = self._opt(nv, "nvmlDeviceGetTemperatureV", nv, h, fn=read_temperature)
        sm = self._opt(nv, "nvmlDeviceGetClockInfo", h, nv.NVML_CLOCK_SM)
        app = self._opt(nv, "nvmlDeviceGetApplicationsClock", h, nv.NVML_CLOCK_GRAPHICS)
        util = self._opt(nv, "nvmlDeviceGetUtilizationRates", h)
        energy = self._opt(nv, "nvmlDeviceGetTotalEnergyConsumption", h)
        used, total = self._memory(nv, h)
        for pid, mem in self._processes(nv, h).items():
            prev = procs.get(pid)  # the same process on two GPUs holds memory on both
            procs[pid] = (prev or 0) + mem if mem is not None else prev
        return GpuReading(
            index=index,
            name=st["name"],
            uuid=st["uuid"],
            power_w=round(power / 1000.0, 3) if power is not None else None,
            temp_c=float(temp) if temp is not None else None,
            sm_clock_mhz=int(sm) if sm is not None else None,
            clocks_event_reasons=self._reasons(nv, h),
            clocks_event_counters_us=self._counters(nv, h),
            applications_clock_mhz=int(app) if app is not None else None,
            slowdown_temp_c=st["slowdown_temp_c"],
            shutdown_temp_c=st["shutdown_temp_c"],
            energy_j=energy / 1000.0 if energy is not None else None,
            util_pct=float(util.gpu) if util is not None else None,
            mem_used_bytes=used,
            mem_total_bytes=total,
            driver_version=self._driver,
        )

    def _processes(self, nv: Any, h: Any) -> dict[int, int | None]:
        """{pid: used bytes or None} on one GPU. A process in both the compute and the graphics list is one
        process: counted once, as nvidia-smi and nvtop count it (not twice its memory)."""
        out: dict[int, int | None] = {}
        for fn_name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            for p in self._opt(nv, fn_name, h) or ():
                pid, mem = int(p.pid), getattr(p, "usedGpuMemory", None)
                prev = out.get(pid)
                out[pid] = mem if prev is None else max(prev, mem) if mem is not None else prev
        return out

    def _reasons(self, nv: Any, h: Any) -> int | None:
        """The instant mask; drivers before 535 only have the ...ThrottleReasons name."""
        for fn_name in (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ):
            fn = getattr(nv, fn_name, None)
            if fn is None:
                continue
            try:
                return int(fn(h))
            except nv.NVMLError as exc:
                value = getattr(exc, "value", None)
                if value in FATAL_ERRORS:
                    raise _GpuGone(f"{fn_name}: {describe_nvml_error(exc)}") from None
                if value != _NOT_FOUND_FN:
                    return None
        return None

    def _counters(self, nv: Any, h: Any) -> dict[str, int | None] | None:
        """Cumulative time per reason in us; each field's own nvmlReturn is checked."""
        out: dict[str, int | None] = dict.fromkeys(COUNTER_KEYS)
        values = self._opt(nv, "nvmlDeviceGetFieldValues", h, [fid for _, fid in COUNTER_FIELDS])
        if values is not None:
            for (key, _), fv in zip(COUNTER_FIELDS, values, strict=False):
                if int(fv.nvmlReturn) == 0:
                    out[key] = _field_int(fv) // 1000  # ns -> us
        else:
            # Older drivers: only the per-policy violation time, of which POWER is a reason of ours.
            vt = self._opt(nv, "nvmlDeviceGetViolationStatus", h, nv.NVML_PERF_POLICY_POWER)
            if vt is not None:
                out["sw_power_cap"] = int(vt.violationTime) // 1000
        return out if any(v is not None for v in out.values()) else None

    def _memory(self, nv: Any, h: Any) -> tuple[int | None, int | None]:
        """(used, total) bytes, or (None, None) where NVML cannot know them."""
        info = self._opt(nv, "nvmlDeviceGetMemoryInfo", h)
        if info is None:
            return None, None  # GB10: NVML memory info is Not Supported; MemAvailable is the truth
        total, used = int(info.total), int(info.used)
        if self._memtotal is None:
            self._memtotal = read_memtotal_bytes(self.proc_root)
        if self._memtotal and abs(total - self._memtotal) <= UMA_TOTAL_TOLERANCE * self._memtotal:
            # GB10 on some drivers answers SUCCESS with total = MemTotal: that is the shared pool, not VRAM.
            return None, None
        return used, total
