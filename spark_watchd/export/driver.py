"""sparkwatchd_gpu_xid_errors_total{gpu,xid}: Xids per GPU, every known code always present (bounded labels)."""

from __future__ import annotations

from spark_watchd.diagnose.xid import XID_LABELS
from spark_watchd.export.families import counter
from spark_watchd.logs import get_logger

log = get_logger("exporter")


def families(snapshot):
    """The Xid counter family; never raises (a renderer never breaks a scrape)."""
    try:
        return list(_families(snapshot))
    except Exception:
        log.exception("driver metrics failed")
        return []


def _families(snapshot):
    counts = (getattr(snapshot, "extras", None) or {}).get("xid_counts") or {}
    fam = counter(
        "gpu_xid_errors",
        "Xid errors the GPU driver reported this daemon saw live (NVML events or the kernel log); "
        'xid="other" for codes outside the documented table.',
        ["gpu", "xid"],
    )
    # The runtime holds every code at 0 for each GPU it has seen, so increase() sees the first Xid.
    for key, n in sorted(counts.items()):
        gpu, _, xid = key.partition(":")
        if xid in XID_LABELS:
            fam.add_metric([gpu, xid], float(n))
    yield fam
