"""Fast memory watch: MemAvailable (and PSI some avg10) every 1-2 s between ticks, kept as a window minimum.

On GB10 MemAvailable has fallen from 29 to 2.5 GiB in 9 s: a 30 s sample alone
misses the dip that precedes an eviction. The thread keeps one descriptor per
file and re-reads it with pread (the kernel regenerates the text on each read),
so a reading costs one syscall and a substring search.
"""

from __future__ import annotations

import os
import threading

_AVAIL = b"MemAvailable:"
_SOME = b"some avg10="


def scan_mem_available_kb(data: bytes) -> int | None:
    """MemAvailable in kB from raw /proc/meminfo bytes, or None when absent."""
    i = data.find(_AVAIL)
    if i < 0:
        return None
    end = data.find(b"\n", i)
    parts = data[i + len(_AVAIL) : end if end >= 0 else None].split()
    try:
        value = int(parts[0])
    except (IndexError, ValueError):
        return None
    return value if 0 <= value < 2**64 else None  # a 400-digit value is a broken file, not a reading


def scan_psi_some_avg10(data: bytes) -> float | None:
    """`some avg10` from raw /proc/pressure/memory bytes, or None."""
    i = data.find(_SOME)
    if i < 0:
        return None
    j = i + len(_SOME)
    end = data.find(b" ", j)
    try:
        value = float(data[j : end if end >= 0 else None])
    except ValueError:
        return None
    return value if 0.0 <= value <= 100.0 else None  # also drops nan and inf


class _PreadFile:
    """One descriptor re-read from offset 0; reopened after an error, closed by close()."""

    def __init__(self, path: str):
        self.path = path
        self._fd: int | None = None

    def read(self) -> bytes | None:
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            return os.pread(self._fd, 8192, 0)
        except OSError:
            self.close()
            return None

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass


class MemWatch:
    """Background reader keeping min MemAvailable and max PSI some avg10 since the last take_window()."""

    def __init__(self, proc_root: str = "/proc", interval_s: float = 1.0):
        self.interval_s = interval_s
        self._meminfo = _PreadFile(os.path.join(proc_root, "meminfo"))
        self._psi = _PreadFile(os.path.join(proc_root, "pressure", "memory"))
        self._lock = threading.Lock()
        self._min_kb: int | None = None
        self._max_some10: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.readings = 0  # how many times the thread has read, for tests and the bench

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="spark-watchd-memwatch", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.read_once()

    def read_once(self) -> None:
        """Take one reading into the window (the thread calls this; tests may too)."""
        data = self._meminfo.read()
        avail = scan_mem_available_kb(data) if data else None
        psi = self._psi.read()
        some10 = scan_psi_some_avg10(psi) if psi else None
        self.observe(avail, some10)
        self.readings += 1

    def observe(self, avail_kb: int | None, some_avg10: float | None = None) -> None:
        """Fold one reading into the window."""
        with self._lock:
            if avail_kb is not None and (self._min_kb is None or avail_kb < self._min_kb):
                self._min_kb = avail_kb
            if some_avg10 is not None and (self._max_some10 is None or some_avg10 > self._max_some10):
                self._max_some10 = some_avg10

    def take_window(self) -> tuple[int | None, float | None]:
        """(min MemAvailable kB, max PSI some avg10) since the previous call; starts a new window."""
        with self._lock:
            out = (self._min_kb, self._max_some10)
            self._min_kb = None
            self._max_some10 = None
        return out

    def stop(self, timeout: float = 5.0) -> None:
        """Stop and join the thread, close the descriptors."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self._meminfo.close()
        self._psi.close()
