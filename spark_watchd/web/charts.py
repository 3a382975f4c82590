"""Bounded in-memory history of published snapshots, for the status page and `GET /api/v1/history`.

Each snapshot is reduced to one compact record (the numbers the page charts, the
severities, the training jobs and the events), not kept whole: a Sample carries
the full meminfo, vmstat and process list, which is ~50x larger. Numbers live in
one ``array('d')`` for all records (NaN for "not sampled"), so 12 h at 30 s (1440
records) takes well under a megabyte (History says how).
"""

from __future__ import annotations

import math
import threading
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any

from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.findings import Diagnosis, Event
from spark_watchd.sample.memory import MemoryView
from spark_watchd.sample.model import SEVERITY_LEVEL, GpuReading, Sample
from spark_watchd.snapshot import Snapshot
from spark_watchd.web.settings import WebSettings

_NAN = float("nan")


class _Tick:
    """What one record's columns are read from: the sample, its first GPU (GB10 has one; an empty reading
    without one), the memory view, the PSI lines and the classifiers' states."""

    __slots__ = ("sample", "gpu", "mem", "psi", "g3", "g4", "diagnosis")

    def read(self, s: Sample, diagnosis: Diagnosis | None, mem: MemoryView | None) -> _Tick:
        """Point at this tick's parts (one _Tick per History, reused under its lock: nothing per record)."""
        self.sample = s
        self.gpu = s.gpus[0] if s.gpus else _NO_GPU
        self.mem = mem
        self.psi = s.psi_memory or {}
        self.diagnosis = diagnosis
        # The throttle, its reason and the rates are the classifiers' (diagnose/verdicts.py), computed once
        # per tick: the chart shades what the G4 card and sparkwatchd_thermal_throttle_active say.
        self.g3 = _state(diagnosis, "G3")
        self.g4 = _state(diagnosis, "G4")
        return self

    def memory(self, name: str) -> Any:
        return getattr(self.mem, name, None)


_NO_GPU = GpuReading()
# The numeric columns of a record, each with where its value comes from, by name: the JSON keys of
# /api/v1/history, in their order (a record's numbers are stored in this order, NaN for "not sampled").
COLUMNS: dict[str, Callable[[_Tick], Any]] = {
    "ts": lambda t: t.sample.ts,
    "power_w": lambda t: t.gpu.power_w,
    "temp_c": lambda t: t.gpu.temp_c,
    "slowdown_temp_c": lambda t: t.gpu.slowdown_temp_c,
    "sm_clock_mhz": lambda t: t.gpu.sm_clock_mhz,
    "app_clock_mhz": lambda t: t.gpu.applications_clock_mhz,
    "util_pct": lambda t: t.gpu.util_pct,
    "reasons": lambda t: t.gpu.clocks_event_reasons,
    "throttle": lambda t: 1.0 if t.g4 is not None and t.g4.throttling else 0.0,
    "mem_total_bytes": lambda t: t.memory("total_bytes"),
    "mem_available_bytes": lambda t: t.memory("available_bytes"),
    "mem_available_min_bytes": lambda t: t.memory("available_min_bytes"),
    # The budget from the tick's memory view: the same figure G3 judged, negative into the reserve.
    "mem_budget_bytes": lambda t: t.memory("budget_bytes"),
    "mem_cached_bytes": lambda t: t.memory("cached_bytes"),
    "mem_anon_bytes": lambda t: t.memory("anon_bytes"),
    "mem_gpu_attributed_bytes": lambda t: t.memory("gpu_attributed_bytes"),
    "swap_used_bytes": lambda t: t.memory("swap_used_bytes"),
    "psi_some_avg60": lambda t: (t.psi.get("some") or {}).get("avg60"),
    "psi_full_avg60": lambda t: (t.psi.get("full") or {}).get("avg60"),
    "swap_out_pages_per_s": lambda t: t.g3.swapout_per_s if t.g3 is not None else None,
    "major_faults_per_s": lambda t: t.g3.majfault_per_s if t.g3 is not None else None,
    "G3": lambda t: _level(t.diagnosis, "G3"),
    "G4": lambda t: _level(t.diagnosis, "G4"),
    "G6": lambda t: _level(t.diagnosis, "G6"),
}
FIELDS = tuple(COLUMNS)
_INT_FIELDS = frozenset(
    {"sm_clock_mhz", "app_clock_mhz", "reasons", "throttle"} | {f for f in FIELDS if f.endswith("_bytes")}
)
_GOTCHA_FIELDS = ("G3", "G4", "G6")
_LEVEL_SEVERITY = {v: k for k, v in SEVERITY_LEVEL.items()}
# Per job and per server in a record: the labels and numbers kept (at most _SERVING_MAX servers a record).
_JOB_NUMBERS = ("step_seconds", "tokens_per_second")
_SERVING_LABELS = ("server", "kind", "up")
_SERVING_NUMBERS = (
    "generation_tokens_per_s",
    "requests_running",
    "requests_waiting",
    "kv_usage",
    "ttft_p95_s",
    "joules_per_token",
)
_SERVING_MAX = 8
_WIDTH = len(FIELDS)  # numbers a record holds, back to back in History._values


