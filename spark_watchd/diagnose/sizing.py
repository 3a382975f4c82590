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


def _by_size(workloads, held: Mapping[tuple, int]) -> list:
    """The GPU-resident workloads, sized, biggest first."""
    return sorted((sized(w, held) for w in workloads if w.gpu_resident), key=_size, reverse=True)


def _size(w) -> int:
    return w.footprint_bytes


def holders(workloads, held: Mapping[tuple, int], mem_total: int | None) -> list[dict[str, Any]]:
    """Who holds the pool, biggest first, each sized (G3's `pool_holders`)."""
    rows = []
    for w in _by_size(workloads, held):
        row = {"kind": w.kind, "pid": w.pid, "footprint_bytes": w.footprint_bytes}
        if mem_total:
            row["pool_share"] = round(w.footprint_bytes / mem_total, 3)
        rows.append(source_of(row, w, held))
    return rows


def with_holders(finding: Finding, workloads, held: Mapping[tuple, int], mem_total: int | None) -> Finding:
    """G3 with who holds the pool (sized) in its evidence, and, when it warns, the biggest holder named in its
    advice: per-process NVML alone can put the wrong workload first. The rows stay deferred (workloads and
    held are this sample's, never changed in place)."""
    if not held:
        return finding
    advice = finding.advice
    if finding.severity in ("warning", "critical") and (ranked := _by_size(workloads, held)):
        top = ranked[0]
        share = f" ({top.footprint_bytes / mem_total:.0%} of the pool)" if mem_total else ""
        remedy = "cap or stop it first" if top.capped is not None else "shrink or stop it first"
        advice = (
            *advice,
            f"The largest holder is {top.kind} (pid {top.pid}): {size_words(top, held)}{share}; {remedy}.",
        )
    return finding.reworded(
        lambda summary, evidence: (summary, dict(evidence, pool_holders=holders(workloads, held, mem_total))),
        advice=advice,
    )
