"""Prometheus exposition: one custom collector renders the latest snapshot into fresh families per scrape.

No global metrics: the collector sits on the project's own CollectorRegistry
and only reads the published snapshot (scrapes never touch hardware).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from spark_watchd import __version__
from spark_watchd.export import board, diagnosis, driver, link, platform, runway, serving, training
from spark_watchd.export.families import counter, gauge
from spark_watchd.logs import get_logger
from spark_watchd.sample.model import REASON_BITS, REASON_COUNTER_KEYS, Sample
from spark_watchd.sample.workloads import KINDS as WORKLOAD_KINDS
from spark_watchd.snapshot import Snapshot


def core_families(snapshot: Snapshot, daemon_info: dict | None = None) -> Iterator[Metric]:
    """build_info and the per-source health families."""
    info = gauge("build_info", "spark-watchd build; always 1.", ["version"])
    info.add_metric([__version__], 1)
    yield info
    up = gauge("source_up", "1 if the source was read successfully on the last tick.", ["source"])
    dur = gauge("source_duration_seconds", "Seconds the source took on the last tick.", ["source"])
    errs = counter("source_errors", "Ticks on which the source failed.", ["source"])
    for name, st in sorted(snapshot.sources.items()):
        up.add_metric([name], 1 if st.up else 0)
        dur.add_metric([name], st.duration_s)
        errs.add_metric([name], st.errors_total)
    yield from (up, dur, errs)
    if snapshot.sample is not None:
        last = gauge("last_sample_timestamp_seconds", "Unix time of the latest sample.")
        last.add_metric([], snapshot.sample.ts + snapshot.wall_shift())  # a replay dated by the wall clock
        yield last
    if daemon_info:
        overruns = counter("tick_overruns", "Ticks skipped because the previous one was still running.")
        overruns.add_metric([], daemon_info.get("overruns", 0))
        yield overruns


def postmortem_families(snapshot: Snapshot) -> Iterator[Metric]:
    """Failed writes of the post-mortem ring and bundles (a full disk, a link planted in the state dir)."""
    fam = counter(
        "postmortem_storage_errors",
        "Failed writes of the post-mortem sample ring or bundles (disk full, a link or FIFO refused).",
        ["part"],
    )
    status = (snapshot.extras or {}).get("postmortem_storage") or {}
    for part, st in sorted(status.items()):
        fam.add_metric([part], st.get("errors_total", 0))
    yield fam


def gpu_families(sample: Sample) -> Iterator[Metric]:
    """The gpu_* families; a reading the driver does not support is simply absent."""
    info = gauge("gpu_info", "GPU identity; always 1.", ["gpu", "uuid", "name", "driver_version"])
    specs = {
        "power_w": ("gpu_power_watts", "Board power draw.", 1.0),
        "temp_c": ("gpu_temperature_celsius", "GPU temperature.", 1.0),
        "slowdown_temp_c": (
            "gpu_slowdown_temperature_celsius",
            "Temperature at which the GPU slows down.",
            1.0,
        ),
        "shutdown_temp_c": (
            "gpu_shutdown_temperature_celsius",
            "Temperature at which the GPU shuts down.",
            1.0,
        ),
        "sm_clock_mhz": ("gpu_sm_clock_hertz", "Current SM clock.", 1e6),
        "applications_clock_mhz": (
            "gpu_applications_clock_hertz",
            "SM clock the board should hold under load.",
            1e6,
        ),
        "util_pct": ("gpu_utilization_ratio", "GPU utilisation, 0 to 1.", 0.01),
    }
    simple = {attr: (gauge(name, doc, ["gpu"]), scale) for attr, (name, doc, scale) in specs.items()}
    energy = counter("gpu_energy_joules", "Energy consumed since the driver loaded.", ["gpu"])
    active = gauge(
        "gpu_clock_event_active", "1 while the clocks-event (throttle) reason is active.", ["gpu", "reason"]
    )
    seconds = counter(
        "gpu_clock_event_seconds", "Cumulative time the clocks-event reason was active.", ["gpu", "reason"]
    )
    memsup = gauge(
        "gpu_memory_info_supported", "1 if NVML reports device memory (0 on GB10's unified memory).", ["gpu"]
    )
    for gpu in sample.gpus:
        g = str(gpu.index)
        info.add_metric([g, gpu.uuid, gpu.name, gpu.driver_version or ""], 1)
        for attr, (fam, scale) in simple.items():
            val = getattr(gpu, attr)
            if val is not None:
                fam.add_metric([g], float(val) * scale)
        if gpu.energy_j is not None:
            energy.add_metric([g], float(gpu.energy_j))
        if gpu.clocks_event_reasons is not None:
            for reason, bit in REASON_BITS.items():
                active.add_metric([g, reason], 1 if gpu.clocks_event_reasons & bit else 0)
        counters = gpu.clocks_event_counters_us
        if counters is not None:
            for reason, key in REASON_COUNTER_KEYS.items():
                if counters.get(key) is not None:
                    seconds.add_metric([g, reason], counters[key] / 1e6)
        # GB10: NVML memory info is Not Supported (unified memory); MemAvailable is the truth.
        memsup.add_metric([g], 1 if gpu.mem_total_bytes is not None else 0)
    yield info
    yield from (fam for fam, _ in simple.values())
    yield from (energy, active, seconds, memsup)


def one_gauge(name: str, doc: str, value: float | None) -> Metric:
    """An unlabelled gauge: described always, with a series only when the value is known."""
    return gauge(name, doc, value=value)


def one_counter(name: str, doc: str, value: float | None) -> Metric:
    """An unlabelled counter: described always, with a series only when the value is known."""
    return counter(name, doc, value=value)


def memory_families(snapshot: Snapshot) -> Iterator[Metric]:
    """memory_*, pressure_* and the vmstat counters: the snapshot's memory view and /proc (never NVML on GB10).

    Every family is always described; a reading this kernel does not give has no series.
    """
    sample, view = snapshot.sample, snapshot.memory_or_default()
    if sample is None or view is None:
        return

    yield one_gauge("memory_total_bytes", "Total usable memory (the unified pool on GB10).", view.total_bytes)
    yield one_gauge(
        "memory_available_bytes",
        "MemAvailable: memory available for new work without swapping.",
        view.available_bytes,
    )
    yield one_gauge("memory_cached_bytes", "Page cache.", view.cached_bytes)
    yield one_gauge("memory_anon_bytes", "Anonymous memory.", view.anon_bytes)
    yield one_gauge(
        "memory_available_min_bytes",
        "Lowest MemAvailable seen since the previous sample.",
        view.available_min_bytes,
    )
    yield one_gauge(
        "memory_budget_bytes",
        "MemAvailable minus the configured OS/driver reserve (negative once into it).",
        view.budget_bytes,
    )
    yield one_gauge(
        "memory_gpu_attributed_bytes",
        "Sum of per-process GPU memory NVML reports.",
        view.gpu_attributed_bytes,
    )
    yield one_gauge(
        "memory_swap_used_bytes",
        "Swap in use (in use is not pressure; swapping out is).",
        view.swap_used_bytes,
    )
    psi = sample.psi_memory or {}
    for kind, name, doc in (
        ("some", "waiting", "Time some tasks were stalled on memory (PSI some total)."),
        ("full", "stalled", "Time all non-idle tasks were stalled on memory (PSI full total)."),
    ):
        total = (psi.get(kind) or {}).get("total")
        yield one_counter(f"pressure_memory_{name}_seconds", doc, None if total is None else total / 1e6)
    vm = sample.vmstat
    for key, name, doc in (
        ("pgmajfault", "major_faults", "Major page faults (vmstat pgmajfault)."),
        ("pswpout", "swap_out_pages", "Pages swapped out (vmstat pswpout)."),
        ("oom_kill", "oom_kills", "Processes killed by the kernel OOM killer (vmstat oom_kill)."),
    ):
        yield one_counter(name, doc, vm.get(key))


def workload_table(snapshot: Snapshot) -> list[dict[str, Any]]:
    """One row per workload (launcher argv, kind, cap, members, footprint), as the diagnosis grouped them."""
    return [w.to_dict() for w in snapshot.workloads]


def workload_families(snapshot: Snapshot) -> Iterator[Metric]:
    """Workloads by kind and whether they are memory-capped; every kind always present (stable series)."""
    counts = {(k, c): 0 for k in WORKLOAD_KINDS for c in ("true", "false")}
    mem = dict.fromkeys(counts, 0)
    for w in snapshot.workloads:
        kind = w.kind if w.kind in WORKLOAD_KINDS else "other"
        key = (kind, "true" if w.capped else "false")
        counts[key] += 1
        mem[key] += w.footprint_bytes
    wl = gauge(
        "workloads",
        "Workloads by kind (a launcher and its children count once); capped: memory bounded by a launcher flag.",
        ["kind", "capped"],
    )
    wm = gauge(
        "workload_memory_bytes",
        "Memory held by workloads (per member process the larger of RSS and NVML memory, summed).",
        ["kind", "capped"],
    )
    for key in counts:
        wl.add_metric(list(key), counts[key])
        wm.add_metric(list(key), mem[key])
    yield from (wl, wm)


class SnapshotCollector:
    """The one custom collector: renders the snapshot the daemon published last."""

    def __init__(self, get_snapshot: Callable[[], Snapshot], daemon=None):
        self.get_snapshot = get_snapshot
        self.daemon = daemon
        self.log = get_logger("exporter")
        self._failed: set[str] = set()
        # Each part guarded on its own: a bug in one costs its families, never the whole scrape.
        self.renderers: tuple[tuple[str, Callable[[Snapshot], Iterable[Metric]]], ...] = (
            ("core", self._core),
            ("gpu", lambda snap: gpu_families(snap.sample) if snap.sample is not None else ()),
            ("memory", memory_families),
            ("workloads", workload_families),
            ("runway", lambda snap: list(runway.families(snap))),
            ("diagnosis", diagnosis.families),
            ("training", training.families),
            ("board", board.families),
            ("driver", driver.families),
            ("serving", serving.families),
            ("link", link.families),
            ("postmortem", postmortem_families),
            ("platform", platform.families),
        )

    def _core(self, snap: Snapshot) -> Iterator[Metric]:
        info = {"overruns": self.daemon.overruns} if self.daemon is not None else None
        yield from core_families(snap, info)

    def describe(self) -> list:
        return []  # families vary with the snapshot; skip the registration-time collect

    def collect(self) -> Iterator[Metric]:
        snap = self.get_snapshot()
        for name, render in self.renderers:
            try:
                fams = list(render(snap))  # materialise so a failing renderer adds nothing partial
            except Exception as exc:  # a renderer never breaks the scrape
                if name not in self._failed:
                    self._failed.add(name)
                    self.log.exception("metrics renderer failed", renderer=name, error=str(exc))
                continue
            self._failed.discard(name)
            # Empty families still go out (HELP and TYPE only): every documented metric is discoverable
            # on a machine without a GPU or a trainer, and series appear under a name already known.
            yield from fams


def build_registry(daemon, *, own_process: bool = False) -> CollectorRegistry:
    """The project's own registry holding one SnapshotCollector over the daemon's snapshot.

    own_process adds the daemon's own `process_*` (CPU seconds, resident memory, open fds, start time) and
    `python_*` series, as every exporter exposes its own cost (node_exporter first); a scrape reads
    /proc/self for them, nothing else.
    """
    reg = CollectorRegistry(auto_describe=False)
    reg.register(SnapshotCollector(daemon.snapshot, daemon))
    if own_process:
        from prometheus_client import GCCollector, PlatformCollector, ProcessCollector

        ProcessCollector(registry=reg)
        PlatformCollector(registry=reg)
        GCCollector(registry=reg)
    return reg
