"""Known-bad combinations of the platform, as data: each entry says when it applies, what follows, what to do
and where it was reported. Adding one is one entry here and one test in tests/diagnose/test_platform_known.py.

An entry's `applies(box)` is pure: it reads the boot's platform, the latest meminfo, whether the host has RDMA
ports, the GPU names NVML gave and the Xids seen this boot (`Box`), and answers the evidence in words, or None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_watchd.sample.platform import PlatformReading


@dataclass(frozen=True, slots=True)
class Box:
    """What the known-bad entries read: the boot's platform and a few readings of the latest sample."""

    platform: PlatformReading
    meminfo: Mapping[str, int] = field(default_factory=dict)
    rdma_ports: int = 0  # RDMA ports the link source lists (a Spark: 4)
    gpu_names: tuple[str, ...] = ()
    xids: frozenset[int] = frozenset()  # Xid codes the driver logged this boot

    @property
    def spark(self) -> bool:
        """A GB10 box: NVML names a GB10, or DGX OS's release file gives an OTA level."""
        return any("GB10" in n for n in self.gpu_names) or self.platform.ota is not None


@dataclass(frozen=True, slots=True)
class KnownBad:
    """One known-bad combination."""

    key: str  # the `check` label of sparkwatchd_platform_problem, bounded by this table
    applies: Callable[[Box], str | None]
    advice: str
    source: str  # the public reports it rests on


def _cma_zero(box: Box) -> str | None:
    total, free = box.meminfo.get("CmaTotal"), box.meminfo.get("CmaFree") or 0
    if total != 0 or not box.rdma_ports or not (free > 0 or box.spark):
        return None
    return (
        f"CmaTotal is 0 kB (CmaFree {free} kB) on a box with {box.rdma_ports} RDMA port(s): RDMA memory "
        "registration (ibv_reg_mr) fails with ENOMEM and NCCL stops at rendezvous with NV_ERR_NO_MEMORY"
    )


def _proprietary_blackwell(box: Box) -> str | None:
    p = box.platform
    if p.driver_flavour != "proprietary" or not (box.spark or 169 in box.xids):
        return None
    seen = "; the driver logs Xid 169" if 169 in box.xids else ""
    version = f" {p.driver}" if p.driver else ""
    return (
        f"the proprietary NVIDIA{version} kernel modules are loaded on a Blackwell GPU (GB10), which only the "
        f"open modules initialise (Xid 169 and 'RmInitAdapter failed!' about every 60 s){seen}"
    )


def _kernel(prefix: str, what: str) -> Callable[[Box], str | None]:
    def applies(box: Box) -> str | None:
        k = box.platform.kernel
        return f"kernel {k}: owners report {what}" if k is not None and k.startswith(prefix) else None

    return applies


KNOWN_BAD: tuple[KnownBad, ...] = (
    KnownBad(
        "cma_zero_rdma",
        _cma_zero,
        "Boot the previous kernel (owners went back to 6.17.0-1031/1032-nvidia with driver 580.173.02), or add "
        "kho=off to the kernel command line; after the reboot /proc/meminfo should show CmaFree at or below "
        "CmaTotal.",
        "luxingcom/aicad-nccl-optimization#1; NVIDIA/open-gpu-kernel-modules#1358; "
        "MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#259 (kho=off)",
    ),
    KnownBad(
        "proprietary_modules_blackwell",
        _proprietary_blackwell,
        "Install the open kernel modules (DGX OS ships nvidia-driver-580-open) and reboot: a GPU reset cannot "
        "help, the proprietary modules never initialise a Blackwell GPU.",
        "Start9Labs/start-technologies PR 3693 (NVIDIA's driver README: Blackwell and later are only supported "
        "by the open kernel modules)",
    ),
    KnownBad(
        "kernel_6_17_0_1008",
        _kernel(
            "6.17.0-1008-",
            "it panicking (EFI pstore records), after which the driver can fail on every later boot "
            "(PCI DOE mailbox timeouts, 'Failed to query NVIDIA devices')",
        ),
        "If this box panics or resets, boot a later 6.17 kernel (GRUB's Advanced options keep the installed ones).",
        "NVIDIA developer forum: '[Root Cause Analysis] DGX Spark driver failure - kernel 6.17.0-1008-nvidia "
        "aarch64 panics cause DOE mailbox failure (pstore evidence)' (topic 366026, DGX OS 7.4.0 OTA); "
        "pytorch/pytorch#174358 (field logs by kernel)",
    ),
    KnownBad(
        "kernel_7_0_0_1019",
        _kernel(
            "7.0.0-1019-",
            "NCCL failing at rendezvous with ENOMEM and NV_ERR_NO_MEMORY, and whole-host wedges needing a power cycle",
        ),
        "Boot 6.17.0-1031-nvidia or 6.17.0-1032-nvidia (still installed: GRUB's Advanced options) until a "
        "fixed kernel ships; hold the linux-nvidia-hwe metapackage so apt upgrade does not pull 7.0 back.",
        "NVIDIA/open-gpu-kernel-modules#1358; MiaAI-Lab/DeepSeek-v4.1-Flash-DGX-Sparks#14",
    ),
)


def known_bad(box: Box) -> list[dict[str, Any]]:
    """Each entry that applies: {check, summary, advice, source}, in table order."""
    out = []
    for entry in KNOWN_BAD:
        summary = entry.applies(box)
        if summary is not None:
            out.append(
                {"check": entry.key, "summary": summary, "advice": entry.advice, "source": entry.source}
            )
    return out
