"""trace-v1 field checks: every known key's type and range, so nothing past the parser sees a bad value.

Run once per parsed line (replay speed matters): exact `type()` tests against
small tuples, and one chained comparison per number (it also refuses NaN and
infinities, which `1e400` decodes to). Unknown keys are ignored and missing keys
are "not sampled", as the spec says; `processes[].ppid` and `driver_events` are
optional (added 2026-12) and checked when present, as is `board`.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from typing import Any

from spark_watchd.sample.kills import KillReport
from spark_watchd.sample.serving import ServingReading

_I = (int,)
_N = (int, float)
_S = (str,)
_B = (bool,)
_MAX = 1e300  # finite: a chained `lo <= v <= hi` then refuses NaN and +-inf as well
_U64 = 2**64 - 1  # /proc and NVML counters are at most unsigned 64-bit
_I64 = 2**63

# (key, accepted types, low, high, required); low None: no range (strings, bools, lists).
_GPU = (
    ("index", _I, 0, 4096, False),
    ("name", _S, None, None, False),
    ("uuid", _S, None, None, False),
    ("power_w", _N, 0, 1e6, False),
    ("temp_c", _N, -273.15, 1000, False),
    ("sm_clock_mhz", _I, 0, 1e6, False),
    ("clocks_event_reasons", _I, 0, _U64, False),
    ("applications_clock_mhz", _I, 0, 1e6, False),
    ("slowdown_temp_c", _N, -273.15, 1000, False),
    ("shutdown_temp_c", _N, -273.15, 1000, False),
    ("energy_j", _N, 0, _MAX, False),
    ("util_pct", _N, 0, 100, False),
    ("mem_used_bytes", _I, 0, _U64, False),
    ("mem_total_bytes", _I, 0, _U64, False),
    ("driver_version", _S, None, None, False),
)
_PROCESS = (
    ("pid", _I, 0, _I64, True),
    ("ppid", _I, 0, _I64, False),
    ("create_time", _N, 0, _MAX, False),
    ("name", _S, None, None, False),
    ("rss_bytes", _I, 0, _U64, False),
    ("gpu_mem_bytes", _I, 0, _U64, False),
    ("gpu_resident", _B, None, None, False),
)
_SENSOR = (
    ("chip", _S, None, None, False),
    ("label", _S, None, None, False),
    ("temp_c", _N, -273.15, 1000, False),
    ("crit_c", _N, -273.15, 1000, False),
)
_THROUGHPUT = (
    ("job", _S, None, None, True),
    ("ts", _N, 0, _MAX, False),
    ("step", _I, 0, _I64, False),
    ("step_seconds", _N, 0, _MAX, False),
    ("tokens_per_second", _N, 0, _MAX, False),
)
_DRIVER_EVENT = (
    ("ts", _N, 0, _MAX, True),
    ("gpu", _I, 0, 4096, False),  # null: a kernel-log line names a PCI address, not an NVML index
    ("xid", _I, 0, _I64, False),
    ("source", _S, None, None, False),  # absent: journal, as DriverEvent.from_dict reads it
    ("text", _S, None, None, False),
    ("pci", _S, None, None, False),  # the PCI address a kernel line names ("0000:01:00.0")
    ("count", _I, 1, _I64, False),  # identical lines folded into this one event (a storm)
    ("boot_end_ts", _N, 0, _MAX, False),  # a previous boot's line: that boot's last journal entry
)
_DRIVER_SOURCES = ("nvml", "journal")
_SAMPLE = (
    ("ts", _N, 0, _MAX, True),
    ("host", _S, None, None, False),
    ("boot_id", _S, None, None, False),
    ("uptime_s", _N, 0, _MAX, False),
    ("mem_available_min_kb", _I, 0, _U64, False),
)
_PSI_FIELDS = ("avg10", "avg60", "avg300", "total")
_PSI_KINDS = {"some", "full"}
# avg* are percentages of time stalled; total is a microsecond counter.
_PSI_LINE = tuple((k, _N, 0, 100.0 if k != "total" else _U64, False) for k in _PSI_FIELDS)
_KIND = {_I: "an integer", _N: "a number", _S: "a string", _B: "true or false"}


class FieldError(ValueError):
    """A trace field with the wrong type or an impossible value; `field` is its path, e.g. gpus[0].power_w."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"field '{field}': {reason}")
        self.field = field
        self.reason = reason


