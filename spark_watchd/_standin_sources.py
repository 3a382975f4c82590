"""Temporary stand-in live sources until spark_watchd.sources.build_sources lands (delete then).

Only /proc/meminfo, /proc/vmstat, /proc/pressure/memory and an NVML probe, so
the daemon runs end to end meanwhile.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from spark_watchd.sources.base import SourceUnavailable


def _read(root: str, name: str) -> str:
    try:
        with open(os.path.join(root, name), encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError as exc:
        raise SourceUnavailable(f"{os.path.join(root, name)}: {exc.strerror or exc}") from None


class _ProcStandin:
    name = "meminfo"

    def __init__(self, proc_root: str):
        self.root = proc_root

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        mem = {}
        for line in _read(self.root, "meminfo").splitlines():
            key, _, rest = line.partition(":")
            if rest.split():
                mem[key.strip()] = int(rest.split()[0])
        if "MemAvailable" not in mem:
            raise SourceUnavailable("meminfo has no MemAvailable")
        vm = {}
        for line in _read(self.root, "vmstat").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                vm[parts[0]] = int(parts[1])
        psi = None
        try:
            psi = {}
            for line in _read(self.root, "pressure/memory").splitlines():
                kind, *fields = line.split()
                psi[kind] = {k: float(v) for k, v in (f.split("=") for f in fields)}
        except SourceUnavailable:
            psi = None
        return {"meminfo": mem, "vmstat": vm, "psi_memory": psi, "mem_available_min_kb": mem["MemAvailable"]}

    def close(self) -> None:
        pass


class _NvmlProbe:
    name = "nvml"

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:
            raise SourceUnavailable(f"NVML unavailable: {exc}") from None
        pynvml.nvmlShutdown()
        return {"gpus": ()}

    def close(self) -> None:
        pass


def build_sources(settings) -> tuple:
    """The stand-in source tuple."""
    return (_NvmlProbe(), _ProcStandin(settings.sources.proc_root))
