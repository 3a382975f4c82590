"""Host facts the operator commands read once (meminfo, container markers), under an injectable root."""

from __future__ import annotations

import os

from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sources.parsers import parse_meminfo

KIB = 1024
# The daemon's own G3 reserve (thresholds.os_reserve_bytes), so `plan` and the live budget agree.
DEFAULT_OS_RESERVE_GIB = Thresholds().os_reserve_bytes / 2**30


def read_meminfo(root: str = "/") -> dict[str, int]:
    """Parsed <root>/proc/meminfo; OSError or ValueError when unreadable or malformed."""
    with open(os.path.join(root, "proc", "meminfo"), encoding="ascii", errors="replace") as f:
        return parse_meminfo(f.read())


def training_budget_gib(meminfo: dict[str, int], reserve_gib: float = DEFAULT_OS_RESERVE_GIB) -> float:
    """GB (10^9 B) a training job may take today: MemAvailable minus the OS reserve, never below 0."""
    # NVML memory info is Not Supported on GB10; MemAvailable is the truth for the shared pool.
    return max(0.0, meminfo["MemAvailable"] * KIB / 2**30 - reserve_gib)
