"""`platform`: the boot's kernel, NVIDIA driver and flavour, CUDA driver, BIOS, SOC and NIC firmware, DGX OTA level.

Every file is world-readable, so no root is needed:
- /proc/sys/kernel/osrelease: the kernel release (`uname -r`).
- /proc/driver/nvidia/version: `NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.173.02  ...` for
  the open modules, `NVRM version: NVIDIA UNIX aarch64 Kernel Module  580.173.02  ...` for the proprietary
  ones; without it /sys/module/nvidia/version gives the version and /sys/module/nvidia/taint the flavour
  (`P`: a proprietary module, Documentation/admin-guide/tainted-kernels.rst; the open modules are MIT/GPL).
- the CUDA driver API version NVML reports, passed on by the nvml source (`_cuda_driver_version`).
- /sys/class/dmi/id/bios_version and bios_date.
- /sys/firmware/efi/esrt/entries/*/{fw_class,fw_version}: the SOC firmware's UEFI capsule entry, by its class.
- /sys/class/infiniband/<dev>/fw_ver: the ConnectX-7 firmware, per RDMA device.
- /etc/dgx-release: `DGX_OTA_VERSION="7.5.0"` on DGX OS.

Each part fails alone: an absent file is None (not exposed here), an unreadable or unparsable one is None with
its reason in `errors`. The files change only with a reboot or a driver reload, so they are read at the first
tick and again every `platform_refresh_s`, and the `platform` key is returned only when the reading differs
from the one returned before (the first tick of a daemon, a reload, NVML answering late): once per boot.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from spark_watchd.sample.platform import MAX_NICS, MAX_TEXT, PlatformReading

_NVRM = re.compile(
    r"^NVRM version:\s+NVIDIA UNIX (Open )?.*?Kernel Module.*?\s(\d+\.\d+(?:\.\d+)?)(?=\s|$)", re.M
)
_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._:+~/ -]*$")  # what a version or a date looks like
_RELEASE_LINE = re.compile(r"^([A-Z_][A-Z0-9_]*)=(.*)$")
MAX_FILE = 4096  # every file read here is a line or two


class Unparsable(ValueError):
    """A platform file that exists but does not say what its format says it should."""


def parse_nvidia_version(text: str) -> tuple[str, str]:
    """/proc/driver/nvidia/version -> (driver version, "open" or "proprietary"), from its NVRM line only
    (the GCC line carries a version-shaped number too)."""
    m = _NVRM.search(text)
    if m is None:
        raise Unparsable("no 'NVRM version: NVIDIA UNIX ... Kernel Module <version>' line")
    return m.group(2), "open" if m.group(1) else "proprietary"


def parse_taint(text: str) -> str:
    """/sys/module/nvidia/taint (`POE`, `OE`) -> "proprietary" when it has P, else "open"."""
    flags = text.strip()
    if not re.fullmatch(r"[A-Z]*", flags):
        raise Unparsable(f"taint flags {flags[:20]!r} are not capital letters")
    return "proprietary" if "P" in flags else "open"


def parse_dgx_release(text: str) -> dict[str, str]:
    """/etc/dgx-release (shell assignments, values optionally quoted) -> {name: value}."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _RELEASE_LINE.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2).strip().strip("\"'")
    return out


def parse_version_text(text: str) -> str:
    """A one-line sysfs version or date (`28.45.4028`, `07/10/2026`) -> itself; Unparsable when not one."""
    v = text.strip()
    if not v or "\n" in v or len(v) > MAX_TEXT or not _VERSION.match(v):
        raise Unparsable(f"not a version: {v[:20]!r}")
    return v


def _read(path: str) -> str | None:
    """The file's text; None when absent (not exposed here). OSError other than absence propagates."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(MAX_FILE)
    except (FileNotFoundError, NotADirectoryError):
        return None


class _Reader:
    """One platform read: each part into `values`, each failure into `errors`, none stopping the rest."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    def part(self, name: str, path: str, parse: Callable[[str], Any]) -> Any:
        try:
            text = _read(path)
            return None if text is None else parse(text)
        except (OSError, UnicodeError, ValueError) as exc:
            self.errors[name] = f"{path}: {exc}"[:200]
            return None


