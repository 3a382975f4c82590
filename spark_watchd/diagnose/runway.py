"""Memory runway: how long until the budget runs out at its recent trend, and which workload keeps growing.

Pure functions of (time, bytes) points (`trend` in diagnose/trend.py, `sustained_fall`, `runway`) and
`BudgetRunway` / `FootprintDrift`, their incremental form fed one sample and its workload table at a time.
A runway is a *sustained* fall: the budget lower in each quarter of the window than in the one before, the
trend over the whole window at least `runway_min_fall_bytes`, and the latest quarter still falling at a
good share of that trend. A model load
that climbs and settles (tens of GiB in a minute or two, then flat) fails the quarters test, so it is
never a runway: G3's transient rules speak for it while it lasts.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any, NamedTuple

from spark_watchd.diagnose.sizing import SOURCE
from spark_watchd.diagnose.trend import TrendWindow, trend
from spark_watchd.sample.findings import Finding

GIB = 1024**3
QUARTERS = 4
# The latest quarter must still fall at this share of the whole window's trend: a fall slowing to a
# quarter of its pace is a transient settling, not a runway.
SETTLE_SHARE = 0.25
HOLD_SHARE = 0.1  # ...and a warning already raised holds while it falls at a tenth of it
# A quarter falling over three times the window's pace (a load, a collapse) or under a third of it (flat: the
# fall began inside the window) is no creep.
STEEP_FACTOR = 3.0

ADVICE_RUNWAY = (
    "Something keeps growing: find it in the workload table (its growth per hour) and restart or cap it "
    "before the pool runs out (vLLM --gpu-memory-utilization, a smaller --max-num-seqs or context).",
    "Then drop the page cache (sync; echo 3 | sudo tee /proc/sys/vm/drop_caches) to buy time.",
)


def quarter_trends(points: Sequence[tuple[float, float]]) -> list[float | None]:
    """The robust trend of each time quarter of the points (None where a quarter holds too few)."""
    pts = list(points)
    return [trend(_quarter(pts, k)) for k in range(QUARTERS)]


def _quarter(pts: list[tuple[float, float]], k: int) -> list[tuple[float, float]]:
    """The points of time quarter k of time-ordered points: those whose quarter, min(3, int((t - t0) / span
    * 4)), is k. That never falls as t rises, so a quarter is a slice (the trackers read one or two quarters,
    not every point's)."""
    if len(pts) < 2:
        return []
    span = pts[-1][0] - pts[0][0]
    if span <= 0:
        return pts if k == 0 else []
    return pts[_start(pts, k, span) : _start(pts, k + 1, span) if k < QUARTERS - 1 else len(pts)]


def _start(pts: list[tuple[float, float]], k: int, span: float) -> int:
    """The first index in quarter k or later: bisected at t0 + k/4 of the span ((t,) sorts before (t, v)),
    then moved to where the exact test changes (a point on the boundary may round either way)."""
    t0 = pts[0][0]
    i = bisect_left(pts, (t0 + span * k / QUARTERS,))
    while i > 0 and (pts[i - 1][0] - t0) / span * QUARTERS >= k:
        i -= 1
    while i < len(pts) and (pts[i][0] - t0) / span * QUARTERS < k:
        i += 1
    return i


def sustained_fall(
    points: Sequence[tuple[float, float]], min_fall: float, slope: float | None = None
) -> bool:
    """Whether the values fell steadily through the whole span: the trend over the span at least `min_fall`,
    every time quarter falling within STEEP_FACTOR times of the span's pace either way (a load is one steep
    quarter among flat ones, a leak that began mid-window a flat quarter, a creep is four alike), and the
    last quarter not settling."""
    if len(points) < 4 * QUARTERS:
        return False
    span = points[-1][0] - points[0][0]
    if slope is None:
        slope = trend(points)
    if slope is None or slope >= 0 or -slope * span < min_fall:
        return False
    pts = list(points)
    # The last quarter first (it must also not be settling), the others only if it passes, each only while
    # the ones before it pass.
    b3 = _start(pts, 3, span)
    last = trend(pts[b3:])
    if not _steady(last, slope) or last > slope * SETTLE_SHARE:
        return False
    b1, b2 = _start(pts, 1, span), _start(pts, 2, span)
    return all(_steady(trend(q), slope) for q in (pts[:b1], pts[b1:b2], pts[b2:b3]))


def _steady(q: float | None, slope: float) -> bool:
    """A quarter's trend within STEEP_FACTOR times of the span's (falling) pace either way."""
    return q is not None and STEEP_FACTOR * slope <= q <= slope / STEEP_FACTOR


def still_falling(points: Sequence[tuple[float, float]], slope: float | None) -> bool:
    """The looser test that holds a runway warning: the last quarter still falls at a tenth of the pace."""
    if slope is None or slope >= 0:
        return False
    last = trend(_quarter(list(points), QUARTERS - 1))
    return last is not None and last <= slope * HOLD_SHARE


class Growth(NamedTuple):
    """One workload's footprint drift over the runway window."""

    kind: str
    name: str
    pid: int
    capped: bool | None
    bytes_per_s: float
    grew_bytes: int
    window_s: float
    # Where its true hold was measured and NVML/RSS under-count it (diagnose/sizing.py): its level now by the
    # hold, and what they count. Its growth stays theirs: the under-count is one constant, and sizing the
    # history by it would make the sample the hold was measured at a step.
    held_bytes: int | None = None
    per_process_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "kind": self.kind,
            "name": self.name,
            "pid": self.pid,
            "capped": self.capped,
            "growth_bytes_per_s": round(self.bytes_per_s, 1),
            "growth_gib_per_h": round(self.bytes_per_s * 3600 / GIB, 2),
            "grew_bytes": self.grew_bytes,
            "window_s": round(self.window_s, 1),
        }
        if self.held_bytes is not None:
            out.update(
                footprint_bytes=self.held_bytes, bytes_source=SOURCE, per_process_bytes=self.per_process_bytes
            )
        return out


