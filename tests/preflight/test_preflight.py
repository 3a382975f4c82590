"""Check lines, the verdict and the report grouping (spark_watchd.preflight)."""

from __future__ import annotations

import pytest

from spark_watchd.preflight import Check, build_report, verdict


def test_verdict_and_report_grouping():
    found = [
        Check("G3", "INFO", "a"),
        Check("G1", "PASS", "b\nc"),
        Check("G10", "WARN", "d"),
        Check("G1", "WARN", "e"),
    ]
    report = build_report(found, "spark-01", "2026-11-29T08:00:00+00:00")
    assert list(report["checks"]) == ["G1", "G3", "G10"]
    assert report["checks"]["G1"][0] == {"status": "PASS", "message": "b c"}
    assert report["verdict"] == "ready-with-warnings"
    assert verdict([Check("G1", "FAIL", "x"), Check("G3", "WARN", "y")]) == "blocked"
    assert verdict([Check("G1", "SKIP", "x"), Check("G3", "INFO", "y")]) == "ready"
    with pytest.raises(ValueError):
        Check("G1", "OK", "x")


def test_a_line_never_carries_a_terminal_escape_from_the_probe_or_argv():
    # A probe error or another user's argv with a clear-screen CSI and a title OSC (issue 20 §2).
    c = Check("G1", "SKIP", "torch not installed (\x1b[2J\x1b]0;owned\x07 boom)")
    assert c.line() == "G1 SKIP: torch not installed (\\x1b[2J\\x1b]0;owned\\x07 boom)"
