"""The incremental trend (TrendWindow) is trend() of its points to the last bit, whatever the moves."""

from __future__ import annotations

import random

from spark_watchd.diagnose.trend import TrendWindow, trend


def test_the_window_trend_is_the_pure_trend_exactly_through_appends_drops_replacements_and_clears():
    r = random.Random(24)
    w = TrendWindow()
    ts = 0.0
    checked = 0
    for _ in range(5000):
        op = r.random()
        ts += r.uniform(0.5, 60.0)
        v = float(r.choice((r.randrange(10**9, 10**11), 5 * 10**10)))  # ties too: flat stretches
        if op < 0.01:
            w.clear()
        elif op < 0.25 and len(w.points) >= 2:
            w.replace_last(ts, v)
        else:
            w.append(ts, v)
        while len(w.points) > r.randrange(4, 60):
            w.popleft()
        if r.random() < 0.7:  # read on most samples only: moves between reads must be kept as well
            assert w.trend() == trend(list(w.points))
            checked += 1
    assert checked > 3000
