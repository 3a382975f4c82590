"""Fleet rules: Sparks grouped by their `cluster` target label, and the one that drags its cluster down.

Two Sparks running DDP/FSDP together over ConnectX-7 wait for the slowest rank at every all-reduce:
one hot Spark slows both, and from inside either box it looks like a slow job. A Spark belongs to a
cluster when its scrape target carries `cluster="<name>"` (prometheus-fleet.yml, targets/sparks.json);
Sparks without the label are never compared with each other.

Each instance is compared with the mean of its peers (the other members of its cluster, itself
excluded), so the rule means the same for a pair and for eight Sparks.
"""

from __future__ import annotations

# The thresholds live in the package, where the daemon's own pair view judges with the same numbers
# (spark_watchd/diagnose/straggler.py): one definition, so the alert and the page cannot disagree.
from spark_watchd.diagnose.straggler import (  # noqa: F401 (re-exported for the tests)
    CLOCK_SHORTFALL,
    LOAD_RATIO,
    STRAGGLER_FOR_S,
    TEMP_EXCESS_C,
    UTIL_GAP,
)


def _peers(series: str) -> str:
    """Mean of the other members of each instance's cluster (NaN-free: clusters of one have no peers)."""
    return (
        f"(sum by (job, cluster) ({series}) - on (job, cluster) group_right {series})\n"
        f"/ on (job, cluster) group_left () (count by (job, cluster) ({series}) - 1 > 0)"
    )


def recording_rules(c) -> list[tuple[str, str]]:
    """Per-instance loaded clock, temperature and utilisation of clustered Sparks, and their peers' means."""
    sel = c.sel('cluster!=""')
    loaded = f"and on (job, instance, gpu) sparkwatchd_gpu_utilization_ratio{sel} >= {LOAD_RATIO}"
    own = {
        "sm_clock_loaded:hertz": f"max by (job, instance, cluster) (sparkwatchd_gpu_sm_clock_hertz{sel} {loaded})",
        "temperature_loaded:celsius": (
            f"max by (job, instance, cluster) (sparkwatchd_gpu_temperature_celsius{sel} {loaded})"
        ),
        "utilization:ratio": f"max by (job, instance, cluster) (sparkwatchd_gpu_utilization_ratio{sel})",
    }
    out = []
    for key, expr in own.items():
        out.append((f"sparkwatchd:cluster_gpu_{key}", expr))
        out.append((f"sparkwatchd:cluster_peers_gpu_{key}", _peers(f"sparkwatchd:cluster_gpu_{key}")))
    return out


def straggler_alert(c) -> tuple:
    """SparkWatchdStraggler as a generate.py alert spec."""
    clk, temp, util = (
        "sparkwatchd:cluster_gpu_sm_clock_loaded:hertz",
        "sparkwatchd:cluster_gpu_temperature_loaded:celsius",
        "sparkwatchd:cluster_gpu_utilization:ratio",
    )
    peer = lambda name: name.replace("cluster_gpu_", "cluster_peers_gpu_")  # noqa: E731
    throttling = (
        'max by (job, instance, cluster) (sparkwatchd:finding_warning:bool{gotcha="G4", cluster!=""}) == 1'
    )
    expr = (
        "max by (job, instance, cluster) (\n"
        f"  {clk} < {CLOCK_SHORTFALL} * {peer(clk)}\n"
        "  or\n"
        f"  {temp} > {peer(temp)} + {TEMP_EXCESS_C}\n"
        "  or\n"
        f"  ({throttling}\n"
        f"   and on (job, instance, cluster) {util} > {peer(util)} + {UTIL_GAP})\n"
        ")"
    )
    return (
        "SparkWatchdStraggler",
        "warning",
        None,
        c.dur(STRAGGLER_FOR_S),
        expr,
        "{{ $labels.instance }} is the straggler of cluster {{ $labels.cluster }}",
        f"Under load, {{{{ $labels.instance }}}} runs its SM clock more than {round((1 - CLOCK_SHORTFALL) * 100)}% "
        f"under its cluster peers', or {TEMP_EXCESS_C} C hotter than them, or shows the thermal throttle signature "
        "while its peers wait on it with lower utilisation. In DDP/FSDP the whole job runs at the pace of this "
        "Spark.",
    )
