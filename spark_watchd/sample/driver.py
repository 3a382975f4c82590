"""trace-v1 `driver_events[]`: one GPU driver fault (an Xid, a driver out-of-memory, a PCIe AER fatal error)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_watchd.sample.driverlines import kernel_line_kind, parse_kernel_line

__all__ = [
    "DRIVER_EVENT_SOURCES",
    "DRIVER_FEEDS",
    "FEED_STATES",
    "LINE_FEEDS",
    "DriverEvent",
    "event_kind",
    "kernel_line_kind",
]

DRIVER_EVENT_SOURCES = ("nvml", "journal")
# The driver-events source's feeds and what each can be doing: the bounded labels of
# sparkwatchd_driver_feed_state{feed,state} and sparkwatchd_driver_lines_rejected_total{feed}.
DRIVER_FEEDS = ("nvml-events", "previous-boot", "kernel-log")
LINE_FEEDS = ("previous-boot", "kernel-log")
FEED_STATES = ("watching", "read", "not supported", "unreadable", "restarting", "off")


@dataclass(frozen=True, slots=True)
class DriverEvent:
    """A fault the driver or kernel reported; `xid` is None for non-Xid lines (NV_ERR_NO_MEMORY, AER).

    Optional (trace-v1, added with issue 18): `pci` the PCI address the kernel line names, `count` how many
    identical lines this one event stands for (a storm folded into one), `boot_end_ts` for a previous boot's
    line the time of that boot's last journal entry (the reboot-cause window is measured back from it).
    """

    ts: float
    gpu: int | None
    xid: int | None
    source: str  # "nvml" (event API) or "journal" (kernel log: previous boot or live)
    text: str
    pci: str | None = None
    count: int = 1
    boot_end_ts: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ts": self.ts, "gpu": self.gpu, "xid": self.xid, "source": self.source}
        d["text"] = self.text
        if self.pci is not None:
            d["pci"] = self.pci
        if self.count != 1:
            d["count"] = self.count
        if self.boot_end_ts is not None:
            d["boot_end_ts"] = self.boot_end_ts
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DriverEvent:
        """Build from a trace object; raises ValueError naming the key that is wrong."""
        gpu, xid, source = d.get("gpu"), d.get("xid"), d.get("source", "journal")
        if source not in DRIVER_EVENT_SOURCES:
            raise ValueError(f"driver_events: 'source' must be nvml or journal, got {source!r}")
        for key, val in (("gpu", gpu), ("xid", xid), ("count", d.get("count"))):
            if val is not None and (isinstance(val, bool) or not isinstance(val, int)):
                raise ValueError(f"driver_events: '{key}' must be an integer or null, got {val!r}")
        pci, end = d.get("pci"), d.get("boot_end_ts")
        if pci is not None and not isinstance(pci, str):
            raise ValueError(f"driver_events: 'pci' must be a string or null, got {pci!r}")
        return cls(
            float(d["ts"]),
            gpu,
            xid,
            source,
            str(d.get("text") or ""),
            pci,
            max(1, int(d.get("count") or 1)),
            None if end is None else float(end),
        )


def event_kind(ev: DriverEvent) -> str:
    """xid, driver_oom, pcie_fatal, or other: what a recorded driver event is.

    A kernel-log event counts only when its text is still a driver line by the trust rule
    (sample/driverlines.py): a trace written by an older release may hold forged lines, which are "other".
    """
    if ev.source == "nvml":
        return "xid" if ev.xid is not None else "other"
    k = parse_kernel_line(ev.text)
    return k.kind if k is not None else "other"