def _record_dict(
    values: array, jobs: tuple | None, events: tuple | None, serving: tuple | None
) -> dict[str, Any]:
    """One record as GET /api/v1/history gives it, from its row of numbers and its rows of jobs and servers."""
    d: dict[str, Any] = {}
    findings: dict[str, str | None] = {}
    for name, v in zip(FIELDS, values, strict=True):
        if name in _GOTCHA_FIELDS:
            findings[name] = None if math.isnan(v) else _LEVEL_SEVERITY.get(int(v), "unknown")
        elif not math.isfinite(v):
            d[name] = None
        else:
            d[name] = int(v) if name in _INT_FIELDS else v
    d["findings"] = findings
    d["jobs"] = [{"job": j, **_named(_JOB_NUMBERS, nums)} for j, nums in _unpack(jobs, len(_JOB_NUMBERS))]
    d["events"] = [dict(e) for e in (events or ())]
    d["serving"] = [
        {**_named(_SERVING_LABELS, labels), **_named(_SERVING_NUMBERS, nums)}
        for labels, nums in _unpack(serving, len(_SERVING_NUMBERS))
    ]
    return d


def _named(names: tuple[str, ...], values: tuple) -> dict[str, Any]:
    return dict(zip(names, values, strict=True))


def _pack(labels: tuple, numbers: list[float], prev: tuple | None) -> tuple:
    """(labels, array('d', numbers)), reusing the previous record's labels, or all of it, when equal."""
    if prev is not None and prev[0] == labels:
        labels = prev[0]
        nums = array("d", numbers)
        if prev[1].tobytes() == nums.tobytes():  # bytes: NaN (None) equals itself
            return prev
        return (labels, nums)
    return (labels, array("d", numbers))


def _unpack(packed: tuple | None, width: int) -> list[tuple[Any, tuple[float | None, ...]]]:
    """[(label, (number or None, ...)), ...] from _pack's form; NaN back to None."""
    if packed is None:
        return []
    labels, nums = packed
    return [
        (label, tuple(None if math.isnan(x) else x for x in nums[i * width : (i + 1) * width]))
        for i, label in enumerate(labels)
    ]


def _num(v: Any) -> float:
    if v is None or isinstance(v, bool):
        return _NAN
    try:
        return float(v)
    except (TypeError, ValueError):
        return _NAN


