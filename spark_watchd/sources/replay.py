"""The daemon's replay mode: a recorded trace emitted at its recorded pace divided by speed.

Trace time is rebased so the first sample lands at the moment replay starts
(freshness checks and Prometheus see current time), spacing between samples is
kept as recorded (classifiers judge rates per recorded second), and `loop`
repeats the trace shifted forward so time never goes back.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator

from spark_watchd.sample.model import Sample
from spark_watchd.sample.serving import shift_serving
from spark_watchd.sample.trace import TraceError, read_trace


class ReplayFeed:
    """Yields (sample, seconds to wait before the next one) from a trace file."""

    def __init__(
        self,
        path: str,
        speed: float = 1.0,
        loop: bool = False,
        clock: Callable[[], float] = time.time,
        on_bad_line: Callable[[TraceError], None] | None = None,
        rebase: bool = True,
    ):
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.path = str(path)
        self.speed = float(speed)
        self.loop = loop
        self.clock = clock
        self.on_bad_line = on_bad_line
        self.rebase = rebase
        self.passes = 0
        self.offset_s = 0.0  # added to recorded time in the current pass (what the page undoes to date it)
        self.step_s = self._probe()  # typical recorded spacing, for freshness and the loop seam

    def _samples(self) -> Iterator[Sample]:
        return read_trace(self.path, skip_bad=True, on_skip=self.on_bad_line)

    def _probe(self) -> float:
        """Check the trace has samples now (fail at start-up, not later) and return its median spacing."""
        ts: list[float] = []
        for s in read_trace(self.path, skip_bad=True):
            ts.append(s.ts)
            if len(ts) >= 50:
                break
        if not ts:
            raise ValueError(f"{self.path}: no readable trace-v1 samples")
        gaps = sorted(b - a for a, b in zip(ts, ts[1:], strict=False) if b > a)
        return gaps[len(gaps) // 2] if gaps else 1.0

    def __iter__(self) -> Iterator[tuple[Sample, float]]:
        offset: float | None = None
        uptime_shift = 0.0
        while True:
            first_ts = last_ts = None
            prev: Sample | None = None
            for sample in self._samples():
                if first_ts is None:
                    first_ts = sample.ts
                    if offset is None:
                        offset = (self.clock() - sample.ts) if self.rebase else 0.0
                    self.offset_s = offset
                if prev is not None:
                    gap = max(0.0, sample.ts - prev.ts)
                    yield self._shift(prev, offset, uptime_shift), gap / self.speed
                prev = sample
                last_ts = sample.ts
            if prev is None:
                return
            self.passes += 1
            if not self.loop:
                yield self._shift(prev, offset, uptime_shift), 0.0
                return
            yield self._shift(prev, offset, uptime_shift), self.step_s / self.speed
            # Next pass starts one step after this one ended: time keeps moving forward.
            shift = (last_ts - first_ts) + self.step_s
            offset += shift
            uptime_shift += shift

    def info(self) -> dict:
        """What the page says about the replay: the trace, the speed, and recorded = served - offset_s."""
        return {"trace": os.path.basename(self.path), "speed": self.speed, "offset_s": self.offset_s}

    @staticmethod
    def _shift(sample: Sample, offset: float, uptime_shift: float) -> Sample:
        if not offset and not uptime_shift:
            return sample
        return dataclasses.replace(
            sample,
            ts=sample.ts + offset,
            uptime_s=sample.uptime_s + uptime_shift if sample.uptime_s is not None else None,
            throughput=tuple(dataclasses.replace(t, ts=t.ts + offset) for t in sample.throughput),
            # Shifted with the sample: a fault's place before or after the boot must not change.
            driver_events=tuple(_shift_driver(e, offset) for e in sample.driver_events),
            serving=tuple(shift_serving(r, offset) for r in sample.serving),
            oom_kills=tuple(dataclasses.replace(k, ts=k.ts + offset) for k in sample.oom_kills),
        )


def _shift_driver(e, offset: float):
    """A driver event moved with its sample, the end of its boot with it (the reboot-cause window)."""
    end = e.boot_end_ts + offset if e.boot_end_ts is not None else None
    return dataclasses.replace(e, ts=e.ts + offset, boot_end_ts=end)
