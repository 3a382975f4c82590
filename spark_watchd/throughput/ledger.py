"""The per-run ledger: what each training run cost and suffered, one JSON line per run in runs.jsonl.

Fed two ways: every published snapshot (a subscriber, `observe`) and the
tracker's run ends (`on_run_end`). Each sample becomes one interval (previous
sample, this sample] with the deltas of the cumulative GPU counters; a run's
figures are the intervals overlapping its first-to-last report, counter deltas
prorated by the overlap. A run is written once a sample at or after its end
has been seen (or on close), so the interval straddling the end is counted.
"""

from __future__ import annotations

import json
import os
import threading
from array import array
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from spark_watchd.logs import get_logger
from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.files import StateFileError, check_regular, open_regular
from spark_watchd.sample.memory import MemoryView
from spark_watchd.sample.model import REASON_COUNTER_KEYS, Sample
from spark_watchd.snapshot import Snapshot
from spark_watchd.throughput.tracker import JobStats, RunEnd

log = get_logger("ledger")

LEDGER_FILE = "runs.jsonl"
LEDGER_VERSION = 1
REASONS = tuple(REASON_COUNTER_KEYS)


@dataclass(slots=True)
class _Interval:
    """One sample's contribution: counter deltas over (t0, t1], readings at t1.

    The ring holds ledger_recent_samples (2,880) of these, 48 minutes' worth at --interval 1: the throttle
    seconds are one array('d') in REASONS order (None when no GPU has the counters), not a dict of floats.
    """

    t0: float
    t1: float
    throttle_s: array | None = None
    energy_j: float | None = None
    peak_temp_c: float | None = None
    mem_min_kb: int | None = None
    evictions: int = 0
    oom_kills: int = 0

    def overlap(self, start: float, end: float) -> float | None:
        """Fraction of this interval inside [start, end]; None when it does not touch the run."""
        if self.t1 <= self.t0:
            return 0.0 if start <= self.t1 <= end else None
        lo, hi = max(self.t0, start), min(self.t1, end)
        if hi < lo or (hi == lo and not (start <= self.t1 <= end)):
            return None
        return (hi - lo) / (self.t1 - self.t0)


@dataclass(slots=True)
class _Totals:
    """Aggregates over the intervals of one run."""

    intervals: int = 0
    throttle_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(REASONS, 0.0))
    energy_j: float | None = None
    peak_temp_c: float | None = None
    mem_min_kb: int | None = None
    evictions: int = 0
    oom_kills: int = 0

    def add(self, iv: _Interval, frac: float) -> None:
        self.intervals += 1
        for reason, s in zip(REASONS, iv.throttle_s or (), strict=False):
            if s:  # a reason the counters did not move (or lack) adds nothing
                self.throttle_s[reason] += s * frac
        if iv.energy_j is not None:
            self.energy_j = (self.energy_j or 0.0) + iv.energy_j * frac
        if iv.peak_temp_c is not None and (self.peak_temp_c is None or iv.peak_temp_c > self.peak_temp_c):
            self.peak_temp_c = iv.peak_temp_c
        if iv.mem_min_kb is not None and (self.mem_min_kb is None or iv.mem_min_kb < self.mem_min_kb):
            self.mem_min_kb = iv.mem_min_kb
        self.evictions += iv.evictions
        self.oom_kills += iv.oom_kills


def _gpu_key(g) -> str:
    return g.uuid or str(g.index)


def interval_of(
    prev: Sample | None, cur: Sample, event_kinds: list[str], memory: MemoryView | None = None
) -> _Interval:
    """The contribution of `cur` given the previous sample and the tick's published memory view (pure)."""
    iv = _Interval(t0=prev.ts if prev is not None else cur.ts, t1=cur.ts)
    before = {_gpu_key(g): g for g in prev.gpus} if prev is not None else {}
    for g in cur.gpus:
        if g.temp_c is not None and (iv.peak_temp_c is None or g.temp_c > iv.peak_temp_c):
            iv.peak_temp_c = g.temp_c
        p = before.get(_gpu_key(g))
        if p is None:
            continue
        if g.energy_j is not None and p.energy_j is not None and g.energy_j >= p.energy_j:
            # A negative delta is a driver reload or reboot: that interval is unknown, not negative.
            iv.energy_j = (iv.energy_j or 0.0) + (g.energy_j - p.energy_j)
        if g.clocks_event_counters_us and p.clocks_event_counters_us:
            for i, key in enumerate(REASON_COUNTER_KEYS.values()):
                a, b = p.clocks_event_counters_us.get(key), g.clocks_event_counters_us.get(key)
                if a is not None and b is not None and b >= a:
                    if iv.throttle_s is None:
                        iv.throttle_s = array("d", bytes(8 * len(REASONS)))  # all 0.0
                    # Several GPUs throttled at once are the same wall seconds: take the largest.
                    iv.throttle_s[i] = max(iv.throttle_s[i], (b - a) / 1e6)
    low = memory.available_min_bytes if memory is not None else None
    iv.mem_min_kb = None if low is None else low // 1024
    iv.evictions = event_kinds.count("eviction")
    iv.oom_kills = event_kinds.count("oom_kill")
    return iv


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _div(a: float | None, b: float) -> float | None:
    return None if a is None or b <= 0 else a / b


