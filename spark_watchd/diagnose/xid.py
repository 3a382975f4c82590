"""The Xid table: every code in NVIDIA's published Xid catalog, its meaning, resolution and next step.

Source: NVIDIA's Xid catalog for Ampere and newer GPUs, docs.nvidia.com/deploy/xid-errors
("Analyzing Xid Errors with the Xid Catalog", the spreadsheet's Resolution Bucket (Immediate Action)), the
same catalog gpud generates its table from and NVSentinel checks its own against. Codes the catalog marks
unused on every GPU are left out; 61 is from the catalog for older GPUs. The resolution is one of
`none`, `restart the application`, `reset the GPU`, `reboot the node`, from the immediate action:
IGNORE -> none; RESTART_APP, CHECK_UVM -> restart the application; RESET_GPU and the reset workflows
(WORKFLOW_XID_48, WORKFLOW_NVLINK_ERR, WORKFLOW_NVLINK5_ERR) -> reset the GPU; RESTART_BM, RESTART_VM,
CHECK_MECHANICALS, XID_154 -> reboot the node. Where the catalog gives no bucket (162-172) the resolution is
the one its description states. `fatal` marks reset and reboot: after them the GPU (or the whole host) needs
a reset, reboot or power cycle, and such an Xid may be what ended a boot. A code outside the table is
"unknown Xid N: see NVIDIA's Xid catalog" and treated as possibly fatal, never silently as harmless.
"""

from __future__ import annotations

from typing import NamedTuple


class XidInfo(NamedTuple):
    meaning: str
    next_step: str
    fatal: bool
    resolution: str = "unknown"


