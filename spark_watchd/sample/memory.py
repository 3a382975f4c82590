"""The memory view of one sample: the figures the exporter, page, API, `status` and ledger all show.

Computed once per tick (the daemon publishes it as `Snapshot.memory`), so every
surface reports the same budget from the same reserve. GB10: NVML memory info is
Not Supported on the unified pool; MemAvailable is the truth.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from spark_watchd.sample.model import Sample

KIB = 1024


@dataclass(frozen=True, slots=True)
class MemoryView:
    """Headline memory figures in bytes; None where this kernel or driver does not give them."""

    total_bytes: int | None
    available_bytes: int | None
    available_min_bytes: (
        int | None
    )  # lowest MemAvailable since the previous sample (fast watch), else available
    # MemAvailable minus CmaFree (when subtracted) minus the OS/driver reserve: negative once the pool is into
    # the reserve. Never clamped, so the G3 card, the chart, `status` and sparkwatchd_memory_budget_bytes show
    # the figure G3 judged.
    budget_bytes: int | None
    os_reserve_bytes: int
    swap_used_bytes: int | None
    gpu_attributed_bytes: int  # sum of the per-process memory NVML reports
    cached_bytes: int | None
    anon_bytes: int | None
    # CMA reserve and its free part (CmaTotal/CmaFree; None on kernels without CONFIG_CMA). MemAvailable
    # counts CmaFree, which only movable allocations may use: not the GPU driver's pinned pages.
    cma_total_bytes: int | None = None
    cma_free_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the `memory` object of /api/v1/status)."""
        return asdict(self)


def usable_available_kb(meminfo, subtract_cma: bool = True) -> int | None:
    """MemAvailable in kB less CmaFree when `subtract_cma` (thresholds.budget_subtracts_cma_free)."""
    avail = meminfo.get("MemAvailable")
    if avail is None or not subtract_cma:
        return avail
    return avail - (meminfo.get("CmaFree") or 0)


def memory_view(sample: Sample, os_reserve_bytes: int = 0, subtract_cma: bool = True) -> MemoryView:
    """The memory view of `sample` with the configured reserve (thresholds.os_reserve_bytes) and CMA rule."""
    mi = sample.meminfo

    def kb(key: str) -> int | None:
        val = mi.get(key)
        return None if val is None else val * KIB

    avail = kb("MemAvailable")
    usable = usable_available_kb(mi, subtract_cma)
    swap_used = None
    if mi.get("SwapTotal") is not None and mi.get("SwapFree") is not None:
        swap_used = (mi["SwapTotal"] - mi["SwapFree"]) * KIB
    return MemoryView(
        total_bytes=kb("MemTotal"),
        available_bytes=avail,
        available_min_bytes=sample.mem_available_min_kb * KIB
        if sample.mem_available_min_kb is not None
        else avail,
        budget_bytes=None if usable is None else usable * KIB - os_reserve_bytes,
        os_reserve_bytes=os_reserve_bytes,
        swap_used_bytes=swap_used,
        gpu_attributed_bytes=sum(p.gpu_mem_bytes for p in sample.processes if p.gpu_mem_bytes),
        cached_bytes=kb("Cached"),
        anon_bytes=kb("AnonPages"),
        cma_total_bytes=kb("CmaTotal"),
        cma_free_bytes=kb("CmaFree"),
    )