def _show(v: Any) -> str:
    text = repr(v) if not isinstance(v, (dict, list)) else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _compile(schema: tuple):
    """A straight-line `ok(d) -> bool` for one schema: about 3x faster than looping over it, and this runs
    for every GPU, sensor and process of every replayed sample. Only a False is explained, by _fields."""
    names = {(): "", _I: "_I", _N: "_N", _S: "_S", _B: "_B"}
    lines = ["def ok(d):", "    if type(d) is not dict: return False", "    g = d.get"]
    for n, (key, kinds, lo, hi, required) in enumerate(schema):
        v = f"v{n}"
        lines.append(f"    {v} = g({key!r})")
        test = f"type({v}) not in {names[kinds]}"
        if lo is not None:
            test += f" or not {lo!r} <= {v} <= {hi!r}"
        lines.append(f"    if {v} is None:" + (" return False" if required else " pass"))
        lines.append(f"    elif {test}: return False")
    lines.append("    return True")
    scope = {"_I": _I, "_N": _N, "_S": _S, "_B": _B}
    exec("\n".join(lines), scope)  # noqa: S102 - generated from the constant schemas above, no input
    return scope["ok"]


def _fields(d: Any, schema: tuple, where: str) -> None:
    if _FAST[id(schema)](d):
        return
    if type(d) is not dict:
        raise FieldError(where, f"must be an object, got {type(d).__name__}")
    get = d.get
    for key, kinds, lo, hi, required in schema:
        v = get(key)
        if v is None:
            if required:
                raise FieldError(f"{where}.{key}" if where else key, "missing")
            continue
        if type(v) not in kinds or (lo is not None and not lo <= v <= hi):
            name = f"{where}.{key}" if where else key
            if type(v) not in kinds:
                raise FieldError(name, f"must be {_KIND[kinds]} or null, got {type(v).__name__} {_show(v)}")
            raise FieldError(name, f"out of range [{lo}, {hi:g}]: {_show(v)}")


_FAST = {
    id(s): _compile(s) for s in (_GPU, _PROCESS, _SENSOR, _THROUGHPUT, _DRIVER_EVENT, _SAMPLE, _PSI_LINE)
}
_PSI_OK = _FAST[id(_PSI_LINE)]
_SCHEMAS = {"": _SAMPLE, "gpus": _GPU, "processes": _PROCESS, "sensors": _SENSOR, "throughput": _THROUGHPUT}
_TYPE_NAMES = {int: "int", float: "float", str: "str", bool: "bool", list: "list", dict: "dict"}


def row_checker(kind: str, keys: tuple[str, ...], nonnull=(), shapes=None):
    """A straight-line `ok(*values) -> bool` for the one-pass reader (sample/decode.py): the values of `keys`
    in that order (an itemgetter's tuple) pass exactly when _fields would pass them for the schema `kind`,
    and are not None where `nonnull` (a value Sample.from_dict would convert). `shapes` maps keys outside the
    schema to the one type they must have (or None). Every key of the schema must be among `keys`."""
    schema = {key: rest for key, *rest in _SCHEMAS[kind]}
    if missing := schema.keys() - set(keys):
        raise ValueError(f"row_checker({kind!r}): schema keys {sorted(missing)} not in the row")
    args, tests = [f"a{n}" for n in range(len(keys))], []
    for a, key in zip(args, keys, strict=True):
        if key in schema:
            kinds, lo, hi, required = schema[key]
            test = f"type({a}) in _N" if kinds == _N else f"type({a}) is {_TYPE_NAMES[kinds[0]]}"
            test += f" and {lo!r} <= {a} <= {hi!r}" if lo is not None else ""
        elif shapes and key in shapes:
            test, required = f"type({a}) is {_TYPE_NAMES[shapes[key]]}", False
        else:
            continue
        tests.append(f"({test})" if required or key in nonnull else f"({a} is None or {test})")
    src = f"def ok({', '.join(args)}):\n    return " + " and ".join(tests or ["True"])
    scope = {"_N": _N}
    exec(src, scope)  # noqa: S102 - generated from the constant schemas above, no input
    scope["ok"].__doc__ = src  # what it tests, for a reader with a debugger
    return scope["ok"]


