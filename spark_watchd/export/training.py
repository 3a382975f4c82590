"""Training metrics rendered from the published snapshot (never from live state)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric

from spark_watchd.export.families import gauge
from spark_watchd.logs import get_logger
from spark_watchd.snapshot import Snapshot
from spark_watchd.throughput.tracker import JobStats

log = get_logger("exporter")


def _rows(snapshot: Snapshot) -> list[tuple[str, float, float | None, float | None, float | None]]:
    """(job, last report ts, step seconds, tokens/s, slowdown) of running jobs from the tracker, else the sample."""
    jobs = snapshot.extras.get("jobs") if snapshot.extras else None
    if jobs:
        return [
            (j.job, j.ts, j.step_seconds, j.tokens_per_second, j.slowdown_ratio)
            for j in jobs
            if isinstance(j, JobStats) and not j.ended  # a finished run leaves /metrics at once
        ]
    # No live jobs: replay and demo serve recorded samples, whose throughput[] is all there is (no baseline).
    sample = snapshot.sample
    if sample is None:
        return []
    return [(t.job, t.ts, t.step_seconds, t.tokens_per_second, None) for t in sample.throughput]


def families(snapshot: Snapshot) -> Iterable[Metric]:
    """sparkwatchd_training_* gauges, one series per tracked job; never raises."""
    try:
        rows = _rows(snapshot)
    except Exception:  # a renderer never raises: a scrape must not fail over one area
        log.exception("training metrics: cannot read the snapshot")
        rows = []
    step = gauge(
        "training_step_seconds",
        "Mean seconds per training step over the job's latest reporting interval.",
        ["job"],
    )
    tps = gauge(
        "training_tokens_per_second",
        "Mean tokens per second over the job's latest reporting interval.",
        ["job"],
    )
    slow = gauge(
        "training_slowdown_ratio",
        "Current step time over the run's own baseline after warm-up (2 = steps take twice as long).",
        ["job"],
    )
    last = gauge(
        "training_last_report_timestamp_seconds",
        "Unix time of the job's latest progress report.",
        ["job"],
    )
    energy = gauge("training_energy_joules", "GPU energy since the job's run started.", ["job"])
    jpt = gauge("training_joules_per_token", "GPU energy per training token over the run so far.", ["job"])
    jps = gauge("training_joules_per_step", "GPU energy per training step over the run so far.", ["job"])
    spent = (snapshot.extras or {}).get("job_energy") or {}
    for job, e in spent.items() if isinstance(spent, dict) else ():
        for fam, key in ((energy, "energy_j"), (jpt, "joules_per_token"), (jps, "joules_per_step")):
            if isinstance(e, dict) and isinstance(e.get(key), (int, float)):
                fam.add_metric([job], float(e[key]))
    shift = snapshot.wall_shift()  # a replayed report dated by the same clock as the sample
    for job, ts, step_s, tok_s, ratio in rows:
        last.add_metric([job], float(ts) + shift)
        if step_s is not None:
            step.add_metric([job], float(step_s))
        if tok_s is not None:
            tps.add_metric([job], float(tok_s))
        if ratio is not None:
            slow.add_metric([job], float(ratio))
    return [step, tps, slow, last, energy, jpt, jps]
