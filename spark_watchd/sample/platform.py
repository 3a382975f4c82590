"""The software and firmware the workload runs on, read once per boot: the trace-v1 `platform` field.

Kernel release, NVIDIA driver version and module flavour (open or proprietary: Blackwell, GB10
included, initialises only under the open modules), the CUDA driver API version, BIOS, SOC and
ConnectX-7 firmware, and the DGX OTA level. Every value is a short version string or None where the
host does not expose it; `errors` names the files that exist but could not be read or parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_watchd.sample.validate import FieldError

FLAVOURS = ("open", "proprietary")
MAX_NICS = 16  # as many RDMA devices as sources/link.py reads ports of: a GB10 shows 4
MAX_TEXT = 64  # a version string longer than this is not a version: cut, so labels stay short
# The string fields, in to_dict order (nic_firmware and errors are maps).
TEXT_FIELDS = (
    "kernel",
    "driver",
    "driver_flavour",
    "cuda_driver",
    "bios_version",
    "bios_date",
    "soc_firmware",
    "ota",
)


def _text(v: Any, key: str) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise TypeError(f"'platform.{key}' must be a string, got {type(v).__name__}")
    return v[:MAX_TEXT]


def _strings(v: Any, key: str, limit: int) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise TypeError(f"'platform.{key}' must be an object, got {type(v).__name__}")
    out: dict[str, str] = {}
    for k, x in v.items():
        if len(out) >= limit:
            break
        if not isinstance(x, str):
            raise TypeError(f"'platform.{key}.{k}' must be a string, got {type(x).__name__}")
        out[str(k)[:MAX_TEXT]] = x[:MAX_TEXT]
    return out


@dataclass(frozen=True, slots=True)
class PlatformReading:
    """The boot's stack; None where not exposed (no NVIDIA driver, no DMI, no RDMA device, not DGX OS)."""

    kernel: str | None = None  # /proc/sys/kernel/osrelease, e.g. 6.17.0-1031-nvidia
    driver: str | None = None  # /proc/driver/nvidia/version (or /sys/module/nvidia/version)
    driver_flavour: str | None = None  # "open" or "proprietary"
    cuda_driver: str | None = None  # the CUDA driver API version NVML reports, e.g. 13.0
    bios_version: str | None = None  # /sys/class/dmi/id/bios_version
    bios_date: str | None = None  # /sys/class/dmi/id/bios_date
    soc_firmware: str | None = None  # where a file exposes it (see sources/platform.py)
    ota: str | None = None  # /etc/dgx-release DGX_OTA_VERSION
    nic_firmware: Mapping[str, str] = field(default_factory=dict)  # RDMA device -> fw_ver
    errors: Mapping[str, str] = field(default_factory=dict)  # field -> why it is None although present

    @property
    def cx7_firmware(self) -> str | None:
        """The ConnectX firmware: the one version every RDMA device reports (a Spark's four share one NIC)."""
        versions = sorted(set(self.nic_firmware.values()))
        return versions[0] if len(versions) == 1 else ("/".join(versions) if versions else None)

    def to_dict(self) -> dict[str, Any]:
        """The trace-v1 `platform` object."""
        d: dict[str, Any] = {k: getattr(self, k) for k in TEXT_FIELDS}
        d["nic_firmware"] = dict(self.nic_firmware)
        if self.errors:
            d["errors"] = dict(self.errors)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PlatformReading:
        """Build from a trace-v1 `platform` object; a wrong shape names its key, unknown keys are ignored."""
        if not isinstance(d, Mapping):
            raise TypeError(f"'platform' must be an object, got {type(d).__name__}")
        flavour = _text(d.get("driver_flavour"), "driver_flavour")
        if flavour is not None and flavour not in FLAVOURS:
            raise ValueError(f"'platform.driver_flavour' must be 'open' or 'proprietary', got {flavour!r}")
        texts = [_text(d.get(k), k) for k in TEXT_FIELDS]
        return cls(
            *texts,
            _strings(d.get("nic_firmware"), "nic_firmware", MAX_NICS),
            _strings(d.get("errors"), "errors", len(TEXT_FIELDS) + 1),
        )

    def changes(self, before: PlatformReading) -> list[tuple[str, str | None, str | None]]:
        """(what, before, now) for each part that differs from `before`, in a fixed order."""
        pairs = (
            ("kernel", before.kernel, self.kernel),
            ("driver", before.driver, self.driver),
            ("driver flavour", before.driver_flavour, self.driver_flavour),
            ("CUDA driver", before.cuda_driver, self.cuda_driver),
            ("BIOS", before.bios_version, self.bios_version),
            ("SOC firmware", before.soc_firmware, self.soc_firmware),
            ("ConnectX-7 firmware", before.cx7_firmware, self.cx7_firmware),
            ("DGX OTA", before.ota, self.ota),
        )
        # A part one boot could not read is no change: only two known values that differ are.
        return [(what, a, b) for what, a, b in pairs if a is not None and b is not None and a != b]


def check_platform(v: Any, where: str) -> None:
    """The trace-v1 `platform` object as trace readers accept it: what from_dict refuses, named."""
    try:
        PlatformReading.from_dict(v)
    except (TypeError, ValueError) as exc:
        raise FieldError(where, str(exc)) from None