_INT_ONLY = {int}
_Q_IS_U64 = array("Q").itemsize == 8  # unsigned long long: 64 bits everywhere this runs
MEMINFO_RANGE = (0, _U64)
VMSTAT_RANGE = (-_I64, _U64)  # some vmstat gauges (nr_*) dip below zero on SMP kernels
CLOCK_COUNTERS_RANGE = (0, _U64)


def counters_ok(d: Any, lo: int, hi: int, nullable: bool = False) -> bool:
    """An object of integer counters (meminfo, vmstat, clocks-event counters) in [lo, hi], by C-level set,
    min and max over its values; False only says "not this": _counters names what is wrong.

    `nullable`: a counter the driver does not give is null (NVML has no hw_slowdown counter of its own)."""
    if type(d) is not dict:
        return False
    if not d:
        return True
    vals = [v for v in d.values() if v is not None] if nullable else d.values()
    if not vals or not set(map(type, vals)) <= _INT_ONLY:
        return not vals
    if lo == 0 and hi == _U64 and _Q_IS_U64:  # array("Q") holds exactly [0, 2**64 - 1]: one C pass
        try:
            array("Q", vals)
        except OverflowError:
            return False
        return True
    return lo <= min(vals) and max(vals) <= hi


def _counters(d: Any, where: str, lo: int, hi: int, nullable: bool = False) -> None:
    if counters_ok(d, lo, hi, nullable):
        return
    if type(d) is not dict:
        raise FieldError(where, f"must be an object, got {type(d).__name__}")
    for k, v in d.items():
        if v is None and nullable:
            continue
        if type(v) is not int:
            raise FieldError(f"{where}.{k}", f"must be an integer, got {type(v).__name__} {_show(v)}")
        if not lo <= v <= hi:
            raise FieldError(f"{where}.{k}", f"out of range [{lo}, {hi}]: {_show(v)}")


def _items(v: Any, where: str, schema: tuple) -> list:
    """Check a list of objects of one schema; the path string is only built for a bad item."""
    if type(v) is not list:
        raise FieldError(where, f"must be a list, got {type(v).__name__}")
    ok = _FAST[id(schema)]
    for i, item in enumerate(v):
        if not ok(item):
            _fields(item, schema, f"{where}[{i}]")
    return v


def check_sample(d: Mapping[str, Any]) -> None:
    """Raise FieldError naming the first trace-v1 field of `d` with a wrong type or impossible value."""
    _fields(d, _SAMPLE, "")
    get = d.get
    if (v := get("meminfo")) is not None:
        _counters(v, "meminfo", *MEMINFO_RANGE)
    if (v := get("vmstat")) is not None:
        _counters(v, "vmstat", *VMSTAT_RANGE)
    if (v := get("psi_memory")) is not None:
        _psi(v)
    if (v := get("gpus")) is not None:
        for i, g in enumerate(_items(v, "gpus", _GPU)):
            if (c := g.get("clocks_event_counters_us")) is not None:
                _counters(c, f"gpus[{i}].clocks_event_counters_us", *CLOCK_COUNTERS_RANGE, nullable=True)
    if (v := get("sensors")) is not None:
        _items(v, "sensors", _SENSOR)
    if (v := get("processes")) is not None:
        for i, p in enumerate(_items(v, "processes", _PROCESS)):
            argv = p.get("cmdline")
            if argv is not None and (type(argv) is not list or not set(map(type, argv)) <= _STR_ONLY):
                raise FieldError(f"processes[{i}].cmdline", "must be a list of strings")
    if (v := get("throughput")) is not None:
        _items(v, "throughput", _THROUGHPUT)
    check_optional(d)


