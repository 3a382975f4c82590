"""The process scan: GPU-resident processes (NVML pids) and known workloads (vLLM, Ollama, trainers...).

Cheap at thousands of processes: the live /proc is kept by `procfs.LiveTable`, which (as
`psutil.process_iter()` does) keeps its own table: each scan sets the listing against the last one, reads
nothing for pids it already knows and one stat file for a new one where psutil reads two; values are
psutil's (create_time, name, rss, ppid). Name and argv are read once per (pid, create_time) and the
classification cached; a scan visits only the processes that need it (new, settling, workloads, GPU-resident:
one stat read each, rss, ppid, and the start time again to catch a reused pid), the rest of the machine costs
no Python work. A new process costs its stat and cmdline reads (os.read, no buffered file); a kernel thread
its stat alone (its argv is empty); its settling re-reads compare cmdline bytes; its kind is cached by
(argv, name). Processes that vanish or deny access mid-scan are skipped.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import psutil

from spark_watchd.sample.model import ProcessInfo
from spark_watchd.sample.workloads import (
    ARGV_HEAD_BYTES,
    SAMPLE_ARGV_MAX_BYTES,
    bound_argv,
    bound_cmdline,
    classify,
    is_ray_runtime,
    is_training_script,
)
from spark_watchd.sources.procfs import LiveTable, iter_root, read_argv, read_cmdline, read_name, stat_state

# How many scans a new process's argv is read again before the cached answer is trusted.
SETTLE_SCANS = 3
_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)
# One /proc/PID entry psutil or our reader cannot make sense of: skip that entry, never the whole list.
_MALFORMED = (OSError, ValueError, IndexError, TypeError, OverflowError, psutil.Error)
# A settling process's cmdline bytes are kept (up to this many) so its re-read compares bytes, not argv.
_SETTLE_RAW_MAX = 4096


@functools.lru_cache(maxsize=256)  # bounded: argv is at most 8 KiB, so at most 2 MiB, and mostly far less
def scan_kind(argv: tuple[str, ...], name: str) -> str:
    """The kind the scan files a process under when NVML does not list it: classify()'s, or "candidate".

    Cached by (argv, name): it is a pure function of them, and new processes come in crowds of one command
    line (a pool's workers, a build's compilers, a test run), so the first of them pays for the rest.
    A `python train.py` is kept before it holds GPU memory too: its model load is a G3 transient.
    Ray's raylet and workers are kept: they chain a Ray executor's memory to its launcher (issue 18)."""
    kind = classify(argv, name, gpu_resident=False)
    if kind == "other" and (is_training_script(argv) or is_ray_runtime(argv, name)):
        kind = "candidate"
    return kind


class ProcessSource:
    """`processes`: ProcessInfo for every GPU-resident or workload-pattern process."""

    name = "processes"

    def __init__(
        self, process_iter: Callable[[], Iterable[psutil.Process]] | None = None, proc_root: str = "/proc"
    ):
        # A new process's name is read straight from /proc/PID/stat (as psutil reads it) where psutil walks the
        # real /proc: psutil's oneshot and wrappers cost as much as the read itself.
        self._direct = False
        if process_iter is None:
            # psutil reads only the real /proc; any other root (a container's /host/proc) is read directly.
            real = os.path.realpath(proc_root) == "/proc"
            process_iter = LiveTable(proc_root) if real else functools.partial(iter_root, proc_root)
            self._direct = real
        self._iter = process_iter
        self.malformed = 0  # /proc/PID entries skipped because they could not be parsed
        # (pid, create_time) -> (name, argv, kind when not GPU-resident or "candidate", reads so far)
        self._cache: dict[tuple[int, float], tuple[str, tuple[str, ...], str, int]] = {}
        self.cmdline_reads = 0  # argv reads so far: stays flat on a quiet machine
        # (pid, create_time) -> its cmdline bytes as last read, while it settles (live /proc only): an unchanged
        # re-read is then a bytes comparison. Dropped once settled, or gone.
        self._settle_raw: dict[tuple[int, float], bytes] = {}
        # pid -> live entry, for the processes the next scan must visit (live /proc only): new, settling,
        # workloads. A settled process that is no workload leaves it; it costs no Python work until gone.
        self._awake: dict[int, Any] = {}

    def _identify(
        self, proc: psutil.Process, key: tuple[int, float], resident: bool
    ) -> tuple[str, tuple[str, ...], str, int]:
        hit = self._cache.get(key)
        # exec() keeps pid and create_time but changes argv (a fresh fork, `exec vllm serve` in an
        # entrypoint script): re-read a process on its first scans, and GPU-resident ones always.
        if hit is not None and hit[3] >= SETTLE_SCANS and not resident:
            return hit
        self.cmdline_reads += 1
        root = getattr(proc, "root", "/proc")
        if self._direct and hit is not None and not resident:
            # A settling re-read: argv alone tells an exec() (or a retitle) apart; unchanged, so is the answer.
            try:
                raw = read_cmdline(root, proc.pid)
                same = raw == self._settle_raw.get(key) or bound_cmdline(raw) == hit[1]
            except psutil.AccessDenied:
                same = hit[1] == ()
            if same:
                entry = self._cache[key] = (*hit[:3], hit[3] + 1)
                if entry[3] >= SETTLE_SCANS:
                    self._settle_raw.pop(key, None)
                return entry
        reads = (hit[3] if hit else 0) + 1
        if self._direct:
            name, argv, raw = _read_direct(proc, root, first=hit is None)
            if raw is not None and len(raw) <= _SETTLE_RAW_MAX and reads < SETTLE_SCANS and not resident:
                self._settle_raw[key] = raw  # for its next settling re-read
            else:
                self._settle_raw.pop(key, None)
        else:
            with proc.oneshot():  # psutil's oneshot caches its own reads
                name, argv = _read_psutil(proc, root)
        entry = (name, argv, scan_kind(argv, name), reads)
        self._cache[key] = entry
        return entry

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        gpu: Mapping[int, int | None] = partial.get("_gpu_processes") or {}
        out = (
            self._collect_live(self._iter, gpu)
            if isinstance(self._iter, LiveTable)
            else self._collect_all(gpu)
        )
        return {"processes": _within_sample_budget(out)}

    def _collect_all(self, gpu: Mapping[int, int | None]) -> list[ProcessInfo]:
        """Any process_iter: every process listed is visited, and the cache kept to the ones listed."""
        seen: set[tuple[int, float]] = set()
        out: list[ProcessInfo] = []
        for proc in self._iter():
            try:
                key = (proc.pid, proc.create_time())
            except _GONE:
                continue
            except _MALFORMED:
                self.malformed += 1
                continue
            seen.add(key)
            self._visit(proc, key, gpu, out)
        for key in self._cache.keys() - seen:
            del self._cache[key]
        for key in self._settle_raw.keys() - seen:
            del self._settle_raw[key]
        return out

    def _collect_live(self, table: LiveTable, gpu: Mapping[int, int | None]) -> list[ProcessInfo]:
        """The live table: only the processes that need reading are visited (new, settling, workloads and
        GPU-resident ones), in pid order as /proc lists them; a settled process that is no workload costs
        nothing until it is gone."""
        new, gone = table.refresh()
        awake = self._awake
        for e in gone:
            if awake.get(e.pid) is e:
                del awake[e.pid]
            key = (e.pid, e.create_time())
            self._cache.pop(key, None)
            self._settle_raw.pop(key, None)
        for e in new:
            awake[e.pid] = e
        visit = dict(awake)
        for pid in gpu:
            e = table.get(pid)
            if e is not None:
                visit[pid] = e
        out: list[ProcessInfo] = []
        cache = self._cache
        for pid in sorted(visit):
            e = visit[pid]
            key = (pid, e.create_time())
            self._visit(e, key, gpu, out)
            hit = cache.get(key)
            if hit is not None and hit[3] >= SETTLE_SCANS and hit[2] == "other":
                if awake.get(pid) is e:
                    del awake[pid]  # settled, no workload: visited again only while NVML lists it
            elif table.get(pid) is e:  # (not found reused): e.g. an exec() seen while GPU-resident
                awake[pid] = e
        return out

    def _visit(self, proc: Any, key: tuple[int, float], gpu: Mapping[int, int | None], out: list) -> None:
        """Read PROC as far as it needs reading; its ProcessInfo appended to OUT when it is kept."""
        try:
            resident = proc.pid in gpu
            hit = self._cache.get(key)
            if hit is not None and not resident and hit[3] >= SETTLE_SCANS:
                if hit[2] == "other":  # the steady case, most of the machine: nothing to read
                    return
                name, argv, kind, _ = hit
            else:
                name, argv, kind, _ = self._identify(proc, key, resident)
                if not resident and kind == "other":
                    return
            # A pid reused since it was first seen: skip now, read afresh next scan.
            if not proc.is_running():
                getattr(self._iter, "forget", lambda pid: None)(proc.pid)
                return
            rss = proc.memory_info().rss
            # Read each tick: a child whose launcher exits is re-parented (to init or a subreaper).
            ppid = proc.ppid()
        except _GONE:
            return
        except _MALFORMED:
            self.malformed += 1
            return
        out.append(
            ProcessInfo(
                pid=proc.pid,
                create_time=key[1],
                name=name,
                cmdline=argv,
                rss_bytes=int(rss),
                gpu_mem_bytes=gpu.get(proc.pid) if resident else None,
                gpu_resident=resident,
                ppid=ppid,
            )
        )

    def close(self) -> None:
        self._cache.clear()
        self._settle_raw.clear()
        self._awake.clear()
        if isinstance(self._iter, LiveTable):
            self._iter = LiveTable(self._iter.root)  # a scan after close() reads every process again


def _read_direct(proc: Any, root: str, first: bool) -> tuple[str, tuple[str, ...], bytes | None]:
    """(name, bounded argv, cmdline bytes or None) of a live /proc entry, read from /proc/PID as psutil reads them
    (psutil's oneshot and wrappers cost as much as the reads; status() only for an empty argv)."""
    # The stat bytes read when the process was first seen hold its name and flags, unless an exec since.
    stat = proc.raw_stat if first else None
    state, kthread = stat_state(stat) if stat is not None else (b"", False)
    raw = None
    if kthread:  # a kernel thread's cmdline reads empty: only whether it is a zombie is asked, as psutil does
        if state == b"Z":
            raise psutil.ZombieProcess(proc.pid)
        argv: tuple[str, ...] = ()
    else:
        try:  # bounded as it is read: another user's 1.9 MB argv is not kept whole (issue 20 §2)
            raw = read_cmdline(root, proc.pid)
            argv = bound_cmdline(raw)
            if not argv and proc.status() == psutil.STATUS_ZOMBIE:  # as psutil's own cmdline() says
                raise psutil.ZombieProcess(proc.pid)
        except psutil.AccessDenied:
            argv = ()
    name = read_name(root, proc.pid, argv, stat)
    proc.raw_stat = None  # read once: not kept for every process on the machine
    return name, argv, raw


def _read_psutil(proc: psutil.Process, root: str) -> tuple[str, tuple[str, ...]]:
    """(name, bounded argv) of a psutil.Process or a ProcEntry (any other /proc root)."""
    try:  # bounded as it is read: another user's 1.9 MB argv is not kept whole (issue 20 §2)
        argv = read_argv(root, proc.pid)
        if not argv and hasattr(proc, "status") and proc.status() == psutil.STATUS_ZOMBIE:
            raise psutil.ZombieProcess(proc.pid)  # as psutil's own cmdline() says
    except psutil.AccessDenied:
        argv = ()
    try:
        name = proc.name()
    except psutil.AccessDenied:
        name = ""
    return name, argv


def _within_sample_budget(out: list[ProcessInfo]) -> tuple[ProcessInfo, ...]:
    """The processes, their argv within SAMPLE_ARGV_MAX_BYTES together: past it each keeps its head and flags."""
    total = 0
    for i, p in enumerate(out):
        total += sum(map(len, p.cmdline))
        if total > SAMPLE_ARGV_MAX_BYTES:  # only when the host runs that much argv: no churn otherwise
            out[i] = dataclasses.replace(p, cmdline=bound_argv(p.cmdline, ARGV_HEAD_BYTES))
    return tuple(out)
