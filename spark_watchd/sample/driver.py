"""trace-v1 `driver_events[]`: one GPU driver fault (an Xid, a driver out-of-memory, a PCIe AER fatal error)."""

from __future__ import annotations

from spark_watchd.sample.driverlines import kernel_line_kind, parse_kernel_line
from spark_watchd.sample.schema import FLOAT, INT, STR, key, traced
from spark_watchd.sample.validate import I64, MAX

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


@traced(name="driver_events: ", strict=True)
class DriverEvent:
    """A fault the driver or kernel reported; `xid` is None for non-Xid lines (NV_ERR_NO_MEMORY, AER).

    Optional (trace-v1, added with issue 18): `pci`, `count` and `boot_end_ts`.
    """

    ts: float = key(FLOAT, 0, MAX, need=True, doc="when the fault was reported")
    # null: a kernel-log line names a PCI address, not an NVML index
    gpu: int | None = key(INT, 0, 4096, doc="NVML index of the GPU")
    xid: int | None = key(INT, 0, I64, doc="Xid code; null for non-Xid lines")
    source: str = key(STR, choices=DRIVER_EVENT_SOURCES, default="journal", doc="event API or kernel log")
    text: str = key(STR, default="", doc="the line as reported")
    pci: str | None = key(STR, optional=True, doc='the PCI address a kernel line names ("0000:01:00.0")')
    count: int = key(
        INT, 1, I64, default=1, optional=True, doc="identical lines folded into this one (a storm)"
    )
    boot_end_ts: float | None = key(
        FLOAT, 0, MAX, optional=True, doc="a previous boot's line: that boot's last journal entry"
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
