"""The process scan: GPU-resident processes (NVML pids) and known workloads (vLLM, Ollama, trainers...).

Cheap at thousands of processes: the live /proc is walked by `procfs.LiveTable`, which (as
`psutil.process_iter()` does) keeps its own table and reads nothing for pids it already knows, and reads
one stat file for a new one where psutil reads two; values are psutil's (create_time, name, rss, ppid).
Name and argv are read once per (pid, create_time) and the classification cached; only the few relevant
processes are read each tick (one stat read: rss, ppid, and the start time again to catch a reused pid).
Processes that vanish or deny access mid-scan are skipped.
"""

from __future__ import annotations

import contextlib
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
    classify,
    is_ray_runtime,
    is_training_script,
)
from spark_watchd.sources.procfs import LiveTable, iter_root, read_argv, read_name

# How many scans a new process's argv is read again before the cached answer is trusted.
SETTLE_SCANS = 3
_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)
# One /proc/PID entry psutil or our reader cannot make sense of: skip that entry, never the whole list.
_MALFORMED = (OSError, ValueError, IndexError, TypeError, OverflowError, psutil.Error)


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
                same = read_argv(root, proc.pid) == hit[1]
            except psutil.AccessDenied:
                same = hit[1] == ()
            if same:
                entry = self._cache[key] = (*hit[:3], hit[3] + 1)
                return entry
        # psutil's oneshot caches its own reads: the direct path makes none (status() only for a zombie).
        with contextlib.nullcontext() if self._direct else proc.oneshot():
            try:  # bounded as it is read: another user's 1.9 MB argv is not kept whole (issue 20 §2)
                argv = read_argv(root, proc.pid)
                zombie = not argv and hasattr(proc, "status") and proc.status() == psutil.STATUS_ZOMBIE
                if zombie:  # as psutil's own cmdline() says
                    raise psutil.ZombieProcess(proc.pid)
            except psutil.AccessDenied:
                argv = ()
            if self._direct:
                # The stat bytes read when the process was first seen hold its name, unless an exec since.
                raw = getattr(proc, "raw_stat", None)
                if raw is not None:
                    proc.raw_stat = None  # read once: not kept for every process on the machine
                name = read_name(root, proc.pid, argv, raw if hit is None else None)
            else:
                try:
                    name = proc.name()
                except psutil.AccessDenied:
                    name = ""
        kind = classify(argv, name, gpu_resident=False)
        # A `python train.py` is kept before it holds GPU memory too: its model load is a G3 transient.
        # Ray's raylet and workers are kept: they chain a Ray executor's memory to its launcher (issue 18).
        if kind == "other" and (is_training_script(argv) or is_ray_runtime(argv, name)):
            kind = "candidate"
        entry = (name, argv, kind, (hit[3] if hit else 0) + 1)
        self._cache[key] = entry
        return entry

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        gpu: Mapping[int, int | None] = partial.get("_gpu_processes") or {}
        seen: set[tuple[int, float]] = set()
        out: list[ProcessInfo] = []
        cache = self._cache
        for proc in self._iter():
            try:
                key = (proc.pid, proc.create_time())
                seen.add(key)
                resident = proc.pid in gpu
                hit = cache.get(key)
                if hit is not None and not resident and hit[3] >= SETTLE_SCANS:
                    if hit[2] == "other":  # the steady case, most of the machine: nothing to read
                        continue
                    name, argv, kind, _ = hit
                else:
                    name, argv, kind, _ = self._identify(proc, key, resident)
                    if not resident and kind == "other":
                        continue
                # A pid reused since it was first seen: skip now, read afresh next scan.
                if not proc.is_running():
                    getattr(self._iter, "forget", lambda pid: None)(proc.pid)
                    continue
                rss = proc.memory_info().rss
                # Read each tick: a child whose launcher exits is re-parented (to init or a subreaper).
                ppid = proc.ppid()
            except _GONE:
                continue
            except _MALFORMED:
                self.malformed += 1
                continue
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
        for key in self._cache.keys() - seen:
            del self._cache[key]
        return {"processes": _within_sample_budget(out)}

    def close(self) -> None:
        self._cache.clear()


def _within_sample_budget(out: list[ProcessInfo]) -> tuple[ProcessInfo, ...]:
    """The processes, their argv within SAMPLE_ARGV_MAX_BYTES together: past it each keeps its head and flags."""
    total = 0
    for i, p in enumerate(out):
        total += sum(map(len, p.cmdline))
        if total > SAMPLE_ARGV_MAX_BYTES:  # only when the host runs that much argv: no churn otherwise
            out[i] = dataclasses.replace(p, cmdline=bound_argv(p.cmdline, ARGV_HEAD_BYTES))
    return tuple(out)