class Runway(NamedTuple):
    """The budget's runway at one sample. `seconds` is None while the budget is not on a sustained fall
    (published as +Inf); `known` is False until the window holds runway_min_span_s of history."""

    known: bool
    seconds: float | None = None
    trend_bytes_per_s: float | None = None
    window_s: float = 0.0
    budget_bytes: int | None = None
    growth: tuple[Growth, ...] = ()

    def evidence(self) -> dict[str, Any]:
        """The G3 evidence keys (JSON-ready)."""
        return {
            "runway_s": None if self.seconds is None else round(self.seconds, 1),
            "runway_known": self.known,
            "budget_trend_bytes_per_s": None
            if self.trend_bytes_per_s is None
            else round(self.trend_bytes_per_s, 1),
            "runway_window_s": round(self.window_s, 1),
            "workload_growth": [g.to_dict() for g in self.growth],
        }

    def sentence(self) -> str | None:
        """ "at the last 20 minutes' rate the pool runs out in about 14 min; vllm grew 19 GiB in that time"."""
        if self.seconds is None:
            return None
        mins = max(1, round(self.window_s / 60))
        out = f"at the last {mins} minutes' rate the pool runs out in about {_duration(self.seconds)}"
        top = max(self.growth, key=lambda g: g.grew_bytes, default=None)
        if top is not None and top.grew_bytes >= GIB:
            out += f"; {top.name} grew {top.grew_bytes / GIB:.0f} GiB in that time"
        return out


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def runway(
    points: Sequence[tuple[float, float]], budget: float, th, growth: tuple[Growth, ...] = (), slope=None
) -> Runway:
    """The runway of a window of (ts, budget bytes) points (oldest first) ending at `budget`; pure. `slope`:
    trend(points) when the caller keeps it (a TrendWindow)."""
    span = points[-1][0] - points[0][0] if points else 0.0
    if span < th.runway_min_span_s:
        return _new(Runway, (False, None, None, span, int(budget), growth))
    if slope is None:
        slope = trend(points)
    if slope is None or slope >= 0 or not sustained_fall(points, th.runway_min_fall_bytes, slope):
        return _new(Runway, (True, None, slope, span, int(budget), growth))
    return _new(Runway, (True, max(0.0, budget) / -slope, slope, span, int(budget), growth))


