"""Per-job progress: step time and tokens/s from cumulative reports, baseline, slowdown, runs, expiry.

The tracker is fed by the progress API and the log tails (any thread) and read by
the daemon's tick as the `progress` source. Reports carry cumulative totals, so a
lost or coalesced report costs resolution, never correctness: each derived value
is the mean over the interval since the previous report that moved the step.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spark_watchd.logs import get_logger
from spark_watchd.sample.model import ThroughputReading
from spark_watchd.throughput.models import ProgressReport
from spark_watchd.throughput.settings import ProgressSettings

log = get_logger("progress")

END_REASONS = ("end", "restart", "expired", "shutdown")


class ReportRejected(ValueError):
    """A well-formed report that contradicts the job's history (HTTP 409)."""


class TooManyJobs(RuntimeError):
    """The job cap is reached and none has expired yet (HTTP 429)."""


@dataclass(frozen=True, slots=True)
class JobStats:
    """What the metrics, the page and the ledger see of one job (snapshot.extras["jobs"])."""

    job: str
    run_id: str
    run_start_ts: float
    ts: float  # time of the latest report (its `ts`, or arrival)
    step: int
    tokens: int | None
    samples: int | None
    first_step: int
    first_tokens: int | None
    first_samples: int | None
    tokens_span_s: float | None  # seconds between the first and the latest token count
    reports: int
    step_seconds: float | None
    tokens_per_second: float | None
    samples_per_second: float | None
    baseline_step_seconds: float | None
    slowdown_ratio: float | None
    max_slowdown_ratio: float | None
    ended: bool = False
    end_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (used by the API response and /api/v1/status)."""
        return {name: getattr(self, name) for name in self.__slots__}


class JobTable(tuple):
    """snapshot.extras["jobs"]: a tuple of JobStats; `to_dict()` is the JSON view {job: stats}."""

    __slots__ = ()

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {j.job: j.to_dict() for j in self}


@dataclass(frozen=True, slots=True)
class RunEnd:
    """A run boundary: the final stats of a run and why it ended (one of END_REASONS)."""

    stats: JobStats
    reason: str


@dataclass(slots=True)
class _Point:
    ts: float
    step: int


class _Counter:
    """An optional cumulative count (tokens, samples): first and latest advancing value, latest rate.

    Kept apart from the step because a log line may carry the token count only
    every N steps (the Hugging Face log dict): the rate spans those lines.
    """

    __slots__ = ("first", "anchor", "rate")

    def __init__(self, ts: float, value: int | None) -> None:
        self.first: tuple[float, int] | None = None if value is None else (ts, value)
        self.anchor = self.first
        self.rate: float | None = None

    def update(self, ts: float, value: int | None) -> None:
        if value is None:
            return
        if self.anchor is None or value < self.anchor[1]:
            if self.first is None:
                self.first = (ts, value)
            self.anchor = (ts, value)
        elif value > self.anchor[1] and ts > self.anchor[0]:
            self.rate = (value - self.anchor[1]) / (ts - self.anchor[0])
            self.anchor = (ts, value)

    def since(self, prev: tuple[float, int] | None) -> float | None:
        """Mean rate from `prev` (an earlier anchor) to now; the latest rate when nothing moved."""
        a = self.anchor
        if prev is not None and a is not None and a[0] > prev[0] and a[1] >= prev[1]:
            return (a[1] - prev[1]) / (a[0] - prev[0])
        return self.rate


class _Job:
    """Mutable state of one job's current run; only touched under the tracker lock."""

    __slots__ = (
        "name",
        "run_id",
        "start",
        "anchor",
        "last",
        "seen",
        "reports",
        "step_s",
        "tokens",
        "samples",
        "warm",
        "baseline",
        "slowdown",
        "max_slowdown",
        "ended",
        "end_reason",
        "collected",
    )

    def __init__(self, name: str, p: _Point, r: ProgressReport, seen: float, s: ProgressSettings) -> None:
        self.name = name
        self.run_id = uuid.uuid4().hex[:12]
        self.start = p
        self.anchor = p  # last report that moved the step: the origin of the next interval
        self.last = p
        self.seen = seen  # arrival time by the daemon's clock, for expiry
        self.reports = 1
        self.step_s: float | None = None
        self.tokens = _Counter(p.ts, r.tokens)
        self.samples = _Counter(p.ts, r.samples)
        self.warm: _Point | None = None  # where warm-up ended: the baseline's origin
        self.baseline: float | None = None
        self.slowdown: float | None = None
        self.max_slowdown: float | None = None
        self.ended = False
        self.end_reason: str | None = None
        # (run_id, step anchor, tokens anchor) at the previous tick, for per-tick means.
        self.collected: tuple[str, _Point, tuple[float, int] | None] | None = None
        self._update_baseline(p, s)  # with no warm-up configured, the first report is the origin

    def advance(self, p: _Point, r: ProgressReport, s: ProgressSettings) -> None:
        self.last = p
        self.reports += 1
        self.tokens.update(p.ts, r.tokens)
        self.samples.update(p.ts, r.samples)
        dt, dstep = p.ts - self.anchor.ts, p.step - self.anchor.step
        if dstep <= 0 or dt <= 0:
            return  # heartbeat (no progress) or same instant: wait for a measurable interval
        self.step_s = dt / dstep
        self.anchor = p
        self._update_baseline(p, s)

    def _update_baseline(self, p: _Point, s: ProgressSettings) -> None:
        if self.warm is None:
            if p.step - self.start.step >= s.warmup_steps and p.ts - self.start.ts >= s.warmup_s:
                self.warm = p
            return
        if self.baseline is None and p.ts - self.warm.ts >= s.baseline_s and p.step > self.warm.step:
            self.baseline = (p.ts - self.warm.ts) / (p.step - self.warm.step)
        if self.baseline and self.step_s is not None:
            self.slowdown = self.step_s / self.baseline
            self.max_slowdown = max(self.max_slowdown or 0.0, self.slowdown)

    def stats(self) -> JobStats:
        tok, smp = self.tokens, self.samples
        return JobStats(
            job=self.name,
            run_id=self.run_id,
            run_start_ts=self.start.ts,
            ts=self.last.ts,
            step=self.last.step,
            tokens=tok.anchor[1] if tok.anchor else None,
            samples=smp.anchor[1] if smp.anchor else None,
            first_step=self.start.step,
            first_tokens=tok.first[1] if tok.first else None,
            first_samples=smp.first[1] if smp.first else None,
            tokens_span_s=tok.anchor[0] - tok.first[0] if tok.first and tok.anchor else None,
            reports=self.reports,
            step_seconds=self.step_s,
            tokens_per_second=tok.rate,
            samples_per_second=smp.rate,
            baseline_step_seconds=self.baseline,
            slowdown_ratio=self.slowdown,
            max_slowdown_ratio=self.max_slowdown,
            ended=self.ended,
            end_reason=self.end_reason,
        )


