"""The driver families: Xids per GPU (every labelled code always present), and the driver-events feeds.

sparkwatchd_gpu_xid_errors_total{gpu,xid}; sparkwatchd_driver_lines_rejected_total{feed} (journal lines
skipped as malformed: over-long, not JSON, a bad timestamp or MESSAGE); sparkwatchd_driver_feed_state
{feed,state} (1 for each feed's current state, 0 for the others; bounded by sample/driver.py).
"""

from __future__ import annotations

from spark_watchd.diagnose.xid import XID_LABELS
from spark_watchd.export.families import counter, gauge
from spark_watchd.logs import get_logger
from spark_watchd.sample.driver import DRIVER_FEEDS, FEED_STATES, LINE_FEEDS

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
    feeds = (getattr(snapshot, "extras", None) or {}).get("driver_feeds")
    if not feeds:  # no driver-events source (a replay, or turned off): no feed to report
        return
    rejected = counter(
        "driver_lines_rejected",
        "Kernel-log lines the driver-events source skipped as malformed (over-long, not JSON, a bad "
        "timestamp or MESSAGE), per feed.",
        ["feed"],
    )
    state = gauge(
        "driver_feed_state",
        "1 for what each driver-events feed is doing now (watching, read, not supported, unreadable, "
        "restarting, off), 0 for the other states.",
        ["feed", "state"],
    )
    for feed in LINE_FEEDS:
        rejected.add_metric([feed], float((feeds.get(feed) or {}).get("lines_rejected") or 0))
    for feed in DRIVER_FEEDS:
        now = (feeds.get(feed) or {}).get("state", "off")
        for st in FEED_STATES:
            state.add_metric([feed, st], 1.0 if st == now else 0.0)
    yield rejected
    yield state