def check_optional(d: Mapping[str, Any]) -> None:
    """The optional keys' part of check_sample: board, driver_events, serving, oom_kills."""
    get = d.get
    if (v := get("board")) is not None:
        _board(v)
    if (v := get("driver_events")) is not None:
        for i, e in enumerate(_items(v, "driver_events", _DRIVER_EVENT)):
            if e.get("source", "journal") not in _DRIVER_SOURCES:
                raise FieldError(
                    f"driver_events[{i}].source", f"must be 'nvml' or 'journal', got {_show(e['source'])}"
                )
    if (v := get("serving")) is not None:
        _serving(v)
    if (v := get("oom_kills")) is not None:
        _oom_kills(v)


def _oom_kills(v: Any) -> None:
    if type(v) is not list:
        raise FieldError("oom_kills", f"must be a list, got {type(v).__name__}")
    for i, item in enumerate(v):
        if type(item) is not dict:
            raise FieldError(f"oom_kills[{i}]", f"must be an object, got {type(item).__name__}")
        if "ts" not in item:
            raise FieldError(f"oom_kills[{i}].ts", "missing")
        try:
            KillReport.from_dict(item)
        except (TypeError, ValueError) as exc:
            raise FieldError(f"oom_kills[{i}]", str(exc).removeprefix("oom_kills: ")) from None


def _serving(v: Any) -> None:
    if type(v) is not list:
        raise FieldError("serving", f"must be a list, got {type(v).__name__}")
    for i, item in enumerate(v):
        try:
            ServingReading.from_dict(item)
        except (TypeError, ValueError) as exc:
            raise FieldError(f"serving[{i}]", str(exc).removeprefix("serving: ")) from None


_STR_ONLY = {str}
# trace-v1 `board` (spbm driver): channel maps with a plausible range each; 100 kW is no board.
_BOARD_MAPS = (
    ("power_w", 0, 1e5),
    ("power_cap_w", 0, 1e5),
    ("energy_j", 0, _MAX),
    ("energy_power_w", 0, 1e5),
    ("temps_c", -273.15, 1000),
)


def _board(v: Any) -> None:
    if type(v) is not dict:
        raise FieldError("board", f"must be an object or null, got {type(v).__name__}")
    for key, lo, hi in _BOARD_MAPS:
        m = v.get(key)
        if m is None:
            continue
        if type(m) is not dict:
            raise FieldError(f"board.{key}", f"must be an object, got {type(m).__name__}")
        for ch, x in m.items():
            if type(x) not in _N or not lo <= x <= hi:
                raise FieldError(f"board.{key}.{ch}", f"must be a number in [{lo:g}, {hi:g}], got {_show(x)}")
    for key in ("prochot", "pl_level"):
        x = v.get(key)
        if x is not None and (type(x) is not int or not 0 <= x <= _U64):
            raise FieldError(f"board.{key}", f"must be a non-negative integer, got {_show(x)}")


def psi_ok(v: Any) -> bool:
    """psi_memory as check_sample accepts it (False: _psi names what is wrong)."""
    return type(v) is dict and v.keys() <= _PSI_KINDS and all(map(_PSI_OK, v.values()))


def _psi(v: Any) -> None:
    if psi_ok(v):
        return
    if type(v) is not dict:
        raise FieldError("psi_memory", f"must be an object or null, got {type(v).__name__}")
    for kind, fields in v.items():
        where = f"psi_memory.{kind}"
        if kind not in ("some", "full"):
            raise FieldError(where, "unknown pressure kind (expected 'some' or 'full')")
        if type(fields) is not dict:
            raise FieldError(where, f"must be an object, got {type(fields).__name__}")
        for key in _PSI_FIELDS:
            x = fields.get(key)
            if x is None:
                continue
            hi = _U64 if key == "total" else 100.0  # avg* are percentages of time stalled
            if type(x) not in _N or not 0 <= x <= hi:
                raise FieldError(f"{where}.{key}", f"must be a number in [0, {hi:g}], got {_show(x)}")
