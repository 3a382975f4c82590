"""G4 damage: each training job's step time against its own earlier baseline (pure state, no clock)."""

from __future__ import annotations

from collections import deque

from spark_watchd.diagnose.verdicts import StepRatio
from spark_watchd.sample.model import Sample


def _median(vals):
    v = sorted(vals)
    return v[len(v) // 2]


class Job:
    """One training job's step-time baseline (median of the readings after warm-up) and recent mean."""

    __slots__ = ("first_ts", "vals", "early", "baseline", "recent", "recent_sum", "last_report")

    def __init__(self, ts):
        self.first_ts = ts
        self.vals = []
        self.early = []  # warm-up readings but the first: a fallback when heat arrives early
        self.baseline = None
        self.recent = deque()
        self.recent_sum = 0.0
        self.last_report = None


def step_ratio(
    jobs: dict, sample: Sample, ts: float, episode: bool, thermal_now: bool, th
) -> StepRatio | None:
    """The job whose recent step time is furthest above its baseline, or None without a baseline."""
    worst = None
    for tp in sample.throughput:
        step = tp.step_seconds
        if step is None and tp.tokens_per_second:
            step = 1.0 / tp.tokens_per_second  # time per token: the same ratio when only tokens/s is known
        if step is None or step <= 0 or ts - tp.ts > th.step_stale_s:
            continue
        j = jobs.get(tp.job)
        if j is None:
            if len(jobs) > 64:  # bounded: forget jobs that stopped reporting
                for k in [k for k, v in jobs.items() if ts - (v.last_report or 0) > th.step_stale_s]:
                    del jobs[k]
            j = jobs[tp.job] = Job(ts)
        if j.last_report != tp.ts:
            j.last_report = tp.ts
            if j.baseline is None:
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
            j.recent.append((ts, step))
            j.recent_sum += step
        while j.recent and ts - j.recent[0][0] > th.step_recent_s:
            j.recent_sum -= j.recent.popleft()[1]
        if j.baseline and j.recent:
            mean = j.recent_sum / len(j.recent)
            r = mean / j.baseline
            if worst is None or r > worst.ratio:
                worst = StepRatio(r, tp.job, mean, j.baseline)
    return worst