RESOLUTIONS = {
    "N": "none",
    "A": "restart the application",
    "G": "reset the GPU",
    "R": "reboot the node",
}
_NEXT = {
    "N": "Nothing to do on its own: the GPU keeps working (read the Xid logged beside it).",
    "A": "Restart the application; if different programs keep hitting it, update the driver.",
    "G": "Reset the GPU (on a Spark: reboot the host); if it comes back after the reset, contact support.",
    "R": "Reboot the node (on a Spark a full power cycle, AC off 60 s); update the driver if it recurs.",
}
# (code, meaning, resolution bucket) in catalog order.
_CATALOG: tuple[tuple[int, str, str], ...] = (
    (8, "GPU stopped processing (a channel idle timeout)", "A"),
    (11, "invalid or corrupted push buffer stream", "A"),
    (13, "graphics engine exception (illegal instruction or out-of-range address in a kernel)", "A"),
    (14, "fake or injected error from user space", "N"),
    (25, "invalid or illegal push buffer stream", "A"),
    (31, "GPU memory page fault (MMU fault: an illegal address)", "A"),
    (32, "invalid or corrupted push buffer stream (the DMA controller; usually PCIe quality)", "A"),
    (37, "driver firmware error", "N"),
    (38, "driver firmware error (watchdog timeout)", "N"),
    (39, "copy engine exception", "A"),
    (40, "copy engine exception", "A"),
    (41, "copy engine exception", "A"),
    (43, "GPU stopped processing (a channel was reset after an application fault)", "N"),
    (44, "graphics engine fault during a context switch", "N"),
    (45, "preemptive cleanup of a channel (a killed process or an earlier error)", "N"),
    (46, "GPU stopped processing (a GPU timeout)", "G"),
    (48, "double-bit ECC error (uncorrectable memory error)", "G"),
    (54, "auxiliary power is not connected to the GPU board", "R"),
    (60, "video processor exception", "A"),
    (61, "internal micro-controller breakpoint or warning (older GPUs)", "R"),
    (62, "internal micro-controller halt", "G"),
    (63, "ECC page retirement or row remapping recorded", "N"),
    (64, "ECC page retirement or row remapping failed to record", "G"),
    (66, "illegal access by the driver", "N"),
    (67, "illegal access by the driver", "N"),
    (68, "NVDEC0 exception", "A"),
    (69, "graphics engine class error", "A"),
    (70, "copy engine 3 error", "A"),
    (71, "copy engine 4 error", "A"),
    (72, "copy engine 5 error", "A"),
    (74, "NVLink error", "G"),
    (75, "copy engine 6 error", "A"),
    (76, "copy engine 7 error", "A"),
    (77, "copy engine 8 error", "A"),
    (78, "vGPU start error", "A"),
    (79, "GPU fell off the bus", "R"),
    (80, "corrupted data sent to the GPU", "A"),
    (82, "NVJPG0 error", "A"),
    (83, "NVDEC1 error", "A"),
    (84, "NVDEC2 error", "A"),
    (85, "copy engine 9 error", "A"),
    (86, "optical flow accelerator exception", "A"),
    (88, "NVDEC3 error", "A"),
    (89, "NVDEC4 error", "A"),
    (92, "high single-bit ECC error rate", "N"),
    (93, "non-fatal violation of the provisioned InfoROM wear limit", "N"),
    (94, "contained ECC error (one application affected)", "A"),
    (95, "uncontained ECC error (every application on the GPU affected)", "G"),
    (96, "NVDEC5 error", "A"),
    (97, "NVDEC6 error", "A"),
    (98, "NVDEC7 error", "A"),
    (99, "NVJPG1 error", "A"),
    (100, "NVJPG2 error", "A"),
    (101, "NVJPG3 error", "A"),
    (102, "NVJPG4 error", "A"),
    (103, "NVJPG5 error", "A"),
    (104, "NVJPG6 error", "A"),
    (105, "NVJPG7 error", "A"),
    (106, "SMBPBI test message", "N"),
    (107, "SMBPBI test message (silent)", "N"),
    (108, "NVLink remote translation error", "N"),
    (109, "context switch timeout (an engine stopped responding)", "G"),
    (110, "security fault error", "G"),
    (119, "GSP RPC timeout (the GPU's firmware processor stopped answering)", "G"),
    (120, "GSP error (the GPU's firmware processor faulted)", "G"),
    (121, "C2C link corrected error (the CPU-GPU chip-to-chip link)", "N"),
    (126, "copy engine 10 error", "A"),
    (127, "copy engine 11 error", "A"),
    (128, "copy engine 12 error", "A"),
    (129, "copy engine 13 error", "A"),
    (130, "copy engine 14 error", "A"),
    (131, "copy engine 15 error", "A"),
    (132, "copy engine 16 error", "A"),
    (133, "copy engine 17 error", "A"),
    (134, "copy engine 18 error", "A"),
    (135, "copy engine 19 error", "A"),
    (136, "link training failed", "G"),
    (137, "NVLink privilege error (an illegal peer-to-peer access)", "N"),
    (139, "optical flow accelerator 1 error", "A"),
    (140, "unrecovered ECC error (pages could not be retired or remapped)", "G"),
    (141, "CUDA fast path error", "N"),
    (143, "GPU initialization error", "G"),
    (144, "NVLink SAW error", "G"),
    (145, "NVLink RLW error", "G"),
    (146, "NVLink TLW error", "G"),
    (147, "NVLink TREX error", "G"),
    (148, "NVLink NVLPW_CTRL error", "G"),
    (149, "NVLink NETIR error", "G"),
    (150, "NVLink MSE error", "G"),
    (151, "key rotation error", "R"),
    (154, "GPU recovery action changed (the driver names the reset, reboot or drain it needs)", "R"),
    (155, "NVLink software-defined error (a link taken down)", "G"),
    (156, "resource retirement event", "G"),
    (157, "resource retirement failure", "N"),
    (158, "GPU fatal timeout", "G"),
    (159, "CHI non-data error (the C2C link)", "A"),
    (160, "channel retirement event", "N"),
    (161, "channel retirement failure", "N"),
    (162, "power smoothing circuitry re-engaged", "N"),
    (163, "power smoothing circuitry disengaged", "N"),
    (164, "power smoothing circuitry low lifetime reached", "N"),
    (165, "power smoothing circuitry lifetime exhausted", "N"),
    (167, "PCIe fatal timeout", "G"),
    (168, "errors found in the write-protected region (reduced GPU memory capacity)", "R"),
    (169, "internal micro-controller halt (SEC2)", "G"),
    (171, "uncorrectable DRAM error (details of an Xid 48)", "G"),
    (172, "uncorrectable SRAM error (details of an Xid 48)", "G"),
)
# Next steps more precise than the resolution's, from the catalog's trigger conditions and field reports.
_STEPS = {
    13: "Usually the application's bug: rerun it under compute-sanitizer; if many programs hit it, update the driver.",
    31: "Usually the application: rerun under compute-sanitizer; repeated across programs points at the driver.",
    43: "The job's context died while the GPU stays usable: restart the job.",
    45: "Usually harmless on its own: read the Xid logged just before it.",
    48: "Reset the GPU or reboot; if it comes back, the memory is failing: contact support.",
    54: "Connect the board's auxiliary power, then reboot.",
    63: "Reset the GPU (or reboot) at a convenient time so the remapping takes effect.",
    79: "Power-cycle (AC off 60 s); check the power brick, heat and the driver version: nothing reaches the GPU "
    "until then.",
    92: "Watch it: corrected errors are harmless until they grow; contact support if the rate climbs.",
    94: "Restart the affected application; the GPU keeps working (reset it when convenient).",
    95: "Reset the GPU or reboot now.",
    109: "The job is hung on the GPU: kill it and reset the GPU (on a Spark: reboot) if it stays stuck.",
    119: "Reset the GPU or reboot; update the driver if it recurs after a power cycle.",
    120: "Reset the GPU or reboot; update the driver if it recurs after a power cycle.",
    121: "Corrected on its own; contact support if it repeats often.",
    154: "Do what the message asks (GPU reset, node reboot, or drain and reset).",
}
XIDS: dict[int, XidInfo] = {
    code: XidInfo(meaning, _STEPS.get(code, _NEXT[r]), r in "GR", RESOLUTIONS[r])
    for code, meaning, r in _CATALOG
}
FATAL_XIDS = frozenset(c for c, i in XIDS.items() if i.fatal)
# Label values of sparkwatchd_gpu_xid_errors_total{gpu,xid}, each held at 0 per GPU: the fatal codes, the
# common application faults, and "other" for the rest (bounded; an unknown code is "other" and alerts as fatal).
_COMMON = (13, 31, 43, 45, 63, 69, 92, 94, 121)
XID_LABELS = tuple(str(c) for c in sorted(FATAL_XIDS | set(_COMMON))) + ("other",)
# The hung-engine pattern (full utilisation at idle power, cooling) names these when the driver logged one.
HUNG_ENGINE_XIDS = (43, 109)
CATALOG_URL = "docs.nvidia.com/deploy/xid-errors"


