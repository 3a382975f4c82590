"""Memory runway families: the budget's runway, CmaFree and each workload kind's footprint drift.

Rendered from the G3 finding's evidence (diagnose/runway.py computes it once per tick); labels bounded
(workload kind and capped, as sparkwatchd_workload_memory_bytes).
"""

from __future__ import annotations

import math

from spark_watchd.diagnose.exits import EXIT_CAUSES
from spark_watchd.export.families import counter, gauge
from spark_watchd.sample.workloads import KINDS as WORKLOAD_KINDS

HOLD_KINDS = ("vllm", "sglang", "trainer")  # the workloads whose hold is measured (diagnose/hold.py)


def families(snapshot):
    """sparkwatchd_memory_runway_seconds, _memory_cma_free_bytes, _workload_growth_bytes_per_second,
    _workload_hold_bytes and _workload_exits_total."""
    diag = getattr(snapshot, "diagnosis", None)
    g3 = diag.findings.get("G3") if diag is not None else None
    ev = g3.evidence if g3 is not None else {}
    state = getattr(g3, "state", None)
    if state is not None and hasattr(state, "runway_known"):  # G3's typed state (diagnose/verdicts.py)
        known, secs = state.runway_known, state.runway_s
    else:  # a snapshot built by hand
        known, secs = bool(ev.get("runway_known")), ev.get("runway_s")
    # +Inf while the budget is not on a sustained fall (no runway), no series before enough history.
    runway = gauge(
        "memory_runway_seconds",
        "Seconds until the memory budget runs out at its trend over the runway window; +Inf when it is not "
        "falling steadily.",
    )
    if known:
        runway.add_metric([], math.inf if secs is None else float(secs))
    yield runway
    view = snapshot.memory_or_default() if hasattr(snapshot, "memory_or_default") else None
    cma = view.cma_free_bytes if view is not None else None
    yield gauge(
        "memory_cma_free_bytes",
        "CmaFree: free CMA pages, counted in MemAvailable but unusable by the GPU driver's pinned pages.",
        value=cma,
    )
    rates = {(k, c): 0.0 for k in WORKLOAD_KINDS for c in ("true", "false")}
    for g in ev.get("workload_growth") or ():
        kind = g.get("kind") if g.get("kind") in WORKLOAD_KINDS else "other"
        rates[(kind, "true" if g.get("capped") else "false")] += float(g.get("growth_bytes_per_s") or 0.0)
    growth = gauge(
        "workload_growth_bytes_per_second",
        "Footprint drift of workloads over the runway window (robust trend, summed per kind); 0 without history.",
        ["kind", "capped"],
    )
    for key, rate in rates.items():
        growth.add_metric(list(key), rate)
    yield growth
    holds = gauge(
        "workload_hold_bytes",
        "Serving engines' and trainers' hold by the usable-memory step (measured), by their flags (declared; "
        "trainers declare none) and by NVML's per-process sum (nvml), summed per kind; 0 without a measured hold.",
        ["kind", "source"],
    )
    held = {(k, src): 0.0 for k in HOLD_KINDS for src in ("measured", "declared", "nvml")}
    for h in (*(ev.get("serving_holds") or ()), *(ev.get("trainer_holds") or ())):
        if h.get("kind") in HOLD_KINDS:
            for src in ("measured", "declared", "nvml"):
                held[(h["kind"], src)] += float(h.get(f"{src}_bytes") or 0)
    for key, value in held.items():
        holds.add_metric(list(key), value)
    yield holds
    exits = counter(
        "workload_exits",
        "Workloads that left the table, by kind and cause (kernel OOM killer global or at a cgroup's limit, "
        "systemd-oomd, earlyoom, the driver out of memory, or an exit); carried across restarts.",
        ["kind", "cause"],
    )
    counts = (getattr(snapshot, "extras", None) or {}).get("exit_counts") or {}
    for kind in WORKLOAD_KINDS:
        for cause in EXIT_CAUSES:
            exits.add_metric([kind, cause], float(counts.get(f"{kind}:{cause}", 0)))
    yield exits
