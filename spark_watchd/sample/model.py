"""Frozen data that flows through the daemon: samples (trace-v1) and their readings.

Samples mirror `docs/trace-v1.md` key for key, so a sample written by
`record` and read back by `replay` round-trips exactly. Mappings inside frozen
objects (``meminfo``, ``vmstat``...) are plain dicts for speed: treat them as
read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_watchd.sample.board import BoardReading
from spark_watchd.sample.driver import DriverEvent
from spark_watchd.sample.kills import KillReport, kills_from
from spark_watchd.sample.link import LinkReading
from spark_watchd.sample.serving import ServingReading, serving_from

TRACE_VERSION = 1
GOTCHAS = ("G3", "G4", "G6")
SEVERITIES = ("unknown", "ok", "warning", "critical")
# sparkwatchd_finding_level values: -1 unknown, 0 ok, 1 warning, 2 critical
SEVERITY_LEVEL = {"unknown": -1, "ok": 0, "warning": 1, "critical": 2}
EVENT_KINDS = (
    "eviction",
    "oom_kill",
    "reboot",
    "throttle_start",
    "throttle_end",
    "xid",
    "driver_oom",
    "pcie_fatal",
)
# sparkwatchd_events_total{kind}: what the runtime counts (throttle_end is not counted; a reboot right
# after a throttle counts under its own kind as well).
COUNTED_EVENT_KINDS = (
    "eviction",
    "oom_kill",
    "reboot",
    "reboot_after_throttle",
    "throttle_start",
    "xid",
    "driver_oom",
    "pcie_fatal",
)

# NVML clocks-event reason bits (nvml.h nvmlClocksEventReason*). Use the named
# constants: one community TUI read 0x10 as SW thermal, which is sync boost.
REASON_BITS = {
    "power_cap": 0x04,  # SW power cap: the platform's normal state on GB10
    "hw_slowdown": 0x08,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
    "hw_power_brake": 0x80,
}
# trace-v1 `clocks_event_counters_us` key for each metric `reason` label.
REASON_COUNTER_KEYS = {
    "power_cap": "sw_power_cap",
    "hw_slowdown": "hw_slowdown",
    "sw_thermal": "sw_thermal",
    "hw_thermal": "hw_thermal",
    "hw_power_brake": "hw_power_brake",
}


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one instant; None where the driver answers Not Supported."""

    index: int
    name: str
    uuid: str
    power_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: int | None = None
    clocks_event_reasons: int | None = None
    clocks_event_counters_us: Mapping[str, int] | None = None
    applications_clock_mhz: int | None = None
    slowdown_temp_c: float | None = None
    shutdown_temp_c: float | None = None
    energy_j: float | None = None
    util_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    # Not in trace-v1 (extension, ignored by other readers).
    driver_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {
            "index": self.index,
            "name": self.name,
            "uuid": self.uuid,
            "power_w": self.power_w,
            "temp_c": self.temp_c,
            "sm_clock_mhz": self.sm_clock_mhz,
            "clocks_event_reasons": self.clocks_event_reasons,
            "clocks_event_counters_us": dict(self.clocks_event_counters_us)
            if self.clocks_event_counters_us is not None
            else None,
            "applications_clock_mhz": self.applications_clock_mhz,
            "slowdown_temp_c": self.slowdown_temp_c,
            "shutdown_temp_c": self.shutdown_temp_c,
            "energy_j": self.energy_j,
            "util_pct": self.util_pct,
            "mem_used_bytes": self.mem_used_bytes,
            "mem_total_bytes": self.mem_total_bytes,
        }
        if self.driver_version is not None:
            d["driver_version"] = self.driver_version
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GpuReading:
        # Positional construction, conversions only where the type differs: this runs once per sample in replay.
        # trace-v1 writers emit every key: subscripts on that path, .get with defaults when one is missing.
        try:
            index, name, uuid = d["index"], d["name"], d["uuid"]
            rest = (
                d["power_w"],
                d["temp_c"],
                d["sm_clock_mhz"],
                d["clocks_event_reasons"],
                d["clocks_event_counters_us"],
                d["applications_clock_mhz"],
                d["slowdown_temp_c"],
                d["shutdown_temp_c"],
                d["energy_j"],
                d["util_pct"],
                d["mem_used_bytes"],
                d["mem_total_bytes"],
            )
        except KeyError:
            g = d.get
            index, name, uuid = g("index", 0), g("name", ""), g("uuid", "")
            rest = tuple(g(k) for k in _GPU_OPTIONAL)
        return cls(
            index if type(index) is int else int(index or 0),  # null is "not sampled": the first GPU
            name if type(name) is str else str(name),
            uuid if type(uuid) is str else str(uuid),
            *rest,
            d.get("driver_version"),
        )


