"""Driver faults: Xid, NV_ERR_NO_MEMORY and PCIe AER fatal events, and what they add to G3, G4 and reboots.

Pure: everything comes from the samples' `driver_events` (no I/O, no clock). A journal event older than the
sample's boot (ts < sample ts - uptime) belongs to the previous boot: it explains a reboot and is shown, but
it is not a fault of this boot.
"""

from __future__ import annotations

from collections import deque

from spark_watchd.diagnose.xid import HUNG_ENGINE_XIDS, describe
from spark_watchd.sample.driver import DriverEvent, event_kind
from spark_watchd.sample.findings import Event, Finding
from spark_watchd.sample.model import Sample

ADVICE_DRIVER_OOM = (
    "The GPU driver could not allocate from the unified pool (NV_ERR_NO_MEMORY) while the pool is nearly "
    "exhausted: owners report the whole host wedging next.",
    "Free memory now: stop or cap a workload (vLLM --gpu-memory-utilization, smaller batch), drop caches.",
)
# Where a dual-Spark pair's ConnectX-7 link soft-locks the head node, this is the line the kernel leaves.
PCIE_HINT = "a PCIe link failed (on a dual-Spark pair, the ConnectX-7 link can soft-lock the head node)"
_GAP_S = 1.0  # journal timestamps and /proc/uptime disagree by well under a second
# A GPU off the bus answers nothing until a power cycle: whatever came after, it ended the boot.
LOST_XIDS = frozenset({79})


def _boot_start(sample: Sample) -> float:
    return sample.ts - (sample.uptime_s or 0.0)


def _span(s: float) -> str:
    """20 s, 4.5 min, 6.0 h."""
    if s < 120:
        return f"{s:.0f} s"
    return f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"


def previous_boot(ev: DriverEvent, sample: Sample) -> bool:
    """Whether a journal event predates the boot the sample was taken in."""
    if ev.source != "journal" or sample.uptime_s is None:
        return False
    return ev.ts < sample.ts - sample.uptime_s - _GAP_S


def fault_text(ev: DriverEvent) -> str | None:
    """The words a reboot event uses for a fault that can end a boot; None for faults that cannot."""
    kind = event_kind(ev)
    if kind == "xid" and describe(ev.xid).fatal:  # an unknown code is possibly fatal
        return f"Xid {ev.xid} ({describe(ev.xid).meaning})"
    if kind == "driver_oom":
        return "the GPU driver out of memory (NV_ERR_NO_MEMORY)"
    if kind == "pcie_fatal":
        return "a PCIe AER fatal error"
    return None


def _event(ev: DriverEvent, prev_boot: bool, flavour: str | None = None) -> Event | None:
    kind = event_kind(ev)
    details: dict = {"source": ev.source, "text": ev.text, "pci": ev.pci, "count": ev.count}
    if prev_boot:
        details["previous_boot"] = True
    when = "Previous boot: " if prev_boot else ""
    lines = f" ({ev.count} lines)" if ev.count > 1 else ""
    if kind == "xid":
        info = describe(ev.xid, flavour)
        on = f" on GPU {ev.gpu}" if ev.gpu is not None else ""
        at = f" ({ev.pci})" if ev.pci is not None else ""
        details.update(
            xid=ev.xid,
            gpu=ev.gpu,
            fatal=info.fatal,
            meaning=info.meaning,
            next_step=info.next_step,
        )
        fatal = " (fatal)" if info.fatal else ""
        return Event(
            "xid",
            "driver",
            ev.ts,
            f"{when}Xid {ev.xid}{on}{at}: {info.meaning}{fatal}{lines}. {info.next_step}",
            details=details,
        )
    if kind == "driver_oom":
        return Event(
            "driver_oom",
            "G3",
            ev.ts,
            f"{when}GPU driver out of unified memory (NV_ERR_NO_MEMORY){lines}",
            details=details,
        )
    if kind == "pcie_fatal":
        at = f" at {ev.pci}" if ev.pci is not None else ""
        return Event(
            "pcie_fatal",
            "driver",
            ev.ts,
            f"{when}PCIe AER fatal error{at}{lines}: {PCIE_HINT}",
            details=details,
        )
    return None


def _nomem_words(evidence: dict, line: int, kernel: str | None) -> str:
    """Why a live NV_ERR_NO_MEMORY line is not paged: on a kernel without a CMA region (CmaTotal 0, as
    7.0.0-1019-nvidia) with the pool roomy it is a kernel/driver fault (owners see such lines at NCCL
    rendezvous with ~90 GiB usable), else a line without exhaustion signals."""
    usable = evidence.get("usable_bytes")
    if usable is not None and usable > line and "CmaTotal 0" in str(evidence.get("usable_basis", "")):
        where = kernel or "this kernel"
        return (
            f"with {usable / 2**30:.1f} GiB usable on {where} (CmaTotal 0, no CMA region): a kernel/driver "
            "fault, not pool pressure (recorded, not paged)"
        )
    return "without exhaustion signals (recorded, not paged)"


