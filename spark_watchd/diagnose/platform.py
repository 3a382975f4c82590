"""The platform under the workload: this boot's stack, what changed since the last boot, known-bad combinations.

Pure: samples in (the trace-v1 `platform` arrives on a boot's first sample and when it changes; the watch
keeps the last one), events and a status out; no I/O, no clock. What must outlive the daemon (the last
boot's platform, the last change) is in `state()`, which the runtime keeps in state.json, so the first
sample after a reboot (a new daemon) is compared with the boot before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spark_watchd.diagnose.platform_known import Box, known_bad
from spark_watchd.sample.findings import Event
from spark_watchd.sample.model import Sample
from spark_watchd.sample.platform import PlatformReading


def _short(v: str | None) -> str:
    return v if v is not None else "?"


def change_words(changes: list[tuple[str, str | None, str | None]]) -> str:
    """`kernel 6.17.0-1031-nvidia -> 7.0.0-1019-nvidia; driver 580.173.02 -> 595.91.07`."""
    return "; ".join(f"{what} {_short(a)} -> {_short(b)}" for what, a, b in changes)


def _span(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 5400 else f"{s / 60:.0f} min"


class PlatformWatch:
    """This boot's platform, the change since the boot before, the known-bad combinations that apply."""

    def __init__(self, th):
        self.th = th
        self.current: PlatformReading | None = None
        self.boot_id: str | None = None  # the boot `current` was read in
        # The last change between boots: {"ts", "boot_id", "summary", "changes"}; the boot it began.
        self.change: dict[str, Any] | None = None
        self.last_ts: float | None = None
        self.xids: set[int] = set()
        self.problems: list[dict[str, Any]] = []
        self._judged: tuple | None = None

    def set_thresholds(self, th) -> None:
        self.th = th

    @property
    def flavour(self) -> str | None:
        """The NVIDIA kernel modules' flavour this boot ("open", "proprietary"), None when unknown."""
        return self.current.driver_flavour if self.current is not None else None

    def state(self) -> dict[str, Any]:
        """The flat part of the engine's persisted state that is the platform's."""
        return {
            "platform": self.current.to_dict() if self.current is not None else None,
            "platform_boot_id": self.boot_id,
            "platform_change": self.change,
            "platform_last_ts": self.last_ts,
        }

    def restore(self, st: Mapping[str, Any]) -> None:
        """Resume from `state()` as read back from disk; a malformed part is forgotten, never fatal."""
        try:
            p = st.get("platform")
            self.current = PlatformReading.from_dict(p) if isinstance(p, Mapping) else None
        except (TypeError, ValueError):
            self.current = None
        bid, change, last = st.get("platform_boot_id"), st.get("platform_change"), st.get("platform_last_ts")
        self.boot_id = bid if isinstance(bid, str) else None
        self.change = (
            dict(change)
            if isinstance(change, Mapping) and isinstance(change.get("ts"), int | float)
            else None
        )
        self.last_ts = float(last) if isinstance(last, int | float) else None

    def reboot_cause(self) -> str | None:
        """Words for a reboot event when the boot that ended began with an update and lasted less than
        `platform_update_window_s`: the update is the first suspect. Read before observe() of the new boot."""
        c, end = self.change, self.last_ts
        if c is None or end is None or c.get("boot_id") != self.boot_id:
            return None
        lasted = end - float(c["ts"])
        if not 0 <= lasted <= self.th.platform_update_window_s:
            return None
        return f"the previous boot ended {_span(lasted)} after an update ({c.get('summary')})"

    def reboot(self) -> None:
        """A new boot: this boot's Xids are history (the platform is kept to compare the next one with)."""
        self.xids.clear()

    def observe(self, sample: Sample) -> list[Event]:
        """Events for a platform that differs from the last one seen; the known-bad entries that apply now."""
        events: list[Event] = []
        for ev in sample.driver_events:
            if ev.xid is not None:
                self.xids.add(ev.xid)
        p = sample.platform
        if p is not None and p != self.current:
            events.extend(self._arrived(sample, p))
        self.last_ts = sample.ts
        if self.current is not None:
            link, mem = sample.link, sample.meminfo
            ports = len(link.ports) if link is not None else 0
            names = tuple(g.name for g in sample.gpus)
            # Judged again only when what the entries read moved: this runs on every replayed sample.
            key = (self.current, mem.get("CmaTotal"), mem.get("CmaFree"), ports, names, len(self.xids))
            if key != self._judged:
                self._judged = key
                self.problems = known_bad(Box(self.current, mem, ports, names, frozenset(self.xids)))
        return events

    def _arrived(self, sample: Sample, p: PlatformReading) -> list[Event]:
        before, same_boot = self.current, sample.boot_id is not None and sample.boot_id == self.boot_id
        self.current, self.boot_id = p, sample.boot_id
        changes = p.changes(before) if before is not None else []
        if not changes:
            return []
        summary = change_words(changes)
        details = {
            "changes": [{"part": w, "before": a, "after": b} for w, a, b in changes],
            "same_boot": same_boot,
        }
        if not same_boot:
            self.change = {
                "ts": sample.ts,
                "boot_id": sample.boot_id,
                "summary": summary,
                "changes": details["changes"],
            }
        when = "since the driver was reloaded" if same_boot else "since the last boot"
        return [
            Event(
                "platform_change",
                "platform",
                sample.ts,
                f"Platform changed {when}: {summary}",
                details=details,
            )
        ]

    def status(self) -> dict[str, Any] | None:
        """The `platform` extra: this boot's stack, the last change, the known-bad entries that apply."""
        if self.current is None:
            return None
        p = self.current
        parts = [f"kernel {p.kernel}" if p.kernel else None]
        if p.driver:
            parts.append(f"driver {p.driver}" + (f" ({p.driver_flavour})" if p.driver_flavour else ""))
        parts += [
            f"CUDA {p.cuda_driver}" if p.cuda_driver else None,
            f"ConnectX-7 {p.cx7_firmware}" if p.cx7_firmware else None,
            f"DGX OTA {p.ota}" if p.ota else None,
        ]
        this_boot = self.change is not None and self.change.get("boot_id") == self.boot_id
        return {
            "platform": {**p.to_dict(), "cx7_firmware": p.cx7_firmware},
            "summary": ", ".join(x for x in parts if x),
            "change": self.change if this_boot else None,  # what this boot brought, since the boot before
            "problems": list(self.problems),
        }
