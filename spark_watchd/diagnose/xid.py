"""The common Xid codes: what each means, what to do next, and whether the GPU needs a reset or power cycle.

From NVIDIA's public Xid catalog (docs.nvidia.com/deploy/xid-errors) as gpud and dcgm-exporter use it.
`fatal` marks codes after which the GPU (or the whole host) needs a reset, reboot or power cycle; the
others are usually one application's fault and the GPU keeps working. The code set is bounded: anything
not here is exported as xid="other".
"""

from __future__ import annotations

from typing import NamedTuple


class XidInfo(NamedTuple):
    meaning: str
    next_step: str
    fatal: bool


XIDS: dict[int, XidInfo] = {
    13: XidInfo(
        "graphics engine exception (illegal instruction or out-of-range address in a kernel)",
        "Usually the application's bug: rerun it under compute-sanitizer; if many programs hit it, update the driver.",
        False,
    ),
    31: XidInfo(
        "GPU memory page fault (MMU fault: an illegal address)",
        "Usually the application: rerun under compute-sanitizer; repeated across programs points at the driver.",
        False,
    ),
    43: XidInfo(
        "GPU stopped processing (a channel was reset after an application fault)",
        "The job's context died while the GPU stays usable: restart the job.",
        False,
    ),
    45: XidInfo(
        "preemptive cleanup of a channel (a killed process or an earlier error)",
        "Usually harmless on its own: read the Xid logged just before it.",
        False,
    ),
    48: XidInfo(
        "double-bit ECC error (uncorrectable memory error)",
        "Reset the GPU or reboot; if it comes back, the memory is failing: contact support.",
        True,
    ),
    61: XidInfo(
        "internal micro-controller breakpoint or warning",
        "Reboot the host; update the driver if it recurs.",
        True,
    ),
    62: XidInfo(
        "internal micro-controller halt",
        "Reboot the host; update the driver or firmware if it recurs.",
        True,
    ),
    63: XidInfo(
        "ECC page retirement or row remapping recorded",
        "Reset the GPU (or reboot) at a convenient time so the remapping takes effect.",
        False,
    ),
    64: XidInfo(
        "ECC page retirement or row remapping failed to record",
        "Reboot; if it recurs the memory is failing: contact support.",
        True,
    ),
    69: XidInfo(
        "graphics engine class error",
        "Restart the application; update the driver if it recurs with several programs.",
        False,
    ),
    74: XidInfo(
        "NVLink error",
        "Reset the GPU or reboot; check the link and the firmware if it recurs.",
        True,
    ),
    79: XidInfo(
        "GPU fell off the bus",
        "Power-cycle (AC off 60 s); check the power brick, heat and the driver version: nothing reaches the GPU "
        "until then.",
        True,
    ),
    92: XidInfo(
        "high single-bit ECC error rate",
        "Watch it: corrected errors are harmless until they grow; contact support if the rate climbs.",
        False,
    ),
    94: XidInfo(
        "contained ECC error (one application affected)",
        "Restart the affected application; the GPU keeps working.",
        False,
    ),
    95: XidInfo(
        "uncontained ECC error (every application on the GPU affected)",
        "Reset the GPU or reboot now.",
        True,
    ),
    109: XidInfo(
        "context switch timeout (an engine stopped responding)",
        "The job is hung on the GPU: kill and restart it; reboot if the GPU stays stuck.",
        False,
    ),
    119: XidInfo(
        "GSP RPC timeout (the GPU's firmware processor stopped answering)",
        "Reboot the host; update the driver if it recurs.",
        True,
    ),
    120: XidInfo(
        "GSP error (the GPU's firmware processor faulted)",
        "Reboot the host; update the driver if it recurs.",
        True,
    ),
    121: XidInfo(
        "C2C link corrected error (the CPU-GPU chip-to-chip link)",
        "Corrected on its own; contact support if it repeats often.",
        False,
    ),
    154: XidInfo(
        "GPU recovery action changed (the driver names the reset, reboot or drain it needs)",
        "Do what the message asks (GPU reset, node reboot, or drain and reset).",
        True,
    ),
}
# Label values of sparkwatchd_gpu_xid_errors_total{xid}: the table's codes plus "other" (bounded).
XID_LABELS = tuple(str(c) for c in sorted(XIDS)) + ("other",)
FATAL_XIDS = frozenset(c for c, i in XIDS.items() if i.fatal)
# The hung-engine pattern (full utilisation at idle power, cooling) names these when the driver logged one.
HUNG_ENGINE_XIDS = (43, 109)


def xid_label(code: int | None) -> str:
    """The bounded metric label for an Xid code."""
    return str(code) if code in XIDS else "other"


def describe(code: int) -> XidInfo:
    """Meaning, next step and fatal flag of an Xid; unknown codes get a pointer to NVIDIA's catalog."""
    return XIDS.get(
        code,
        XidInfo(
            "an Xid not in spark-watchd's table",
            "Look it up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors); reboot if the GPU misbehaves.",
            False,
        ),
    )
