"""Rolling trace-v1 files (`run --record DIR`): one file per UTC day, old days deleted."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import time
from pathlib import Path

from spark_watchd.logs import get_logger
from spark_watchd.sample.trace import TraceWriter
from spark_watchd.snapshot import Snapshot

PREFIX = "spark-watchd-"


class RollingRecorder:
    """A daemon subscriber that appends each published sample to DIR/spark-watchd-YYYY-MM-DD.jsonl."""

    def __init__(self, directory: str, keep_days: int = 7):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.keep_days = keep_days
        self.log = get_logger("record")
        self._day: str | None = None
        self._writer: TraceWriter | None = None
        # The boot's platform (trace-v1 `platform`, on a boot's first sample only): each day's file begins
        # with it, so a file read alone still says what the workload ran on.
        self._boot: str | None = None
        self._platform = None

    def __call__(self, snapshot: Snapshot) -> None:
        sample = snapshot.sample
        if sample is None:
            return
        if sample.boot_id != self._boot:
            self._boot, self._platform = sample.boot_id, None
        if sample.platform is not None:
            self._platform = sample.platform
        day = dt.datetime.fromtimestamp(sample.ts, dt.timezone.utc).strftime("%Y-%m-%d")
        if day != self._day:
            self.close()
            self._writer = TraceWriter(self.dir / f"{PREFIX}{day}.jsonl")
            if self._writer.repaired_bytes:
                self.log.warning(
                    "repaired a torn trace tail",
                    path=str(self._writer.path),
                    dropped_bytes=self._writer.repaired_bytes,
                )
            self._day = day
            self._prune()
            if sample.platform is None and self._platform is not None:
                sample = dataclasses.replace(sample, platform=self._platform)
        self._writer.write(sample)

    def _prune(self) -> None:
        cutoff = time.time() - self.keep_days * 86400
        for p in self.dir.glob(f"{PREFIX}*.jsonl"):
            try:
                if p.stat().st_mtime < cutoff:
                    os.unlink(p)
            except OSError:
                pass

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
