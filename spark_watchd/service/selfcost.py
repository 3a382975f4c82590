"""What the daemon itself costs the Spark: its CPU share and resident memory, for the page and `status`.

/metrics carries the standard `process_*` series (prometheus_client's ProcessCollector, as node_exporter
exposes its own); this is the one-line human view of the same figures, taken once a tick so that a page
load or `status` reads a number already known instead of touching /proc on every request.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes(statm: str = "/proc/self/statm") -> int | None:
    """This process's resident set in bytes (statm's second field), None where /proc is not there."""
    try:
        with open(statm, "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds() -> float:
    """User plus system CPU seconds of this process, all threads."""
    t = os.times()
    return t.user + t.system


class SelfCost:
    """The daemon's CPU share over the last tick (and since start) and its resident memory."""

    def __init__(
        self,
        cpu: Callable[[], float] = cpu_seconds,
        rss: Callable[[], int | None] = resident_bytes,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._cpu, self._rss, self._clock = cpu, rss, clock
        self._start = self._last = (clock(), cpu())

    def read(self) -> dict[str, Any]:
        """{cpu_share, cpu_share_since_start, cpu_seconds_total, resident_bytes, summary}; shares are of one CPU."""
        now, used = self._clock(), self._cpu()
        last_t, last_cpu = self._last
        self._last = (now, used)
        share = (used - last_cpu) / (now - last_t) if now > last_t else None
        since = (used - self._start[1]) / (now - self._start[0]) if now > self._start[0] else None
        rss = self._rss()
        return {
            "cpu_share": share,
            "cpu_share_since_start": since,
            "cpu_seconds_total": used,
            "resident_bytes": rss,
            "summary": summary(share, rss),
        }


def summary(share: float | None, rss: int | None) -> str:
    """'spark-watchd: 0.02 % of a CPU, 48 MiB' (either half left out when unknown)."""
    parts = []
    if share is not None:
        pct = share * 100
        parts.append(f"{pct:.2f} % of a CPU" if pct < 10 else f"{pct:.0f} % of a CPU")
    if rss is not None:
        parts.append(f"{rss / 2**20:.0f} MiB")
    return "spark-watchd: " + (", ".join(parts) if parts else "cost unknown")
