"""PCI address to GPU index: NVML's bus ids first, the NVIDIA display devices under /sys/bus/pci without it."""

from __future__ import annotations

from types import SimpleNamespace

from spark_watchd.sample.driverlines import normalize_pci
from spark_watchd.sources.gpu_pci import nvml_pci_index, sysfs_pci_index


class _Nvml:
    """nvmlDeviceGetPciInfo as nvidia-ml-py answers it: busId bytes with an 8-digit domain."""

    def __init__(self, buses):
        self.buses = buses

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetPciInfo(self, handle):
        bus = self.buses[handle]
        if bus is None:
            raise RuntimeError("Not Supported")
        return SimpleNamespace(busId=bus)


def test_nvml_bus_ids_map_kernel_addresses_to_indices():
    nv = _Nvml([b"0000000F:01:00.0", "00000000:81:00.0", None])
    assert nvml_pci_index(nv, [0, 1, 2]) == {"000f:01:00.0": 0, "0000:81:00.0": 1}
    assert normalize_pci("PCI:000f:01:00") == "000f:01:00.0"  # the Xid line's form of GPU 0


def test_sysfs_lists_nvidia_display_controllers_in_bus_order(tmp_path):
    devices = {
        "0000:81:00.0": ("0x10de", "0x030200"),
        "000f:01:00.0": ("0x10de", "0x030000"),
        "0000:81:00.1": ("0x10de", "0x040300"),  # the GPU's audio function: not a GPU
        "0000:00:01.0": ("0x8086", "0x060400"),
    }
    for name, (vendor, cls) in devices.items():
        d = tmp_path / "bus" / "pci" / "devices" / name
        d.mkdir(parents=True)
        (d / "vendor").write_text(vendor + "\n")
        (d / "class").write_text(cls + "\n")
    assert sysfs_pci_index(str(tmp_path)) == {"0000:81:00.0": 0, "000f:01:00.0": 1}
    assert sysfs_pci_index(str(tmp_path / "missing")) == {}
