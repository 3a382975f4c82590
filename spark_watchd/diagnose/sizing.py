"""Each workload sized by its true hold where per-process NVML under-counts it (issue 31, item 2).

A workload's footprint is the sum over its members of the larger of NVML memory and RSS; on GB10 that
under-counts a serving engine by about 10 GiB (Syllo/nvtop#511: 89.28 GiB by NVML's per-process figure,
98.70 GiB held; one engine held 109 GiB against 71 declared). Where diagnose/hold.py measured a running
workload's hold from the usable-memory step and it exceeds the footprint counted then by UNDERCOUNT_BYTES
or more, that excess (its *under-count*) is added to the footprint it is counted at now: the level is the
measured one and whatever the workload grows by afterwards still shows. G6 (who is heavy, uncapped or near
capacity, and its words), G3 (who holds the pool, biggest first, and the advice naming the biggest) and the
runway's growth rows read workloads through here, and say which figures came from the step.
Pure: workloads and the under-counts in, workloads and words out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spark_watchd.sample.findings import Finding

GIB = 1024**3
SOURCE = "usable-memory step"  # `bytes_source` of every figure sized by a measured hold


def sized(w, held: Mapping[tuple, int]):
    """The workload with its footprint raised by its under-count (itself when none was measured)."""
    u = held.get(w.key) if held else None
    return w._replace(footprint_bytes=w.footprint_bytes + u) if u else w


def size_words(w, held: Mapping[tuple, int]) -> str:
    """'64 GiB', or '64 GiB by the usable-memory step (NVML counts 53)' for a sized workload."""
    u = held.get(w.key) if held else None
    text = f"{w.footprint_bytes / GIB:.0f} GiB"
    if u:
        by, counted = ("NVML", w.gpu_mem_bytes) if w.gpu_mem_bytes else ("RSS", w.footprint_bytes - u)
        text += f" by the {SOURCE} ({by} counts {counted / GIB:.0f})"
    return text


def source_of(row: dict[str, Any], w, held: Mapping[tuple, int]) -> dict[str, Any]:
    """An evidence row of a sized workload says where its bytes came from and what NVML/RSS counted."""
    u = held.get(w.key) if held else None
    if u:
        row["bytes_source"] = SOURCE
        row["per_process_bytes"] = w.footprint_bytes - u
    return row


def holders(workloads, held: Mapping[tuple, int], mem_total: int | None) -> list[dict[str, Any]]:
    """Who holds the pool, biggest first, each sized (G3's `pool_holders`)."""
    rows = []
    for w in sorted((sized(w, held) for w in workloads if w.gpu_resident), key=_size, reverse=True):
        row = {"kind": w.kind, "pid": w.pid, "footprint_bytes": w.footprint_bytes}
        if mem_total:
            row["pool_share"] = round(w.footprint_bytes / mem_total, 3)
        rows.append(source_of(row, w, held))
    return rows


def _size(w) -> int:
    return w.footprint_bytes


def with_holders(finding: Finding, workloads, held: Mapping[tuple, int], mem_total: int | None) -> Finding:
    """G3 with who holds the pool (sized) in its evidence, and, when it warns, the biggest holder named in its
    advice: per-process NVML alone can put the wrong workload first."""
    if not held:
        return finding
    top = max((sized(w, held) for w in workloads if w.gpu_resident), key=_size, default=None)
    advice = finding.advice
    if top is not None and finding.severity in ("warning", "critical"):
        share = f" ({top.footprint_bytes / mem_total:.0%} of the pool)" if mem_total else ""
        remedy = "cap or stop it first" if top.capped is not None else "shrink or stop it first"
        line = f"The largest holder is {top.kind} (pid {top.pid}): {size_words(top, held)}{share}; {remedy}."
        advice = (*advice, line)
    rows = holders(workloads, held, mem_total)
    return finding.reworded(
        lambda summary, evidence: (summary, dict(evidence, pool_holders=rows)), advice=advice
    )