class History:
    """Bounded, thread-safe window of compact records; call it with each published Snapshot.

    At --interval 1 the window holds up to history_max_records (20,000 records, 5.5 h), so a record is no
    object of its own: its numbers are a FIELDS-wide row of one ``array('d')`` holding every record's back
    to back (NaN for "not sampled"; rows before `_head` are dropped ones, cut off in batches), and its jobs,
    events and servers one slot each of three deques (None when it has none). The per-job and per-server
    rows keep their numbers in one ``array('d')`` (NaN for None) and share their names with the record
    before whenever they are the same (the same jobs and servers tick after tick); a serving part that did
    not change at all (a server that is down) is shared whole.
    """

    def __init__(self, settings: WebSettings | None = None) -> None:
        self.settings = settings or WebSettings()
        self._values = array("d")
        self._head = 0  # rows before this one are dropped records
        self._jobs: deque[tuple | None] = deque()
        self._events: deque[tuple | None] = deque()
        self._serving: deque[tuple | None] = deque()
        self._lock = threading.Lock()
        self._tick = _Tick()
        # Bumped whenever the window is cleared (time went backwards: a looping replay, a clock step),
        # so readers polling with ?since= know to start over.
        self.generation = 0

    def __call__(self, snapshot: Snapshot) -> None:
        """Subscriber entry point: record the snapshot (never raises into the daemon's tick)."""
        self.observe(snapshot)

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)

    def _ts(self, i: int) -> float:
        """The timestamp of record i (0: the oldest held; -1: the newest); the lock held."""
        return self._values[(self._head + (i if i >= 0 else len(self._jobs) + i)) * _WIDTH]

    def observe(self, snapshot: Snapshot) -> bool:
        """Add one snapshot; False when it carries no new sample (none yet, or the same tick again)."""
        sample = snapshot.sample
        if sample is None:
            return False
        with self._lock:
            last_ts = self._ts(-1) if self._jobs else None
            if last_ts is not None and sample.ts == last_ts:
                return False
            if last_ts is not None and sample.ts < last_ts:
                self._clear()
                self.generation += 1
            self._compact(sample, snapshot.diagnosis, snapshot.memory_or_default())
            horizon = sample.ts - self.settings.history_hours * 3600.0
            drop = 0  # the oldest records past the count bound or the time window (never the newest)
            while len(self._jobs) - drop > self.settings.history_max_records or self._ts(drop) < horizon:
                drop += 1
            self._drop(drop)
        return True

    def _clear(self) -> None:
        del self._values[:]
        self._head = 0
        for q in (self._jobs, self._events, self._serving):
            q.clear()

    def _drop(self, n: int) -> None:
        """Forget the n oldest records; their rows are cut off the array once they outnumber the rest."""
        for _ in range(n):
            self._jobs.popleft()
            self._events.popleft()
            self._serving.popleft()
        self._head += n
        if self._head > max(64, len(self._jobs)):  # amortised: each row is moved at most once per drop
            del self._values[: self._head * _WIDTH]
            self._head = 0

    def _compact(self, s: Sample, diagnosis: Diagnosis | None, mem: MemoryView | None) -> None:
        """Append the sample's record (the lock held)."""
        tick = self._tick.read(s, diagnosis, mem)
        values = array("d", [_num(column(tick)) for column in COLUMNS.values()])
        prev_jobs = self._jobs[-1] if self._jobs else None
        prev_serving = self._serving[-1] if self._serving else None
        jobs = None
        if s.throughput and self.settings.history_max_jobs:
            kept = sorted(s.throughput, key=lambda t: -(_finite(t.tokens_per_second) or 0.0))[
                : self.settings.history_max_jobs
            ]
            kept.sort(key=lambda t: t.job)
            nums = [_num(_finite(getattr(t, k))) for t in kept for k in _JOB_NUMBERS]
            jobs = _pack(tuple(t.job for t in kept), nums, prev_jobs)
        events = (
            tuple(_event_dict(e) for e in diagnosis.events)
            if diagnosis is not None and diagnosis.events
            else None
        )
        serving = None
        if s.serving:
            rows = sorted(s.serving, key=lambda r: r.server)[:_SERVING_MAX]
            nums = [_num(_finite(getattr(r, k))) for r in rows for k in _SERVING_NUMBERS]
            labels = tuple(tuple(getattr(r, k) for k in _SERVING_LABELS) for r in rows)
            serving = _pack(labels, nums, prev_serving)
        self._values.extend(values)
        self._jobs.append(jobs)
        self._events.append(events)
        self._serving.append(serving)

    def _rows(self, since: float | None, limit: int | None) -> tuple[list[tuple], bool]:
        """The raw rows of records with ts > since, oldest first, at most `limit` (the newest); whether any
        were cut. Copies: the array moves when dropped rows are cut off."""
        limit = self.settings.history_api_max_records if limit is None else max(0, limit)
        picked = []
        with self._lock:
            n = len(self._jobs)
            for i in range(n - 1, -1, -1):
                if since is not None and self._ts(i) <= since or len(picked) > limit:
                    break
                off = (self._head + i) * _WIDTH
                picked.append(
                    (self._values[off : off + _WIDTH], self._jobs[i], self._events[i], self._serving[i])
                )
        truncated = len(picked) > limit
        picked = picked[:limit]
        picked.reverse()
        return picked, truncated

    def records(
        self, since: float | None = None, limit: int | None = None
    ) -> tuple[list[dict[str, Any]], bool]:
        """Records with ts > since (all when None), oldest first, at most `limit` (the newest); and whether any were cut."""
        rows, truncated = self._rows(since, limit)
        return [_record_dict(*r) for r in rows], truncated

    def _envelope(self, since: float | None, count: int, truncated: bool) -> dict[str, Any]:
        with self._lock:
            first = self._ts(0) if self._jobs else None
            last = self._ts(-1) if self._jobs else None
            size = len(self._jobs)
        return {
            "generation": self.generation,
            "since": since,
            "count": count,
            "truncated": truncated,
            "held": size,
            "first_ts": first,
            "last_ts": last,
        }

    def to_json(self, since: float | None = None, limit: int | None = None) -> dict[str, Any]:
        """The GET /api/v1/history body."""
        recs, truncated = self.records(since, limit)
        return {**self._envelope(since, len(recs), truncated), "records": recs}

    def json_body(self, since: float | None = None, limit: int | None = None) -> bytes:
        """to_json() as compact JSON (``separators=(",", ":")``, no NaN), byte for byte, built a record at a
        time: 5,000 records as dicts took ~15 MB at once, and the page asks for them on every load."""
        rows, truncated = self._rows(since, limit)
        head = dumps_strict(self._envelope(since, len(rows), truncated), separators=(",", ":"))
        buf = bytearray(head[:-1].encode() + b',"records":[')
        for i, r in enumerate(rows):
            if i:
                buf += b","
            buf += dumps_strict(_record_dict(*r), separators=(",", ":")).encode()
        buf += b"]}"
        return bytes(buf)


def _finite(v: Any) -> float | None:
    f = _num(v)
    return None if math.isnan(f) or math.isinf(f) else f


def _state(diagnosis: Diagnosis | None, gotcha: str) -> Any:
    """The typed state a classifier published with its finding (None without one)."""
    f = diagnosis.findings.get(gotcha) if diagnosis is not None else None
    return f.state if f is not None else None


def _level(diagnosis: Diagnosis | None, gotcha: str) -> float:
    f = diagnosis.findings.get(gotcha) if diagnosis is not None else None
    return float(f.level) if f is not None else _NAN


def _event_dict(e: Event) -> dict[str, Any]:
    d = {"kind": e.kind, "gotcha": e.gotcha, "ts": e.ts, "summary": e.summary}
    if e.after_throttle is not None:
        d["after_throttle"] = e.after_throttle
    if e.kind in _DRIVER_KINDS and e.details:
        # The page labels driver faults by code and marks fatal ones: keep those few keys, not the kernel line.
        d["details"] = {k: e.details[k] for k in _DRIVER_KEYS if k in e.details}
    return d


_DRIVER_KINDS = ("xid", "driver_oom", "pcie_fatal")
_DRIVER_KEYS = ("xid", "gpu", "fatal", "previous_boot")
