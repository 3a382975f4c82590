"""Memory runway: how long until the budget runs out at its recent trend, and which workload keeps growing.

Pure functions of (time, bytes) points (`trend`, `sustained_fall`, `runway`) and `RunwayTracker`, their
incremental form fed one sample and its workload table at a time. A runway is a *sustained* fall: the budget
lower in each quarter of the window than in the one before, the trend over the whole window at least
`runway_min_fall_bytes`, and the latest quarter still falling at a good share of that trend. A model load
that climbs and settles (tens of GiB in a minute or two, then flat) fails the quarters test, so it is
never a runway: G3's transient rules speak for it while it lasts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

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


def trend(points: Sequence[tuple[float, float]]) -> float | None:
    """Robust slope of (ts, value) points, per second: the median of the half-window-lag slopes.

    Each point is paired with the one half the window later (n/2 pairs, O(n log n)): one spike or one
    noisy reading moves the median by at most one rank, where a least-squares fit would tilt.
    """
    n = len(points)
    if n < 4:
        return None
    # islice walks a deque (the trackers' windows) in place: no copy of the window per call.
    later = points[n // 2 :] if isinstance(points, list) else islice(points, n // 2, None)
    slopes = [(v1 - v0) / (t1 - t0) for (t0, v0), (t1, v1) in zip(points, later, strict=False) if t1 > t0]
    slopes.sort()
    m = len(slopes)
    if not m:
        return None
    return slopes[m // 2] if m % 2 else (slopes[m // 2 - 1] + slopes[m // 2]) / 2


def quarter_trends(points: Sequence[tuple[float, float]]) -> list[float | None]:
    """The robust trend of each time quarter of the points (None where a quarter holds too few)."""
    if len(points) < 2:
        return [None] * QUARTERS
    t0, span = points[0][0], points[-1][0] - points[0][0]
    quarters: list[list[tuple[float, float]]] = [[] for _ in range(QUARTERS)]
    for p in points:
        quarters[min(QUARTERS - 1, int((p[0] - t0) / span * QUARTERS)) if span > 0 else 0].append(p)
    return [trend(q) for q in quarters]


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
    qs = quarter_trends(points)
    if any(q is None or q < STEEP_FACTOR * slope or q > slope / STEEP_FACTOR for q in qs):
        return False
    return qs[-1] <= slope * SETTLE_SHARE


def still_falling(points: Sequence[tuple[float, float]], slope: float | None) -> bool:
    """The looser test that holds a runway warning: the last quarter still falls at a tenth of the pace."""
    if slope is None or slope >= 0:
        return False
    last = quarter_trends(points)[-1]
    return last is not None and last <= slope * HOLD_SHARE


@dataclass(frozen=True, slots=True)
class Growth:
    """One workload's footprint drift over the runway window."""

    kind: str
    name: str
    pid: int
    capped: bool | None
    bytes_per_s: float
    grew_bytes: int
    window_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "pid": self.pid,
            "capped": self.capped,
            "growth_bytes_per_s": round(self.bytes_per_s, 1),
            "growth_gib_per_h": round(self.bytes_per_s * 3600 / GIB, 2),
            "grew_bytes": self.grew_bytes,
            "window_s": round(self.window_s, 1),
        }


@dataclass(frozen=True, slots=True)
class Runway:
    """The budget's runway at one sample. `seconds` is None while the budget is not on a sustained fall
    (published as +Inf); `known` is False until the window holds runway_min_span_s of history."""

    known: bool
    seconds: float | None = None
    trend_bytes_per_s: float | None = None
    window_s: float = 0.0
    budget_bytes: int | None = None
    growth: tuple[Growth, ...] = field(default_factory=tuple)

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
    points: Sequence[tuple[float, float]], budget: float, th, growth: tuple[Growth, ...] = ()
) -> Runway:
    """The runway of a window of (ts, budget bytes) points (oldest first) ending at `budget`; pure."""
    span = points[-1][0] - points[0][0] if points else 0.0
    if span < th.runway_min_span_s:
        return Runway(False, window_s=span, budget_bytes=int(budget), growth=growth)
    pts = points if isinstance(points, list) else list(points)
    slope = trend(pts)
    if slope is None or slope >= 0 or not sustained_fall(pts, th.runway_min_fall_bytes, slope):
        return Runway(True, None, slope, span, int(budget), growth)
    return Runway(True, max(0.0, budget) / -slope, slope, span, int(budget), growth)