_GPU_OPTIONAL = (
    "power_w", "temp_c", "sm_clock_mhz", "clocks_event_reasons", "clocks_event_counters_us", "applications_clock_mhz",
    "slowdown_temp_c", "shutdown_temp_c", "energy_j", "util_pct", "mem_used_bytes", "mem_total_bytes",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """A GPU-resident or workload-pattern process; (pid, create_time) is its identity."""

    pid: int
    create_time: float
    name: str
    cmdline: tuple[str, ...]
    rss_bytes: int
    gpu_mem_bytes: int | None = None
    gpu_resident: bool = False
    # Parent pid: ties a renamed GPU-resident child (VLLM::EngineCore, ollama runner) to its launcher.
    ppid: int | None = None

    @property
    def key(self) -> tuple[int, float]:
        return (self.pid, self.create_time)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "pid": self.pid,
            "create_time": self.create_time,
            "name": self.name,
            "cmdline": list(self.cmdline),
            "rss_bytes": self.rss_bytes,
            "gpu_mem_bytes": self.gpu_mem_bytes,
            "gpu_resident": self.gpu_resident,
        }
        if self.ppid is not None:  # optional in trace-v1: an old trace round-trips unchanged
            d["ppid"] = self.ppid
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProcessInfo:
        pid = d["pid"]
        try:
            ct, name, rss, argv = d["create_time"], d["name"], d["rss_bytes"], d["cmdline"] or ()
            gpu, resident = d["gpu_mem_bytes"], d["gpu_resident"]
        except KeyError:
            g = d.get
            ct, name, rss, argv = g("create_time"), g("name", ""), g("rss_bytes"), g("cmdline") or ()
            gpu, resident = g("gpu_mem_bytes"), g("gpu_resident", False)
        return cls(
            pid if type(pid) is int else int(pid),
            ct if type(ct) is float else float(ct or 0.0),
            name if type(name) is str else str(name),
            tuple(argv) if all(type(a) is str for a in argv) else tuple(str(a) for a in argv),
            rss if type(rss) is int else int(rss or 0),
            gpu,
            resident if type(resident) is bool else bool(resident),
            None if (pp := d.get("ppid")) is None else pp if type(pp) is int else int(pp),  # optional
        )


@dataclass(frozen=True, slots=True)
class ThroughputReading:
    """Latest progress of one training job, as seen at sample time."""

    job: str
    ts: float
    step: int
    step_seconds: float | None = None
    tokens_per_second: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "ts": self.ts,
            "step": self.step,
            "step_seconds": self.step_seconds,
            "tokens_per_second": self.tokens_per_second,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ThroughputReading:
        return cls(
            job=str(d["job"]),
            ts=float(d.get("ts") or 0.0),
            step=int(d.get("step") or 0),
            step_seconds=d.get("step_seconds"),
            tokens_per_second=d.get("tokens_per_second"),
        )


@dataclass(frozen=True, slots=True)
class Sensor:
    chip: str
    label: str
    temp_c: float | None
    crit_c: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"chip": self.chip, "label": self.label, "temp_c": self.temp_c, "crit_c": self.crit_c}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Sensor:
        try:
            chip, label, temp, crit = d["chip"], d["label"], d["temp_c"], d["crit_c"]
        except KeyError:
            g = d.get
            chip, label, temp, crit = g("chip", ""), g("label", ""), g("temp_c"), g("crit_c")
        key = (chip, label, temp, crit)
        # A host's sensors repeat the same few readings sample after sample (7 per GB10 sample, 0.1 C steps):
        # reuse the frozen object. Exact str/float/None values only (70 and 70.0 stay apart), never a zero.
        s = _SENSORS.get(key) if type(chip) is str and type(label) is str else None
        if s is not None and type(s.temp_c) is type(temp) and type(s.crit_c) is type(crit):
            return s
        s = cls(
            chip if type(chip) is str else str(chip),
            label if type(label) is str else str(label),
            temp,
            crit,
        )
        if type(chip) is str and type(label) is str and temp != 0 and crit != 0:
            if len(_SENSORS) >= 4096:
                _SENSORS.clear()  # bounded: a long trace with drifting readings never grows it past this
            _SENSORS[key] = s
        return s


_SENSORS: dict[tuple, Sensor] = {}  # memo of immutable Sensor objects by their four values