def _per(energy_j: float | None, units: int | None) -> float | None:
    return None if energy_j is None or not units or units <= 0 else energy_j / units


def _delta(last: int | None, first: int | None) -> int | None:
    return None if last is None or first is None or last < first else last - first


def run_record(stats: JobStats, reason: str, totals: _Totals) -> dict[str, Any]:
    """The ledger line for one finished run (pure)."""
    duration = max(0.0, stats.ts - stats.run_start_ts)
    intervals = max(0, stats.step - stats.first_step)  # steps between the first and the last report
    # A report of step N says N steps are done: a run first heard at step 0 or 1 did all of them itself
    # (steps 1-80 are 80 steps, not 79); a resumed run's first report is where it picked up.
    steps = max(0, stats.step) if stats.first_step <= 1 else intervals
    tokens = _delta(stats.tokens, stats.first_tokens)
    samples = _delta(stats.samples, stats.first_samples)
    # Token counts may arrive on fewer reports than steps (log dicts every N steps): use their own span.
    tok_span = stats.tokens_span_s if stats.tokens_span_s else duration
    return {
        "v": LEDGER_VERSION,
        "job": stats.job,
        "run_id": stats.run_id,
        "start": _iso(stats.run_start_ts),
        "end": _iso(stats.ts),
        "start_ts": stats.run_start_ts,
        "end_ts": stats.ts,
        "end_reason": reason,
        "duration_s": round(duration, 3),
        "first_step": stats.first_step,
        "last_step": stats.step,
        "steps": steps,
        "tokens": tokens,
        "samples": samples,
        "reports": stats.reports,
        "mean_step_seconds": _div(duration, intervals) if intervals else None,
        "mean_tokens_per_second": _div(tokens, tok_span),
        "mean_samples_per_second": _div(samples, duration),
        "baseline_step_seconds": stats.baseline_step_seconds,
        "max_slowdown_ratio": stats.max_slowdown_ratio,
        "throttle_seconds": {k: round(v, 3) for k, v in totals.throttle_s.items()},
        "energy_j": None if totals.energy_j is None else round(totals.energy_j, 3),
        # Energy per unit of work over the same intervals (the GPU's counter over the run, shared or not).
        "joules_per_token": _per(totals.energy_j, tokens),
        "joules_per_step": _per(totals.energy_j, steps),
        "peak_temp_c": totals.peak_temp_c,
        "mem_available_min_bytes": None if totals.mem_min_kb is None else totals.mem_min_kb * 1024,
        "evictions": totals.evictions,
        "oom_kills": totals.oom_kills,
        "sample_intervals": totals.intervals,
    }


# A report flood (a trainer restarting in a loop) must not fill the state disk: past this size runs.jsonl
# becomes runs.jsonl.1 (the one before is dropped), so the ledger holds at most twice this.
MAX_LEDGER_BYTES = 4 << 20
# Runs that ended "in the future" (a client clock ahead, or a hostile ts) wait for a covering sample; past
# this many the oldest is written now, and one more than this far ahead is not waited for at all.
MAX_CLOSING = 256
FUTURE_S = 3600.0