def xid_label(code: int | None) -> str:
    """The bounded metric label for an Xid code."""
    return str(code) if code is not None and str(code) in XID_LABELS else "other"


# Next steps that depend on the NVIDIA kernel modules' flavour (the platform source): with the proprietary
# modules a Blackwell GPU (GB10) never initialises, logging Xid 169 and "RmInitAdapter failed!" about every
# 60 s; a reset cannot help, the open modules do (Start9Labs/start-technologies PR 3693).
FLAVOUR_STEPS = {
    (169, "proprietary"): "The proprietary NVIDIA kernel modules are loaded, and they never initialise a "
    "Blackwell GPU (GB10): install the open modules (nvidia-driver-580-open on DGX OS) and reboot; a GPU "
    "reset will not help.",
}


def describe(code: int, flavour: str | None = None) -> XidInfo:
    """Meaning, next step, fatal flag and resolution of an Xid; an unknown code is possibly fatal. `flavour`
    ("open", "proprietary" or None) picks the next step where the modules' flavour explains the code."""
    info = XIDS.get(code)
    if info is not None:
        step = FLAVOUR_STEPS.get((code, flavour))
        return info._replace(next_step=step, resolution="install the open kernel modules") if step else info
    return XidInfo(
        f"unknown Xid {code}: see NVIDIA's Xid catalog",
        f"Look it up in NVIDIA's Xid catalog ({CATALOG_URL}); until then treat it as fatal: reset the GPU "
        "or reboot if the GPU misbehaves.",
        True,
        "unknown",
    )
