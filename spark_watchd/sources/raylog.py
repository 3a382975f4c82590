"""Ray's memory monitor kills, from the tail of Ray's GCS log (`gcs_server.out` under `[sources] ray_log_dir`).

Bounded: the file is opened at its end at start (old kills are not this run's), then only new bytes are
read, at most MAX_READ a tick, and a line longer than MAX_LINE is dropped. Rotation (a new inode, as when
`session_latest` points to a new session) or truncation reads the new file from its start; a missing file
or directory (no Ray here, or hidden by the unit's PrivateTmp) is silence, never down.

A report counts only when no other user could have written it (filetrust.py): the file and every directory
above it belong to root or to the daemon's own user (whose files are as much its word as its own state: a
daemon a user runs for themselves, beside their own Ray), or to the killed process's own user (its uid
remembered from /proc while it was in the workload table), and none is writable by group or others. Another user's log (they created /tmp/ray
first) is read past, its kills dropped, and why said once in the log per change. exits.py then attributes a
report only to a pid that left the workload table in the same window.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Mapping
from typing import Any

from spark_watchd.logs import get_logger
from spark_watchd.sample.kills import RAY_EXIT_MARK, RAY_MEMORY_MARK, KillReport, parse_ray_oom
from spark_watchd.sources.filetrust import Trust, file_trust

LOG_NAME = "gcs_server.out"
MAX_READ = 256 << 10  # bytes read per tick: a backlog is caught up over several ticks
MAX_LINE = 16 << 10  # a line longer than this is dropped
MAX_REPORTS = 50  # kills kept per tick
UID_MEMORY_TICKS = 20  # a process's uid is remembered this many ticks after it left the table


class RayOomSource:
    """`oom_kills` (killer `ray`) from Ray's GCS log; never down."""

    name = "ray_oom"

    def __init__(
        self,
        log_dir: str,
        clock: Callable[[], float] = time.time,
        proc_root: str = "/proc",
        own_uid: int | None = None,
    ):
        self.path = os.path.join(log_dir, LOG_NAME) if log_dir else ""
        self.clock = clock
        self.proc_root = proc_root
        self.own_uid = os.geteuid() if own_uid is None else own_uid  # the daemon's own user
        self._uids: dict[int, tuple[int, int, float | None]] = {}  # pid -> (uid, tick last seen, create_time)
        self._tick = 0
        self._trust: Trust | None = None  # the file's, as checked when it was last read
        self._said: dict[str, str | None] = {"file": None, "victim": None}  # what was logged, per concern
        self.log = get_logger("ray_oom")
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
            self._trust = file_trust(self.path)
            self._say("file", self._trust.reason)
            if self._trust.ident is None:  # a link, a FIFO, a directory: not read at all
                return b""
            # Never through a link, never blocked on a FIFO; the file read is the one whose owners were checked.
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return b""
        with os.fdopen(fd, "rb") as f:
            fst = os.fstat(fd)
            if (fst.st_dev, fst.st_ino) != self._trust.ident or not stat.S_ISREG(fst.st_mode):
                self._trust = Trust(None, f"{self.path} changed while it was checked")
                return b""
            f.seek(self._pos)
            data = f.read(MAX_READ)
        self._pos += len(data)
        return data

    def _say(self, concern: str, why: str | None) -> None:
        """Log a distrust once when it starts or changes, and once when it clears."""
        if why == self._said[concern]:
            return
        if why is not None:
            self.log.warning("Ray memory-monitor kills ignored", reason=why, path=self.path)
        else:
            self.log.info("Ray memory-monitor kills trusted again", path=self.path)
        self._said[concern] = why

    def _remember_uids(self, processes) -> None:
        """The uid of each workload process, while it runs (a report comes after its victim is gone)."""
        self._tick += 1
        for p in processes or ():
            pid, born = getattr(p, "pid", None), getattr(p, "create_time", None)
            if not isinstance(pid, int):
                continue
            known = self._uids.get(pid)
            if known is None or known[2] != born:  # a reused pid is another process: its own uid
                try:
                    known = (os.stat(os.path.join(self.proc_root, str(pid))).st_uid, self._tick, born)
                except OSError:
                    continue
            self._uids[pid] = (known[0], self._tick, born)
        if len(self._uids) > 4096 or self._tick % UID_MEMORY_TICKS == 0:
            self._uids = {k: v for k, v in self._uids.items() if self._tick - v[1] <= UID_MEMORY_TICKS}

    def _counts(self, report: KillReport) -> bool:
        """Whether the file's owners may speak of this victim: root's or the daemon's own user's file of anyone,
        another user's of their own processes."""
        trust = self._trust
        if trust is None or trust.uid is None:
            return False
        if trust.uid in (0, self.own_uid):
            return True
        victim = self._uids.get(report.pid) if report.pid is not None else None
        if victim is not None and victim[0] == trust.uid:
            self._say("victim", None)
            return True
        self._say(
            "victim",
            f"{self.path} belongs to uid {trust.uid}: its reports count only for that user's own processes, "
            "and one named another user's (or one never seen)",
        )
        return False

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
        self._remember_uids(partial.get("processes"))
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
            if report is not None and len(reports) < MAX_REPORTS and self._counts(report):
                reports.append(report)
        if not reports:
            return {}
        return {"oom_kills": [*(partial.get("oom_kills") or ()), *reports]}

    def close(self) -> None:
        """Nothing held between ticks."""
