"""The published snapshot: what scrapes, the page and the API read. Swapped as one reference per tick."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_watchd.sample.findings import Diagnosis, Event
from spark_watchd.sample.memory import MemoryView, memory_view
from spark_watchd.sample.model import Sample


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """How one source fared on the last tick."""

    name: str
    up: bool
    duration_s: float = 0.0
    errors_total: int = 0
    error: str | None = None  # last error text while down


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Latest sample, its diagnosis, source health and running counters."""

    sample: Sample | None
    diagnosis: Diagnosis | None
    sources: Mapping[str, SourceStatus] = field(default_factory=dict)
    # sparkwatchd_events_total{kind}: cumulative, carried across restarts by the state file.
    event_counts: Mapping[str, int] = field(default_factory=dict)
    recent_events: tuple[Event, ...] = ()
    # The workload table (sample.groups.Workload rows) the diagnosis grouped this tick: the exporter,
    # page, API and CLI only format it.
    workloads: tuple[Any, ...] = ()
    # Extra per-area data (e.g. "jobs" from the throughput tracker); render-only.
    extras: Mapping[str, Any] = field(default_factory=dict)
    published_at: float = 0.0
    mode: str = "live"  # "live" or "replay"
    # The memory view of `sample` with the configured reserve, computed once by the daemon's tick.
    memory: MemoryView | None = None

    def wall_shift(self) -> float:
        """Seconds to add to this snapshot's sample and event times to date them by the wall clock.

        0 live. A replay serves recorded spacing faster than real time (a demo at 60x runs hours ahead
        of the clock): the one replay clock shows the newest sample at the moment it was published, and
        every output (API, metrics, CLI, page, webhooks) dates its times with this same shift.
        """
        if self.mode != "replay" or self.sample is None or not self.published_at:
            return 0.0
        return self.published_at - self.sample.ts

    def memory_or_default(self) -> MemoryView | None:
        """`memory`, or the view with no reserve for a snapshot built by hand (tests, tools)."""
        if self.memory is not None or self.sample is None:
            return self.memory
        return memory_view(self.sample)


def state_status(runtime: Any) -> SourceStatus | None:
    """The state directory as a source (`sparkwatchd_source_up{source="state"}`): down while writing the state,
    journal or captures fails (disk full, read-only remount); None when nothing is kept on disk."""
    error = getattr(runtime, "storage_error", None)
    if getattr(runtime, "state_dir", None) is None and error is None:
        return None
    return SourceStatus("state", error is None, 0.0, int(getattr(runtime, "storage_errors_total", 0)), error)
