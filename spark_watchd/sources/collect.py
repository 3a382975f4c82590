"""One tick's collection: every source guarded and timed, the parts merged into one frozen Sample."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from spark_watchd.logs import get_logger
from spark_watchd.sample.board import BoardReading
from spark_watchd.sample.driver import DriverEvent
from spark_watchd.sample.link import LinkReading
from spark_watchd.sample.model import GpuReading, ProcessInfo, Sample, Sensor, ThroughputReading
from spark_watchd.sample.serving import ServingReading
from spark_watchd.snapshot import SourceStatus

_ITEM_TYPES = {
    "gpus": GpuReading,
    "sensors": Sensor,
    "processes": ProcessInfo,
    "throughput": ThroughputReading,
    "driver_events": DriverEvent,
    "serving": ServingReading,
}
_SAMPLE_FIELDS = (
    "host",
    "boot_id",
    "uptime_s",
    "gpus",
    "meminfo",
    "psi_memory",
    "vmstat",
    "mem_available_min_kb",
    "sensors",
    "processes",
    "throughput",
    "board",
    "driver_events",
    "serving",
    "link",
)


def build_sample(ts: float, parts: Mapping[str, Any]) -> Sample:
    """Assemble a frozen Sample from the merged source outputs (dicts or model objects)."""
    kw: dict[str, Any] = {}
    for key in _SAMPLE_FIELDS:
        if key not in parts or parts[key] is None and key in _ITEM_TYPES:
            continue
        val = parts[key]
        if key in _ITEM_TYPES:
            cls = _ITEM_TYPES[key]
            val = tuple(cls.from_dict(v) if isinstance(v, Mapping) else v for v in val)
        elif key == "board" and isinstance(val, Mapping):
            val = BoardReading.from_dict(val)
        elif key == "link" and isinstance(val, Mapping):
            val = LinkReading.from_dict(val)
        kw[key] = val
    kw.setdefault("host", socket.gethostname())
    return Sample(ts=ts, **kw)


class Collector:
    """Collects a tuple of sources; a source that raises is marked down and the others go on."""

    def __init__(self, sources: Iterable[Any], clock: Callable[[], float] = time.time, log=None):
        self.sources = tuple(sources)
        self.clock = clock
        self.log = log or get_logger("collector")
        self._errors: dict[str, int] = {}
        self._state: dict[str, str | None] = {}  # name -> last error (None when up); absent before first tick
        # Sources already reported missing at start-up: their first "down" is not news.
        self.expected_down: set[str] = set()

    def collect(self) -> tuple[Sample, dict[str, SourceStatus]]:
        """Sample every source once; returns the Sample and each source's status."""
        ts = self.clock()
        parts, statuses = self.gather()
        return build_sample(ts, parts), statuses

    def gather(self, seed: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, SourceStatus]]:
        """Every source's output merged over `seed` (what each sees as `partial`), and each one's status."""
        parts: dict[str, Any] = dict(seed or {})
        statuses: dict[str, SourceStatus] = {}
        for src in self.sources:
            name = getattr(src, "name", type(src).__name__)
            t0 = time.perf_counter()
            error: str | None = None
            try:
                out = src.collect(parts)
                if out:
                    parts.update(out)
            except Exception as exc:  # any failure is this source's alone
                error = str(exc) or type(exc).__name__
                self._errors[name] = self._errors.get(name, 0) + 1
            duration = time.perf_counter() - t0
            self._log_transition(name, error)
            statuses[name] = SourceStatus(name, error is None, duration, self._errors.get(name, 0), error)
        return parts, statuses

    def _log_transition(self, name: str, error: str | None) -> None:
        """Log once per state change: down (with why), recovered; never every tick."""
        first = name not in self._state
        prev = self._state.get(name)
        self._state[name] = error
        if error is not None and first and name in self.expected_down:
            self.log.debug(f"{name} down: {error}", source=name, error=error)
        elif error is not None and (first or prev is None):
            self.log.warning(f"{name} down: {error}", source=name, error=error)
        elif error is None and not first and prev is not None:
            self.log.info(f"{name} recovered", source=name)
        elif error is not None and prev is not None and _kind(prev) != _kind(error):
            self.log.warning(f"{name} still down: {error}", source=name, error=error)

    def close(self) -> None:
        """Close every source (stops their threads), never raising."""
        for src in self.sources:
            try:
                src.close()
            except Exception as exc:
                self.log.warning("source close failed", source=getattr(src, "name", "?"), error=str(exc))


def _kind(error: str) -> str:
    # Errors that differ only in numbers or asides ("(next retry in 9 s)", pids) are the same state.
    return re.sub(r"\([^)]*\)|\d+", "", error).strip()[:80]
