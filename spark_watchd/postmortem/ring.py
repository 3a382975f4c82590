"""The last minutes of samples on disk, bounded, surviving a kill -9, a wedge and a power cut.

Two trace-v1 segment files take turns: samples append to the current one (one line, flushed and fsynced, so
a power cut loses at most the line in flight and a torn tail is cut on reopen); once it spans the whole ring
(or passes its byte cap) the other one is truncated and becomes current. The pair always holds at least the
last `span_s` (unless a segment hit its byte cap) and at most twice that; `samples()` returns the last `span_s`.
Each sample carries the fast memory watch's minimum for its interval (`mem_available_min_kb`), so the ring
keeps the dips between ticks too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from spark_watchd.sample.model import Sample
from spark_watchd.sample.trace import TraceError, iter_trace_dicts, repair_torn_tail

SEGMENTS = ("ring-0.jsonl", "ring-1.jsonl")


def _span(path: Path) -> tuple[float | None, float | None]:
    """(first ts, last ts) of a segment file, None where it is empty or unreadable."""
    first = last = None
    try:
        for obj in iter_trace_dicts(path, skip_bad=True):
            ts = float(obj["ts"])
            first = ts if first is None else first
            last = ts
    except (OSError, TraceError, ValueError):
        pass
    return first, last


class SampleRing:
    """Appends each sample to the on-disk ring; `samples()` reads the last span_s back (oldest first)."""

    def __init__(
        self, directory: str | os.PathLike, span_s: float = 1800.0, max_segment_bytes: int = 8 << 20
    ):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.span_s = span_s
        self.max_segment_bytes = max_segment_bytes
        self.bytes_written = 0  # for the bench: what this ring put on disk
        spans = [_span(self.dir / name) for name in SEGMENTS]
        # The current segment is the one written last; the other holds the span before it.
        self.cur = 0 if (spans[0][1] or 0) >= (spans[1][1] or 0) else 1
        self.first_ts = spans[self.cur][0]
        self._fh = None

    @property
    def path(self) -> Path:
        return self.dir / SEGMENTS[self.cur]

    def _open(self, truncate: bool) -> None:
        if self._fh is not None:
            self._fh.close()
        if truncate:
            self._fh = open(self.path, "wb")  # noqa: SIM115
        else:
            repair_torn_tail(self.path)
            self._fh = open(self.path, "ab")  # noqa: SIM115
        self._size = self._fh.tell()

    def append(self, sample: Sample) -> None:
        """Write one sample durably (write, flush, fsync)."""
        line = (json.dumps(sample.to_dict(), separators=(",", ":")) + "\n").encode()
        if self._fh is None:
            self._open(truncate=False)
        full = self._size + len(line) > self.max_segment_bytes
        if self.first_ts is not None and (sample.ts - self.first_ts >= self.span_s or full):
            self.cur = 1 - self.cur
            self._open(truncate=True)
            self.first_ts = None
        if self.first_ts is None:
            self.first_ts = sample.ts
        self._fh.write(line)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._size += len(line)
        self.bytes_written += len(line)

    def samples(self) -> list[Sample]:
        """The ring's samples of the last span_s (by the newest sample's time), oldest first."""
        out: list[Sample] = []
        for name in SEGMENTS:
            path = self.dir / name
            if not path.exists():
                continue
            try:
                for obj in iter_trace_dicts(path, skip_bad=True):
                    try:
                        out.append(Sample.from_dict(obj))
                    except (TypeError, ValueError, KeyError, AttributeError):
                        continue  # a line this release cannot read: the rest still can
            except OSError:
                continue
        out.sort(key=lambda s: s.ts)
        if out:
            newest = out[-1].ts
            out = [s for s in out if s.ts >= newest - self.span_s]
        return out

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
