"""Host facts the operator commands read once (meminfo, container markers), under an injectable root."""

from __future__ import annotations

import os

KIB = 1024
# What the OS, desktop and daemons keep for themselves on a Spark; training gets MemAvailable minus this.
DEFAULT_OS_RESERVE_GB = 8.0

try:  # the sources area's parser, once merged; same contract (kB values, ValueError naming the line)
    from spark_watchd.sources.procfs import parse_meminfo
except ImportError:  # pragma: no cover - until the sources branch is on main

    def parse_meminfo(text: str) -> dict[str, int]:
        """/proc/meminfo as {key: int} (kB), ValueError naming a malformed line."""
        out: dict[str, int] = {}
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            key, sep, rest = line.partition(":")
            parts = rest.split()
            if not sep or not parts or not parts[0].isdigit():
                raise ValueError(f"meminfo line {lineno}: expected 'Key: value [kB]', got {line[:60]!r}")
            out[key.strip()] = int(parts[0])
        if "MemTotal" not in out:
            raise ValueError("meminfo: no MemTotal line")
        return out


def read_meminfo(root: str = "/") -> dict[str, int]:
    """Parsed <root>/proc/meminfo; OSError or ValueError when unreadable or malformed."""
    with open(os.path.join(root, "proc", "meminfo"), encoding="ascii", errors="replace") as f:
        return parse_meminfo(f.read())


def training_budget_gb(meminfo: dict[str, int], reserve_gb: float = DEFAULT_OS_RESERVE_GB) -> float:
    """GB (10^9 B) a training job may take today: MemAvailable minus the OS reserve, never below 0."""
    # NVML memory info is Not Supported on GB10; MemAvailable is the truth for the shared pool.
    return max(0.0, meminfo["MemAvailable"] * KIB / 1e9 - reserve_gb)
