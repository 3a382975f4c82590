"""The incremental trend (TrendWindow) is trend() of its points to the last bit, whatever the moves."""

from __future__ import annotations

import random

from spark_watchd.diagnose.runway import quarter_trends
from spark_watchd.diagnose.trend import TrendWindow, trend


def test_the_window_trend_is_the_pure_trend_exactly_through_appends_drops_replacements_and_clears():
    r = random.Random(24)
    w = TrendWindow()
    ts = 0.0
    checked = 0
    for _ in range(5000):
        ts += r.uniform(0.5, 60.0)
        v = float(r.choice((r.randrange(10**9, 10**11), 5 * 10**10)))  # ties too: flat stretches
        if r.random() < 0.01:
            w.clear()
        # a spacing that sometimes replaces the newest point, a window that drops none, one or many
        w.fold(ts, v, r.choice((0.0, 10.0, 45.0)), r.choice((600.0, 1200.0, r.uniform(0, 2400.0))))
        if r.random() < 0.7:  # read on most samples only: the moves between reads are kept as well
            assert w.trend() == trend(list(w.points))
            checked += 1
    assert checked > 3000


def _quarters_by_point(points):
    """Each point's quarter by its own time (what runway.quarter_trends computes by bisection)."""
    t0, span = points[0][0], points[-1][0] - points[0][0]
    qs = [[] for _ in range(4)]
    for p in points:
        qs[min(3, int((p[0] - t0) / span * 4)) if span > 0 else 0].append(p)
    return [trend(q) for q in qs]


def test_quarter_trends_split_the_points_by_each_points_own_quarter_even_on_the_boundaries():
    r = random.Random(7)
    for _ in range(2000):
        n = r.randrange(2, 60)
        t0 = r.choice((0.0, 1_764_000_000.123, r.uniform(0, 2e9)))
        step = r.choice((1.0, 30.0, 0.1, r.uniform(0.01, 90.0)))
        # evenly spaced points land exactly on quarter boundaries; jittered ones near them
        ts = [t0 + i * step + (r.uniform(-1e-7, 1e-7) * step if r.random() < 0.3 else 0.0) for i in range(n)]
        ts = sorted(set(ts))
        points = [(t, float(r.randrange(10**9, 10**11))) for t in ts]
        if len(points) >= 2:
            assert quarter_trends(points) == _quarters_by_point(points)
