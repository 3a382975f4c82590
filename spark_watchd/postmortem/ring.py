"""The last minutes of samples on disk, bounded, surviving a kill -9, a wedge and a power cut.

Two trace-v1 segment files take turns: samples append to the current one (one line, written, then fsynced,
so a power cut loses at most the line in flight and a torn tail is cut on reopen); once it spans the whole
ring (or passes its byte cap) the other one is truncated and becomes current. The pair always holds at least
the last `span_s` (unless a segment hit its byte cap) and at most twice that; `samples()` returns the last
`span_s`. Each sample carries the fast memory watch's minimum for its interval (`mem_available_min_kb`), so
the ring keeps the dips between ticks too.

The ring is a state file like the others (sample/files.py): its directory and segments are never reached
through a symbolic link, a FIFO or a device there is refused (StateFileError: `run` exits 78 naming the path),
a line longer than MAX_LINE is skipped without being held in memory, and an append that fails part-way (a
full disk) is cut back so the next sample starts on a clean line. Argv secrets are redacted before a sample
is written (sample/redact.py).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.files import StateFileError, open_regular
from spark_watchd.sample.model import Sample
from spark_watchd.sample.redact import redact_sample_dict
from spark_watchd.sample.trace import TraceError, parse_line, parse_sample

SEGMENTS = ("ring-0.jsonl", "ring-1.jsonl")
# A GB10 sample with a few hundred processes is tens of KiB; a line past this was not written by the ring.
MAX_LINE = 4 << 20
_CHUNK = 1 << 20


def state_subdir(directory: Path, mode: int = 0o755) -> Path:
    """A directory of the state dir, created; StateFileError (exit 78 at start) when a link or anything but
    a directory is there."""
    try:
        directory.mkdir(mode=mode, parents=True)
    except FileExistsError:
        pass
    st = os.lstat(directory)
    if stat.S_ISLNK(st.st_mode):
        raise StateFileError(f"state directory {directory} is a symbolic link: refusing to follow it")
    if not stat.S_ISDIR(st.st_mode):
        raise StateFileError(f"state directory {directory} is not a directory")
    return directory


def segment_lines(path: Path, skipped: list[int] | None = None) -> Iterator[bytes]:
    """The lines of a segment (a torn last line included), each at most MAX_LINE bytes; longer ones are
    skipped a chunk at a time (counted in `skipped[0]`). Nothing when it is absent; StateFileError for a link
    or anything but a regular file."""
    fd = open_regular(path)
    if fd is None:
        return
    with os.fdopen(fd, "rb") as fh:
        while line := fh.readline(MAX_LINE + 1):
            if len(line) > MAX_LINE and not line.endswith(b"\n"):
                while (rest := fh.readline(_CHUNK)) and not rest.endswith(b"\n"):
                    pass
                if skipped is not None:
                    skipped[0] += 1
                continue
            if not line.isspace():
                yield line


def _span(path: Path) -> tuple[float | None, float | None]:
    """(first ts, last ts) of a segment file, None where it is empty or unreadable."""
    first = last = None
    for raw in segment_lines(path):
        try:
            ts = float(parse_line(raw.decode("utf-8", "replace"))["ts"])
        except (TraceError, ValueError, TypeError):
            continue
        first = ts if first is None else first
        last = ts
    return first, last


def _cut_torn_tail(fd: int) -> None:
    """Cut an unterminated last line (a writer killed or a disk filled mid-write) so appends start clean."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    pos, start = size, 0
    while pos > 0:  # a chunk at a time: a planted 200 MB tail is never held whole
        step = min(65536, pos)
        pos -= step
        nl = os.pread(fd, step, pos).rfind(b"\n")
        if nl >= 0:
            start = pos + nl + 1
            break
    os.ftruncate(fd, start)
    os.fsync(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class SampleRing:
    """Appends each sample to the on-disk ring; `samples()` reads the last span_s back (oldest first)."""

    def __init__(
        self, directory: str | os.PathLike, span_s: float = 1800.0, max_segment_bytes: int = 8 << 20
    ):
        self.dir = state_subdir(Path(directory))
        self.span_s = span_s
        self.max_segment_bytes = max_segment_bytes
        self.bytes_written = 0  # for the bench: what this ring put on disk
        self.lines_skipped = 0  # over-long lines passed over by samples()
        spans = [_span(self.dir / name) for name in SEGMENTS]  # StateFileError here: exit 78 at start
        # The current segment is the one written last; the other holds the span before it.
        self.cur = 0 if (spans[0][1] or 0) >= (spans[1][1] or 0) else 1
        self.first_ts = spans[self.cur][0]
        self._fd: int | None = None
        self._size = 0
        self._lock = threading.Lock()  # one append at a time, whichever thread forces a sample to disk

    @property
    def path(self) -> Path:
        return self.dir / SEGMENTS[self.cur]

    def _open(self, index: int, truncate: bool) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | (os.O_TRUNC if truncate else 0)
        fd = open_regular(self.dir / SEGMENTS[index], flags, 0o600)
        assert fd is not None
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
                os.fchmod(fd, 0o600)  # argv lives here: a segment an older release made 0644 turns private
            _cut_torn_tail(fd)
            self._size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        self._fd, self.cur = fd, index

    def append(self, sample: Sample) -> None:
        """Write one sample durably (write, fsync). OSError (a full disk) or StateFileError (a link or FIFO
        planted under a segment's name) leaves the segment as it was before the call."""
        line = (dumps_strict(redact_sample_dict(sample.to_dict()), separators=(",", ":")) + "\n").encode()
        with self._lock:
            self._append(sample.ts, line)

    def _append(self, ts: float, line: bytes) -> None:
        if self._fd is None:
            self._open(self.cur, truncate=False)
        full = self._size + len(line) > self.max_segment_bytes
        if self.first_ts is not None and (ts - self.first_ts >= self.span_s or full):
            self._open(1 - self.cur, truncate=True)
            self.first_ts = None
        fd = self._fd
        try:
            _write_all(fd, line)
            os.fsync(fd)
        except OSError:
            try:  # a half line would swallow the next sample: cut back to the last whole one
                os.ftruncate(fd, self._size)
            except OSError:
                os.close(fd)
                self._fd = None  # reopened next time, its torn tail cut then
            raise
        if self.first_ts is None:
            self.first_ts = ts
        self._size += len(line)
        self.bytes_written += len(line)

    def samples(self) -> list[Sample]:
        """The ring's samples of the last span_s (by the newest sample's time), oldest first. StateFileError
        when a segment is a link or not a regular file."""
        out: list[Sample] = []
        skipped = [0]
        for name in SEGMENTS:
            try:
                for raw in segment_lines(self.dir / name, skipped):
                    try:
                        out.append(parse_sample(raw.decode("utf-8", "replace")))
                    except (ValueError, TypeError, KeyError, AttributeError):
                        continue  # a line this release cannot read: the rest still can
            except OSError:  # unreadable: the other segment still is (StateFileError is no OSError)
                continue
        self.lines_skipped += skipped[0]
        out.sort(key=lambda s: s.ts)
        if out:
            newest = out[-1].ts
            out = [s for s in out if s.ts >= newest - self.span_s]
        return out

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
