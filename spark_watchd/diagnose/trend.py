"""The robust trend of a (time, value) series: `trend`, pure, and `TrendWindow`, its incremental form.

Used by the memory runway (diagnose/runway.py): the budget's trend and each workload's footprint drift.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from collections.abc import Sequence
from itertools import islice


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


class TrendWindow:
    """A window of (ts, value) points, oldest first, with its `trend` kept up to date as points come and go.

    Cached (`trend` sorts n/2 slopes on every call, once a sample per window): the sorted slopes of every pair
    of points `lag` apart. A point appended, dropped or replaced changes one of those pairs each (a bisect);
    they are sorted afresh only when n // 2, the lag `trend` pairs at, has moved. The same slopes, so the same
    median, to the last bit, as trend(points). Times must strictly rise (callers clear on a step back); change
    `points` only through fold() and clear().
    """

    __slots__ = ("points", "_lag", "_slopes")

    def __init__(self) -> None:
        self.points: deque[tuple[float, float]] = deque()
        self._lag = 0  # 0: no slopes cached
        self._slopes: list[float] = []

    def __len__(self) -> int:
        return len(self.points)

    def clear(self) -> None:
        self.points.clear()
        self._lag = 0
        self._slopes.clear()

    def fold(self, ts: float, v: float, spacing: float, window_s: float) -> None:
        """Take (ts, v) in, keeping the window no denser than `spacing` (the latest reading replaces a point
        too close to the one before it) and no longer than window_s (the oldest points drop)."""
        pts = self.points
        lag = self._lag
        slopes = self._slopes
        n = len(pts)
        if n >= 2 and ts - pts[-2][0] < spacing:
            if n > lag > 0:  # the pair ending at the newest point changes
                (t0, v0), (t1, v1) = pts[-1 - lag], pts[-1]
                del slopes[bisect_left(slopes, (v1 - v0) / (t1 - t0))]
                insort(slopes, (v - v0) / (ts - t0))
            pts[-1] = (ts, v)
        else:
            pts.append((ts, v))
            if n >= lag > 0:  # a pair ending at the new point
                t0, v0 = pts[-1 - lag]
                insort(slopes, (v - v0) / (ts - t0))
        while ts - pts[0][0] > window_s:
            if len(pts) > lag > 0:  # the pair starting at the oldest point goes
                (t0, v0), (t1, v1) = pts[0], pts[lag]
                # (the very float added for this pair: computed from the same two points)
                del slopes[bisect_left(slopes, (v1 - v0) / (t1 - t0))]
            pts.popleft()

    def trend(self) -> float | None:
        """trend(self.points)."""
        pts = self.points
        n = len(pts)
        if n < 4:
            return None
        lag = n // 2
        if lag != self._lag:
            self._lag = lag
            self._slopes = s = [
                (v1 - v0) / (t1 - t0) for (t0, v0), (t1, v1) in zip(pts, islice(pts, lag, None), strict=False)
            ]
            s.sort()
        s = self._slopes
        m = len(s)
        return s[m // 2] if m % 2 else (s[m // 2 - 1] + s[m // 2]) / 2
