"""Processes read from a /proc tree under any root (`sources.proc_root`), with psutil's Process interface.

psutil always reads the real /proc (its PROCFS_PATH is process-wide), so a daemon in a
container pointed at the host's /proc (`/host/proc`) would see only its own processes.
This reader covers what the process scan asks: pid, create_time, name, cmdline, rss.
create_time is computed as psutil does (stat starttime / CLK_TCK + `btime` of ROOT/stat).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import nullcontext
from typing import NamedTuple

import psutil

from spark_watchd.sample.workloads import bound_cmdline

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_U64_MAX = 2**64 - 1
_FS_ENC, _FS_ERRS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
_COMM_LEN = 15  # TASK_COMM_LEN - 1: the kernel truncates comm to this
_ARGV_READ_MAX = 8 << 20  # the kernel's own bound on argv + environ is a quarter of an 8-32 MiB stack
_O_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_FIRST_READ = (
    16 << 10
)  # one read holds nearly every argv (ARGV_MAX_BYTES is 8 KiB): only a longer one reads on


def read_bytes(path: str, limit: int) -> bytes:
    """PATH's first LIMIT bytes by os.open/os.read: the scan reads two or three small files per new process, and
    an io.open() (a buffered reader, and a buffer of LIMIT bytes: 8 MiB for an argv) costs more than the read.

    A short first read is the end of the file (a /proc file answers a read whole up to its size, as a regular
    file does); a full one reads on, in growing chunks, to the end or LIMIT. OSError as open() raises it."""
    fd = os.open(path, _O_READ)
    try:
        first = min(limit, _FIRST_READ)
        data = os.read(fd, first)
        if len(data) < first or first == limit:
            return data
        parts, total = [data], len(data)
        while total < limit:
            data = os.read(fd, min(limit - total, total))
            if not data:
                break
            parts.append(data)
            total += len(data)
        return b"".join(parts)
    finally:
        os.close(fd)


class _Mem(NamedTuple):
    rss: int


def parse_stat(text: str) -> tuple[str, int, int, int]:
    """(comm, ppid, starttime ticks, rss pages) from /proc/PID/stat; ValueError when malformed.

    comm sits in parentheses and may itself hold spaces and ')' (a process can rename itself to
    anything), so the fields are split after the last ')'.
    """
    head, sep, tail = text.rpartition(")")
    if not sep or "(" not in head:
        raise ValueError("stat: no '(comm)'")
    comm = head.partition("(")[2]
    fields = tail.split(None, 22)  # the fields up to rss; the rest of the line stays one string
    if len(fields) < 22:
        raise ValueError(f"stat: {len(fields)} fields after comm, expected at least 22")
    ppid, start, rss = fields[1], fields[19], fields[21]
    values = []
    for v in (ppid, start, rss):
        if not v.isascii() or not v.lstrip("-").isdigit() or len(v) > 20:
            raise ValueError(f"stat: not a number: {v[:30]!r}")
        values.append(int(v))
    ppid_i, start_i, rss_i = values
    if not (0 <= ppid_i <= 2**31 and 0 <= start_i <= _U64_MAX and 0 <= rss_i * _PAGE <= _U64_MAX):
        raise ValueError("stat: value out of range")
    return comm, ppid_i, start_i, rss_i


def boot_time(root: str) -> float:
    """`btime` of ROOT/stat: the boot time create_time is counted from."""
    with open(os.path.join(root, "stat"), encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("btime "):
                value = int(line.split()[1])
                if not 0 <= value < 2**40:
                    raise ValueError(f"{root}/stat: impossible btime {value}")
                return float(value)
    raise ValueError(f"{root}/stat: no btime line")


class ProcEntry:
    """One ROOT/PID directory, read on demand; OSError/ValueError mean "gone" or "malformed"."""

    # Slots: the live table keeps one entry for every process on the machine, thousands of them.
    __slots__ = ("root", "pid", "_btime", "_dir", "_stat")

    def __init__(self, root: str, pid: int, btime: float):
        self.root = root
        self.pid = pid
        self._btime = btime
        self._dir = os.path.join(root, str(pid))
        self._stat: tuple[str, int, int, int] | None = None

    def _read_stat(self) -> tuple[str, int, int, int]:
        try:
            with open(os.path.join(self._dir, "stat"), encoding="utf-8", errors="replace") as f:
                self._stat = parse_stat(f.read(4096))
        except FileNotFoundError:
            raise psutil.NoSuchProcess(self.pid) from None
        return self._stat

    def _cached(self) -> tuple[str, int, int, int]:
        return self._stat if self._stat is not None else self._read_stat()

    def create_time(self) -> float:
        return round(self._btime + self._cached()[2] / _CLK_TCK, 2)

    def name(self) -> str:
        return self._cached()[0]

    def ppid(self) -> int:
        return self._cached()[1]

    def cmdline(self) -> list[str]:
        return list(read_argv(self.root, self.pid))

    def is_running(self) -> bool:
        return os.path.isdir(self._dir)

    def memory_info(self) -> _Mem:
        return _Mem(self._read_stat()[3] * _PAGE)  # fresh: rss is the one value read every tick

    def oneshot(self):
        return nullcontext()


class LiveEntry(ProcEntry):
    """A process of the live /proc, as psutil.Process sees it: the same create_time (unrounded: the boot time
    plus starttime / CLK_TCK, in psutil's order), a pid reused since it was first seen is not running."""

    __slots__ = ("raw_stat", "_start", "_ctime")

    def __init__(self, root: str, pid: int, btime: float):
        self.root = root
        self.pid = pid
        self._btime = btime
        self._dir = f"{root}/{pid}"
        try:
            self.raw_stat: bytes | None = read_bytes(
                f"{self._dir}/stat", 4096
            )  # its name read once (read_name)
        except FileNotFoundError:
            raise psutil.NoSuchProcess(pid) from None
        self._stat = parse_stat(self.raw_stat.decode("utf-8", "replace"))
        self._start = self._stat[2]
        self._ctime = float(self._start) / _CLK_TCK + btime

    def create_time(self) -> float:
        return self._ctime

    def _read_stat(self) -> tuple[str, int, int, int]:
        # As ProcEntry's, by os.read: what is read from it here (ppid, start, rss) is digits either way.
        try:
            self._stat = parse_stat(read_bytes(f"{self._dir}/stat", 4096).decode("utf-8", "replace"))
        except FileNotFoundError:
            raise psutil.NoSuchProcess(self.pid) from None
        return self._stat

    def is_running(self) -> bool:
        """Still there and still this process (the stat read fresh: rss and ppid come from it)."""
        try:
            return self._read_stat()[2] == self._start
        except psutil.NoSuchProcess:
            return False

    def memory_info(self) -> _Mem:
        """RSS as psutil reads it (statm's resident pages: stat's own count can lag it by a few pages)."""
        try:
            return _Mem(int(read_bytes(f"{self._dir}/statm", 512).split()[1]) * _PAGE)
        except FileNotFoundError:
            raise psutil.NoSuchProcess(self.pid) from None

    def status(self) -> str:
        """psutil's status for a zombie (the one state the scan asks about), else "running"."""
        try:
            data = read_bytes(f"{self._dir}/stat", 4096)
        except FileNotFoundError:
            raise psutil.NoSuchProcess(self.pid) from None
        return (
            psutil.STATUS_ZOMBIE if data[data.rfind(b")") + 2 : data.rfind(b")") + 3] == b"Z" else "running"
        )


class LiveTable:
    """The live /proc kept as a table between scans, as psutil.process_iter() keeps one: a pid listed both times
    is the same process. Each refresh sets the listing's names against the last one's (set arithmetic, in C),
    so a pid seen before costs no read and no Python work; a new one costs one stat read (psutil: stat and
    /proc/stat)."""

    def __init__(self, root: str = "/proc"):
        self.root = root
        self._known: dict[str, LiveEntry] = {}  # /proc name -> its entry
        self._not_pids: set[str] = set()  # names that are no process (self, sys, ...): the same few each scan
        self._dropped: list[LiveEntry] = []  # forgotten since the last refresh

    def refresh(self) -> tuple[list[LiveEntry], list[LiveEntry]]:
        """(entries new since the last refresh, entries gone or forgotten since). A pid whose stat cannot be
        read (gone meanwhile, malformed) is not kept: it is tried again next refresh."""
        names = set(os.listdir(self.root))
        known = self._known
        fresh = []
        for n in names - known.keys() - self._not_pids:
            if n.isdigit() and n.isascii():
                fresh.append(n)
            else:
                self._not_pids.add(n)
        btime = boot_time(self.root) if fresh else 0.0  # what can fail, before the table changes
        gone = [known.pop(n) for n in known.keys() - names]
        gone += self._dropped
        self._dropped = []
        new = []
        for n in fresh:
            try:
                e = LiveEntry(self.root, int(n), btime)
            except (psutil.NoSuchProcess, OSError, ValueError):
                continue
            known[n] = e
            new.append(e)
        return new, gone

    def get(self, pid: int) -> LiveEntry | None:
        """PID's entry as of the last refresh."""
        return self._known.get(str(pid))

    def __call__(self) -> Iterator[LiveEntry]:
        """Every process, refreshed, in pid order (the order /proc lists them in)."""
        self.refresh()
        return iter(sorted(self._known.values(), key=_pid_of))

    def forget(self, pid: int) -> None:
        """Read PID afresh next refresh (it was found reused); its entry is reported gone then."""
        e = self._known.pop(str(pid), None)
        if e is not None:
            self._dropped.append(e)


def _pid_of(e: ProcEntry) -> int:
    return e.pid


def read_cmdline(root: str, pid: int) -> bytes:
    """ROOT/PID/cmdline's bytes, read whole (a launcher's cap flag may follow a megabyte of padding);
    psutil.NoSuchProcess when gone, psutil.AccessDenied when unreadable."""
    try:
        return read_bytes(f"{root}/{pid}/cmdline", _ARGV_READ_MAX)
    except FileNotFoundError:
        raise psutil.NoSuchProcess(pid) from None
    except PermissionError:
        raise psutil.AccessDenied(pid) from None


def read_argv(root: str, pid: int) -> tuple[str, ...]:
    """ROOT/PID/cmdline as a bounded argv (sample/workloads.bound_cmdline): only what is kept becomes strings."""
    return bound_cmdline(read_cmdline(root, pid))


_PF_KTHREAD = 0x00200000  # include/linux/sched.h: the task is a kernel thread


def stat_state(stat: bytes) -> tuple[bytes, bool]:
    """(state letter, whether a kernel thread) from /proc/PID/stat bytes; ValueError when malformed.

    A kernel thread has no argv (its cmdline reads empty) until it exec()s a user program (a usermode helper),
    which clears the flag."""
    fields = stat[stat.rfind(b")") + 2 :].split(None, 7)
    if len(fields) < 7 or not fields[6].isdigit():
        raise ValueError("stat: no flags field")
    return fields[0], bool(int(fields[6]) & _PF_KTHREAD)


def read_name(root: str, pid: int, argv: tuple[str, ...], stat: bytes | None = None) -> str:
    """The process name exactly as psutil's name() gives it: comm from ROOT/PID/stat (or `stat`, its bytes
    just read), or argv[0]'s basename where the kernel truncated comm (15 characters) and argv[0] extends it.
    psutil.NoSuchProcess when gone."""
    data = stat
    if data is None:
        try:
            data = read_bytes(f"{root}/{pid}/stat", 4096)
        except (FileNotFoundError, ProcessLookupError):
            raise psutil.NoSuchProcess(pid) from None
    name = data[data.find(b"(") + 1 : data.rfind(b")")].decode(_FS_ENC, _FS_ERRS)
    if len(name) >= _COMM_LEN and argv:
        ext = os.path.basename(argv[0])
        if ext.startswith(name):
            name = ext
    return name


def iter_root(root: str) -> Iterator[ProcEntry]:
    """Every numeric directory of ROOT as a ProcEntry; OSError when ROOT (or its stat) cannot be read.

    A tree without process directories (a fixture host) has no processes, and needs no ROOT/stat."""
    pids = [int(n) for n in os.listdir(root) if n.isdigit() and n.isascii() and len(n) <= 10]
    if not pids:
        return
    btime = boot_time(root)
    for pid in pids:
        yield ProcEntry(root, pid, btime)