class RunLedger:
    """Subscriber (`observe`) and run listener (`on_run_end`) that appends finished runs to runs.jsonl."""

    def __init__(
        self, path: str | os.PathLike, recent_samples: int = 2880, max_bytes: int = MAX_LEDGER_BYTES
    ) -> None:
        self.path = Path(path)
        for p in (self.path, rotated(self.path)):
            check_regular(p)  # a link or FIFO here: exit 78 at start, naming it
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._recent: deque[_Interval] = deque()
        self._max_recent = recent_samples
        self._prev: Sample | None = None
        # Intervals too old for the ring, already folded per open run (run_id -> totals).
        self._folded: dict[str, _Totals] = {}
        self._open: dict[str, float] = {}  # run_id -> start ts, from the latest snapshot's jobs
        self._closing: list[RunEnd] = []
        self._write_failed = False
        self._jobs: tuple[JobStats, ...] = ()  # the latest snapshot's running jobs (for running_energy)

    def observe(self, snapshot: Snapshot) -> None:
        """Subscriber: fold the snapshot's sample in and write runs that are now fully covered."""
        sample = snapshot.sample
        if sample is None:
            return
        kinds = [e.kind for e in snapshot.diagnosis.events] if snapshot.diagnosis else []
        jobs = snapshot.extras.get("jobs") if snapshot.extras else None
        with self._lock:
            if jobs is not None:
                self._jobs = tuple(j for j in jobs if isinstance(j, JobStats) and not j.ended)
                self._open = {j.run_id: j.run_start_ts for j in self._jobs}
            if self._prev is not None and sample.ts <= self._prev.ts:
                # Time went back (replay --loop, clock step): start the ring over.
                self._recent.clear()
                self._prev = None
            self._recent.append(interval_of(self._prev, sample, kinds, snapshot.memory_or_default()))
            self._prev = sample
            while len(self._recent) > self._max_recent:
                self._fold(self._recent.popleft())
            horizon = sample.ts + FUTURE_S
            ready = [ev for ev in self._closing if ev.stats.ts <= sample.ts or ev.stats.ts > horizon]
            self._closing = [ev for ev in self._closing if sample.ts < ev.stats.ts <= horizon]
        for ev in ready:
            self._write(ev)

    def on_run_end(self, ev: RunEnd) -> None:
        """Run listener: write now if a sample already covers the end, else at the next sample."""
        overflow: list[RunEnd] = []
        with self._lock:
            covered = self._prev is not None and self._prev.ts >= ev.stats.ts
            if not covered:
                self._closing.append(ev)
                if len(self._closing) > MAX_CLOSING:
                    overflow, self._closing = self._closing[:-MAX_CLOSING], self._closing[-MAX_CLOSING:]
        for old in overflow:
            self._write(old)
        if covered:
            self._write(ev)

    def close(self) -> None:
        """Write every run still waiting for its covering sample."""
        with self._lock:
            pending, self._closing = self._closing, []
        for ev in pending:
            self._write(ev)

    def _fold(self, iv: _Interval) -> None:
        for run_id, start in self._open.items():
            frac = iv.overlap(start, float("inf"))
            if frac is not None:
                self._folded.setdefault(run_id, _Totals()).add(iv, frac)
        live = set(self._open) | {ev.stats.run_id for ev in self._closing}
        for run_id in [r for r in self._folded if r not in live]:
            del self._folded[run_id]

    def totals(self, stats: JobStats) -> _Totals:
        """Aggregates of the intervals that overlap the run's first-to-last report."""
        with self._lock:
            t = self._folded.pop(stats.run_id, None) or _Totals()
            for iv in self._since(stats.run_start_ts):
                frac = iv.overlap(stats.run_start_ts, stats.ts)
                if frac is not None:
                    t.add(iv, frac)
        return t

    def _since(self, start: float) -> list[_Interval]:
        """The ring's intervals from the first that ends at or after `start`, oldest first (the lock held).

        The ring is in time order and an interval that ends before a run starts does not overlap it, so a
        run of a few minutes reads its few hundred intervals, not all 2,880, every tick (running_energy).
        """
        tail = []
        for iv in reversed(self._recent):
            if iv.t1 < start:
                break
            tail.append(iv)
        tail.reverse()
        return tail

    def running_energy(self) -> dict[str, dict[str, Any]]:
        """Per running job: GPU energy since its run started, its tokens and steps, J/token and J/step so far."""
        out: dict[str, dict[str, Any]] = {}
        with self._lock:
            for j in self._jobs:
                t = _Totals()
                old = self._folded.get(j.run_id)
                if old is not None:
                    t.energy_j = old.energy_j
                for iv in self._since(j.run_start_ts):
                    frac = iv.overlap(j.run_start_ts, j.ts)
                    if frac is not None and iv.energy_j is not None:
                        t.energy_j = (t.energy_j or 0.0) + iv.energy_j * frac
                tokens = _delta(j.tokens, j.first_tokens)
                steps = max(0, j.step - j.first_step)
                out[j.job] = {
                    "energy_j": t.energy_j,
                    "tokens": tokens,
                    "steps": steps,
                    "joules_per_token": _per(t.energy_j, tokens),
                    "joules_per_step": _per(t.energy_j, steps),
                }
        return out

    def _write(self, ev: RunEnd) -> None:
        record = run_record(ev.stats, ev.reason, self.totals(ev.stats))
        line = dumps_strict(record, separators=(",", ":")) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._rotate(len(line))
            fd = open_regular(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())  # one write on O_APPEND: lines never interleave
                os.fsync(fd)
            finally:
                os.close(fd)
            self._write_failed = False
        except (OSError, StateFileError) as e:  # a link swapped in later is refused like a full disk
            if not self._write_failed:  # log once per state change, not per run
                log.error("cannot write the run ledger", path=str(self.path), error=str(e))
            self._write_failed = True

    def _rotate(self, incoming: int) -> None:
        """runs.jsonl -> runs.jsonl.1 when this line would take it past max_bytes (bounded ledger)."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size and size + incoming > self.max_bytes:
            os.replace(self.path, rotated(self.path))


def rotated(path: str | os.PathLike) -> Path:
    """The previous ledger file that rotation keeps beside runs.jsonl."""
    return Path(f"{path}.1")


def read_runs(path: str | os.PathLike) -> tuple[list[dict[str, Any]], int]:
    """Ledger records in file order (the rotated file's first), and the number of unreadable lines skipped."""
    runs: list[dict[str, Any]] = []
    bad = 0
    texts = []
    for p in (rotated(path), Path(path)):
        fd = open_regular(p)  # StateFileError for a link or a FIFO: never read through one
        if fd is None:
            continue
        with open(fd, encoding="utf-8", errors="replace") as fh:
            texts.append(fh.read())
    for line in "\n".join(texts).splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(rec, Mapping) and "job" in rec:
            runs.append(dict(rec))
        else:
            bad += 1
    return runs, bad