@dataclass(frozen=True, slots=True)
class Sample:
    """One tick's readings, exactly the trace-v1 sample."""

    ts: float
    host: str | None = None
    boot_id: str | None = None
    uptime_s: float | None = None
    gpus: tuple[GpuReading, ...] = ()
    meminfo: Mapping[str, int] = field(default_factory=dict)
    psi_memory: Mapping[str, Mapping[str, float]] | None = None
    vmstat: Mapping[str, int] = field(default_factory=dict)
    mem_available_min_kb: int | None = None
    sensors: tuple[Sensor, ...] = ()
    processes: tuple[ProcessInfo, ...] = ()
    throughput: tuple[ThroughputReading, ...] = ()
    board: BoardReading | None = None  # optional: only hosts with the spbm hwmon driver
    driver_events: tuple[DriverEvent, ...] = ()  # optional in trace-v1 (added 2026-12)
    serving: tuple[ServingReading, ...] = ()  # optional in trace-v1: inference servers' own telemetry
    link: LinkReading | None = None  # optional: hosts with an RDMA NIC (the Sparks' ConnectX-7)
    # optional: kill reports (kernel OOM killer, systemd-oomd, earlyoom)
    oom_kills: tuple[KillReport, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The trace-v1 object: every key present, null where not supported; the optional keys only when there
        is something (older traces round-trip line for line)."""
        d: dict[str, Any] = {
            "v": TRACE_VERSION,
            "ts": self.ts,
            "host": self.host,
            "boot_id": self.boot_id,
            "uptime_s": self.uptime_s,
            "gpus": [g.to_dict() for g in self.gpus],
            "meminfo": dict(self.meminfo),
            "psi_memory": self.psi_memory,
            "vmstat": dict(self.vmstat),
            "mem_available_min_kb": self.mem_available_min_kb,
            "sensors": [s.to_dict() for s in self.sensors],
            "processes": [p.to_dict() for p in self.processes],
            "throughput": [t.to_dict() for t in self.throughput],
        }
        if self.board is not None:
            d["board"] = self.board.to_dict()
        if self.driver_events:
            d["driver_events"] = [e.to_dict() for e in self.driver_events]
        if self.serving:
            d["serving"] = [r.to_dict() for r in self.serving]
        if self.link is not None:
            d["link"] = self.link.to_dict()
        if self.oom_kills:
            d["oom_kills"] = [k.to_dict() for k in self.oom_kills]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Sample:
        """Build from a trace-v1 object; unknown keys ignored, missing optional keys are 'not sampled'.

        Raises TypeError/ValueError naming the key when a field has the wrong shape.
        """
        try:  # trace-v1 writers emit every key
            gpus, meminfo, psi, vmstat = d["gpus"], d["meminfo"], d["psi_memory"], d["vmstat"]
            sensors, procs, tp = d["sensors"], d["processes"], d["throughput"]
            host, boot_id, uptime, mn = d["host"], d["boot_id"], d["uptime_s"], d["mem_available_min_kb"]
        except KeyError:  # a missing optional key is "not sampled"
            g = d.get
            gpus, meminfo, psi, vmstat = g("gpus"), g("meminfo"), g("psi_memory"), g("vmstat")
            sensors, procs, tp = g("sensors"), g("processes"), g("throughput")
            host, boot_id, uptime, mn = g("host"), g("boot_id"), g("uptime_s"), g("mem_available_min_kb")
        # One cheap exact-type test on the common path; the full check (and its message) only on a mismatch.
        if not (
            (gpus is None or type(gpus) is list)
            and (meminfo is None or type(meminfo) is dict)
            and (psi is None or type(psi) is dict)
            and (vmstat is None or type(vmstat) is dict)
            and (sensors is None or type(sensors) is list)
            and (procs is None or type(procs) is list)
            and (tp is None or type(tp) is list)
            and (host is None or type(host) is str)
            and (boot_id is None or type(boot_id) is str)
            and (uptime is None or type(uptime) is float or type(uptime) is int)
            and (mn is None or type(mn) is int or type(mn) is float)
        ):
            for key, kind in _SAMPLE_SHAPES:
                val = d.get(key)
                if val is not None and not isinstance(val, kind):
                    raise TypeError(f"'{key}' must be {_KIND_NAMES[kind]}, got {type(val).__name__}")
        gfd, sfd, pfd = GpuReading.from_dict, Sensor.from_dict, ProcessInfo.from_dict
        if (dev := d.get("driver_events")) is not None and type(dev) is not list:  # optional, as below
            raise TypeError(f"'driver_events' must be a list, got {type(dev).__name__}")
        return cls(
            float(d["ts"]),
            host,
            boot_id,
            uptime,
            tuple([gfd(x) for x in gpus]) if gpus else (),
            meminfo or {},
            psi,
            vmstat or {},
            mn,
            tuple([sfd(x) for x in sensors]) if sensors else (),
            tuple([pfd(x) for x in procs]) if procs else (),
            tuple([ThroughputReading.from_dict(x) for x in tp]) if tp else (),
            *optional_parts(d),
        )


def optional_parts(d: Mapping[str, Any]) -> tuple:
    """board, driver_events, serving, link and oom_kills of a trace-v1 object, as Sample takes them."""
    dev = d.get("driver_events")
    return (
        BoardReading.from_dict(b) if (b := d.get("board")) is not None else None,
        tuple([DriverEvent.from_dict(x) for x in dev]) if dev else (),
        serving_from(d.get("serving")),
        LinkReading.from_dict(k) if (k := d.get("link")) is not None else None,
        kills_from(d.get("oom_kills")),
    )


_SAMPLE_SHAPES = (
    ("gpus", list), ("meminfo", dict), ("psi_memory", dict), ("vmstat", dict), ("sensors", list),
    ("processes", list), ("throughput", list), ("host", str), ("boot_id", str),
    ("uptime_s", (int, float)), ("mem_available_min_kb", (int, float)),
)  # fmt: skip
_KIND_NAMES = {list: "a list", dict: "an object", str: "a string", (int, float): "a number"}