class JobTracker:
    """Thread-safe per-job progress; also the `progress` Source of the daemon's tick."""

    name = "progress"

    def __init__(self, settings: ProgressSettings | None = None, clock: Callable[[], float] = time.time):
        self.settings = settings or ProgressSettings()
        self._clock = clock
        self._lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}
        self._listeners: list[Callable[[RunEnd], None]] = []
        self._close_hooks: tuple[list[Callable[[], None]], list[Callable[[], None]]] = ([], [])

    def add_run_listener(self, fn: Callable[[RunEnd], None]) -> None:
        """Call `fn(RunEnd)` whenever a run ends (explicit end, restart, expiry, shutdown)."""
        self._listeners.append(fn)

    def add_close_hook(self, fn: Callable[[], None], before: bool = False) -> None:
        """Call `fn()` on close(): before open runs are ended (stop feeders) or after (flush the ledger)."""
        self._close_hooks[0 if before else 1].append(fn)

    def report(self, r: ProgressReport) -> JobStats:
        """Apply one report; returns the job's stats after it. Raises ReportRejected / TooManyJobs."""
        now = self._clock()
        p = _Point(r.ts if r.ts is not None else now, r.step)
        ended: list[RunEnd] = []
        try:
            with self._lock:
                ended.extend(self._expire(now))
                job = self._jobs.get(r.job)
                if job is not None and not job.ended and r.event != "start" and p.step >= job.last.step:
                    if p.ts < job.last.ts:
                        raise ReportRejected(
                            f"ts {p.ts:.3f} is earlier than this job's previous report ({job.last.ts:.3f}) "
                            "while the step did not go back"
                        )
                    job.advance(p, r, self.settings)
                    job.seen = now
                else:
                    if job is not None and not job.ended:
                        # A smaller step than before is a restart; "start" says so explicitly.
                        ended.append(self._end(job, "restart"))
                    if job is None and len(self._jobs) >= self.settings.max_jobs:
                        raise TooManyJobs(
                            f"already tracking {len(self._jobs)} jobs (progress.max_jobs); a job is dropped "
                            f"after {self.settings.job_expiry_s:g} s without reports"
                        )
                    job = self._jobs[r.job] = _Job(r.job, p, r, now, self.settings)
                if r.event == "end":
                    ended.append(self._end(job, "end"))
                stats = job.stats()
        finally:
            self._notify(ended)
        return stats

    def stats(self) -> JobTable:
        """Every tracked job, sorted by name (expired ones dropped first)."""
        with self._lock:
            ended = self._expire(self._clock())
            out = JobTable(self._jobs[k].stats() for k in sorted(self._jobs))
        self._notify(ended)
        return out

    def collect(self, partial: Mapping[str, Any]) -> Mapping[str, Any]:
        """Source interface: trace-v1 `throughput[]`, each value the mean since the previous tick."""
        readings = []
        with self._lock:
            ended = self._expire(self._clock())
            for name in sorted(self._jobs):
                job = self._jobs[name]
                prev = job.collected
                if job.ended and prev is not None and prev[0] == job.run_id and prev[1] is job.anchor:
                    # Finished and its last interval already sampled: the page's line and `status` stop here
                    # instead of running flat until the job expires (issue 14.3).
                    continue
                step_s, tps = job.step_s, job.tokens.rate
                if prev is not None and prev[0] == job.run_id:
                    q, p = prev[1], job.anchor
                    dt, dstep = p.ts - q.ts, p.step - q.step
                    if dt > 0 and dstep > 0:
                        step_s = dt / dstep
                    tps = job.tokens.since(prev[2])
                job.collected = (job.run_id, job.anchor, job.tokens.anchor)
                readings.append(
                    ThroughputReading(
                        job=name,
                        ts=job.last.ts,
                        step=job.last.step,
                        step_seconds=step_s,
                        tokens_per_second=tps,
                    )
                )
        self._notify(ended)
        return {"throughput": tuple(readings)}

    def close(self) -> None:
        """End every open run with reason "shutdown" so the ledger records it."""
        self._run_hooks(self._close_hooks[0])
        with self._lock:
            ended = [self._end(j, "shutdown") for j in self._jobs.values() if not j.ended]
            self._jobs.clear()
        self._notify(ended)
        self._run_hooks(self._close_hooks[1])

    @staticmethod
    def _run_hooks(hooks: list[Callable[[], None]]) -> None:
        while hooks:
            fn = hooks.pop(0)  # each runs once even if close() is called again
            try:
                fn()
            except Exception:
                log.exception("close hook failed")

    # -- internals (lock held) --

    def _end(self, job: _Job, reason: str) -> RunEnd:
        job.ended = True
        job.end_reason = reason
        return RunEnd(job.stats(), reason)

    def _expire(self, now: float) -> list[RunEnd]:
        limit = self.settings.job_expiry_s
        gone = [name for name, j in self._jobs.items() if now - j.seen > limit]
        ended = []
        for name in gone:
            job = self._jobs.pop(name)
            if not job.ended:
                ended.append(self._end(job, "expired"))
            log.info("progress job expired without reports", job=name, silent_s=round(now - job.seen))
        return ended

    def _notify(self, ended: list[RunEnd]) -> None:
        for ev in ended:
            for fn in self._listeners:
                try:
                    fn(ev)
                except Exception:  # a broken listener must not lose the report or the tick
                    log.exception("run listener failed", job=ev.stats.job)