class BudgetRunway:
    """Incremental runway of the budget and the runway warning's latch (G3 owns one: `G3Tracker._now`)."""

    def __init__(self, th):
        self.th = th
        self.points: deque[tuple[float, float]] = deque()
        self.on = False
        self.hold_until: float | None = None
        self.latest = Runway(False)

    def set_thresholds(self, th) -> None:
        """Judge with reloaded thresholds from the next sample on; the history stays."""
        self.th = th
        self.on = False

    def forget(self) -> None:
        """A reboot, a clock step back or a kill: the past trend is not the present one."""
        self.points.clear()
        self.on = False
        self.hold_until = None
        self.latest = Runway(False)

    def update(self, ts: float, budget: int | None) -> Runway:
        """Fold one sample's budget in; the runway at ts."""
        th = self.th
        if budget is None:
            self.points.clear()
            self.latest = Runway(False)
            return self.latest
        pts = self.points
        if pts and (ts <= pts[-1][0] or ts - pts[-1][0] > th.max_gap_s):
            pts.clear()
        pts.append((ts, float(budget)))
        while ts - pts[0][0] > th.runway_window_s:
            pts.popleft()
        self.latest = runway(pts, budget, th)
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


DRIFT_POINTS = 120  # footprint points per workload over runway_window_s: one per 10 s of the default 20 min


class FootprintDrift:
    """Each workload's footprint trend over the runway window (the engine feeds it G6's workload table)."""

    def __init__(self, th):
        self.th = th
        self.footprints: dict[tuple, deque] = {}  # workload key -> deque of (ts, footprint bytes)
        # workload key -> {footprint: how many of its points hold it}: one key means the window is flat, whose
        # trend is exactly 0.0 (every half-lag slope is 0.0 / dt), with no slopes to sort. Most workloads sit
        # still most of the time (about 45 % of the trends of the fixture and public traces).
        self.counts: dict[tuple, dict[float, int]] = {}

    def set_thresholds(self, th) -> None:
        self.th = th

    def forget(self) -> None:
        self.footprints.clear()
        self.counts.clear()

    def update(self, ts: float, workloads: Iterable[Any]) -> tuple[Growth, ...]:
        """Fold one sample's workload table in; the drift of each workload with enough history."""
        th = self.th
        win = th.runway_window_s
        # At most DRIFT_POINTS points a workload over the window, whatever the interval: at --interval 1 and
        # 50 servers a point a sample was 60,000 points (6 MiB) and a 1,200-point sort per workload per tick.
        spacing = win / DRIFT_POINTS
        growth = []
        seen = set()
        for w in workloads:
            seen.add(w.key)
            h = self.footprints.get(w.key)
            if h is None:
                h = self.footprints[w.key] = deque()
                c = self.counts[w.key] = {}
            else:
                c = self.counts[w.key]
            if h and ts <= h[-1][0]:
                h.clear()
                c.clear()
            v = float(w.footprint_bytes)
            if len(h) >= 2 and ts - h[-2][0] < spacing:
                _uncount(c, h[-1][1])
                h[-1] = (ts, v)  # the latest reading, the series no denser than spacing
            else:
                h.append((ts, v))
            c[v] = c.get(v, 0) + 1
            while ts - h[0][0] > win:
                _uncount(c, h.popleft()[1])
            span = ts - h[0][0]
            if span < th.runway_min_span_s:
                slope = None
            elif len(c) == 1 and len(h) >= 4:  # flat (times strictly rise: h is cleared on a step back)
                slope = 0.0
            else:
                slope = trend(h)
            if slope is not None:
                growth.append(Growth(w.kind, w.name, w.pid, w.capped, slope, int(h[-1][1] - h[0][1]), span))
        if len(seen) != len(self.footprints):
            for key in [k for k in self.footprints if k not in seen]:
                del self.footprints[key]
                del self.counts[key]
        return tuple(growth)


def _uncount(c: dict[float, int], v: float) -> None:
    n = c[v] - 1
    if n:
        c[v] = n
    else:
        del c[v]


def with_growth(finding: Finding, growth: tuple[Growth, ...], th) -> Finding:
    """G3 with each workload's drift in its evidence, and the top grower named after a short runway."""
    ev = finding.evidence
    if not growth:
        if "runway_known" not in ev or not ev.get("workload_growth"):
            return finding  # the runway's own (empty) growth list is already what this would write
        evidence = dict(ev)
        evidence["workload_growth"] = []
        return Finding(
            finding.gotcha, finding.severity, finding.summary, evidence, finding.advice, finding.anomaly,
            finding.state,
        )  # fmt: skip
    evidence = dict(ev)
    evidence["workload_growth"] = [g.to_dict() for g in growth]
    summary = finding.summary
    secs = ev.get("runway_s")
    if secs is not None and secs <= th.runway_leave_s:
        top = max(growth, key=_grew)
        if top.grew_bytes >= GIB:
            summary = f"{summary}; {top.name} grew {top.grew_bytes / GIB:.0f} GiB in that time"
    return Finding(
        finding.gotcha, finding.severity, summary, evidence, finding.advice, finding.anomaly, finding.state
    )


def _grew(g: Growth) -> int:
    return g.grew_bytes
