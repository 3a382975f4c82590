"""Driver faults: Xid, NV_ERR_NO_MEMORY and PCIe AER fatal events, and what they add to G3, G4 and reboots.

Pure: everything comes from the samples' `driver_events` (no I/O, no clock). A journal event older than the
sample's boot (ts < sample ts - uptime) belongs to the previous boot: it explains a reboot and is shown, but
it is not a fault of this boot.
"""

from __future__ import annotations

import dataclasses
from collections import deque

from spark_watchd.diagnose.xid import FATAL_XIDS, HUNG_ENGINE_XIDS, describe
from spark_watchd.sample.driver import DriverEvent, event_kind
from spark_watchd.sample.findings import Event, Finding
from spark_watchd.sample.model import Sample

ADVICE_DRIVER_OOM = (
    "The GPU driver could not allocate from the unified pool (NV_ERR_NO_MEMORY) before the kernel's OOM "
    "killer moved: owners report the whole host wedging next.",
    "Free memory now: stop or cap a workload (vLLM --gpu-memory-utilization, smaller batch), drop caches.",
)
# Where a dual-Spark pair's ConnectX-7 link soft-locks the head node, this is the line the kernel leaves.
PCIE_HINT = "a PCIe link failed (on a dual-Spark pair, the ConnectX-7 link can soft-lock the head node)"
_GAP_S = 1.0  # journal timestamps and /proc/uptime disagree by well under a second


def previous_boot(ev: DriverEvent, sample: Sample) -> bool:
    """Whether a journal event predates the boot the sample was taken in."""
    if ev.source != "journal" or sample.uptime_s is None:
        return False
    return ev.ts < sample.ts - sample.uptime_s - _GAP_S


def fault_text(ev: DriverEvent) -> str | None:
    """The words a reboot event uses for a fault that can end a boot; None for faults that cannot."""
    kind = event_kind(ev)
    if kind == "xid" and ev.xid in FATAL_XIDS:
        return f"Xid {ev.xid} ({describe(ev.xid).meaning})"
    if kind == "driver_oom":
        return "the GPU driver out of memory (NV_ERR_NO_MEMORY)"
    if kind == "pcie_fatal":
        return "a PCIe AER fatal error"
    return None


def _event(ev: DriverEvent, prev_boot: bool) -> Event | None:
    kind = event_kind(ev)
    details: dict = {"source": ev.source, "text": ev.text}
    if prev_boot:
        details["previous_boot"] = True
    when = "Previous boot: " if prev_boot else ""
    if kind == "xid":
        info = describe(ev.xid)
        on = f" on GPU {ev.gpu}" if ev.gpu is not None else ""
        details.update(
            xid=ev.xid, gpu=ev.gpu, fatal=info.fatal, meaning=info.meaning, next_step=info.next_step
        )
        fatal = " (fatal)" if info.fatal else ""
        return Event(
            "xid",
            "driver",
            ev.ts,
            f"{when}Xid {ev.xid}{on}: {info.meaning}{fatal}. {info.next_step}",
            details=details,
        )
    if kind == "driver_oom":
        return Event(
            "driver_oom",
            "G3",
            ev.ts,
            f"{when}GPU driver out of unified memory (NV_ERR_NO_MEMORY)",
            details=details,
        )
    if kind == "pcie_fatal":
        return Event(
            "pcie_fatal", "driver", ev.ts, f"{when}PCIe AER fatal error: {PCIE_HINT}", details=details
        )
    return None


class DriverTracker:
    """Remembers this boot's faults: the reboot cause, the G3 hold, the Xid a hung engine names."""

    def __init__(self, th):
        self.th = th
        self.recent: deque[tuple[float, int]] = deque(maxlen=64)  # (ts, xid) of this boot
        self.last_fault: tuple[float, str] | None = None  # (ts, words) of this boot's last boot-ending fault
        self.last_oom_ts: float | None = None

    def set_thresholds(self, th) -> None:
        """Judge with new thresholds from the next sample on."""
        self.th = th

    def reboot_cause(self, sample: Sample) -> str | None:
        """Why the previous boot ended, from its journal lines in this sample, else from faults seen live."""
        found = None
        for ev in sample.driver_events:
            if previous_boot(ev, sample) and (text := fault_text(ev)) is not None:
                found = (ev.ts, text, ev.xid)
        if found is None and self.last_fault is not None:
            ts, text = self.last_fault
            if text.startswith("Xid") or sample.ts - ts <= self.th.driver_fault_reboot_window_s:
                found = (ts, text, None)
        return f"the previous boot ended with {found[1]}" if found else None

    def reboot(self) -> None:
        """A new boot: this boot's faults are history."""
        self.recent.clear()
        self.last_fault = None
        self.last_oom_ts = None

    def update(self, sample: Sample) -> list[Event]:
        """Events for the sample's driver faults; remembers the live ones."""
        out = []
        for ev in sample.driver_events:
            prev = previous_boot(ev, sample)
            e = _event(ev, prev)
            if e is None:
                continue
            out.append(e)
            if prev:
                continue
            if ev.xid is not None:
                self.recent.append((ev.ts, ev.xid))
            if e.kind == "driver_oom":
                self.last_oom_ts = ev.ts
            if (text := fault_text(ev)) is not None:
                self.last_fault = (ev.ts, text)
        return out

    def g3(self, finding: Finding, ts: float) -> Finding:
        """G3 critical while a live NV_ERR_NO_MEMORY is recent: the driver ran out of the pool."""
        if (
            self.last_oom_ts is None
            or ts - self.last_oom_ts > self.th.driver_oom_hold_s
            or ts < self.last_oom_ts - 60
        ):
            return finding
        ev = dict(finding.evidence, driver_oom_ts=self.last_oom_ts)
        summary = (
            f"GPU driver out of unified memory (NV_ERR_NO_MEMORY) {ts - self.last_oom_ts:.0f} s ago; "
            + finding.summary
        )
        return dataclasses.replace(
            finding,
            severity="critical",
            summary=summary,
            evidence=ev,
            advice=ADVICE_DRIVER_OOM + tuple(finding.advice),
        )

    def g4(self, finding: Finding, ts: float) -> Finding:
        """The hung-engine anomaly names a matching Xid (43, 109) the driver logged recently."""
        if finding.anomaly != "hung_engine":
            return finding
        for xts, xid in reversed(self.recent):
            if xid in HUNG_ENGINE_XIDS and 0 <= ts - xts <= self.th.hung_xid_window_s:
                summary = f"{finding.summary}; the driver logged Xid {xid} ({describe(xid).meaning})"
                return dataclasses.replace(finding, summary=summary, evidence=dict(finding.evidence, xid=xid))
        return finding
