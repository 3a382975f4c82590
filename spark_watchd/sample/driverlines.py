"""What a kernel message says about the GPU driver: pure recognition of the driver's own lines.

Trust rule (issue 18): the driver's text must START the message, with its documented prefix only:
`NVRM: ...` for the NVIDIA driver (every line of a multi-line message), `<driver> <PCI address>: AER: ...`
or `<driver> <PCI address>: PCIe Bus Error: severity=...` for a PCIe AER fatal error. Text that appears
inside another kernel message (a tmpfs mount option echoed in "tmpfs: Unknown parameter '...'") never
matches. Whether the message came from the kernel at all is the journal reader's check
(sources/driverlog.py); these functions only read the text.

A process report the kernel starts with the process's name (`<comm>[<pid>]: segfault ...`) is never the
driver's, whatever that name is; "fallen off the bus" counts only in the driver's own wordings below.

Recognised (each with its PCI address when the line names one, normalised to `dddd:bb:dd.f`):
- `NVRM: Xid (PCI:0000:01:00): 79, ...`, also `Xid (0000:03:00): 14` and `Xid (PCI:0000:b3:00.0): 79`;
- every wording of a GPU lost off the bus, as Xid 79 (as gpud and NVSentinel treat them):
  `NVRM: GPU 0000:29:00.0: GPU has fallen off the bus.`, the short `NVRM: GPU 18:00.0: ...`, and the
  probe-time report with no Xid at all, `NVRM: The NVIDIA GPU 0000:18:00.0 (PCI ID: 10de:1db6)` /
  `NVRM: installed in this system has` / `NVRM: fallen off the bus and is not responding to commands.`,
  in one message or in separate entries (the address carried from the first line through `ctx`);
- `NVRM: ... [NV_ERR_NO_MEMORY]` (driver_oom); an uncorrectable fatal PCIe AER error (pcie_fatal).
"""

from __future__ import annotations

import re
from typing import NamedTuple

_PCI = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
_XID = re.compile(rf"NVRM: Xid \((?:PCI:)?(?P<pci>{_PCI})\): (?P<xid>\d{{1,6}})(?![\d.])")
_BUS_LOST = re.compile(rf"NVRM: GPU (?:at )?(?:PCI:)?(?P<pci>{_PCI}):? (?:GPU )?has fallen off the bus")
_PROBE = re.compile(rf"NVRM: The NVIDIA GPU (?P<pci>{_PCI})(?![\w:])")
_NO_MEMORY = re.compile(r"NVRM: .*\[NV_ERR_NO_MEMORY\]")
_AER_FATAL = re.compile(
    rf"[\w.-]+ (?P<pci>{_PCI}): (?:AER: [^\n]*Uncorrect\w* \(Fatal\)|PCIe Bus Error: severity=Uncorrect\w* \(Fatal\))"
)
FALLEN = "fallen off the bus"
# The probe-time report's own lines that say it (the GPU named on the report's first line, `_PROBE`).
_FALLEN_LINE = re.compile(
    r"NVRM: (?:\(PCI ID: [^)]*\) )?(?:installed in this system has )?fallen off the bus"
)
# A process report ("<comm>[<pid>]: segfault ...", "... unhandled exception ...") starts with the process's
# name, which any user sets (prctl PR_SET_NAME, at most 15 characters): never the driver's line.
_PROCESS_REPORT = re.compile(r"[^\n]{1,15}\[\d+\]: ")
LOST_XID = 79
# A probe-time report split over entries names its GPU on the first line: carried this long.
_CARRY_S = 5.0


class KernelLine(NamedTuple):
    """A recognised driver line: kind (xid, driver_oom, pcie_fatal), the Xid code, the PCI address."""

    kind: str
    xid: int | None
    pci: str | None


def normalize_pci(text: str | None) -> str | None:
    """`0000:01:00.0` from `PCI:0000:01:00`, `18:00.0`, `00000000:01:00.0` (NVML's busId); None if not one."""
    if not text:
        return None
    m = re.fullmatch(
        r"(?:PCI:)?(?:(?P<dom>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})"
        r"(?:\.(?P<fn>[0-7]))?",
        text.strip(),
    )
    if m is None:
        return None
    dom = int(m.group("dom") or "0", 16)
    return f"{dom:04x}:{m.group('bus').lower()}:{m.group('dev').lower()}.{m.group('fn') or '0'}"


def parse_kernel_line(text: str, ctx: dict | None = None, ts: float | None = None) -> KernelLine | None:
    """The driver line a kernel message is, or None. `ctx` (one dict per feed) carries a split report's GPU."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return None
    if _PROCESS_REPORT.match(lines[0]):
        return None
    if lines[0].startswith("NVRM: "):
        if not all(ln.startswith("NVRM: ") for ln in lines):
            return None  # driver text below another line of the message is not the driver's
        return _nvrm(lines, ctx, ts)
    if len(lines) == 1 and "Fatal" in lines[0] and (m := _AER_FATAL.match(lines[0])):
        return KernelLine("pcie_fatal", None, normalize_pci(m.group("pci")))
    return None


def _nvrm(lines: list[str], ctx: dict | None, ts: float | None) -> KernelLine | None:
    for ln in lines:
        if m := _XID.match(ln):
            return KernelLine("xid", int(m.group("xid")), normalize_pci(m.group("pci")))
    for ln in lines:
        if m := _BUS_LOST.match(ln):
            return KernelLine("xid", LOST_XID, normalize_pci(m.group("pci")))
    probe = next((m for ln in lines if (m := _PROBE.match(ln))), None)
    if probe is not None and ctx is not None:
        ctx["probe_pci"] = (normalize_pci(probe.group("pci")), ts)
    if (probe is not None and any(FALLEN in ln for ln in lines)) or any(
        _FALLEN_LINE.match(ln) for ln in lines
    ):
        pci = normalize_pci(probe.group("pci")) if probe is not None else _carried(ctx, ts)
        return KernelLine("xid", LOST_XID, pci)
    if any(_NO_MEMORY.match(ln) for ln in lines):
        return KernelLine("driver_oom", None, None)
    return None


def _carried(ctx: dict | None, ts: float | None) -> str | None:
    """The GPU a split probe-time report named on its first line, if that line came just before."""
    if not ctx or "probe_pci" not in ctx:
        return None
    pci, at = ctx["probe_pci"]
    if ts is not None and at is not None and not (0 <= ts - at <= _CARRY_S):
        return None
    return pci


def kernel_line_kind(text: str) -> tuple[str, int | None] | None:
    """("xid", code), ("driver_oom", None) or ("pcie_fatal", None) for a kernel log line; None for the rest."""
    k = parse_kernel_line(text)
    return (k.kind, k.xid) if k is not None else None
