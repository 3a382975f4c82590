"""Run the NVML source once against a real GPU and keep what it read (for the lead, on a GPU machine).

    python bench/nvml_device_check.py OUT.json

Needs only nvidia-ml-py and this package (run from the repository root, or
installed). Creates no CUDA context: only NVML is called. Prints the readings
as JSON and writes them to OUT.json: the GpuReading per GPU (trace-v1 form),
the GPU processes, the raw answer of every guarded call (value or NVML error),
how long the collect took, and whether this process showed up as a GPU process
(it must not), and what NVML's event API answers (supported event types, Xid
registration, a 200 ms nvmlEventSetWait_v2 that should time out, and the
driver_events source's state). With SPARK_WATCHD_FAKE_NVML=gb10 it runs against the fake NVML,
to check the script itself before spending device time.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pynvml  # noqa: E402

from spark_watchd.app import nvml_from_env  # noqa: E402
from spark_watchd.sources.driver_events import XID_EVENT, DriverEventsSource  # noqa: E402
from spark_watchd.sources.nvml import COUNTER_FIELDS, NvmlSource, describe_nvml_error  # noqa: E402


def raw_calls(nv) -> list[dict]:
    """Every call the source makes, answered raw, so a surprise on new hardware is visible."""
    out = []
    for i in range(nv.nvmlDeviceGetCount()):
        h = nv.nvmlDeviceGetHandleByIndex(i)
        calls = {
            "name": lambda h=h: nv.nvmlDeviceGetName(h),
            "uuid": lambda h=h: nv.nvmlDeviceGetUUID(h),
            "power_mw": lambda h=h: nv.nvmlDeviceGetPowerUsage(h),
            "temp_c": lambda h=h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
            "temp_v_c": lambda h=h: nv.nvmlDeviceGetTemperatureV(h, nv.NVML_TEMPERATURE_GPU),
            "pci_bus_id": lambda h=h: nv.nvmlDeviceGetPciInfo(h).busId,
            "slowdown_c": lambda h=h: nv.nvmlDeviceGetTemperatureThreshold(
                h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
            ),
            "shutdown_c": lambda h=h: nv.nvmlDeviceGetTemperatureThreshold(
                h, nv.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
            ),
            "sm_clock": lambda h=h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
            "app_clock": lambda h=h: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_GRAPHICS),
            "util": lambda h=h: nv.nvmlDeviceGetUtilizationRates(h).gpu,
            "reasons": lambda h=h: hex(nv.nvmlDeviceGetCurrentClocksEventReasons(h)),
            "energy_mj": lambda h=h: nv.nvmlDeviceGetTotalEnergyConsumption(h),
            "memory": lambda h=h: (lambda m: {"total": m.total, "used": m.used})(
                nv.nvmlDeviceGetMemoryInfo(h)
            ),
            "memory_v2": lambda h=h: (lambda m: {"total": m.total, "used": m.used})(
                nv.nvmlDeviceGetMemoryInfo(h, nv.nvmlMemory_v2)
            ),
            "fields": lambda h=h: [
                {"id": fv.fieldId, "ret": fv.nvmlReturn, "type": fv.valueType, "ull": fv.value.ullVal}
                for fv in nv.nvmlDeviceGetFieldValues(h, [fid for _, fid in COUNTER_FIELDS])
            ],
            "violation_power_ns": lambda h=h: (
                nv.nvmlDeviceGetViolationStatus(h, nv.NVML_PERF_POLICY_POWER).violationTime
            ),
            "violation_thermal_ns": lambda h=h: (
                nv.nvmlDeviceGetViolationStatus(h, nv.NVML_PERF_POLICY_THERMAL).violationTime
            ),
            "compute_procs": lambda h=h: [
                (p.pid, p.usedGpuMemory) for p in nv.nvmlDeviceGetComputeRunningProcesses(h)
            ],
            "graphics_procs": lambda h=h: [
                (p.pid, p.usedGpuMemory) for p in nv.nvmlDeviceGetGraphicsRunningProcesses(h)
            ],
        }
        answers = {}
        for key, fn in calls.items():
            try:
                v = fn()
                answers[key] = v.decode() if isinstance(v, bytes) else v
            except (
                nv.NVMLError,
                AttributeError,
                getattr(nv, "NVMLLibraryMismatchError", nv.NVMLError),
            ) as exc:
                # AttributeError: an older nvidia-ml-py without the call; mismatch: a library without it.
                label = "NVMLError" if isinstance(exc, nv.NVMLError) else type(exc).__name__
                answers[key] = f"{label} {getattr(exc, 'value', '?')}: {exc}"
        out.append(answers)
    return out


def _answer(nv, fn):
    try:
        return fn()
    except nv.NVMLError as exc:
        return f"NVMLError {getattr(exc, 'value', '?')}: {exc}"


def event_api(nv) -> dict:
    """The Xid event calls answered raw (NVML must be initialised): Not Supported is an answer, not a failure."""
    es = _answer(nv, nv.nvmlEventSetCreate)
    out: dict = {"event_set": "created" if not isinstance(es, str) else es, "gpus": []}
    if isinstance(es, str):
        return out
    try:
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            supported = _answer(nv, lambda h=h: nv.nvmlDeviceGetSupportedEventTypes(h))
            out["gpus"].append(
                {
                    "supported_event_types": hex(supported) if isinstance(supported, int) else supported,
                    "register_xid": _answer(nv, lambda h=h: nv.nvmlDeviceRegisterEvents(h, XID_EVENT, es))
                    or "ok",
                }
            )
        t0 = time.monotonic()
        got = _answer(nv, lambda: nv.nvmlEventSetWait_v2(es, 200))
        out["wait_200ms"] = (
            got if isinstance(got, str) else {"eventType": got.eventType, "eventData": got.eventData}
        )
        out["wait_s"] = round(time.monotonic() - t0, 3)
    finally:
        _answer(nv, lambda: nv.nvmlEventSetFree(es))
    return out


def driver_events_source(nv) -> dict:
    """The driver_events source's own verdict on this machine (NVML feed only; the journal is not read)."""
    src = DriverEventsSource(nv, journalctl=None, follow=False, wait_ms=200)
    try:
        got = src.collect({})
        deadline = time.monotonic() + 5
        while "nvml-events" not in src.states and time.monotonic() < deadline:
            time.sleep(0.05)
        return {"states": dict(src.states), "events": [e.to_dict() for e in got["driver_events"]]}
    finally:
        src.close()


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def main() -> int:
    dest = sys.argv[1] if len(sys.argv) > 1 else "nvml-device-check.json"
    nv = nvml_from_env() or pynvml
    src = NvmlSource(nv, call_timeout_s=10)
    t0 = time.monotonic()
    try:
        got = src.collect({})
        error = None
    except Exception as exc:  # noqa: BLE001 - report whatever it is
        got, error = {}, f"{type(exc).__name__}: {exc}"
    took = time.monotonic() - t0
    t1 = time.monotonic()
    second = src.collect({}) if error is None else {}
    took2 = time.monotonic() - t1
    src.close()
    raw, driver, events = [], None, {}
    try:
        nv.nvmlInit()
        try:
            raw = raw_calls(nv)
            driver = nv.nvmlSystemGetDriverVersion()
            events = event_api(nv)
        finally:
            nv.nvmlShutdown()
    except nv.NVMLError as exc:
        error = error or describe_nvml_error(exc)
    procs = got.get("_gpu_processes", {})
    report = {
        "host": os.uname().nodename,
        "machine": os.uname().machine,
        "driver_version": driver.decode() if isinstance(driver, bytes) else driver,
        "nvidia_ml_py": _version("nvidia-ml-py"),
        "error": error,
        "first_collect_s": round(took, 4),
        "second_collect_s": round(took2, 4),
        "gpus": [g.to_dict() for g in got.get("gpus", ())],
        "gpus_second": [g.to_dict() for g in second.get("gpus", ())],
        "gpu_processes": {str(k): v for k, v in procs.items()},
        "own_pid_is_gpu_process": os.getpid() in procs,
        "cuda_modules_loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "cuda", "cupy")),
        "raw": raw,
        "event_api": events,
        "driver_events_source": driver_events_source(nv),
    }
    text = json.dumps(report, indent=2, default=str)
    print(text)
    with open(dest, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main())
