"""Helpers the bench scripts share (run them from anywhere: `python bench/NAME.py`)."""

from __future__ import annotations

import socket
import subprocess


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_sleepers(n: int) -> list[subprocess.Popen]:
    """N idle processes so the process scan has something to walk."""
    return [subprocess.Popen(["sleep", "600"], close_fds=True) for _ in range(n)]


def proc_status(pid: int, key: str) -> int:
    """An integer field of /proc/PID/status (VmRSS in KiB, Threads); 0 when absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def count_series(exposition: str) -> int:
    """Sample lines in a Prometheus exposition (not # HELP / # TYPE)."""
    return sum(1 for line in exposition.splitlines() if line and not line.startswith("#"))
