"""Hysteresis and minimum dwell: readings hovering at a threshold do not toggle findings; episodes are
still caught at their first sample."""

from __future__ import annotations

import pytest

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.steady import Dwell, Latch
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.sample.findings import Finding
from tests.diagnose.diag_builders import Host


def test_latch_enters_at_one_level_and_leaves_past_another():
    lt = Latch()
    assert [lt.above(v, 2.0, 1.0) for v in (1.9, 2.0, 1.5, 1.0, 0.9, 1.5)] == [
        False,
        True,
        True,
        True,
        False,
        False,
    ]
    lt = Latch()
    assert [lt.below(v, 8.0, 9.0) for v in (8.5, 8.0, 8.9, 9.0, 9.1, 8.5)] == [
        False,
        True,
        True,
        True,
        False,
        False,
    ]


def test_latch_lets_a_trailing_average_go_once_the_live_rate_is_quiet():
    lt = Latch()
    assert lt.above(10.0, 2.0, 1.0, now=10.0)
    assert not lt.above(6.0, 2.0, 1.0, now=0.0)  # avg60 still decaying, the stalls are over
    assert not lt.above(3.0, 2.0, 1.0, now=0.0)  # nor does the decay enter it again


def test_dwell_holds_a_severity_it_entered_but_never_delays_a_rise():
    d = Dwell()
    ok, warn = Finding("G3", "ok", "fine"), Finding("G3", "warning", "thin")
    assert d.apply(ok, 0.0, 45.0) is ok
    assert d.apply(warn, 30.0, 45.0) is warn  # rising: at once
    held = d.apply(ok, 60.0, 45.0)
    assert held.severity == "warning" and held.evidence["held_severity_s"] == 15.0
    assert d.apply(ok, 75.0, 45.0).severity == "ok"


def test_memavailable_wandering_at_the_thin_budget_line_with_quiet_psi_warns_once():
    th = Thresholds()
    host = Host()
    d = Diagnoser(th)
    line = (th.budget_warn_bytes + th.os_reserve_bytes) / 2**30  # MemAvailable at the thin-budget line
    sev = [
        d.observe(host.sample(avail_gib=line + (0.4 if i % 2 else -0.4))).findings["G3"].severity
        for i in range(30)
    ]
    assert sev[0] == "warning"  # caught at the first sample under the line
    assert sum(a != b for a, b in zip(sev, sev[1:], strict=False)) == 0
    sev = [d.observe(host.sample(avail_gib=line + 2.0)).findings["G3"].severity for _ in range(3)]
    assert sev[-1] == "ok"  # clearly back above the leaving level


def test_temperature_wandering_a_degree_under_the_slowdown_with_quiet_counters_is_not_a_throttle():
    th = Thresholds()
    host = Host()
    d = Diagnoser(th)
    sev = [
        d.observe(host.sample(temp=85.0 + (0.4 if i % 2 else -0.4), power=95.0)).findings["G4"].severity
        for i in range(30)
    ]
    assert set(sev) == {"ok"}


def test_a_leaving_level_on_the_wrong_side_of_its_entering_level_is_refused():
    with pytest.raises(ValueError, match="psi_some_leave_pct .* must be at or below psi_some_warn_pct"):
        Thresholds(psi_some_leave_pct=3.0)
    with pytest.raises(ValueError, match="budget_warn_leave_bytes"):
        Thresholds(budget_warn_leave_bytes=2**30)
    assert Thresholds(psi_some_warn_pct=5.0, psi_some_leave_pct=5.0).psi_some_leave_pct == 5.0


def test_a_default_leaving_level_follows_a_moved_entering_level():
    gib = 2**30
    th = Thresholds(budget_warn_bytes=10 * gib, psi_some_warn_pct=0.5, heavy_workload_bytes=2 * gib)
    assert th.budget_warn_leave_bytes == 11 * gib  # the same 1 GiB margin
    assert th.psi_some_leave_pct == 0.25  # the same ratio (half)
    assert th.heavy_leave_bytes == int(1.5 * gib)