# tuple.__new__ builds a Runway or Growth without NamedTuple's Python-level __new__ (once a sample, a workload).
_new = tuple.__new__

# Budget points over runway_window_s, whatever the interval: one per 10 s of the default 20 min. Every trace
# samples at 27 s or more, where this never binds; at --interval 1 the window held 1,200 points.
RUNWAY_POINTS = 120
DRIFT_POINTS = 120  # footprint points per workload over runway_window_s, likewise


class BudgetRunway:
    """Incremental runway of the budget and the runway warning's latch (G3 owns one: `G3Tracker._now`)."""

    def __init__(self, th):
        self.th = th
        self.window = TrendWindow()  # the budget's (ts, bytes) over runway_window_s, at most RUNWAY_POINTS
        self.on = False
        self.hold_until: float | None = None
        self.latest = Runway(False)

    @property
    def points(self) -> deque[tuple[float, float]]:
        return self.window.points

    def set_thresholds(self, th) -> None:
        """Judge with reloaded thresholds from the next sample on; the history stays."""
        self.th = th
        self.on = False

    def forget(self) -> None:
        """A reboot, a clock step back or a kill: the past trend is not the present one."""
        self.window.clear()
        self.on = False
        self.hold_until = None
        self.latest = Runway(False)

    def update(self, ts: float, budget: int | None) -> Runway:
        """Fold one sample's budget in; the runway at ts."""
        th = self.th
        win = self.window
        if budget is None:
            win.clear()
            self.latest = Runway(False)
            return self.latest
        pts = win.points
        if pts and (ts <= pts[-1][0] or ts - pts[-1][0] > th.max_gap_s):
            win.clear()
        window_s = th.runway_window_s
        win.fold(ts, float(budget), window_s / RUNWAY_POINTS, window_s)
        span = ts - pts[0][0]
        if span < th.runway_min_span_s:  # (runway() without the trend: it is not read before then)
            self.latest = _new(Runway, (False, None, None, span, int(budget), ()))
        else:
            self.latest = runway(pts, budget, th, (), win.trend())
        return self.latest

    def warn(self, ts: float, rw: Runway) -> bool:
        """The runway warning: on at a runway of runway_warn_s or less, held while the budget still falls
        (`still_falling`) toward a runway under runway_leave_s, and for at least min_dwell_s."""
        th = self.th
        if rw.seconds is not None and rw.seconds <= th.runway_warn_s:
            self.on = True
        elif self.on:
            slope = rw.trend_bytes_per_s
            hold = rw.known and rw.budget_bytes is not None and still_falling(self.points, slope)
            self.on = hold and max(0.0, rw.budget_bytes) / -slope <= th.runway_leave_s
        if self.on:
            self.hold_until = ts + th.min_dwell_s
            return True
        return self.hold_until is not None and ts < self.hold_until


class FootprintHistory:
    """One workload's (ts, footprint bytes) over the window: points[lo:]. Points are appended, never changed
    in place (a replaced newest point, a compaction or a clear makes a new list), so the slice a sample
    handed out (`Drifting`) stays that sample's window whatever comes after: its trend is sorted only if read.
    """

    __slots__ = ("points", "lo")

    def __init__(self) -> None:
        self.points: list[tuple[float, float]] = []
        self.lo = 0

    def __len__(self) -> int:
        return len(self.points) - self.lo

    def clear(self) -> None:
        self.points, self.lo = [], 0

    def fold(self, ts: float, v: float, spacing: float, window_s: float) -> None:
        """Take (ts, v) in: no denser than `spacing` (the latest reading replaces a point too close to the one
        before it), no longer than window_s (the window's start moves on; compacted once a quarter is behind it)."""
        pts, lo = self.points, self.lo
        if len(pts) - lo >= 2 and ts - pts[-2][0] < spacing:
            pts, lo = pts[lo:-1], 0
            self.points = pts
        elif lo >= 16 and 4 * lo >= len(pts):
            pts, lo = pts[lo:], 0
            self.points = pts
        pts.append((ts, v))
        while ts - pts[lo][0] > window_s:
            lo += 1
        self.lo = lo


