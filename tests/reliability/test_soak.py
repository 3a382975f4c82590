"""Soak, short: half a simulated day through the running daemon with pid and job churn; no label piles up."""

from __future__ import annotations

import pytest

from bench.soak import STEP, build_week_trace, soak
from tests.conftest import REPO

SCENARIOS = sorted((REPO / "spark_watchd" / "scenarios").glob("*.jsonl"))
HOURS = 3600.0


@pytest.mark.slow
def test_half_a_simulated_day_with_churn_keeps_the_series_count_flat(tmp_path):
    samples = int(12 * HOURS / STEP)
    trace = tmp_path / "day.jsonl"
    passes = build_week_trace(trace, SCENARIOS, samples, churn=True)
    assert passes >= 4  # every 3 h a new pass: new pids and new job names each time
    # State kept in memory: fsyncs of the state file would make this disk-bound (bench/soak.py keeps it on disk).
    rows = soak(trace, samples, speed=50000, log=lambda *_: None, every=2 * HOURS, keep_state=False)
    assert rows[-1]["day"] >= 5, rows  # reached the end of the simulated half day
    # First plateau: after one cycle through both scenarios (6 h); from there the count may move by a few
    # series (a finding's evidence, a job between reports) but must not grow with every pass.
    plateau = rows[3]["series"]
    assert plateau > 30  # a real exposition, not an empty page
    assert max(r["series"] for r in rows[3:]) <= plateau + 12, [r["series"] for r in rows]
