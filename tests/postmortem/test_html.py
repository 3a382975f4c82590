"""The report's charts: round ticks a person reads, an empty chart that says why, the advice (issue 34)."""

from __future__ import annotations

from spark_watchd.postmortem.html import _advice, chart, tick_label, ticks


def _labels(lo, hi):
    axis = ticks(lo, hi)
    return [tick_label(v, axis[1] - axis[0]) for v in axis]


def test_ticks_are_round_cover_the_range_and_read_without_exponents():
    assert _labels(0, 2670) == ["0", "1,000", "2,000", "3,000"]  # was 0 / 668 / 1.34e+03 / 2e+03 / 2.67e+03
    assert _labels(26, 52.1) == ["20", "30", "40", "50", "60"]  # was 52.1 / 39.1 / 26
    assert _labels(0, 0.9) == ["0.00", "0.25", "0.50", "0.75", "1.00"]
    assert _labels(-1.3, 4) == ["-2", "0", "2", "4"]
    for lo, hi in ((0, 1e-3), (3, 3.2), (0, 123456), (-50, -10)):
        axis = ticks(lo, hi)
        assert axis[0] <= lo and axis[-1] >= hi and 2 <= len(axis) <= 7


def test_a_chart_without_readings_says_why_instead_of_vanishing():
    html = chart(
        "Runway at the trend", "min", [("runway", [(0.0, None), (30.0, None)])], 0, 30, empty="no fall"
    )
    assert "Runway at the trend" in html and "no fall" in html and "<path" not in html


def test_the_report_gives_the_advice_of_each_gotcha_at_its_worst():
    timeline = [
        {"ts": 0.0, "G3": {"severity": "warning", "summary": "thin", "advice": ["Drop the page cache"]}},
        {
            "ts": 30.0,
            "G3": {"severity": "critical", "summary": "gone", "advice": ["Stop the <b>job</b> now"]},
        },
        {"ts": 60.0, "G3": {"severity": "ok", "summary": "fine"}},
    ]
    what = _advice(timeline)
    assert what.startswith("<h2>What to do</h2>")
    assert "critical" in what and "Stop the &lt;b&gt;job&lt;/b&gt; now" in what and "page cache" not in what
