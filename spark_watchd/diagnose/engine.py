"""The stateful diagnoser: one sample in, findings and events out. Deterministic: no I/O, no wall clock."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from spark_watchd.diagnose import features as feat
from spark_watchd.diagnose.driver import DriverTracker
from spark_watchd.diagnose.g3 import G3Tracker
from spark_watchd.diagnose.g4 import G4Tracker
from spark_watchd.diagnose.g6 import G6Tracker
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.findings import Diagnosis, Event
from spark_watchd.sample.model import Sample


class Diagnoser:
    """Keeps a bounded window and per-process memory; `observe(sample)` judges the newest sample."""

    def __init__(self, thresholds: Thresholds | None = None):
        self.th = thresholds or Thresholds()
        self.window: deque[Sample] = deque()
        self.g3 = G3Tracker(self.th)
        self.g4 = G4Tracker(self.th)
        self.g6 = G6Tracker(self.th)
        self.driver = DriverTracker(self.th)
        self._prev: feat.Features | None = None
        self._restored: Mapping[str, Any] | None = None

    def restore(self, state: Mapping[str, Any]) -> None:
        """Resume from a persisted state (see `state()`): a new boot_id on the next sample is a reboot."""
        self._restored = dict(state)
        self.g4.restore(state)

    def state(self) -> dict[str, Any]:
        """What must survive a power loss to recognise a reboot after a throttle."""
        last = self._prev
        return {
            "boot_id": last.boot_id if last is not None else (self._restored or {}).get("boot_id"),
            "uptime_s": last.uptime_s if last is not None else (self._restored or {}).get("uptime_s"),
            **self.g4.state(),
        }

    def set_thresholds(self, th: Thresholds) -> None:
        """Use new thresholds from the next sample on, keeping every window, baseline and episode."""
        self.th = self.g3.th = self.g6.th = self.driver.th = th
        self.g3.new_thresholds()
        self.g6.new_thresholds()
        self.g4.set_thresholds(th)

    @property
    def throttle_seconds(self) -> float:
        """Seconds spent in thermal throttle per the G4 classifier."""
        return self.g4.throttle_s

    def _restored_reboot(self, sample: Sample) -> bool:
        r = self._restored
        self._restored = None
        if not r:
            return False
        if sample.boot_id and r.get("boot_id"):
            return sample.boot_id != r["boot_id"]
        up, prev_up = sample.uptime_s, r.get("uptime_s")
        return up is not None and prev_up is not None and up + 1.0 < prev_up

    def observe(self, sample: Sample) -> Diagnosis:
        """Judge one sample (in time order; a clock step back restarts the windows)."""
        th = self.th
        prev = self._prev
        f = feat.compute(prev, sample, th)
        events: list[Event] = []
        reboot = f.reboot or (prev is None and self._restored_reboot(sample))
        self._restored = None
        if reboot:
            events.extend(self.g4.reboot(sample.ts, sample.boot_id, self.driver.reboot_cause(sample)))
            self.driver.reboot()
            self.g3.reboot()
            self.g6.reboot()
            self.window.clear()
        elif prev is not None and sample.ts < prev.ts:
            # The clock stepped back (NTP, a hand-edited trace): windows keyed on time would never
            # expire, so start them afresh; episodes and counters carry on.
            self.g3.time_jump(sample.ts)
            self.g6.reboot()
            self.g4.time_jump(sample.ts)
            self.window.clear()
        win = self.window
        win.append(sample)
        while sample.ts - win[0].ts > th.window_s or len(win) > th.window_max_samples:
            win.popleft()
        events.extend(self.driver.update(sample) if sample.driver_events else ())
        g4f, e4 = self.g4.update(sample, f)
        g3f, e3 = self.g3.update(sample, f)
        g6f, e6 = self.g6.update(sample, f)
        g3f, g4f = self.driver.g3(g3f, sample.ts), self.driver.g4(g4f, sample.ts)
        events.extend(e4)
        events.extend(e3)
        events.extend(e6)
        self._prev = f
        return Diagnosis(sample.ts, {"G3": g3f, "G4": g4f, "G6": g6f}, tuple(events), self.g6.workloads)

    def run(self, samples: Iterable[Sample]) -> Iterator[Diagnosis]:
        """Judge each sample in turn."""
        for s in samples:
            yield self.observe(s)