class DriverTracker:
    """Remembers this boot's faults: the reboot cause, the G3 hold, the Xid a hung engine names."""

    def __init__(self, th):
        self.th = th
        self.recent: deque[tuple[float, int]] = deque(maxlen=64)  # (ts, xid) of this boot
        # (ts, words, GPU lost) of this boot's last boot-ending fault
        self.last_fault: tuple[float, str, bool] | None = None
        self.last_oom_ts: float | None = None
        self.flavour: str | None = None  # the NVIDIA modules' flavour this boot (diagnose/platform.py)
        self.cause_is_nomem = False  # the last reboot_cause found is an NV_ERR_NO_MEMORY line

    def set_thresholds(self, th) -> None:
        """Judge with new thresholds from the next sample on."""
        self.th = th

    def reboot_cause(self, sample: Sample, last_ts: float | None = None) -> str | None:
        """Why the previous boot ended: a boot-ending fault in its last minutes, or None.

        The window (driver_fault_reboot_window_s) is measured back from the end of that boot: for its journal
        lines in this sample, from its last journal entry (`boot_end_ts`; this boot's start where a trace
        lacks it); for faults seen live, from `last_ts`, the last sample before the gap. A GPU lost off the
        bus (Xid 79) is the cause however long before the end: nothing reaches it again until a power cycle.
        """
        window = self.th.driver_fault_reboot_window_s
        found = None
        for ev in sample.driver_events:
            if not previous_boot(ev, sample) or (text := fault_text(ev)) is None:
                continue
            end = ev.boot_end_ts if ev.boot_end_ts is not None else _boot_start(sample)
            ref = "its last journal entry" if ev.boot_end_ts is not None else "this boot began"
            if ev.xid in LOST_XIDS or end - ev.ts <= window:
                found = (end - ev.ts, text, ref)
        if found is None and self.last_fault is not None and last_ts is not None:
            ts, text, lost = self.last_fault
            if lost or -_GAP_S <= last_ts - ts <= window:
                found = (last_ts - ts, text, "the last sample before the gap")
        self.cause_is_nomem = found is not None and "NV_ERR_NO_MEMORY" in found[1]
        if found is None:
            return None
        before, text, ref = found
        return f"the previous boot ended with {text}, {_span(max(0.0, before))} before {ref}"

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
            e = _event(ev, prev, self.flavour)
            if e is None:
                continue
            out.append(e)
            if prev:
                continue
            if e.kind == "xid":
                self.recent.append((ev.ts, ev.xid))
            if e.kind == "driver_oom":
                self.last_oom_ts = ev.ts
            if (text := fault_text(ev)) is not None:
                self.last_fault = (ev.ts, text, ev.xid in LOST_XIDS)
        return out

    def g3(self, finding: Finding, ts: float, kernel: str | None = None) -> Finding:
        """Name a recent live NV_ERR_NO_MEMORY on G3: evidence always, never a severity of its own.

        G3 is critical only on the memory signals its written meaning requires (the pool close to exhaustion
        with stalls or swapping, sustained PSI full, an OOM kill); with them the line leads the summary and
        its advice. Without them (a vLLM start-up probing the pool, memory to spare) it is recorded, not paged.
        """
        if (
            self.last_oom_ts is None
            or ts - self.last_oom_ts > self.th.driver_oom_hold_s
            or ts < self.last_oom_ts - 60
        ):
            return finding
        age, oom_ts = max(0.0, ts - self.last_oom_ts), self.last_oom_ts
        # The words are built on first read (Finding.reworded): a deferred G3 stays deferred.
        if finding.severity != "critical":
            line = self.th.budget_warn_bytes + self.th.os_reserve_bytes
            return finding.reworded(
                lambda summary, evidence: (
                    f"{summary}; NV_ERR_NO_MEMORY logged {age:.0f} s ago "
                    + _nomem_words(evidence, line, kernel),
                    dict(evidence, driver_oom_ts=oom_ts),
                )
            )
        return finding.reworded(
            lambda summary, evidence: (
                f"GPU driver out of unified memory (NV_ERR_NO_MEMORY) {age:.0f} s ago; " + summary,
                dict(evidence, driver_oom_ts=oom_ts),
            ),
            advice=ADVICE_DRIVER_OOM + tuple(finding.advice),
        )

    def g4(self, finding: Finding, ts: float) -> Finding:
        """The hung-engine anomaly names a matching Xid (43, 109) the driver logged recently."""
        if finding.anomaly != "hung_engine":
            return finding
        window = self.th.hung_xid_window_s
        xid = next(
            (x for xts, x in reversed(self.recent) if x in HUNG_ENGINE_XIDS and 0 <= ts - xts <= window), None
        )
        if xid is None:
            return finding
        named = f"; the driver logged Xid {xid} ({describe(xid).meaning})"
        return finding.reworded(lambda summary, evidence: (summary + named, dict(evidence, xid=xid)))
