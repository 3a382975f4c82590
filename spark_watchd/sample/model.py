"""Frozen data that flows through the daemon: samples (trace-v1) and their readings.

Each record below is its trace-v1 declaration (sample/schema.py makes the dataclass, to_dict, from_dict,
the validator and the one-pass reader from it); `docs/trace-v1.md` documents it key for key (a test
checks the tables), so a sample written by `record` and read back by `replay` round-trips exactly.
Mappings inside frozen objects (``meminfo``, ``vmstat``...) are plain dicts for speed: treat them as
read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spark_watchd.sample import validate
from spark_watchd.sample.board import BoardReading, check_board
from spark_watchd.sample.driver import DriverEvent
from spark_watchd.sample.kills import KillReport, check_kill
from spark_watchd.sample.link import LinkReading
from spark_watchd.sample.platform import PlatformReading, check_platform
from spark_watchd.sample.schema import (
    BOOL,
    FLOAT,
    INT,
    NUM,
    STR,
    counters,
    key,
    obj,
    record,
    records,
    strings,
    to_dict,
    traced,
)
from spark_watchd.sample.serving import SERVING_KINDS, ServingReading, check_serving
from spark_watchd.sample.validate import I64, MAX, U64

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


TEMP = (-273.15, 1000)  # a temperature in Celsius: above absolute zero, below anything that still reports


@traced
class GpuReading:
    """One GPU at one instant; None where the driver answers Not Supported."""

    index: int = key(INT, 0, 4096, default=0, doc="device identity")
    name: str = key(STR, default="", doc="device identity")
    uuid: str = key(STR, default="", doc="device identity")
    power_w: float | None = key(NUM, 0, 1e6, doc="board power draw, watts")
    temp_c: float | None = key(NUM, *TEMP, doc="GPU temperature, Celsius")
    sm_clock_mhz: int | None = key(INT, 0, 1e6, doc="current SM clock")
    clocks_event_reasons: int | None = key(INT, 0, U64, doc="NVML clocks-event (throttle) reasons bitmask")
    clocks_event_counters_us: Mapping[str, int] | None = counters(
        0, U64, nullable=True, doc="cumulative time spent in each reason, microseconds"
    )
    applications_clock_mhz: int | None = key(INT, 0, 1e6, doc="the SM clock the board is meant to hold")
    slowdown_temp_c: float | None = key(NUM, *TEMP, doc="NVML slowdown temperature threshold")
    shutdown_temp_c: float | None = key(NUM, *TEMP, doc="NVML shutdown temperature threshold")
    energy_j: float | None = key(NUM, 0, MAX, doc="cumulative energy since driver load, joules")
    util_pct: float | None = key(NUM, 0, 100, doc="GPU utilisation")
    mem_used_bytes: int | None = key(INT, 0, U64, doc="device memory; null on GB10")
    mem_total_bytes: int | None = key(INT, 0, U64, doc="device memory; null on GB10")
    # Not in trace-v1 (an extension, ignored by other readers).
    driver_version: str | None = key(STR, optional=True, doc="the driver's version (extension)")


@traced
class ProcessInfo:
    """A GPU-resident or workload-pattern process; (pid, create_time) is its identity."""

    pid: int = key(INT, 0, I64, need=True, doc="process id")
    create_time: float = key(FLOAT, 0, MAX, default=0.0, doc="process start, Unix seconds")
    name: str = key(STR, default="", doc="process name")
    cmdline: tuple[str, ...] = strings(doc="full argv")
    rss_bytes: int = key(INT, 0, U64, default=0, doc="resident set size")
    gpu_mem_bytes: int | None = key(INT, 0, U64, doc="NVML per-process used memory")
    gpu_resident: bool = key(BOOL, default=False, doc="listed by NVML as a compute or graphics process")
    # Ties a renamed GPU-resident child (VLLM::EngineCore, ollama runner) to its launcher.
    ppid: int | None = key(INT, 0, I64, optional=True, doc="parent process id")

    @property
    def key(self) -> tuple[int, float]:
        return (self.pid, self.create_time)


@traced
class ThroughputReading:
    """Latest progress of one training job, as seen at sample time."""

    job: str = key(STR, need=True, doc="job name as the trainer reported it")
    ts: float = key(FLOAT, 0, MAX, default=0.0, doc="time of the latest report")
    step: int = key(INT, 0, I64, default=0, doc="latest global step")
    step_seconds: float | None = key(NUM, 0, MAX, doc="mean seconds per step since the previous sample")
    tokens_per_second: float | None = key(NUM, 0, MAX, doc="mean tokens per second since the previous sample")


@traced(interned=True)  # 7 per GB10 sample, repeating the same few readings (0.1 C steps)
class Sensor:
    """A temperature sensor outside NVML (hwmon, thermal zones)."""

    chip: str = key(STR, default="", doc="hwmon chip or thermal zone type")
    label: str = key(STR, default="", doc="its label")
    temp_c: float | None = key(NUM, *TEMP, doc="temperature, Celsius")
    crit_c: float | None = key(NUM, *TEMP, doc="critical threshold, Celsius")


@traced
class ServingProgress:
    """One server's progress at one 1 s read (the armed fast ring's): what the engine stall is judged on."""

    server: str = key(STR, need=True, doc="its label, as in serving[]")
    ts: float = key(FLOAT, 0, MAX, need=True, doc="time of the read, Unix seconds")
    kind: str = key(STR, choices=SERVING_KINDS, default="vllm", doc="the server's kind")
    up: bool = key(BOOL, default=True, doc="the server answered")
    error: str | None = key(STR, doc="why it is down")
    requests_running: float | None = key(NUM, 0, MAX, doc="in the running batch")
    requests_waiting: float | None = key(NUM, 0, MAX, doc="queued")
    kv_usage: float | None = key(NUM, 0, MAX, doc="share of the KV cache in use")
    prompt_tokens_total: float | None = key(NUM, 0, MAX, doc="cumulative counter")
    generation_tokens_total: float | None = key(NUM, 0, MAX, doc="cumulative counter")
    generation_tokens_in_flight: float | None = key(NUM, 0, MAX, doc="llama.cpp: tokens of running requests")
    prompt_tokens_per_s: float | None = key(NUM, 0, MAX, doc="rate since the server's previous 1 s read")
    generation_tokens_per_s: float | None = key(NUM, 0, MAX, doc="rate since the server's previous 1 s read")


MEMINFO_RANGE = (0, U64)
VMSTAT_RANGE = (-I64, U64)  # some vmstat gauges (nr_*) dip below zero on SMP kernels


@traced(strict=True)
class Sample:
    """One tick's readings, exactly the trace-v1 sample."""

    ts: float = key(FLOAT, 0, MAX, need=True, doc="sample time, Unix seconds (UTC)")
    host: str | None = key(STR, doc="hostname")
    boot_id: str | None = key(STR, doc="/proc/sys/kernel/random/boot_id")
    uptime_s: float | None = key(NUM, 0, MAX, doc="first field of /proc/uptime")
    gpus: tuple[GpuReading, ...] = records(GpuReading, doc="one object per GPU")
    meminfo: Mapping[str, int] = counters(*MEMINFO_RANGE, default={}, doc="every /proc/meminfo key")
    psi_memory: Mapping[str, Mapping[str, float]] | None = obj(
        validate.check_psi, doc="/proc/pressure/memory"
    )
    vmstat: Mapping[str, int] = counters(*VMSTAT_RANGE, default={}, doc="cumulative counters of /proc/vmstat")
    mem_available_min_kb: int | None = key(INT, 0, U64, doc="lowest MemAvailable since the previous sample")
    sensors: tuple[Sensor, ...] = records(Sensor, doc="temperature sensors outside NVML")
    processes: tuple[ProcessInfo, ...] = records(ProcessInfo, doc="the relevant processes")
    throughput: tuple[ThroughputReading, ...] = records(ThroughputReading, doc="training jobs' progress")
    board: BoardReading | None = record(BoardReading, check=check_board, doc="spbm board telemetry")
    driver_events: tuple[DriverEvent, ...] = records(DriverEvent, optional=True, doc="GPU driver faults")
    serving: tuple[ServingReading, ...] = records(
        ServingReading, optional=True, check=check_serving, doc="inference servers' own telemetry"
    )
    serving_progress: tuple[ServingProgress, ...] = records(
        ServingProgress,
        optional=True,
        doc="the servers' 1 s progress reads since the previous sample, while the fast ring is armed",
    )
    link: LinkReading | None = record(LinkReading, doc="the host's RDMA ports")
    oom_kills: tuple[KillReport, ...] = records(
        KillReport, optional=True, check=check_kill, doc="kill reports since the previous sample"
    )
    platform: PlatformReading | None = record(
        PlatformReading,
        check=check_platform,
        doc="the boot's kernel, driver and firmware, on a boot's first sample",
    )
    kernel: str | None = key(
        STR, optional=True, doc="the running kernel's release (/proc/sys/kernel/osrelease)"
    )

    def to_dict(self) -> dict[str, Any]:
        """The trace-v1 object: every key present, null where not supported; the optional keys only when there
        is something (older traces round-trip line for line)."""
        return {"v": TRACE_VERSION, **to_dict(self)}


def check_sample(d: Mapping[str, Any]) -> None:
    """Raise FieldError naming the first trace-v1 field of `d` with a wrong type or impossible value."""
    Sample.check(d, "")
