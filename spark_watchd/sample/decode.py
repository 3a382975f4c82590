"""A decoded trace-v1 line to its Sample in one pass, for the shape every writer emits.

`read_trace` tries `sample_from(obj)` on each line first. It checks what `check_sample` checks and builds
what `Sample.from_dict` builds, reading each record's values once (one itemgetter call) and testing them
with one generated expression (validate.row_checker, from the same schemas). Anything off that shape -- a
missing key, a value `from_dict` would convert, a value that fails a check -- answers None, and the exact
path (parse_line's checks, then Sample.from_dict) decides, with its messages. So a line the exact path
refuses is never accepted here, and an accepted line gives the same Sample.
"""

from __future__ import annotations

import dataclasses
from operator import itemgetter
from typing import Any

from spark_watchd.sample.model import (
    GpuReading,
    ProcessInfo,
    Sample,
    Sensor,
    ThroughputReading,
    optional_parts,
)
from spark_watchd.sample.validate import (
    CLOCK_COUNTERS_RANGE,
    MEMINFO_RANGE,
    VMSTAT_RANGE,
    check_optional,
    counters_ok,
    psi_ok,
    row_checker,
)


def maker(cls):
    """`make(*values)`, the same instance as cls(*values) for a frozen slots dataclass given every field, at
    about a sixth of the work: the frozen __init__ stores each field through object.__setattr__ (some 1,400
    machine instructions a field on CPython 3.11), `make` stores them into a plain twin class with the same
    slots (an ordinary slot store) and then gives the object its class (a __class__ assignment, which Python
    allows between classes of one layout and checks). Nothing runs that cls(*values) would run besides the
    stores: these records have no __post_init__ and no field converters."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    if getattr(cls, "__slots__", None) != names or hasattr(cls, "__post_init__"):
        raise TypeError(f"maker({cls.__name__}): not a frozen slots dataclass of plain fields")
    twin = type(f"_{cls.__name__}Slots", (), {"__slots__": names})
    args = [f"a{n}" for n in range(len(names))]
    src = f"def make({', '.join(args)}):\n    o = new(twin)\n"
    src += "".join(f"    o.{name} = {a}\n" for name, a in zip(names, args, strict=True))
    src += "    o.__class__ = cls\n    return o\n"
    scope = {"new": object.__new__, "twin": twin, "cls": cls}
    exec(src, scope)  # noqa: S102 - generated from the dataclass's own field names, no input
    return scope["make"]


_SAMPLE, _GPU_READING, _PROCESS = maker(Sample), maker(GpuReading), maker(ProcessInfo)
_SENSOR_READING, _THROUGHPUT = maker(Sensor), maker(ThroughputReading)

_LISTS, _OBJECTS = ("gpus", "sensors", "processes", "throughput"), ("meminfo", "psi_memory", "vmstat")
# The sample's keys in Sample's field order (after "v"); a line with exactly these has no optional key.
_TOP_KEYS = ("ts", "host", "boot_id", "uptime_s", "gpus", "meminfo", "psi_memory", "vmstat",
             "mem_available_min_kb", "sensors", "processes", "throughput")  # fmt: skip
_TOP = itemgetter("v", *_TOP_KEYS)
_TOP_OK = row_checker(
    "",
    ("v", *_TOP_KEYS),  # "v" unchecked here: sample_from compares it
    nonnull=("gpus", "meminfo", "vmstat", "sensors", "processes", "throughput"),
    shapes={**dict.fromkeys(_LISTS, list), **dict.fromkeys(_OBJECTS, dict)},
)
# GpuReading's fields in order; driver_version (an extension) is read with .get.
_GPU_KEYS = ("index", "name", "uuid", "power_w", "temp_c", "sm_clock_mhz", "clocks_event_reasons",
             "clocks_event_counters_us", "applications_clock_mhz", "slowdown_temp_c", "shutdown_temp_c",
             "energy_j", "util_pct", "mem_used_bytes", "mem_total_bytes")  # fmt: skip
_GPU = itemgetter(*_GPU_KEYS)
_GPU_OK = row_checker(
    "gpus",
    (*_GPU_KEYS, "driver_version"),
    nonnull=("index", "name", "uuid"),
    shapes={"clocks_event_counters_us": dict},
)
_PROC_KEYS = ("pid", "create_time", "name", "cmdline", "rss_bytes", "gpu_mem_bytes", "gpu_resident")
_PROC = itemgetter(*_PROC_KEYS)  # ProcessInfo's fields in order; ppid is optional (.get)
_PROC_OK = row_checker(
    "processes",
    (*_PROC_KEYS, "ppid"),
    nonnull=("create_time", "name", "rss_bytes", "gpu_resident"),
    shapes={"cmdline": list},
)
_STR_ONLY = {str}
_SENSOR_KEYS = ("chip", "label", "temp_c", "crit_c")
_SENSOR = itemgetter(*_SENSOR_KEYS)
_SENSOR_OK = row_checker("sensors", _SENSOR_KEYS, nonnull=("chip", "label"))
_TP_KEYS = ("job", "ts", "step", "step_seconds", "tokens_per_second")
_TP = itemgetter(*_TP_KEYS)
_TP_OK = row_checker("throughput", _TP_KEYS, nonnull=("ts", "step"))
_NO_OPTIONAL = optional_parts({})
_OFF_SHAPE = (KeyError, TypeError, ValueError, AttributeError)  # FieldError is a ValueError

# Sensors checked and built here, by their four values: a host's sensors repeat the same few readings
# sample after sample (7 per GB10 sample, 0.1 C steps), so most are found here and neither checked nor built
# again. A hit must also match the types of temp_c and crit_c (70 == 70.0 as a key), and a zero is never
# kept (-0.0 == 0.0). Only this reader adds to it, so everything in it passed _SENSOR_OK. Bounded: cleared
# at 4096 entries.
_SENSORS: dict[tuple, Sensor] = {}


def sample_from(obj: Any) -> Sample | None:
    """The Sample of a decoded trace line of the common shape, checked; None: let the exact path decide."""
    try:
        row = _TOP(obj)
        v, ts, host, boot_id, uptime, gpus, meminfo, psi, vmstat, mn, sensors, procs, tp = row
        if not (
            v == 1
            and _TOP_OK(*row)
            and counters_ok(meminfo, *MEMINFO_RANGE)
            and counters_ok(vmstat, *VMSTAT_RANGE)
            and (psi is None or psi_ok(psi))
        ):
            return None
        built = _gpus(gpus), _sensors(sensors), _processes(procs), _throughput(tp)
        if None in built:
            return None
        if len(obj) == 13:  # "v" and _TOP_KEYS, nothing else
            optional = _NO_OPTIONAL
        else:  # an optional key (board, driver_events...) or an unknown one: as the exact path does it
            check_optional(obj)
            optional = optional_parts(obj)
    except _OFF_SHAPE:  # a missing key, a list where an object is, a FieldError of check_optional...
        return None
    g, s, p, t = built
    return _SAMPLE(
        float(ts), host, boot_id, uptime, g, meminfo or {}, psi, vmstat or {}, mn, s, p, t, *optional
    )


def _gpus(items: list) -> tuple | None:
    out = []
    for d in items:
        row = _GPU(d)
        dv = d.get("driver_version")
        if not _GPU_OK(*row, dv):
            return None
        if (c := row[7]) is not None and not counters_ok(c, *CLOCK_COUNTERS_RANGE, nullable=True):
            return None
        out.append(_GPU_READING(*row, dv))
    return tuple(out)


def _sensors(items: list) -> tuple | None:
    out = []
    memo = _SENSORS
    for d in items:
        row = _SENSOR(d)
        s = memo.get(row)
        if s is None or type(s.temp_c) is not type(row[2]) or type(s.crit_c) is not type(row[3]):
            if not _SENSOR_OK(*row):
                return None
            s = _SENSOR_READING(*row)
            if row[2] != 0 and row[3] != 0:
                if len(memo) >= 4096:
                    memo.clear()
                memo[row] = s
        out.append(s)
    return tuple(out)


def _processes(items: list) -> tuple | None:
    out = []
    for d in items:
        row = _PROC(d)
        ppid = d.get("ppid")
        if not _PROC_OK(*row, ppid):
            return None
        pid, ct, name, argv, rss, gpu, resident = row
        if argv and not set(map(type, argv)) <= _STR_ONLY:
            return None
        ct = ct if type(ct) is float else float(ct)
        out.append(_PROCESS(pid, ct, name, tuple(argv) if argv else (), rss, gpu, resident, ppid))
    return tuple(out)


def _throughput(items: list) -> tuple | None:
    out = []
    for d in items:
        row = _TP(d)
        if not _TP_OK(*row):
            return None
        job, ts, step, step_s, tps = row
        out.append(_THROUGHPUT(job, ts if type(ts) is float else float(ts), step, step_s, tps))
    return tuple(out)
