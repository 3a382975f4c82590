"""Sources: one module each, listed in one explicit tuple by build_sources()."""

from __future__ import annotations

import ctypes
import os
import shutil
import time
from collections.abc import Callable
from typing import Any

from spark_watchd.sources.base import Source, SourceUnavailable
from spark_watchd.sources.board import BoardSource
from spark_watchd.sources.driver_events import DriverEventsSource
from spark_watchd.sources.kernel import BootSource, MeminfoSource, PsiSource, VmstatSource
from spark_watchd.sources.link import LinkSource
from spark_watchd.sources.memcg import MemcgKillsSource
from spark_watchd.sources.nvml import NvmlSource
from spark_watchd.sources.oomkillers import OomKillersSource
from spark_watchd.sources.platform import PlatformSource
from spark_watchd.sources.processes import ProcessSource
from spark_watchd.sources.raylog import RayOomSource
from spark_watchd.sources.sensors import SensorsSource
from spark_watchd.sources.serving import ServingSource
from spark_watchd.sources.settings import SourcesSettings
from spark_watchd.sources.smi import SmiSource

__all__ = ["Source", "SourceUnavailable", "build_sources", "missing_sources", "nvml_library_problem"]

NVML_LIBRARY = "libnvidia-ml.so.1"


def _section(settings: Any) -> SourcesSettings:
    """Accept the root Settings or its `[sources]` section."""
    return getattr(settings, "sources", settings) if settings is not None else SourcesSettings()


def nvml_library_problem() -> str | None:
    """Why NVML cannot be loaded here (None when it can). Loads the library; initialises nothing."""
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return "nvidia-ml-py not installed"
    try:
        ctypes.CDLL(NVML_LIBRARY)
    except OSError:
        return f"{NVML_LIBRARY} not found"
    return None


def _smi_path(s: SourcesSettings) -> str | None:
    path = s.nvidia_smi_path
    if os.sep in path:
        return path if os.access(path, os.X_OK) else None
    return shutil.which(path)


def build_sources(
    settings: Any = None, nvml: Any = None, clock: Callable[[], float] = time.monotonic
) -> tuple[Source, ...]:
    """The sources in tick order: GPU (NVML, or nvidia-smi when NVML cannot load), meminfo, psi, vmstat,
    boot, processes, sensors, board (spbm; empty, not down, without the community driver), link (the RDMA
    ports: empty without an RDMA driver), platform (the boot's kernel, driver and firmware), driver_events (unless turned off), serving (the inference servers'
    own telemetry, with the root settings' [serving]). `nvml` is a fake NVML module, None for the real library. Without NVML and
    nvidia-smi the `nvml` source is still listed (and down)."""
    s = _section(settings)
    if nvml is None and nvml_library_problem() is not None and (smi := _smi_path(s)) is not None:
        gpu: Source = SmiSource(smi, timeout_s=s.nvidia_smi_timeout_s)
    else:
        gpu = NvmlSource(
            nvml,
            proc_root=s.proc_root,
            call_timeout_s=s.nvml_timeout_s,
            backoff_initial_s=s.nvml_backoff_initial_s,
            backoff_max_s=s.nvml_backoff_max_s,
            clock=clock,
            # The real library missing and no nvidia-smi to fall back on: every error says both.
            also=f"no {s.nvidia_smi_path} either" if nvml is None and nvml_library_problem() else None,
        )
    core: tuple[Source, ...] = (
        gpu,
        MeminfoSource(s.proc_root, watch_interval_s=s.fast_watch_interval_s),
        PsiSource(s.proc_root),
        VmstatSource(s.proc_root),
        BootSource(s.proc_root),
        ProcessSource(proc_root=s.proc_root),
        SensorsSource(s.sys_root),
        BoardSource(s.sys_root, clock=clock),
        LinkSource(s.sys_root),
    )
    if s.platform:  # after the GPU source: NVML passes on the CUDA driver version
        core += (
            PlatformSource(
                s.proc_root,
                s.sys_root,
                s.dgx_release_path,
                s.soc_firmware_esrt_class,
                refresh_s=s.platform_refresh_s,
                clock=clock,
            ),
        )
    if s.driver_events:
        core += (
            DriverEventsSource(
                nvml if isinstance(gpu, NvmlSource) else None,
                journalctl=s.journalctl_path or None,
                journal_timeout_s=s.journal_timeout_s,
                follow=s.kernel_log_follow,
                nvml_events=isinstance(gpu, NvmlSource),
            ),
        )
        if s.kernel_log_follow and s.journalctl_path:  # after it: appends to the kernel's oom_kills
            core += (OomKillersSource(s.journalctl_path),)
    if s.ray_log_dir:
        core += (
            RayOomSource(s.ray_log_dir, proc_root=s.proc_root),
        )  # Ray's memory monitor's kills, from its GCS log
    core += (MemcgKillsSource(s.proc_root, s.sys_root),)  # after the processes and the kill reports
    serving = getattr(
        settings, "serving", None
    )  # the root Settings carry [serving]; a bare [sources] does not
    if serving is not None and serving.enabled:
        core += (ServingSource(serving, interval_s=settings.daemon.interval, proc_root=s.proc_root),)
    return core


def missing_sources(settings: Any = None, nvml: Any = None) -> list[tuple[str, str]]:
    """(source, reason) for what this machine cannot provide, for the daemon's start-up lines."""
    s = _section(settings)
    out: list[tuple[str, str]] = []
    if nvml is None and (problem := nvml_library_problem()) is not None:
        smi = _smi_path(s)
        if smi:
            out.append(("nvml", f"{problem}; reading GPUs through {smi} instead (source nvidia_smi)"))
        else:
            out.append(("nvml", f"{problem}; no {s.nvidia_smi_path} either: no GPU readings"))
    if not os.path.exists(os.path.join(s.proc_root, "pressure", "memory")):
        out.append(
            (
                "psi",
                f"{os.path.join(s.proc_root, 'pressure', 'memory')} absent (kernel without PSI): psi_memory null",
            )
        )
    sensors = SensorsSource(s.sys_root).collect({})["sensors"]
    if not sensors:
        out.append(("sensors", f"no thermal zones or hwmon temperatures under {s.sys_root}/class"))
    return out
