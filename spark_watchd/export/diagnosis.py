"""Diagnosis metric families rendered from the published snapshot (never raises, labels bounded)."""

from __future__ import annotations

from spark_watchd.export.families import counter, gauge
from spark_watchd.logs import get_logger
from spark_watchd.sample.model import COUNTED_EVENT_KINDS, GOTCHAS, SEVERITY_LEVEL
from spark_watchd.snapshot.acks import acknowledged

ANOMALY_KINDS = ("power_delivery", "recurring_stall", "hung_engine", "power_limit", "clock_cap_lost")
EVENT_KINDS = COUNTED_EVENT_KINDS  # the kind label's values (README's table)
log = get_logger("exporter")


def families(snapshot):
    """sparkwatchd_finding_level, _finding_acknowledged, _events_total, _throttled_seconds_total, _anomaly, _thermal_throttle_active."""
    try:
        return list(_families(snapshot))
    except Exception:  # a renderer never breaks a scrape
        log.exception("diagnosis metrics failed")
        return []


def _families(snapshot):
    diag = getattr(snapshot, "diagnosis", None)
    findings = diag.findings if diag is not None else {}
    lvl = gauge(
        "finding_level",
        "Verdict per gotcha: -1 unknown, 0 ok, 1 warning, 2 critical.",
        ["gotcha"],
    )
    for g in GOTCHAS:
        f = findings.get(g)
        lvl.add_metric([g], SEVERITY_LEVEL[f.severity] if f is not None else -1)
    yield lvl

    acked = acknowledged(snapshot)
    ack = gauge(
        "finding_acknowledged",
        "1 while an owner's acknowledgement covers the gotcha's finding (same severity or better, same "
        "workloads, not expired); alert rules can leave such findings out.",
        ["gotcha"],
    )
    for g in GOTCHAS:
        ack.add_metric([g], 1.0 if g in acked else 0.0)
    yield ack

    counts = getattr(snapshot, "event_counts", None) or {}
    ev = counter("events", "Events seen by the diagnosis engine, carried across restarts.", ["kind"])
    for k in EVENT_KINDS:
        ev.add_metric([k], float(counts.get(k, 0)))
    yield ev

    g4 = findings.get("G4")
    st = g4.state if g4 is not None else None  # diagnose.verdicts.G4State
    secs = st.throttled_seconds_total if st is not None else None
    if secs is None:
        secs = (getattr(snapshot, "extras", None) or {}).get("throttle_seconds_total")
    if secs is not None:
        yield counter(
            "throttled_seconds",
            "Seconds spent in thermal throttle according to the G4 classifier.",
            value=float(secs),
        )

    an = gauge(
        "anomaly",
        "Non-thermal GPU anomaly (1 present): power_delivery fault, recurring_stall (a low-power stall that "
        "keeps coming back and clears on its own), hung_engine, firmware power_limit or "
        "clock_cap_lost (the owner's SM clock cap gone after a reboot); never a throttle.",
        ["kind"],
    )
    for k in ANOMALY_KINDS:
        an.add_metric([k], 1.0 if g4 is not None and g4.anomaly == k else 0.0)
    yield an
    if g4 is not None and g4.severity != "unknown":
        yield gauge(
            "thermal_throttle_active",
            "1 while the G4 classifier sees a thermal throttle (warning or critical).",
            value=1.0 if st is not None and st.throttling else 0.0,
        )
