"""The stateful diagnoser: one sample in, findings and events out. Deterministic: no I/O, no wall clock."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from spark_watchd.diagnose import features as feat
from spark_watchd.diagnose.driver import DriverTracker
from spark_watchd.diagnose.exits import ExitTracker, name_oom_event
from spark_watchd.diagnose.g3 import G3Tracker
from spark_watchd.diagnose.g4 import G4Tracker
from spark_watchd.diagnose.g6 import G6Tracker
from spark_watchd.diagnose.hold import HoldWatch, with_holds
from spark_watchd.diagnose.link import LinkWatch
from spark_watchd.diagnose.platform import PlatformWatch
from spark_watchd.diagnose.prelude import Prelude, named_reboot
from spark_watchd.diagnose.runway import FootprintDrift, with_growth
from spark_watchd.diagnose.sizing import with_holders
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.diagnose.tracker import Tracker
from spark_watchd.sample.findings import Diagnosis, Event
from spark_watchd.sample.model import Sample

GOTCHAS = ("G3", "G4", "G6")  # the order of a Diagnosis's findings (and of the replay output)


class Diagnoser:
    """Feeds each sample to the three trackers through their common interface (`diagnose.tracker.Tracker`)."""

    def __init__(self, thresholds: Thresholds | None = None):
        self.th = thresholds or Thresholds()
        # Judged in this order, so the events of one sample come out G4, G3, G6 (as they always have).
        self.trackers: tuple[Tracker, ...] = (G4Tracker(self.th), G3Tracker(self.th), G6Tracker(self.th))
        self.driver = DriverTracker(self.th)
        self.link = LinkWatch(self.th)  # the ConnectX-7 ports: evidence beside the findings, not a gotcha
        self.drift = FootprintDrift(self.th)  # each workload's footprint trend (the runway is G3's)
        self.exits = ExitTracker(self.th)
        self.platform = PlatformWatch(self.th)  # the boot's stack, its change since the last boot, known-bad
        self.prelude = Prelude(self.th)  # a boot's last minutes, for the reboot after a wedge to name
        self.holds = HoldWatch(self.th)  # each engine's and trainer's true hold (against what it declared)
        self._g6 = next(t for t in self.trackers if t.gotcha == "G6")  # sizes workloads by those holds
        self._prev: feat.Features | None = None
        self._restored: Mapping[str, Any] | None = None

    def restore(self, state: Mapping[str, Any]) -> None:
        """Resume from a persisted state (see `state()`): a new boot_id on the next sample is a reboot."""
        self._restored = dict(state)
        for t in self.trackers:
            t.restore(self._restored)
        self.holds.restore(self._restored)

    def state(self) -> dict[str, Any]:
        """What must survive a power loss to recognise a reboot after a throttle: one flat JSON object."""
        last = self._prev
        out = {
            "boot_id": last.boot_id if last is not None else (self._restored or {}).get("boot_id"),
            "uptime_s": last.uptime_s if last is not None else (self._restored or {}).get("uptime_s"),
        }
        for t in self.trackers:
            out.update(t.state())
        out.update(self.holds.state())
        return out

    def set_thresholds(self, th: Thresholds) -> None:
        """Use new thresholds from the next sample on, keeping every window, baseline and episode."""
        self.th = th
        self.driver.set_thresholds(th)
        self.link.set_thresholds(th)
        self.drift.set_thresholds(th)
        self.exits.set_thresholds(th)
        self.platform.set_thresholds(th)
        self.prelude.th = th
        for t in self.trackers:
            t.set_thresholds(th)

    @property
    def throttle_seconds(self) -> float:
        """Seconds spent in thermal throttle per the G4 classifier (its persisted counter)."""
        return float(self.state().get("throttle_seconds_total") or 0.0)

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
        """Judge one sample (in time order; a clock step back restarts the windows).

        The hot path of replay and of every live tick: each step below that rarely has anything to do (a
        reboot, a clock step, driver events, kill reports, exits) is skipped on a cheap test of its input.
        """
        prev = self._prev
        f = feat.compute(prev, sample, self.th)
        events: list[Event] = []
        if f.reboot or (self._restored is not None and prev is None and self._restored_reboot(sample)):
            # Read before the driver forgets the last boot; a live fault's window ends at the last sample.
            cause = self.driver.reboot_cause(sample, prev.ts if prev is not None else None)
            if cause is not None and self.driver.cause_is_nomem and self.prelude.roomy():
                cause = (
                    None  # NV_ERR_NO_MEMORY with a roomy pool to the end: a driver fault, not why it ended
                )
            said_nomem = cause is not None and self.driver.cause_is_nomem
            cause = cause or self.platform.reboot_cause()  # a boot that failed soon after an update
            before = self.prelude.words(said_nomem=said_nomem)
            self.driver.reboot()
            self.platform.reboot()
            self.link.reboot()
            self.drift.forget()
            self.exits.forget()
            self.prelude.forget()
            self.holds.forget()
            for t in self.trackers:
                events.extend(t.reboot(sample.ts, sample.boot_id, cause))
            if before is not None:
                events = [named_reboot(e, *before) if e.kind == "reboot" else e for e in events]
        elif prev is not None and sample.ts < prev.ts:
            # The clock stepped back (NTP, a hand-edited trace): windows keyed on time would never
            # expire, so start them afresh; episodes and counters carry on.
            self.drift.forget()
            self.exits.forget()
            self.holds.forget()
            for t in self.trackers:
                t.time_jump(sample.ts)
        self._restored = None
        if sample.platform is not None or self.platform.current is not None:
            events.extend(self.platform.observe(sample))
            self.driver.flavour = self.platform.flavour  # the Xid advice that depends on it
        if sample.driver_events:
            events.extend(self.driver.update(sample))
        findings = dict.fromkeys(GOTCHAS)  # the keys in GOTCHAS order, filled below
        # Each engine's and trainer's true hold, measured on this sample's workload table (G6's grouping, taken
        # ahead of its judgement): G6 sizes each workload by it where NVML under-counts it.
        usable = f.avail_b
        if usable is not None and self.th.budget_subtracts_cma_free:
            usable -= f.cma_free_b or 0
        held = self.holds.observe(sample.ts, usable, f.cached_b, f.mem_total_b, self._g6.group(sample))
        under = self._g6.held = self.holds.undercounts
        workloads = ()
        for t in self.trackers:
            finding, evs, wl = t.observe(sample, f)
            findings[t.gotcha] = finding
            if evs:
                events.extend(evs)
            if wl and not workloads:
                workloads = wl
        if sample.link is not None or self.link.status is not None:
            self.link.observe(sample)
        if sample.oom_kills and events:
            events = [name_oom_event(e, sample.oom_kills) if e.kind == "oom_kill" else e for e in events]
        gone = self.exits.update(sample, f.oom_delta, workloads)
        if gone:
            events.extend(gone)
        g3 = with_growth(findings["G3"], self.drift.update(sample.ts, workloads, under), self.th)
        driver = self.driver  # its annotations touch a finding only after a fault: skipped until there is one
        if driver.last_oom_ts is not None:
            g3 = driver.g3(g3, sample.ts, sample.kernel)
        findings["G3"] = g3
        if driver.recent:
            findings["G4"] = driver.g4(findings["G4"], sample.ts)
        if held:
            events.extend(held)
        if self.holds.holds:
            findings["G3"] = with_holds(findings["G3"], self.holds.holds)
        if under:  # who holds the pool, sized, where a measured hold shows NVML under-counting
            findings["G3"] = with_holders(findings["G3"], workloads, under, f.mem_total_b)
        self.prelude.observe(sample.ts, usable, events)
        self._prev = f
        return Diagnosis(sample.ts, findings, tuple(events), workloads)

    @property
    def cap(self):
        """The SM clock cap watch, G4's (diagnose/clockcap.py; its rules are g4_rules.clock_cap_lost/_capped)."""
        return next(t for t in self.trackers if t.gotcha == "G4").cap

    @property
    def latest_runway(self):
        """The budget's runway at the latest sample (diagnose.runway.Runway, kept by G3)."""
        return next(t for t in self.trackers if t.gotcha == "G3").runway.latest

    def run(self, samples: Iterable[Sample]) -> Iterator[Diagnosis]:
        """Judge each sample in turn."""
        for s in samples:
            yield self.observe(s)
