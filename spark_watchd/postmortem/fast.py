"""The last two minutes at one second, on disk, while memory is thin (issue 31, item 4).

A wedge on GB10 freezes userspace seconds after the engine stalls (NVIDIA/open-gpu-kernel-modules#1358): at
the default 30 s tick up to a whole interval before the freeze is lost, ring and all. While G3 is warning or
worse, `FastRing` reads /proc/meminfo, /proc/pressure/memory and /proc/vmstat every second on its own thread
and appends each reading as a trace-v1 line (`v`, `ts`, `boot_id`, `uptime_s`, `meminfo`, `psi_memory`,
`vmstat`, `mem_available_min_kb`), flushed and fsynced, to `STATE_DIR/fast/fast-0.jsonl` and `fast-1.jsonl`,
which take turns a minute each: the last one to two minutes survive a freeze or a hard reset, and
`spark-watchd replay STATE_DIR/fast/fast-N.jsonl` shows them. Disarmed (the pool roomy) the thread stops and
nothing is read or written. Its cost: `python bench/fast_ring.py`.

Each line also carries the servers' progress (`serving`: each scraped server's token counters and requests,
read that second by the serving source's own scraper, sources/serving_fast.py; a slow server keeps its last
reading and never holds the line more than PROGRESS_WAIT_S). The engine stall is judged on those reads by
the rule the tick uses (diagnose/stall.py): a new stall asks the daemon for a tick at once (`on_stall`), whose
sample carries the same reads (`serving_progress`), so the stall event, G3 critical on a thin pool and its
bundle come seconds after the counters stop, not a tick later.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from spark_watchd.diagnose.stall import StallWatch
from spark_watchd.logs import get_logger
from spark_watchd.sample.files import StateFileError, check_regular, open_regular
from spark_watchd.sample.model import Sample
from spark_watchd.sample.trace import iter_trace_dicts, repair_torn_tail
from spark_watchd.sources.parsers import parse_meminfo, parse_psi, parse_vmstat

SEGMENTS = ("fast-0.jsonl", "fast-1.jsonl")
# A server answers /metrics in milliseconds; one that takes longer keeps its last reading this second.
PROGRESS_WAIT_S = 0.25
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
        servers=None,
        thresholds=None,
        on_stall=None,
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
        # The serving source now (`servers()`: its `progress(wait_s)` and `progress_stop()`, or None), the
        # thresholds now (`thresholds()`), and what to call on a new engine stall (app.py: a tick at once).
        self.servers, self.thresholds, self.on_stall = servers, thresholds, on_stall
        self.stalls = StallWatch(None)
        self._said: str | None = None
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
        src = self.servers() if self.servers is not None else None
        if src is not None:
            src.progress_stop()
        self.stalls.forget()

    def _run(self) -> None:
        due = time.monotonic()
        while True:
            try:
                self.read_once()
            except OSError:
                pass  # a full disk: the next second tries again; the daemon goes on
            except StateFileError as exc:  # a link or a FIFO planted as a segment: stop writing, say so once
                log.warning("fast ring stopped", error=str(exc))
                return
            # Every interval_s from the first reading (a slow second is not carried into the next ones).
            due = max(due + self.interval_s, time.monotonic())
            if self._stop.wait(due - time.monotonic()):
                return

    def line(self) -> dict | None:
        """One reading as a trace-v1 sample dict (the servers' progress under `serving`), or None when
        /proc/meminfo cannot be read."""
        return self._line()[0]

    def _line(self) -> tuple[dict | None, tuple]:
        root = self.proc_root
        mem = _read(os.path.join(root, "meminfo"))
        if mem is None:
            return None, ()
        meminfo = parse_meminfo(mem)
        psi = _read(os.path.join(root, "pressure", "memory"))
        vm = _read(os.path.join(root, "vmstat"))
        up = _read(os.path.join(root, "uptime"))
        vmstat = parse_vmstat(vm) if vm else {}
        ts = round(self.clock(), 3)  # the memory's time; the servers' reads carry their own
        progress = self._progress()
        obj = {
            "v": 1,
            "ts": ts,
            "boot_id": self.boot_id,
            "uptime_s": float(up.split()[0]) if up and up.split() else None,
            "meminfo": meminfo,
            "psi_memory": parse_psi(psi) if psi else None,
            "vmstat": {k: vmstat[k] for k in _VMSTAT_KEYS if k in vmstat},
            "mem_available_min_kb": meminfo.get("MemAvailable"),
            "processes": [],
        }
        if progress:
            obj["serving"] = [r.to_dict() for r in progress]
        return obj, progress

    def _progress(self) -> tuple:
        """This second's reads of the servers' progress; () without servers, or when reading them failed."""
        try:
            src = self.servers() if self.servers is not None else None
            return tuple(src.progress(PROGRESS_WAIT_S)) if src is not None else ()
        except Exception as exc:  # a bug there costs the servers' part of this line, never the memory part
            self._say("fast ring: servers' progress not read", exc)
            return ()

    def read_once(self) -> None:
        """Read once and append the line durably (write, flush, fsync); then judge the servers' progress."""
        obj, progress = self._line()
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
        if progress and self.thresholds is not None:
            self._judge(progress)

    def _judge(self, progress: tuple) -> None:
        """The engine stall on this second's reads (the tick's rule); a new one asks for a tick at once."""
        try:
            self.stalls.th = self.thresholds()
            _, new = self.stalls.follow(progress)
            if new and self.on_stall is not None:
                log.warning(
                    "engine stall seen at 1 s: a tick now", stalls="; ".join(st.words() for st in new)
                )
                self.on_stall()
        except Exception as exc:  # the 1 s memory lines go on whatever happens here
            self._say("fast ring: stall not judged", exc)

    def _say(self, what: str, exc: Exception) -> None:
        """Log a failure once while it lasts the same (not every second)."""
        text = f"{what}: {type(exc).__name__}: {exc}"
        if text != self._said:
            self._said = text
            log.warning(what, error=text)

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