def read_platform(
    proc_root: str = "/proc",
    sys_root: str = "/sys",
    dgx_release: str = "/etc/dgx-release",
    soc_esrt_class: str = "",
    cuda_driver: str | None = None,
) -> PlatformReading | None:
    """Everything the roots expose; None when they expose nothing at all (a bare fixture tree)."""
    r = _Reader()
    v = r.values
    v["kernel"] = r.part("kernel", os.path.join(proc_root, "sys/kernel/osrelease"), parse_version_text)
    nv = r.part("driver", os.path.join(proc_root, "driver/nvidia/version"), parse_nvidia_version)
    v["driver"], v["driver_flavour"] = nv if nv is not None else (None, None)
    module = os.path.join(sys_root, "module", "nvidia")
    if v["driver"] is None:  # /proc/driver/nvidia absent (a container without it): the module's own files
        v["driver"] = r.part("driver", os.path.join(module, "version"), parse_version_text)
    if v["driver_flavour"] is None and v["driver"] is not None:
        v["driver_flavour"] = r.part("driver_flavour", os.path.join(module, "taint"), parse_taint)
    v["cuda_driver"] = cuda_driver
    dmi = os.path.join(sys_root, "class", "dmi", "id")
    v["bios_version"] = r.part("bios_version", os.path.join(dmi, "bios_version"), parse_version_text)
    v["bios_date"] = r.part("bios_date", os.path.join(dmi, "bios_date"), parse_version_text)
    v["soc_firmware"] = _soc_firmware(r, sys_root, soc_esrt_class)
    release = r.part("ota", dgx_release, parse_dgx_release)
    v["ota"] = (release or {}).get("DGX_OTA_VERSION") or None
    nics = {}
    ib = os.path.join(sys_root, "class", "infiniband")
    for dev in _listdir(ib)[:MAX_NICS]:
        fw = r.part("nic_firmware", os.path.join(ib, dev, "fw_ver"), parse_version_text)
        if fw is not None:
            nics[dev] = fw
    if not any(v.values()) and not nics and not r.errors:
        return None
    return PlatformReading(**v, nic_firmware=nics, errors=r.errors)


def _soc_firmware(r: _Reader, sys_root: str, esrt_class: str) -> str | None:
    """The fw_version of the ESRT entry whose fw_class starts with `esrt_class` (case-insensitive)."""
    if not esrt_class:
        return None
    base = os.path.join(sys_root, "firmware", "efi", "esrt", "entries")
    for entry in _listdir(base):
        cls = r.part("soc_firmware", os.path.join(base, entry, "fw_class"), str.strip)
        if cls and cls.lower().startswith(esrt_class.lower()):
            return r.part("soc_firmware", os.path.join(base, entry, "fw_version"), parse_version_text)
    return None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


class PlatformSource:
    """`platform`: read at the first tick and every `refresh_s`; returned only when it changed."""

    name = "platform"

    def __init__(
        self,
        proc_root: str = "/proc",
        sys_root: str = "/sys",
        dgx_release: str = "/etc/dgx-release",
        soc_esrt_class: str = "",
        refresh_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._args = (proc_root, sys_root, dgx_release, soc_esrt_class)
        self.refresh_s = refresh_s
        self.clock = clock
        self._read_at: float | None = None
        self._cuda: str | None = None
        self.latest: PlatformReading | None = None  # the reading last returned

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        now = self.clock()
        cuda = partial.get("_cuda_driver_version") or self._cuda
        due = self._read_at is None or (self.refresh_s > 0 and now - self._read_at >= self.refresh_s)
        if not due and cuda == self._cuda:
            return {}
        self._read_at, self._cuda = now, cuda
        reading = read_platform(*self._args, cuda_driver=cuda)
        if reading is None or reading == self.latest:
            return {}
        self.latest = reading
        return {"platform": reading}

    def close(self) -> None:
        """Nothing held open."""
