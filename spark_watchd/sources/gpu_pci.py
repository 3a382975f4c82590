"""Which GPU index a PCI address is: NVML's PCI bus ids, or the NVIDIA display devices under /sys/bus/pci.

A kernel line names its GPU by PCI address (`NVRM: Xid (PCI:0000:01:00): 79`); the metrics and the
findings use NVML's index. NVML enumerates GPUs in PCI bus order, so without NVML (the driver lost, or
NVML not in use) the index is the device's place among the NVIDIA display controllers (vendor 0x10de,
class 0x03xxxx) sorted by address.
"""

from __future__ import annotations

import os
from typing import Any

from spark_watchd.sample.driverlines import normalize_pci

NVIDIA_VENDOR = "0x10de"


def nvml_pci_index(nv: Any, indices: list[int]) -> dict[str, int]:
    """{PCI address: index} from nvmlDeviceGetPciInfo(handle).busId; devices that do not answer are left out."""
    out: dict[str, int] = {}
    for i in indices:
        try:
            bus = nv.nvmlDeviceGetPciInfo(nv.nvmlDeviceGetHandleByIndex(i)).busId
        except Exception:
            continue
        pci = normalize_pci(bus.decode("ascii", "replace") if isinstance(bus, bytes) else str(bus))
        if pci is not None:
            out[pci] = i
    return out


def sysfs_pci_index(sys_root: str = "/sys") -> dict[str, int]:
    """{PCI address: index} of the NVIDIA display controllers under SYS_ROOT/bus/pci/devices, in bus order."""
    root = os.path.join(sys_root, "bus", "pci", "devices")
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return {}
    gpus = []
    for name in names:
        try:
            with open(os.path.join(root, name, "vendor")) as fh:
                vendor = fh.read().strip().lower()
            with open(os.path.join(root, name, "class")) as fh:
                cls = fh.read().strip().lower()
        except OSError:
            continue
        if vendor == NVIDIA_VENDOR and cls.startswith("0x03") and (pci := normalize_pci(name)) is not None:
            gpus.append(pci)
    return {pci: i for i, pci in enumerate(sorted(gpus))}
