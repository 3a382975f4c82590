"""The last two minutes at one second, on disk, while memory is thin (issue 31, item 4).

A wedge on GB10 freezes userspace seconds after the engine stalls (NVIDIA/open-gpu-kernel-modules#1358): at
the default 30 s tick up to a whole interval before the freeze is lost, ring and all. While G3 is warning or
worse, `FastRing` reads /proc/meminfo, /proc/pressure/memory and /proc/vmstat every second on its own thread
and appends each reading as a trace-v1 line (`v`, `ts`, `boot_id`, `uptime_s`, `meminfo`, `psi_memory`,
`vmstat`, `mem_available_min_kb`), flushed and fsynced, to `STATE_DIR/fast/fast-0.jsonl` and `fast-1.jsonl`,
which take turns a minute each: the last one to two minutes survive a freeze or a hard reset, and
`spark-watchd replay STATE_DIR/fast/fast-N.jsonl` shows them. Disarmed (the pool roomy) the thread stops and
nothing is read or written. Its cost: `python bench/fast_ring.py`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from spark_watchd.logs import get_logger
from spark_watchd.sample.files import StateFileError, check_regular, open_regular
from spark_watchd.sample.model import Sample
from spark_watchd.sample.trace import iter_trace_dicts, repair_torn_tail
from spark_watchd.sources.parsers import parse_meminfo, parse_psi, parse_vmstat

SEGMENTS = ("fast-0.jsonl", "fast-1.jsonl")
_VMSTAT_KEYS = ("pgmajfault", "pswpin", "pswpout", "oom_kill")
log = get_logger("postmortem")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _open(path: Path, how: int):
    """A segment for writing, never through a link (a state file: sample/files.py), private to the daemon."""
    return os.fdopen(open_regular(path, os.O_WRONLY | os.O_CREAT | how, 0o600), "ab")


class FastRing:
    """A daemon subscriber: armed while G3 is warning or critical, a 1 s reader writing the last minutes."""

    def __init__(
        self,
        directory,
        proc_root: str = "/proc",
        interval_s: float = 1.0,
        span_s: float = 120.0,
        clock=time.time,
    ):
        self.dir = Path(directory)
        self.proc_root = proc_root
        self.interval_s = interval_s
        self.segment_s = span_s / 2
        self.clock = clock
        self.bytes_written = 0
        self.readings = 0
        self._cur = 0
        self._seg_start: float | None = None
        self._fh = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        boot = _read(os.path.join(proc_root, "sys", "kernel", "random", "boot_id"))
        self.boot_id = boot.strip() if boot else None

    @property
    def armed(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __call__(self, snapshot) -> None:
        """Arm on a G3 warning or critical, disarm when it is ok again (each published snapshot)."""
        diag = getattr(snapshot, "diagnosis", None)
        g3 = diag.findings.get("G3") if diag is not None else None
        if g3 is not None and g3.severity in ("warning", "critical"):
            self.arm()
        elif g3 is not None and g3.severity == "ok":
            self.disarm()

    def arm(self) -> None:
        if self.armed:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="spark-watchd-fastring", daemon=True)
        self._thread.start()

    def disarm(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while True:
            try:
                self.read_once()
            except OSError:
                pass  # a full disk: the next second tries again; the daemon goes on
            except StateFileError as exc:  # a link or a FIFO planted as a segment: stop writing, say so once
                log.warning("fast ring stopped", error=str(exc))
                return
            if self._stop.wait(self.interval_s):
                return

    def line(self) -> dict | None:
        """One reading as a trace-v1 sample dict, or None when /proc/meminfo cannot be read."""
        root = self.proc_root
        mem = _read(os.path.join(root, "meminfo"))
        if mem is None:
            return None
        meminfo = parse_meminfo(mem)
        psi = _read(os.path.join(root, "pressure", "memory"))
        vm = _read(os.path.join(root, "vmstat"))
        up = _read(os.path.join(root, "uptime"))
        vmstat = parse_vmstat(vm) if vm else {}
        return {
            "v": 1,
            "ts": round(self.clock(), 3),
            "boot_id": self.boot_id,
            "uptime_s": float(up.split()[0]) if up and up.split() else None,
            "meminfo": meminfo,
            "psi_memory": parse_psi(psi) if psi else None,
            "vmstat": {k: vmstat[k] for k in _VMSTAT_KEYS if k in vmstat},
            "mem_available_min_kb": meminfo.get("MemAvailable"),
            "processes": [],
        }

    def read_once(self) -> None:
        """Read once and append the line durably (write, flush, fsync)."""
        obj = self.line()
        if obj is None:
            return
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        with self._lock:
            ts = obj["ts"]
            if self._fh is None:
                self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                path = self.dir / SEGMENTS[self._cur]
                check_regular(path)
                repair_torn_tail(path)
                self._fh = _open(path, os.O_APPEND)
                self._seg_start = ts
            elif ts - self._seg_start >= self.segment_s:
                self._fh.close()
                self._cur = 1 - self._cur
                self._fh = _open(self.dir / SEGMENTS[self._cur], os.O_TRUNC)
                self._seg_start = ts
            self._fh.write(data)
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self.bytes_written += len(data)
            self.readings += 1

    def samples(self) -> list[Sample]:
        """What the two segments hold, oldest first (the final seconds before a freeze, after it)."""
        return read_fast(self.dir)

    def close(self) -> None:
        self.disarm()
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


def read_fast(directory) -> list[Sample]:
    """The 1 s readings the two segments under `directory` hold, oldest first; [] when there are none or a
    segment is not a regular file (a link or FIFO planted there is never followed)."""
    out = []
    for name in SEGMENTS:
        path = Path(directory) / name
        try:
            if not path.exists():
                continue
            check_regular(path)
            out += [Sample.from_dict(o) for o in iter_trace_dicts(path, skip_bad=True)]
        except (OSError, StateFileError, ValueError) as exc:
            log.warning("fast ring not read", path=str(path), error=str(exc))
    return sorted(out, key=lambda s: s.ts)
