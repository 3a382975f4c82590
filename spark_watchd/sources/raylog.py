"""Ray's memory monitor kills, from the tail of Ray's GCS log (`gcs_server.out` under `[sources] ray_log_dir`).

Bounded: the file is opened at its end at start (old kills are not this run's), then only new bytes are
read, at most MAX_READ a tick, and a line longer than MAX_LINE is dropped. Rotation (a new inode, as when
`session_latest` points to a new session) or truncation reads the new file from its start; a missing file
or directory (no Ray here, or hidden by the unit's PrivateTmp) is silence, never down. The file is written
by the Ray user, so a report is as trustworthy as Ray's own process; exits.py attributes it only to a pid
that left the workload table in the same window.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from spark_watchd.sample.kills import RAY_EXIT_MARK, RAY_MEMORY_MARK, KillReport, parse_ray_oom

LOG_NAME = "gcs_server.out"
MAX_READ = 256 << 10  # bytes read per tick: a backlog is caught up over several ticks
MAX_LINE = 16 << 10  # a line longer than this is dropped
MAX_REPORTS = 50  # kills kept per tick


class RayOomSource:
    """`oom_kills` (killer `ray`) from Ray's GCS log; never down."""

    name = "ray_oom"

    def __init__(self, log_dir: str, clock: Callable[[], float] = time.time):
        self.path = os.path.join(log_dir, LOG_NAME) if log_dir else ""
        self.clock = clock
        self._ino: tuple[int, int] | None = None  # (dev, inode) of the file being read
        self._pos = 0
        self._buf = b""
        self._pending: str | None = None  # an exit line waiting for its continuation
        self._started = False

    def _read_new(self) -> bytes:
        try:
            st = os.stat(self.path)
        except OSError:
            self._ino, self._buf, self._pending = None, b"", None
            self._started = True
            return b""
        ino = (st.st_dev, st.st_ino)
        if ino != self._ino or st.st_size < self._pos:
            at_start = not self._started
            self._ino, self._buf, self._pending = ino, b"", None
            self._pos = st.st_size if at_start else 0  # a file there at start: only what comes next
        self._started = True
        if st.st_size <= self._pos:
            return b""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._pos)
                data = f.read(MAX_READ)
        except OSError:
            return b""
        self._pos += len(data)
        return data

    def _lines(self, data: bytes) -> list[str]:
        parts = (self._buf + data).split(b"\n")
        self._buf = parts.pop()
        if len(self._buf) > MAX_LINE:
            self._buf = b""  # no newline in sight: junk, dropped
        return [p.decode("utf-8", "replace") for p in parts if len(p) <= MAX_LINE]

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        if not self.path:
            return {}
        reports: list[KillReport] = []
        now = self.clock()
        for line in self._lines(self._read_new()):
            if RAY_EXIT_MARK in line:
                self._pending = line
                line = ""  # its continuation may be on this line too
                if RAY_MEMORY_MARK not in self._pending:
                    continue
            elif self._pending is None or RAY_MEMORY_MARK not in line:
                self._pending = None
                continue
            report = parse_ray_oom(now, f"{self._pending}\n{line}" if line else self._pending)
            self._pending = None
            if report is not None and len(reports) < MAX_REPORTS:
                reports.append(report)
        if not reports:
            return {}
        return {"oom_kills": [*(partial.get("oom_kills") or ()), *reports]}

    def close(self) -> None:
        """Nothing held between ticks."""
