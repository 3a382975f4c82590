"""G4 damage: each training job's step time against its own earlier baseline (pure state, no clock)."""

from __future__ import annotations

from collections import deque

from spark_watchd.diagnose.verdicts import StepRatio
from spark_watchd.sample.model import Sample

# tuple.__new__ builds the record without NamedTuple's Python-level __new__ (once per job per new report).
_new = tuple.__new__


def _median(vals):
    v = sorted(vals)
    return v[len(v) // 2]


class Job:
    """One training job's step-time baseline (median of the readings after warm-up) and recent mean."""

    __slots__ = ("first_ts", "vals", "early", "baseline", "recent", "recent_sum", "last_report", "ratio")

    def __init__(self, ts):
        self.first_ts = ts
        self.vals = []
        self.early = []  # warm-up readings but the first: a fallback when heat arrives early
        self.baseline = None
        self.recent = deque()
        self.recent_sum = 0.0
        self.last_report = None
        # Its StepRatio, kept while neither a new report nor the recent window's expiry moved it (most
        # samples carry the same report the last one did): None without a baseline or recent readings.
        self.ratio: StepRatio | None = None

    def forget_recent(self) -> None:
        """The clock stepped back: the recent mean starts afresh (the baseline stays)."""
        self.recent.clear()
        self.recent_sum = 0.0
        self.last_report = None
        self.ratio = None


def step_ratio(
    jobs: dict, sample: Sample, ts: float, episode: bool, thermal_now: bool, th
) -> StepRatio | None:
    """The job whose recent step time is furthest above its baseline, or None without a baseline."""
    worst = None
    recent_s = th.step_recent_s
    for tp in sample.throughput:
        step = tp.step_seconds
        if step is None and tp.tokens_per_second:
            step = 1.0 / tp.tokens_per_second  # time per token: the same ratio when only tokens/s is known
        at = tp.ts
        if step is None or step <= 0 or ts - at > th.step_stale_s:
            continue
        j = jobs.get(tp.job)
        if j is None:
            if len(jobs) > 64:  # bounded: forget jobs that stopped reporting
                for k in [k for k, v in jobs.items() if ts - (v.last_report or 0) > th.step_stale_s]:
                    del jobs[k]
            j = jobs[tp.job] = Job(ts)
        recent = j.recent
        moved = j.last_report != at
        if moved:
            j.last_report = at
            if j.baseline is None:
                _learn(j, step, ts, episode, thermal_now, th)
            recent.append((ts, step))
            j.recent_sum += step
        while recent and ts - recent[0][0] > recent_s:
            j.recent_sum -= recent.popleft()[1]
            moved = True
        if moved:
            base = j.baseline
            if base and recent:
                mean = j.recent_sum / len(recent)
                j.ratio = _new(StepRatio, (mean / base, tp.job, mean, base))
            else:
                j.ratio = None
        r = j.ratio
        if r is not None and (worst is None or r.ratio > worst.ratio):
            worst = r
    return worst


def _learn(j: Job, step: float, ts: float, episode: bool, thermal_now: bool, th) -> None:
    """One more reading towards a job's baseline: the median after warm-up (early readings if heat comes first)."""
    age = ts - j.first_ts
    hot = episode or thermal_now
    if not hot:
        if age >= th.baseline_warmup_s:
            j.vals.append(step)
        elif age > 0 and len(j.early) < 16:
            j.early.append(step)
    done = age >= th.baseline_warmup_s + th.baseline_window_s
    if (done or episode) and len(j.vals) >= th.baseline_min_points:
        j.baseline = _median(j.vals)
    elif episode and len(j.vals) + len(j.early) >= 2:
        # heat arrived before the baseline window filled: best effort from what we have
        j.baseline = _median(j.vals + j.early)
    if j.baseline is not None:
        j.vals = j.early = []