class Drifting(NamedTuple):
    """One workload's footprint window at one sample (a slice no later sample changes); its row when read."""

    workload: Any  # this sample's row of the workload table (immutable)
    points: list[tuple[float, float]]
    lo: int
    hi: int
    under: int = 0  # what NVML/RSS under-count it by, where its true hold was measured (diagnose/sizing.py)

    def growth(self) -> Growth:
        pts = self.points[self.lo : self.hi]
        (t0, v0), (t1, v1) = pts[0], pts[-1]
        w = self.workload
        g = Growth(w.kind, w.name, w.pid, w.capped, trend(pts), int(v1 - v0), t1 - t0)
        if self.under:
            g = g._replace(held_bytes=w.footprint_bytes + self.under, per_process_bytes=w.footprint_bytes)
        return g


class FootprintDrift:
    """Each workload's footprint trend over the runway window (the engine feeds it G6's workload table)."""

    def __init__(self, th):
        self.th = th
        # workload key -> its footprints over the window, at most about DRIFT_POINTS: at --interval 1 and 50
        # servers a point a sample was 60,000 points (6 MiB) and a 1,200-point sort per workload per tick.
        self.footprints: dict[tuple, FootprintHistory] = {}

    def set_thresholds(self, th) -> None:
        self.th = th

    def forget(self) -> None:
        self.footprints.clear()

    def update(self, ts: float, workloads: Iterable[Any], held=None) -> tuple[Drifting, ...]:
        """Fold one sample's workload table in; the window of each workload with enough history (the growth
        rows are only ever read as words: their trends are computed then, see with_growth). held: each
        workload's under-count by NVML/RSS where its true hold was measured, for the rows' level."""
        th = self.th
        win = th.runway_window_s
        spacing = win / DRIFT_POINTS
        min_span = th.runway_min_span_s
        footprints = self.footprints
        drifting = []
        seen = set()
        for w in workloads:
            key = w.key
            seen.add(key)
            h = footprints.get(key)
            if h is None:
                h = footprints[key] = FootprintHistory()
            elif h.points and ts <= h.points[-1][0]:
                h.clear()
            h.fold(ts, float(w.footprint_bytes), spacing, win)
            pts, lo = h.points, h.lo
            if len(pts) - lo >= 4 and ts - pts[lo][0] >= min_span:  # (a trend needs 4 points)
                drifting.append(_new(Drifting, (w, pts, lo, len(pts), held.get(key, 0) if held else 0)))
        if len(seen) != len(footprints):
            for key in [k for k in footprints if k not in seen]:
                del footprints[key]
        return tuple(drifting)


def with_growth(finding: Finding, drifting: tuple[Drifting, ...], th) -> Finding:
    """G3 with each workload's drift in its evidence, and the top grower named after a short runway. The words
    stay deferred (built on first read from this sample's windows, which no later sample changes)."""
    if not drifting:
        return finding  # G3's runway evidence already holds the empty growth list this would write
    return Finding.deferred(
        finding.gotcha,
        finding.severity,
        partial(_grown_words, finding, drifting, th.runway_leave_s),
        finding.advice,
        finding.anomaly,
        finding.state,
    )


def _grown_words(finding: Finding, drifting: tuple[Drifting, ...], leave_s: float) -> tuple[str, dict]:
    growth = [d.growth() for d in drifting]
    ev = finding.evidence
    evidence = dict(ev)
    evidence["workload_growth"] = [g.to_dict() for g in growth]
    summary = finding.summary
    secs = ev.get("runway_s")
    if secs is not None and secs <= leave_s:
        top = max(growth, key=_grew)
        if top.grew_bytes >= GIB:
            summary = f"{summary}; {top.name} grew {top.grew_bytes / GIB:.0f} GiB in that time"
    return summary, evidence


def _grew(g: Growth) -> int:
    return g.grew_bytes
