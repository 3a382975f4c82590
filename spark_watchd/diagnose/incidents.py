"""Capture on trouble: a bounded ring of recent samples flushed to a trace-v1 file when a finding leaves ok."""

from __future__ import annotations

import errno
import os
from collections import deque
from pathlib import Path

from spark_watchd.sample.files import StateFileError
from spark_watchd.sample.findings import Diagnosis
from spark_watchd.sample.model import Sample
from spark_watchd.sample.trace import TraceWriter

TROUBLE = ("warning", "critical")


class CaptureRing:
    """Keeps `pre` samples; on trouble writes them plus the next `post` samples to dir; keeps at most `keep` files."""

    def __init__(self, directory: str | os.PathLike, pre: int = 30, post: int = 30, keep: int = 20):
        self.dir = Path(directory)
        self.pre = pre
        self.post = post
        self.keep = keep
        self.ring: deque[Sample] = deque(maxlen=max(1, pre))
        self._last: dict[str, str] = {}
        self._writer: TraceWriter | None = None
        self._left = 0
        self.files: list[Path] = []

    def push(self, sample: Sample, diagnosis: Diagnosis) -> Path | None:
        """Feed one judged sample; returns the capture file started at this sample, if any."""
        self.ring.append(sample)
        started = None
        trouble = []
        for g, f in diagnosis.findings.items():
            prev = self._last.get(g, "ok")
            if f.severity in TROUBLE and prev not in TROUBLE:
                trouble.append(g)
            self._last[g] = f.severity
        if self._writer is not None:
            self._writer.write(sample)
            self._left -= 1
            if trouble:
                self._left = self.post  # more trouble: keep recording
            if self._left <= 0:
                self._writer.close()
                self._writer = None
        elif trouble:
            started = self._start(sample, trouble)
        return started

    def _start(self, sample: Sample, gotchas: list[str]) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"capture-{int(sample.ts)}-{'-'.join(gotchas)}.jsonl"
        try:
            self._writer = TraceWriter(path, nofollow=True)
        except StateFileError as exc:  # a link or FIFO planted under that name: a storage failure, said once
            raise OSError(errno.ELOOP, str(exc)) from None
        for s in self.ring:
            self._writer.write(s)
        self._left = self.post
        self.files = sorted(self.dir.glob("capture-*.jsonl"))
        while len(self.files) > self.keep:
            old = self.files.pop(0)
            if old != path:
                try:
                    old.unlink()
                except OSError:
                    pass
        return path

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
