"""The /proc sources: meminfo (with the fast watch's window minimum), psi, vmstat, boot."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any

from spark_watchd.sources.memwatch import MemWatch
from spark_watchd.sources.parsers import (
    parse_boot_id,
    parse_meminfo,
    parse_psi,
    parse_uptime,
    parse_vmstat,
    parsed,
    read_optional,
    read_proc,
)


class _ProcFiles:
    """What the /proc sources share: the root they read under; nothing held open between ticks."""

    def __init__(self, proc_root: str = "/proc"):
        self.proc_root = proc_root

    def close(self) -> None:
        """Nothing to release: every read opens and closes its file."""


class MeminfoSource:
    """`meminfo` and `mem_available_min_kb` (lowest MemAvailable since the previous collect).

    With a MemWatch the minimum covers readings every 1-2 s between ticks;
    without one (watch_interval_s=0, `once`) it is this reading's MemAvailable.
    The watch thread starts at the first collect and stops at close().
    Also returns the private `_psi_some_avg10_max` (peak PSI some avg10 in the window).
    """

    name = "meminfo"

    def __init__(self, proc_root: str = "/proc", watch_interval_s: float = 1.0):
        self.proc_root = proc_root
        self.watch = MemWatch(proc_root, watch_interval_s) if watch_interval_s > 0 else None

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        path = os.path.join(self.proc_root, "meminfo")
        meminfo = parsed(parse_meminfo, read_proc(self.proc_root, "meminfo"), path)
        avail = meminfo.get("MemAvailable")
        window_min, some_max = (None, None)
        if self.watch is not None:
            window_min, some_max = self.watch.take_window()
            self.watch.start()
        lows = [v for v in (avail, window_min) if v is not None]
        return {
            "meminfo": meminfo,
            "mem_available_min_kb": min(lows) if lows else None,
            "_psi_some_avg10_max": some_max,
        }

    def close(self) -> None:
        if self.watch is not None:
            self.watch.stop()


class PsiSource(_ProcFiles):
    """`psi_memory` from /proc/pressure/memory; None (source still up) where the kernel has no PSI."""

    name = "psi"

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        text = read_optional(self.proc_root, "pressure/memory")
        if text is None:
            # Kernels built without CONFIG_PSI, or booted with psi=0: not supported, not an error.
            return {"psi_memory": None}
        return {"psi_memory": parsed(parse_psi, text, os.path.join(self.proc_root, "pressure/memory"))}


class VmstatSource(_ProcFiles):
    """`vmstat`: every cumulative counter of /proc/vmstat (pgmajfault, pswpin, pswpout, oom_kill...)."""

    name = "vmstat"

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        path = os.path.join(self.proc_root, "vmstat")
        return {"vmstat": parsed(parse_vmstat, read_proc(self.proc_root, "vmstat"), path)}


class BootSource(_ProcFiles):
    """`boot_id`, `uptime_s` and `host`: what reboot detection needs; `kernel`, the running release."""

    name = "boot"

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        root = self.proc_root
        boot_id = parsed(
            parse_boot_id,
            read_proc(root, "sys/kernel/random/boot_id"),
            os.path.join(root, "sys/kernel/random/boot_id"),
        )
        uptime = parsed(parse_uptime, read_proc(root, "uptime"), os.path.join(root, "uptime"))
        host_text = read_optional(root, "sys/kernel/hostname")
        host = host_text.strip() if host_text and host_text.strip() else socket.gethostname()
        release = read_optional(
            root, "sys/kernel/osrelease"
        )  # which kernel: CMA and driver faults differ by it
        kernel = release.strip()[:128] if release and release.strip().isprintable() else None
        return {"boot_id": boot_id, "uptime_s": uptime, "host": host, "kernel": kernel}
