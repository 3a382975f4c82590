"""trace-v1 `driver_events[]`: one GPU driver fault (an Xid, a driver out-of-memory, a PCIe AER fatal error)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DRIVER_EVENT_SOURCES = ("nvml", "journal")


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


# What a kernel log line says, for the lines worth a driver event. NV_ERR_NO_MEMORY is the driver failing
# to allocate from the unified pool (owners report a silent whole-host wedge right after it under memory
# pressure); AER fatal errors are PCIe links going down (a dual-Spark pair's ConnectX-7 can soft-lock the host).
_XID = re.compile(r"NVRM: Xid \((?P<pci>[^)]*)\): (?P<xid>\d+)\b")
_NO_MEMORY = re.compile(r"NVRM: .*\[NV_ERR_NO_MEMORY\]")
_AER_FATAL = re.compile(r"AER: .*Uncorrect\w* \(Fatal\)|severity=Uncorrect\w* \(Fatal\)")


def kernel_line_kind(text: str) -> tuple[str, int | None] | None:
    """("xid", code), ("driver_oom", None) or ("pcie_fatal", None) for a kernel log line; None for the rest."""
    if "NVRM" in text:
        m = _XID.search(text)
        if m:
            return "xid", int(m.group("xid"))
        if _NO_MEMORY.search(text):
            return "driver_oom", None
    if "Fatal" in text and _AER_FATAL.search(text):
        return "pcie_fatal", None
    return None


def event_kind(ev: DriverEvent) -> str:
    """xid, driver_oom, pcie_fatal, or other: what a recorded driver event is."""
    if ev.xid is not None:
        return "xid"
    k = kernel_line_kind(ev.text)
    return k[0] if k else "other"
